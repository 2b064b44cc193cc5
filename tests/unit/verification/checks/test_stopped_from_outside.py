"""A run whose launcher was stopped from outside (run.json `interrupted_by`: a stopped workflow, a scheduler's
time limit, scancel) cannot show its end: what it lacks after the stop is INCONCLUSIVE with that one-line
cause, never a FAIL of the stack; a failure it showed before the stop still FAILs. Recorded H200 runs, cut
short the way a stop cuts them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-1gpu"


def copy(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(DATA / name, dest)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return dest


def stop(run_dir: Path, signal: str | None, keep_lines: int = 200) -> None:
    """Cut the last cycle's log and the launcher's as a stop does, and record the stop (or not)."""
    last = max(run_dir.glob("logs/train_cycle*.log"))
    lines = last.read_text().splitlines(keepends=True)
    last.write_text("".join(lines[:keep_lines]))
    run = json.loads((run_dir / "run.json").read_text())
    run.update(exit_code=1, interrupted_by=signal)
    (run_dir / "run.json").write_text(json.dumps(run))
    tracker = run_dir / "checkpoints" / "latest_checkpointed_iteration.txt"
    if tracker.exists():
        tracker.write_text("5")


@pytest.mark.parametrize("name", ["kill", "baseline"])
def test_a_run_stopped_from_outside_is_inconclusive_with_its_cause(tmp_path, name):
    run_dir = copy(tmp_path, name)
    stop(run_dir, "SIGTERM")
    report = build_report(run_dir)
    assert report["verdict"] == "inconclusive", [
        (c["id"], c["status"], c["detail"]) for c in report["checks"]
    ]
    assert report["cause"].startswith("the launcher was stopped by SIGTERM from outside"), report["cause"]
    assert report["cause_evidence"]["kind"] == "interrupted"


@pytest.mark.parametrize("name", ["kill", "baseline"])
def test_the_same_cut_without_a_stop_fails(tmp_path, name):
    """Negative control: the same truncated run with no recorded stop is the stack's failure."""
    run_dir = copy(tmp_path, name)
    stop(run_dir, None)
    assert build_report(run_dir)["verdict"] == "fail"


def test_a_failure_shown_before_the_stop_still_fails(tmp_path):
    """A wrong fault rank in the marker is evidence the stop does not explain."""
    run_dir = copy(tmp_path, "kill")
    stop(run_dir, "SIGINT")
    marker = json.loads((run_dir / "fault_injected.json").read_text())
    marker["rank"] = marker["rank"] + 1
    (run_dir / "fault_injected.json").write_text(json.dumps(marker))
    report = build_report(run_dir)
    assert report["verdict"] == "fail", report.get("cause")


def test_a_stop_that_is_not_a_signal_name_is_refused(tmp_path):
    from ftqual.verification.evidence.run_meta import RunMetaError

    run_dir = copy(tmp_path, "kill")
    stop(run_dir, "whenever")
    with pytest.raises(RunMetaError, match="'interrupted_by' must be a signal's name"):
        build_report(run_dir)
