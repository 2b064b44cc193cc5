"""config/checkpoint_faults.yaml on one H200 (tests/data/megatron-h200-checkpoint-faults-1gpu), Megatron-LM
core_v0.19.0 through the README's command: what that stack did with each broken checkpoint, as the verifier
reads it from the run directories (the findings, their evidence and the exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-checkpoint-faults-1gpu"


def _run(kind: str) -> Path:
    return next((FIXTURE / "runs").glob(f"{kind}-*"))


def _outcome(kind: str) -> tuple[dict, dict]:
    report = build_report(_run(kind), None)
    return report, next(c for c in report["checks"] if c["id"] == "checkpoint_break_outcome")


def test_every_damage_was_made_to_the_checkpoint_that_armed_the_kill():
    for kind in ("tracker_not_a_number", "tracker_missing_iteration", "tracker_removed", "shard_truncated"):
        marker = json.loads((_run(kind) / "fault_injected.json").read_text())
        assert (
            marker["damage"]["kind"] == kind
            and marker["damage"]["iteration"] == marker["checkpoint_iteration"]
        )


def test_a_tracker_that_is_not_a_number_ends_megatron_with_exit_0():
    report, check = _outcome("tracker_not_a_number")
    log = (_run("tracker_not_a_number") / "logs" / "train_cycle1.log").read_text()
    assert "ERROR: Invalid metadata file" in log
    assert report["verdict"] == "fail" and report["cause"].startswith(
        "silent end: exit 0 at iteration 10 of 30"
    )
    assert check["values"]["outcome"] == "silent_end" and report["metrics"]["launcher_exit_code"] == 0


def test_a_missing_tracker_makes_megatron_train_from_random():
    report, check = _outcome("tracker_removed")
    assert report["verdict"] == "fail"
    assert report["cause"].startswith("cycle 1 restarted from scratch while checkpoint 5 existed")
    assert check["values"]["outcome"] == "restarted_from_scratch"
    assert "--exit-on-missing-checkpoint" in check["values"]["mitigation"]


@pytest.mark.parametrize(("kind", "error"), [
    ("tracker_missing_iteration", "FileNotFoundError"),
    ("shard_truncated", "Error"),
])  # fmt: skip
def test_a_checkpoint_that_cannot_load_is_stopped_by_nvrx_after_three_cycles(kind, error):
    report, check = _outcome(kind)
    assert report["verdict"] == "pass"
    values = check["values"]
    assert values["outcome"] == "stopped_loudly" and values["exit_code"] == 93
    assert values["cycles_after_damage"] == 3 == values["bound_cycles"]
    assert values["gpu_s_without_progress"] > 30  # three Megatron start-ups on one GPU
    assert report["metrics"]["no_progress_cycles"]["cycles"] == [1, 2, 3]
    for cycle in (1, 2, 3):
        assert error in (_run(kind) / "logs" / f"train_cycle{cycle}.log").read_text()
