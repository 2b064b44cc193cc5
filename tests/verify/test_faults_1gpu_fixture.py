"""config/faults.yaml on one H200 (tests/data/megatron-h200-faults-1gpu): NVRx's fault catalog on a real GPU,
what the machine decided and what ftqual decides now from the same evidence. Two faults did not take their
own path on this stack (an exception and a SIGINT unwind but leave the rank alive until the step timeout):
those are FAILs whose cause says so, never a PASS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.verdict import judged
from ftqual.verify import build_report

DATA = Path(__file__).resolve().parents[1] / "data" / "megatron-h200-faults-1gpu"
BASELINE = DATA / "runs" / "baseline-20261202T145438Z-660-a1"
# scenario -> (verdict, detected_by) of every completed attempt
EXPECTED = {
    "baseline": ("pass", None),
    "segfault": ("pass", "exit"),
    "abort": ("pass", "exit"),
    "sigterm": ("pass", "exit"),
    "gpu_error": ("pass", "exit"),
    "gil_lock": ("pass", "section:step"),
    "gpu_hang": ("pass", "section:step"),
    "exception": ("fail", "section:step"),
    "sigint": ("fail", "section:step"),
}


def attempts(scenario: str) -> list[dict]:
    return [
        json.loads(p.read_text()) for p in sorted((DATA / "results" / scenario).glob("*-[0-9]/verify.json"))
    ]


def test_every_catalog_fault_ran_on_the_gpu():
    assert set(EXPECTED) == {p.name for p in (DATA / "results").iterdir() if p.is_dir()} - {
        "preflight",
        "stack",
    }


@pytest.mark.parametrize("scenario", sorted(EXPECTED))
def test_the_machine_and_today_agree_on_every_attempt(scenario):
    verdict, detected_by = EXPECTED[scenario]
    for report in attempts(scenario):
        assert (judged(report).outcome.verdict, report["metrics"].get("detected_by")) == (
            verdict,
            detected_by,
        )
        base = None if scenario == "baseline" else BASELINE
        now = build_report(DATA / "runs" / report["run_id"], base)
        assert now["verdict"] == verdict, now.get("cause")
        assert now["metrics"].get("detected_by") == detected_by


@pytest.mark.parametrize("scenario", ["gpu_error", "gpu_hang"])
def test_gpu_faults_leave_nothing_behind(scenario):
    """The faulted process and its GPU memory were gone before the replacement started (NVRx's reclaim
    check: 528 MB to 0 MB at once on this stack)."""
    (report,) = attempts(scenario)
    run = DATA / "runs" / report["run_id"]
    now = build_report(run, BASELINE)
    check = {c["id"]: c for c in now["checks"]}["no_leftovers"]
    assert check["status"] == "pass"
    assert check["values"]["gpu_reclaim_s_max"] == 0.0
    assert "NVRx's GPU-memory check before 1 replacement(s): reclaimed, at most 0 s" in check["detail"]


def test_nvrx_giving_up_on_gpu_memory_is_said(tmp_path):
    """NVRx's reclaim timeout (another process on the GPU, or the failed cycle's memory) is a note with its
    line: the restart includes that wait; whose memory it was, the leftovers records say."""
    import shutil

    (report,) = attempts("gpu_error")
    run = tmp_path / "run"
    shutil.copytree(DATA / "runs" / report["run_id"], run)
    log = run / "logs" / "launcher.log"
    text = log.read_text()
    line = next(x for x in text.splitlines() if "memory reclaimed in" in x)
    gave_up = line.split("launcher.py")[0].replace("[INFO]", "[ERROR]") + (
        "launcher.py:1290 Timeout waiting for GPU memory to be reclaimed after 50.0s. Memory may not have "
        "been fully cleaned up. Proceeding anyway as best effort."
    )
    log.write_text(text.replace(line, gave_up))
    check = {c["id"]: c for c in build_report(run, BASELINE)["checks"]}["no_leftovers"]
    assert check["values"]["gpu_reclaim_s_max"] == 50.0
    assert any("gave up waiting for GPU memory after 50 s" in note for note in check["notes"]), check


@pytest.mark.parametrize("run_id", ["exception-20261202T152038Z-662-a2", "sigint-20261202T152534Z-2144-a1"])
def test_an_unwinding_fault_that_lingered_is_a_fail_that_says_so(run_id):
    report = build_report(DATA / "runs" / run_id, BASELINE)
    check = {c["id"]: c for c in report["checks"]}["failure_detected_and_restarted"]
    assert check["status"] == "fail"
    assert "unwound (a traceback follows the injection) but the rank did not exit" in report["cause"]
    assert "section 'step' timeout killed it" in report["cause"]
    cited = {(e["path"], e["line"]) for e in check["evidence"]}
    log = (DATA / "runs" / run_id / "logs" / "train_cycle0.log").read_text().splitlines()
    traces = [path_line for path_line in cited if path_line[0] == "logs/train_cycle0.log"]
    assert any("Traceback" in log[line - 1] for _, line in traces), cited


@pytest.mark.parametrize("run_id", ["gpu_hang-20261202T150128Z-4848-a1", "sigint-20261202T152220Z-1460-a1"])
def test_a_run_the_time_limit_stopped_is_inconclusive(run_id):
    run = DATA / "runs" / run_id
    assert json.loads((run / "run.json").read_text())["interrupted_by"] == "SIGTERM"
    report = build_report(run, BASELINE)
    assert report["verdict"] == "inconclusive"
    assert report["cause_evidence"]["kind"] == "interrupted"


def test_the_committed_catalog_report_is_todays():
    """docs/gpu-qualification/faults-h200-1gpu/summary.json: every fault, with the lingering faults' cause."""
    doc = json.loads((DATA.parents[2] / "docs/gpu-qualification/faults-h200-1gpu/summary.json").read_text())
    rows = {row["scenario"]: row for row in doc["faults"]}
    assert set(rows) == set(EXPECTED) - {"baseline"}
    assert {name for name, row in rows.items() if row["verdict"] != "pass"} == {"exception", "sigint"}
    assert doc["verdict"] == "fail"


def test_the_same_cut_without_a_recorded_stop_fails(tmp_path):
    """Negative control: the SIGINT run the time limit cut (its rank ended by the stop's SIGTERM, no
    replacement cycle) is a FAIL once run.json no longer says the launcher was stopped from outside."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(DATA / "runs" / "sigint-20261202T152220Z-1460-a1", run)
    meta = json.loads((run / "run.json").read_text())
    meta["interrupted_by"] = None
    (run / "run.json").write_text(json.dumps(meta))
    report = build_report(run, BASELINE)
    assert report["verdict"] == "fail"
    failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    assert {"failure_detected_and_restarted", "resumed_from_checkpoint", "clean_finish"} <= failed
