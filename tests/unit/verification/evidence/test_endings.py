"""How a run ended where its exit code misleads (ftqual.verification.evidence.endings): a silent end
(exit 0 before the last iteration), a restart from scratch while a checkpoint existed, restarts without
progress with the GPU-seconds they burned; and the final exit codes verify.json's metrics carry."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data"
ONE_GPU = DATA / "megatron-h200-1gpu"


def _cut_after(log: Path, last: int) -> None:
    """Drop every iteration line above `last` and every later save line: the run ends there, silently."""
    kept = []
    for line in log.read_text(encoding="utf-8").splitlines(keepends=True):
        m = re.search(r" iteration +(\d+)/", line) or re.search(r"checkpoint from iteration +(\d+)", line)
        if m and int(m.group(1)) > last:
            continue
        kept.append(line)
    log.write_text("".join(kept), encoding="utf-8")


def _copy(tmp_path: Path, run: str) -> Path:
    dest = tmp_path / run.replace("/", "_")
    shutil.copytree(DATA / run, dest, symlinks=True)
    return dest


@pytest.mark.parametrize(("run", "log", "check"), [
    ("megatron-h200-1gpu/baseline", "train_cycle0.log", "uninterrupted_completion"),
    ("megatron-h200-1gpu/kill", "train_cycle1.log", "progress_after_resume"),
])  # fmt: skip
def test_exit_0_before_the_last_iteration_fails_as_a_silent_end(tmp_path, run, log, check):
    copy = _copy(tmp_path, run)
    _cut_after(copy / "logs" / log, 20)
    report = build_report(copy, None)
    assert report["verdict"] == "fail"
    assert report["cause"].startswith("silent end: exit 0 at iteration 20 of 30 (the launcher's exit: logs/")
    assert report["cause_evidence"]["path"] == f"logs/{log}"
    failed = next(c for c in report["checks"] if c["id"] == check)
    assert failed["status"] == "fail" and "silent end: exit 0 at iteration 20 of 30" in failed["detail"]
    cited = {e["path"] for e in failed["evidence"]}
    assert {f"logs/{log}", "logs/launcher.log"} <= cited  # the last iteration line and the exit line
    assert report["metrics"]["silent_end"] == {"iteration": 20, "train_iters": 30}
    assert report["metrics"]["launcher_exit_code"] == 0


@pytest.mark.parametrize("run", ["megatron-h200-1gpu/baseline", "megatron-h200-1gpu/kill"])
def test_a_run_that_reached_its_last_iteration_names_no_ending(run):
    report = build_report(DATA / run, None)
    assert report["verdict"] == "pass"
    metrics = report["metrics"]
    assert metrics["launcher_exit_code"] == 0 and metrics["rank_exit_codes"] == [0]
    assert not {"silent_end", "scratch_restarts", "no_progress_cycles"} & metrics.keys()


def test_a_run_stopped_from_outside_is_no_silent_end(tmp_path):
    import json

    copy = _copy(tmp_path, "megatron-h200-1gpu/baseline")
    _cut_after(copy / "logs" / "train_cycle0.log", 20)
    meta = json.loads((copy / "run.json").read_text())
    meta["interrupted_by"] = "SIGTERM"
    (copy / "run.json").write_text(json.dumps(meta))
    report = build_report(copy, None)
    assert "silent_end" not in report["metrics"]
    assert "silent end" not in (report.get("cause") or "")


def test_a_replacement_that_trained_from_iteration_0_is_named():
    run = DATA / "megatron-h200x2-extended" / "no_resume"  # no --load: the replacement starts from random
    report = build_report(run, None)
    assert report["verdict"] == "fail"
    assert report["cause"].startswith("cycle 1 restarted from scratch while checkpoint 5 existed")
    assert report["metrics"]["scratch_restarts"] == [{"cycle": 1, "checkpoint": 5}]
    check = next(c for c in report["checks"] if c["id"] == "progress_after_resume")
    assert "restarted from scratch while checkpoint 5 existed" in check["detail"]


def test_restarts_without_progress_give_their_cycles_and_gpu_seconds():
    run = DATA / "megatron-h200-matrix-m014-crash-at-end" / "baseline"  # crashes after its last save: exit 93
    report = build_report(run, None)
    burned = report["metrics"]["no_progress_cycles"]
    assert burned["cycles"] == [1, 2, 3] and burned["restored"] == [30, 30, 30]
    assert burned["exit_code"] == 93 and burned["world_size"] == 1
    assert burned["gpu_s"] == pytest.approx(burned["wall_s"] * 1, abs=0.1) and burned["gpu_s"] > 0
    assert "3 restart(s) without progress (cycles [1, 2, 3], restored iteration 30)" in report["cause"]
    assert f"{burned['gpu_s']:g} GPU-s burned" in report["cause"]
    assert report["metrics"]["launcher_exit_code"] == 93 and report["metrics"]["rank_exit_codes"] == [1]
