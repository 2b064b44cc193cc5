"""Kills timed to each phase of a real save: the wrapper around the smoke workload (torch, in a subprocess),
one rank, killed in each phase, and a run whose saves never showed the phase (the parts in
tests/unit/rank/test_save_phases.py)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest

from ftqual.rank.freeze import (
    TRIGGER_HELPER_POLL,
    TRIGGER_INOTIFY,
    TRIGGER_RANK_POLL,
    WAKEUP_OFF_RANK_CPU,
    WAKEUP_REALTIME,
)
from ftqual.rank.ids import SAVE_PHASES
from tests.integration.workload.test_smoke_workload import smoke_env

SHARD = "__0_0.distcp"

# --- real: the wrapper around the smoke workload, one rank, killed in each phase of a real save ------------

PAYLOAD_MB = 64  # so that the shard writes last (tens of ms) and their phases can be seen


def run_killed_in(
    repo_root, tmp_path, phase: str, async_save: bool, train_iters: int = 12
) -> subprocess.CompletedProcess:
    ckpt = tmp_path / "ckpt"
    env = {**smoke_env(), "TORCHELASTIC_RESTART_COUNT": "0"}
    workload = [
        f"--save={ckpt}",
        f"--load={ckpt}",
        f"--train-iters={train_iters}",
        "--save-interval=4",
        "--global-batch-size=1",
        "--smoke-step-seconds=0",
        f"--smoke-checkpoint-mb={PAYLOAD_MB}",
    ]
    if async_save:
        workload.append("--async-save")
    # The smoke writes `.metadata`, metadata.json and the tracker within ~2 ms (sync, and async when the
    # finalize already waits for the write): shorter than a poll plus the marker's fsyncs, so the kill could
    # land after the tracker advanced (save_finalized always; save_shards_complete on a busy CI machine). A
    # slow save holds the tracker back for a second after every phase, long enough to be killed in.
    workload.append("--smoke-save-seconds=1.0")
    cmd = [
        sys.executable,
        str(repo_root / "workloads" / "megatron_gpt_worker.py"),
        "--entrypoint",
        str(repo_root / "workloads" / "smoke_train.py"),
        "--checkpoint-dir",
        str(ckpt),
        "--fault-marker",
        str(tmp_path / "fault_injected.json"),
        "--fault",
        "kill",
        "--fault-rank",
        "0",
        "--run-id",
        "phases",
        "--fault-timing",
        phase,
        "--",
        *workload,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("phase", SAVE_PHASES)
def test_the_rank_dies_in_the_phase_of_a_real_save(repo_root, tmp_path, phase, async_save):
    done = run_killed_in(repo_root, tmp_path, phase, async_save)
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]
    marker = json.loads((tmp_path / "fault_injected.json").read_text())
    assert (marker["fault"], marker["timing"], marker["placement"]) == ("kill", phase, phase)
    assert marker["baseline_iteration"] == 0
    saved, tracked = marker["save_iteration"], marker["checkpoint_iteration"]
    assert saved in (8, 12) and tracked == saved - 4  # the cycle completed a save before it: 4 or 8
    ckpt = tmp_path / "ckpt"
    # killed before the save it struck was tracked: the tracker still names the completed one
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == str(tracked)
    reference = ckpt / f"iter_{tracked:07d}" / SHARD
    full = reference.stat().st_size  # the completed checkpoint's shard: the payload and the model
    assert full > PAYLOAD_MB << 20
    on_disk = marker["on_disk"]
    assert set(on_disk) == {"shards", "bytes", "metadata", "metadata_json"}
    if phase == "save_staged":
        assert on_disk == {"shards": 0, "bytes": 0, "metadata": False, "metadata_json": False}
    elif phase == "save_shards_partial":
        assert on_disk["shards"] == 1 and not on_disk["metadata"] and not on_disk["metadata_json"]
    elif phase == "save_shards_complete":
        assert on_disk == {"shards": 1, "bytes": full, "metadata": False, "metadata_json": False}
    else:
        assert on_disk["shards"] == 1 and on_disk["bytes"] == full and on_disk["metadata"] is True
    assert "[ftqual-inject] " in done.stderr
    # the rank was stopped, the phase seen again on disk (the marker's on_disk), and only then killed
    assert marker["method"].startswith("SIGSTOP of the rank by its injector's helper"), marker
    assert marker["freeze"]["threads_stopped"] is True
    # save_finalized is awaited by the helper's own watch (`.metadata`'s event, or its look when written
    # before the watch began); every other phase by the rank's poll
    watched = (TRIGGER_INOTIFY, TRIGGER_HELPER_POLL)
    assert marker["freeze"]["trigger"] in (watched if phase == "save_finalized" else (TRIGGER_RANK_POLL,))
    if phase == "save_finalized":
        assert marker["freeze"]["wakeup"] in (WAKEUP_REALTIME, WAKEUP_OFF_RANK_CPU)


@pytest.mark.timeout(300)
def test_a_run_whose_saves_never_showed_the_phase_fails(repo_root, tmp_path):
    """One save only (iteration 4): nothing newer than the tracker once it passed the baseline, so no phase
    could arm; the wrapper exits 3 rather than pass as a run that was killed in a save."""
    done = run_killed_in(repo_root, tmp_path, "save_shards_partial", False, train_iters=4)
    assert done.returncode == 3, done.stderr[-3000:]
    assert "was never injected" in done.stderr
    assert not (tmp_path / "fault_injected.json").exists()
    assert (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == "4"
