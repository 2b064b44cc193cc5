"""A recommendation proved end to end on CPU (the real ft_launcher, the smoke workload): a baseline under the
configured timeouts is measured, `ftqual recommend-timeouts --no-floors` recommends from its summary (NVRx's
rule alone: the floors would make the hang wait a minute), and the hang rerun under the recommendation
(`NVRX_TIMEOUTS_FROM`: run.json says `timeouts_source: recommended`) passes with no healthy section over a
recommended timeout and its detection within the recommended step timeout + the monitor interval; the report
calls it proven. The negative control: a copy of that run whose recommended setup timeout is below what setup
took (a recommendation the run disproves) FAILs `timeouts_not_exceeded`, and the proof says disproved."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from ftqual.report import recommend
from ftqual.report import timeouts as tm
from tests.integration.e2e.test_fault_catalog_real import check, launch
from tests.support.launch import verify_run

CONFIGURED = {
    "NVRX_SECTION_TIMEOUTS": "setup:120,step:10,checkpointing:60",
    "NVRX_OUT_OF_SECTION_TIMEOUT": "30",
}
FROM = "setup:120,step:10,checkpointing:60,out_of_section:30"


@pytest.fixture(scope="module")
def proved(repo_root, tmp_path_factory):
    work = tmp_path_factory.mktemp("recommended")
    base_dir = launch(repo_root, work, "baseline-configured", "none", [], **CONFIGURED)
    code, base = verify_run(repo_root, base_dir)
    assert code == 0, base.get("cause")
    results = work / "results"
    results.mkdir()
    summary = {"verdict": "pass", "timeouts": tm.build_timeouts([("baseline", base)], floors=False)}
    (results / "summary.json").write_text(json.dumps(summary))
    assert recommend.main([str(results), "--no-floors"]) == 0
    snippet = yaml.safe_load((results / recommend.SNIPPET_NAME).read_text())
    rec = snippet["timeouts"]
    assert snippet["timeouts_from"] == {"setup": 120, "step": 10, "checkpointing": 60, "out_of_section": 30}
    sections = ",".join(f"{k}:{rec[k]:g}" for k in ("setup", "step", "checkpointing"))
    hang_dir = launch(
        repo_root,
        work,
        "hang-recommended",
        "hang",
        [],
        NVRX_SECTION_TIMEOUTS=sections,
        NVRX_OUT_OF_SECTION_TIMEOUT=f"{rec['out_of_section']:g}",
        NVRX_TIMEOUTS_FROM=FROM,
    )
    return base, rec, hang_dir


def test_the_hang_under_the_recommendation_proves_it(repo_root, proved):
    base, rec, hang_dir = proved
    run = json.loads((hang_dir / "run.json").read_text())
    assert run["timeouts_source"] == "recommended" and run["timeouts"]["step"] == rec["step"]
    code, report = verify_run(repo_root, hang_dir)
    assert code == 0 and report["verdict"] == "pass", report.get("cause")
    assert report["expected"]["timeouts_source"] == "recommended"
    assert check(report, "timeouts_not_exceeded")["status"] == "pass"
    bound = check(report, "detected_within_timeout")
    assert bound["status"] == "pass", bound["detail"]
    assert bound["values"]["detection_s"] <= rec["step"] + 5 + 1
    base["expected"].update(timeouts_source="recommended", timeouts_from=report["expected"]["timeouts_from"])
    proof = tm.build_timeouts([("baseline", base), ("hang", report)])["proof"]
    assert proof["verdict"] == "proven", proof


def test_a_recommendation_the_run_disproves_fails(repo_root, proved, tmp_path):
    _, _, hang_dir = proved
    _, measured = verify_run(repo_root, hang_dir)
    setup_max = check(measured, "timeouts_not_exceeded")["values"]["setup"]["max_s"]
    assert setup_max, "the hang run measured no setup: nothing to disprove"
    copy = tmp_path / hang_dir.name
    shutil.copytree(hang_dir, copy, symlinks=True)
    run_json = copy / "run.json"
    run = json.loads(run_json.read_text())
    # Half of what setup took in this very run: a fixed figure is not below it on a faster machine.
    run["timeouts"]["setup"] = round(setup_max / 2, 4)
    run_json.write_text(json.dumps(run))
    code, report = verify_run(repo_root, copy)
    quiet = check(report, "timeouts_not_exceeded")
    assert code == 1 and quiet["status"] == "fail", quiet["detail"]
    assert "would have fired on a healthy run" in quiet["detail"]
    assert tm.build_timeouts([("hang", report)])["proof"]["verdict"] == "disproved"
