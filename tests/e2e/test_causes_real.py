"""One-line causes on real runs of the smoke workload under the real ft_launcher: a workload that rejects its
arguments in every cycle, and a kill that never comes because no checkpoint completes before the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftqual.causes import classify

pytestmark = pytest.mark.e2e


def launch(repo_root: Path, work: Path, run_id: str, fault: str, args: list[str], extra: dict) -> Path:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVRX_", "SLURM_"))}
    env.update(
        NVRX_WORKLOAD="smoke",
        NVRX_WORK_DIR=str(work),
        NVRX_RUN_ID=run_id,
        NVRX_DEMO_FAULT=fault,
        GPUS_PER_NODE="2",
        NVRX_MAX_RESTARTS="1",
        NVRX_TERM_TIMEOUT="5",
        NVRX_WORKERS_STOP_TIMEOUT="5",
        TMPDIR="/tmp",
        **extra,
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ftqual.launch", *args],
        env=env,
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    run_dir = work / "runs" / run_id
    assert run_dir.is_dir(), proc.stderr
    return run_dir


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
    # the verifier, as a user runs it, names that root cause whatever NVRx did after it (ftqual.verdict)
    from ftqual.verify import build_report

    report = build_report(run_dir)
    assert report["verdict"] == "fail" and "the kill was never injected" in report["cause"], report.get(
        "cause"
    )
    assert report["cause_evidence"]["kind"] == "not_injected"
