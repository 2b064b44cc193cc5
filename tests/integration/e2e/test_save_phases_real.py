"""End to end on CPU (real ft_launcher, the smoke workload): a rank SIGKILLed in a phase of a save, for an
asynchronous and a synchronous save; `ftqual verify` finds the marker's view of the disk in that phase, the
save never finalized, and the replacement on the tracker's checkpoint, never the save in flight."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.launch import FAST_STEPS, SHORT_FAULT_RUN, launch_smoke, verify_run

RUN = {**SHORT_FAULT_RUN, "TRAIN_ITERS": "16", "NVRX_SMOKE_CHECKPOINT_MB": "64"}


@pytest.mark.parametrize(("phase", "asynchronous"), [
    ("save_shards_partial", True),
    ("save_finalized", True),
    ("save_shards_partial", False),
])  # fmt: skip
def test_a_kill_in_a_phase_of_a_save_resumes_from_the_tracked_checkpoint(
    repo_root: Path, tmp_path: Path, phase: str, asynchronous: bool
):
    env = {**RUN, "NVRX_FAULT_TIMING": phase, "NVRX_ASYNC_SAVE": "1" if asynchronous else "0"}
    # The async `.metadata` to tracker window lasts until the next step's finalize: with fast steps on a
    # busy machine the background write can end after that step began, leaving no window to kill in.
    steps = ["--smoke-step-seconds=1.0"] if phase == "save_finalized" else [*FAST_STEPS]
    # A slow save holds the tracker back for a second after every phase: the marker's fsyncs on a busy
    # machine must not outlast the rest of the save, or the kill lands after the tracker advanced.
    steps.append("--smoke-save-seconds=1.0")
    run_dir = launch_smoke(repo_root, tmp_path, phase, "kill", steps, env, timeout=420)
    marker = json.loads((run_dir / "fault_injected.json").read_text())
    assert marker["timing"] == phase and marker["save_iteration"] > marker["checkpoint_iteration"]
    assert marker["on_disk"]["metadata"] is (phase == "save_finalized"), marker["on_disk"]
    rc, report = verify_run(repo_root, run_dir)
    check = next(c for c in report["checks"] if c["id"] == "interrupted_save_discarded")
    assert check["status"] == "pass", check["detail"]
    assert f"killed in {phase}" in check["detail"]
    assert check["values"]["restored_iteration"] == marker["checkpoint_iteration"]
    assert rc == 0 and report["verdict"] == "pass", report.get("cause")
