"""One-line causes on real runs of the smoke workload under the real ft_launcher: a workload that rejects its
arguments in every cycle, and a kill that never comes because no checkpoint completes before the end."""

from __future__ import annotations

import json
from pathlib import Path

from ftqual.verification.causes import classify
from tests.support.launch import launch_smoke


def launch(repo_root: Path, work: Path, run_id: str, fault: str, args: list[str], extra: dict) -> Path:
    return launch_smoke(repo_root, work, run_id, fault, args, extra)


def test_rejected_arguments_in_every_cycle(repo_root, tmp_path):
    run_dir = launch(repo_root, tmp_path, "badarg", "none", ["--smoke-step-seconds=abc"],
                     {"TRAIN_ITERS": "6", "SAVE_INTERVAL": "3"})  # fmt: skip
    run = json.loads((run_dir / "run.json").read_text())
    cause = classify(run_dir, run, run["exit_code"])
    assert run["exit_code"] != 0
    assert cause.kind == "argument_error" and "--smoke-step-seconds" in cause.text, cause


def test_a_kill_that_never_comes(repo_root, tmp_path):
    """The first checkpoint is the last iteration's: the fault, which waits for a checkpoint with training
    left after it, is never injected."""
    run_dir = launch(repo_root, tmp_path, "noinject", "kill", ["--smoke-step-seconds=0.05"],
                     {"TRAIN_ITERS": "6", "SAVE_INTERVAL": "5"})  # fmt: skip
    run = json.loads((run_dir / "run.json").read_text())
    cause = classify(run_dir, run, run["exit_code"])
    assert not (run_dir / "fault_injected.json").exists()
    assert cause.kind == "not_injected" and cause.path.startswith("logs/train_cycle"), cause
    # the verifier, as a user runs it, names that root cause whatever NVRx did after it
    # (ftqual.verification.verdict)
    from ftqual.verification.verify import build_report

    report = build_report(run_dir)
    assert report["verdict"] == "fail" and "the kill was never injected" in report["cause"], report.get(
        "cause"
    )
    assert report["cause_evidence"]["kind"] == "not_injected"
