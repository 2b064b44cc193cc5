"""config/campaign.yaml through Snakemake on CPU (real ft_launcher, smoke workload): preflight, the baseline,
the campaign, verify, summary and gate PASS, and the published report names every fault and the goodput.

A smaller campaign than the shipped one (4 faults, seed 3: segfault and gil_lock of rank 1, hang and abort of
rank 0), given as one more --configfile over config/campaign.yaml, the way a user would shorten it; the kill
and hang scenarios are left out (their own tests run them).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.support.workflow import copy_project, read_json, run_snakemake, write_yaml

FAULTS = ["segfault", "hang", "abort", "gil_lock"]
RANKS = [1, 0, 0, 1]
PLANNED = list(zip(FAULTS, RANKS, strict=True))
SMALL = {
    "smoke": {"step_seconds": 0.1, "save_seconds": 0.0},
    # a 5 s step timeout (50 healthy steps) catches the hang and the GIL lock 5 s sooner each than 10 s
    "timeouts": {"step": 5},
    "scale": {"gpus": 1024, "days": 30},
    "scenarios": {
        "kill": {"enabled": False},
        "hang": {"enabled": False},
        "campaign": {"train_iters": 16, "campaign": {"faults": 4, "seed": 3}},
    },
}


@pytest.mark.timeout(400)
def test_config_campaign_yaml_qualifies_through_the_workflow_and_its_report_names_every_fault(tmp_path):
    project = copy_project(tmp_path / "project")
    write_yaml(project / "config" / "campaign-small.yaml", SMALL)
    proc = run_snakemake(
        project,
        *("--profile", "profiles/local"),
        *("--configfile", "config/campaign.yaml", "config/campaign-small.yaml"),
        timeout=360,
        # the summary rule's `ftqual` command runs the copy's package, whichever checkout installed it
        env={"PYTHONPATH": str(project)},
    )
    assert proc.returncode == 0, proc.stdout[-6000:]
    results = project / "results"
    summary = read_json(results / "summary.json")
    assert summary["verdict"] == "pass", summary["headline"]
    assert [sc["name"] for sc in summary["scenarios"]] == ["baseline", "campaign"]

    entry = summary["campaigns"]["campaign"]
    assert [f["fault"] for f in entry["faults"]] == FAULTS and [f["rank"] for f in entry["faults"]] == RANKS
    assert all(f["verdict"] == "pass" for f in entry["faults"])
    assert (entry["seed"], entry["planned"], entry["injected"]) == (3, 4, 4)
    assert entry["accumulation"]["status"] == "pass" and entry["plan_followed"]["status"] == "pass"
    good = entry["goodput"]
    assert 0 < good["measured"] < 1 and 0 < good["projected"] < 1 and good["gap_parts_s"]
    assert [t["detected_by"].startswith("section") for t in entry["timeline"]] == [False, True, False, True]
    # the at-scale model, applied to the campaign's own measured means, reproduces its measured goodput
    (check,) = summary["at_scale"]["campaign_checks"]
    assert check["within"] and check["measured"] == good["measured"], check

    md = (results / "summary.md").read_text()
    assert md.startswith("# ftqual: PASS")
    part = md[md.index("## Campaign") :]
    for k, (fault, rank) in enumerate(PLANNED, start=1):
        assert f"| {k} | {fault} | {rank} |" in part
    assert f"Goodput measured **{good['measured']:.1%}**" in part and "Per cycle" in part
    assert (results / summary["plots"]["campaign_campaign"]).is_file()

    root = ET.parse(results / "junit.xml").getroot()
    assert (root.get("failures"), root.get("errors")) == ("0", "0")
    names = [c.get("name") for c in root.iter("testcase") if c.get("classname") == "ftqual.campaign.campaign"]
    assert names == [f"fault_{k}_{f}_rank{r}" for k, (f, r) in enumerate(PLANNED, start=1)]
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["campaign.goodput_measured"] == str(good["measured"])
