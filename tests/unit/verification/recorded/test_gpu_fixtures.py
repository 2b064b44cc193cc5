"""Run directories ftqual itself recorded on an H200 (tests/data/megatron-h200-1gpu): verdicts and metrics."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftqual.verification.verify import build_report, check_by_id, exit_code_for

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-1gpu"
BASELINE = DATA / "baseline"


def report_for(name: str) -> dict:
    return build_report(DATA / name, BASELINE if name != "baseline" else None)


def test_gpu_baseline_passes():
    report = report_for("baseline")
    assert report["verdict"] == "pass"
    assert check_by_id(report, "uninterrupted_completion")["status"] == "pass"


def test_gpu_kill_recovers_from_checkpoint_five():
    report = report_for("kill")
    assert report["verdict"] == "pass", report["checks"]
    m = report["metrics"]
    assert m["detected_by"] == "exit"
    assert m["checkpoint_iteration"] == 5 and m["restored_iteration"] == 5
    assert m["detection_s"] < 1.0
    assert 0 < m["restart_s"] < 30


@pytest.mark.parametrize(
    ("name", "section", "timeout"),
    [("hang", "step", 120.0), ("hang-seed-placement", "checkpointing", 300.0)],
)
def test_gpu_hang_is_detected_by_the_section_it_landed_in(name, section, timeout):
    report = report_for(name)
    assert report["verdict"] == "pass", report["checks"]
    m = report["metrics"]
    assert m["detected_by"] == f"section:{section}"
    # the rank monitor checks every 5 s: detection lies between the timeout and the timeout plus a check
    assert timeout <= m["detection_s"] <= timeout + 10


def test_gpu_distributed_optimizer_without_te_fails_to_resume():
    report = report_for("negative-distopt-kill")
    assert report["verdict"] == "fail"
    assert exit_code_for(report) == 1
    assert check_by_id(report, "resumed_from_checkpoint")["status"] == "fail"
    clean = check_by_id(report, "clean_finish")
    assert clean["status"] == "fail"
    assert "93" in clean["detail"]


def test_two_launcher_tp2_run_that_never_trained_fails():
    """Recorded on 2 x H200: Megatron asserted at start (TP=2 without CUDA_DEVICE_MAX_CONNECTIONS=1)."""
    run = DATA.parent / "megatron-h200-2gpu" / "negative-tp2-two-launchers"
    report = build_report(run, None)
    assert report["verdict"] == "fail"
    assert check_by_id(report, "clean_finish")["status"] == "fail"
    assert check_by_id(report, "resumed_from_checkpoint")["status"] == "fail"
    world = check_by_id(report, "active_world_unchanged")
    assert world["status"] == "pass" and "n1" in world["detail"] and "n2" in world["detail"]


TE_RUNS = DATA.parent / "megatron-h200x2-te-distopt"


@pytest.mark.parametrize("name", ["kill", "hang"])
def test_distributed_optimizer_with_transformer_engine_resumes(name):
    """The same distributed optimizer that cannot resume without TE (above) resumes with TE 2.20.2."""
    command = (TE_RUNS / name / "command.txt").read_text()
    assert "--transformer-impl transformer_engine" in command and "--use-distributed-optimizer" in command
    report = build_report(TE_RUNS / name, TE_RUNS / "baseline")
    assert report["verdict"] == "pass", report["checks"]
    assert check_by_id(report, "resumed_from_checkpoint")["status"] == "pass"
    assert check_by_id(report, "replay_consistency")["status"] == "pass"
    assert report["metrics"]["restored_iteration"] == 5
