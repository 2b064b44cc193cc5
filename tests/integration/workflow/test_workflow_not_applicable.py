"""A scenario this stack cannot run, through Snakemake on CPU (real ft_launcher, smoke workload): the others
run and qualify, it is judged not applicable with its reason, and it never counts as a pass.

The reason is real: fault disk_full mounts a size-capped ext4 filesystem (mkfs.ext4, as root with
CAP_SYS_ADMIN and a loop device). The workflow runs with the sbin directories left off PATH, so mkfs.ext4 is
not found, as on a node without e2fsprogs; a node that is not root, or a root without CAP_SYS_ADMIN or loop
devices, is judged not applicable too, for its own reason. The preflight finds it with the same PATH the
runs would inherit. One module-scoped workspace: the first run qualifies baseline and kill beside it; the
second (the negative control) leaves kill out, so that no applicable fault scenario is left: not a PASS.

The same workspace runs with `checkpoint_payloads: drop` (the smoke workload writing 4 MiB of payload into
every checkpoint, 2 MiB in each rank's torch_dist shard): once each run is verified its payload files are
gone, payloads_dropped.json lists them with their sizes, the completion records stay, and the summary says
PASS.
"""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.workflow import project_with, read_json, run_snakemake, snakemake_env, write_yaml

PROFILE = ("--profile", "profiles/local")
CONFIG = {
    "checkpoint_payloads": "drop",
    "checkpoint_payload_mb": 4,  # each rank's shard is over the 1 MiB a payload file needs
    "smoke": {"step_seconds": 0.1, "save_seconds": 0.0},
    "scenarios": {
        "baseline": {"fault": "none"},
        "kill": {"fault": "kill", "rank": 1},
        "hang": {"enabled": False},
        "disk_full": {"fault": "disk_full", "rank": 1},
    },
}
NO_KILL = {"scenarios": {"kill": {"enabled": False}}}


def path_without_sbin() -> str:
    return os.pathsep.join(d for d in snakemake_env()["PATH"].split(os.pathsep) if not d.endswith("sbin"))


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    if shutil.which("mkfs.ext4", path=path_without_sbin()) is not None:
        pytest.skip("mkfs.ext4 is on PATH outside the sbin directories here")
    project = project_with(tmp_path_factory.mktemp("not_applicable") / "project", {})
    write_yaml(project / "config" / "na.yaml", CONFIG)
    write_yaml(project / "config" / "na_no_kill.yaml", NO_KILL)
    return project


def snakemake(project, *configfiles: str):
    return run_snakemake(
        project, *PROFILE, "--configfile", *configfiles, timeout=600, env={"PATH": path_without_sbin()}
    )


@pytest.fixture(scope="module")
def first_run(project):
    return snakemake(project, "config/na.yaml")


def only(project, scenario: str, name: str) -> dict:
    [path] = sorted((project / "results" / scenario).glob(f"*-*/{name}"))
    return read_json(path)


@pytest.mark.timeout(700)
def test_the_others_qualify_and_the_gate_passes(project, first_run):
    assert first_run.returncode == 0, first_run.stdout[-6000:]
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "pass"
    assert summary["headline"].startswith("ftqual: PASS — recovery qualified (2/2 applicable scenarios)")
    assert summary["headline"].endswith("; 1 not applicable on this stack: disk_full")
    assert list(summary["not_applicable"]) == ["disk_full"]
    assert "disk_full" in summary["not_applicable"]["disk_full"]
    assert summary["scenario_counts"] == {"pass": 2, "fail": 0, "inconclusive": 0, "not_applicable": 1}
    assert "disk_full: NOT APPLICABLE on this stack — fault disk_full " in first_run.stdout


@pytest.mark.timeout(700)
def test_the_preflight_names_it_and_nothing_is_launched(project, first_run):
    [preflight] = sorted((project / "results" / "preflight").glob("*-*/preflight.json"))
    report = read_json(preflight)
    assert report["verdict"] in ("pass", "warn")
    assert list(report["not_applicable"]) == ["disk_full"]
    check = next(c for c in report["checks"] if c["id"] == "scenario:disk_full")
    assert check["status"] == "skip" and check["detail"].startswith("not applicable on this stack: ")
    attempt = only(project, "disk_full", "attempt.json")
    assert attempt["launched"] is False
    assert attempt["not_applicable"] == report["not_applicable"]["disk_full"]
    assert not [p for p in (project / "runs").iterdir() if p.name.startswith("disk_full-")]
    verify = only(project, "disk_full", "verify.json")
    assert verify["verdict"] == "not_applicable"
    assert [c["status"] for c in verify["checks"]] == ["skip"]


@pytest.mark.timeout(700)
def test_junit_skips_it_with_the_reason(project, first_run):
    root = ET.parse(project / "results" / "junit.xml").getroot()
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "disk_full")
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    verdict = next(c for c in suite.iter("testcase") if c.get("name") == "verdict")
    skipped = verdict.find("skipped")
    assert skipped is not None and skipped.get("message").startswith("not applicable on this stack: ")
    assert root.get("failures") == "0" and root.get("errors") == "0"
    md = (project / "results" / "summary.md").read_text()
    assert "## Not applicable on this stack" in md and "- **disk_full** (fault `disk_full`): " in md


@pytest.mark.timeout(700)
def test_drop_leaves_manifests_and_a_pass(project, first_run):
    assert first_run.returncode == 0, first_run.stdout[-6000:]
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "pass", summary["headline"]
    runs = [Path(p) for p in (project / "runs").iterdir() if (p / "run.json").is_file()]
    assert len(runs) == 2
    for run in runs:
        ckpt = run / "checkpoints"
        assert not list(ckpt.glob("iter_*/*.distcp"))
        manifest = json.loads((ckpt / "payloads_dropped.json").read_text())
        assert manifest["schema"] == "ftqual.payloads/v1" and manifest["files"]
        shards = {Path(f["path"]).name for f in manifest["files"]}
        assert shards == {"__0_0.distcp", "__1_0.distcp"}
        assert all(f["bytes"] >= 2 << 20 for f in manifest["files"])  # the share, plus the model's state
        assert all((ckpt / f["path"]).parent.joinpath(".metadata").is_file() for f in manifest["files"])


@pytest.mark.timeout(700)
def test_without_an_applicable_fault_scenario_it_is_no_pass(project, first_run):
    """Negative control: the baseline passed and disk_full is not applicable; a not-applicable scenario never
    counts as a pass, so nothing qualifies recovery and the gate fails."""
    proc = snakemake(project, "config/na.yaml", "config/na_no_kill.yaml")
    assert proc.returncode != 0, proc.stdout[-6000:]
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "inconclusive"
    assert summary["headline"].startswith("ftqual: INCONCLUSIVE — no fault scenario ran")
    assert summary["headline"].endswith("1 not applicable on this stack: disk_full")
    assert summary["scenario_counts"]["pass"] == 1
