"""End to end on CPU (real ft_launcher, the smoke workload): the checkpoint storage fails under a live job.
disk_full mounts a capped ext4 filesystem at the checkpoint directory (as root), rank 1 fills it once a
checkpoint completed, every later save runs out of space and NVRx stops the job (exit 93) within the bound;
writer_stall SIGSTOPs the smoke workload's writer process in the middle of a save, the checkpointing timeout
detects it and the replacement resumes from the tracker's checkpoint. `ftqual verify` passes both, and the
capped filesystem is gone afterwards with every file of the run kept."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftqual.launch import capped_storage
from tests.support.launch import FAST_STEPS, SHORT_FAULT_RUN, launch_smoke, verify_run

RUN = {**SHORT_FAULT_RUN, "TRAIN_ITERS": "16", "NVRX_SMOKE_CHECKPOINT_MB": "64", "NVRX_MAX_RESTARTS": "3"}


def _outcome(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == "storage_fault_outcome")


@pytest.mark.skipif(capped_storage.cannot_mount() is not None, reason="disk_full mounts: root and mkfs.ext4")
def test_a_full_checkpoint_filesystem_stops_the_job_loudly_with_the_tracker_on_a_whole_checkpoint(
    repo_root: Path, tmp_path: Path
):
    env = {**RUN, "NVRX_STORAGE_CAP_MB": "256"}
    run_dir = launch_smoke(repo_root, tmp_path, "disk_full", "disk_full", [*FAST_STEPS], env, timeout=480)
    run = json.loads((run_dir / "run.json").read_text())
    assert run["exit_code"] == 93, run
    storage = run["storage"]
    assert storage["cap_bytes"] == 256 << 20 and storage["image_removed"] is True and "problem" not in storage
    checkpoints = run_dir / "checkpoints"
    assert not os.path.ismount(checkpoints) and not (run_dir / capped_storage.IMAGE_NAME).exists()
    assert (checkpoints / ".ftqual-filler").stat().st_size == 0  # kept, emptied: its size is in the marker
    assert (checkpoints / "latest_checkpointed_iteration.txt").read_text().strip() == "4"
    marker = json.loads((run_dir / "fault_injected.json").read_text())
    assert marker["storage"]["filesystem_after"]["free_bytes"] < marker["storage"]["checkpoint_bytes"]
    rc, report = verify_run(repo_root, run_dir)
    check = _outcome(report)
    assert check["status"] == "pass", check["detail"]
    assert check["values"]["outcome"] == "stopped_loudly" and check["values"]["failed_save"] == 8
    assert rc == 0 and report["verdict"] == "pass", [(c["id"], c["status"]) for c in report["checks"]]


def test_a_stalled_writer_is_caught_by_the_checkpointing_timeout_and_the_job_recovers(
    repo_root: Path, tmp_path: Path
):
    # The writer process's first save (its spawn) can take seconds of a busy machine's step.
    env = {
        **RUN,
        "NVRX_FAULT_TIMING": "save_shards_partial",
        "NVRX_SECTION_TIMEOUTS": "setup:60,step:30,checkpointing:20",
        "NVRX_OUT_OF_SECTION_TIMEOUT": "30",
    }
    run_dir = launch_smoke(
        repo_root, tmp_path, "writer_stall", "writer_stall", [*FAST_STEPS], env, timeout=480
    )
    marker = json.loads((run_dir / "fault_injected.json").read_text())
    writers = marker["storage"]["writers"]
    assert writers and all(w["pid"] != marker["pid"] for w in writers), marker
    assert marker["save_iteration"] > marker["checkpoint_iteration"]
    rc, report = verify_run(repo_root, run_dir)
    check = _outcome(report)
    assert check["status"] == "pass", check["detail"]
    assert check["values"]["outcome"] == "recovered" and check["values"]["final_tracker"] == 16
    detected = next(c for c in report["checks"] if c["id"] == "failure_detected_and_restarted")
    assert "'checkpointing' section timeout" in detected["detail"], detected["detail"]
    assert rc == 0 and report["verdict"] == "pass", [(c["id"], c["status"]) for c in report["checks"]]
