"""workloads/smoke_train.py meets a broken checkpoint as Megatron core_v0.19 does: a tracker that is not a
number ends every rank with status 0 (read_metadata's sys.exit()), no tracker starts from random or, with
--exit-on-missing-checkpoint, exits 0; a missing iteration directory and a truncated shard raise, uncaught;
a corrupted shard loads without a word (torch checks no bytes) unless --verify-integrity re-hashes it.
The damages are the worker's own (megatron_gpt_worker.damage_checkpoint), on a real checkpoint."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ftqual.rank.damage import damage_checkpoint
from tests.integration.workload.test_smoke_workload import ITERATION, LOADING, smoke_env

TRACKER = "latest_checkpointed_iteration.txt"
ERROR = "ERROR: Invalid metadata file {}. Exiting"
EXIT_LINE = ">> '--exit-on-missing-checkpoint' set ... exiting. <<"


def smoke_args(ckpt: Path, *args: str) -> list[str]:
    return [
        f"--save={ckpt}",
        f"--load={ckpt}",
        "--save-interval=2",
        "--global-batch-size=2",
        "--smoke-step-seconds=0",
        *args,
    ]


def run_smoke(repo_root: Path, ckpt: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(repo_root / "workloads" / "smoke_train.py"), *smoke_args(ckpt, *args)]
    return subprocess.run(cmd, env=smoke_env(), capture_output=True, text=True, timeout=120)


def iterations(stdout: str) -> list[int]:
    return [int(m[1]) for m in map(ITERATION.match, stdout.splitlines()) if m]


@pytest.fixture(scope="module")
def saved(repo_root, tmp_path_factory):
    """4 iterations from scratch: checkpoints at 2 and 4, the tracker naming 4."""
    ckpt = tmp_path_factory.mktemp("saved") / "ckpt"
    done = run_smoke(repo_root, ckpt, "--train-iters=4")
    assert done.returncode == 0, done.stderr
    assert (ckpt / TRACKER).read_text() == "4"
    return ckpt


@pytest.fixture
def ckpt(saved, tmp_path):
    """A copy of the saved checkpoints for one test to break."""
    return Path(shutil.copytree(saved, tmp_path / "ckpt"))


def test_an_intact_checkpoint_resumes(repo_root, ckpt):
    """The negative control of every test below: the same copy, unbroken, loads and trains on."""
    done = run_smoke(repo_root, ckpt, "--train-iters=6")
    assert done.returncode == 0, done.stderr
    assert iterations(done.stdout) == [5, 6]
    assert any(LOADING.match(line) for line in done.stdout.splitlines())


@pytest.mark.parametrize(
    "content",
    [None, b"", b"  \n", b"four", b"\xff\xfe"],
    ids=["nuls", "empty", "blank", "text", "not-utf8"],
)
def test_a_tracker_that_is_not_a_number_ends_the_rank_with_status_0(repo_root, ckpt, content):
    if content is None:  # the wrapper's damage: NULs of the tracker's length
        record = damage_checkpoint("tracker_not_a_number", ckpt / TRACKER, 4)
        assert record["tracker_after"] == "\\x00"
    else:
        (ckpt / TRACKER).write_bytes(content)
    done = run_smoke(repo_root, ckpt, "--train-iters=6")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert ERROR.format(ckpt / TRACKER) in lines
    assert iterations(done.stdout) == []  # nothing trained after it
    assert not any(LOADING.match(line) for line in lines)
    assert lines[-1] == ERROR.format(ckpt / TRACKER)  # the last word: nothing ran after it
    assert "Traceback" not in done.stderr


def test_a_release_tracker_is_iteration_0(repo_root, ckpt):
    """Megatron's read_metadata: `release` is no error (the load then looks for its checkpoint)."""
    (ckpt / TRACKER).write_text("release\n")
    done = run_smoke(repo_root, ckpt, "--train-iters=6")
    assert ERROR.format(ckpt / TRACKER) not in done.stdout
    assert done.returncode != 0 and "FileNotFoundError" in done.stderr  # no iter_0000000 here


def test_no_tracker_with_exit_on_missing_checkpoint_exits_0(repo_root, ckpt):
    damage_checkpoint("tracker_removed", ckpt / TRACKER, 4)
    done = run_smoke(repo_root, ckpt, "--train-iters=6", "--exit-on-missing-checkpoint")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    warning = f"WARNING: could not find the metadata file {ckpt / TRACKER}"
    assert lines[lines.index(warning) : lines.index(warning) + 3] == [
        warning,
        "    will not load any checkpoints and will start from random",
        EXIT_LINE,
    ]
    assert iterations(done.stdout) == []
    assert f"  exit_on_missing_checkpoint {'.' * 22} True" in lines


def test_no_tracker_without_the_flag_starts_from_random(repo_root, ckpt):
    damage_checkpoint("tracker_removed", ckpt / TRACKER, 4)
    done = run_smoke(repo_root, ckpt, "--train-iters=2")
    assert done.returncode == 0, done.stderr
    assert EXIT_LINE not in done.stdout
    assert iterations(done.stdout) == [1, 2]
    # An argument added after runs were recorded: printed only when given (earlier blocks stay as they were).
    assert "exit_on_missing_checkpoint" not in done.stdout


def test_a_missing_iteration_directory_raises_before_any_load(repo_root, ckpt):
    damage_checkpoint("tracker_missing_iteration", ckpt / TRACKER, 4)
    done = run_smoke(repo_root, ckpt, "--train-iters=6")
    assert done.returncode not in (0, None)
    assert f"FileNotFoundError: [Errno 2] No such file or directory: '{ckpt / 'iter_0000004'}'" in done.stderr
    assert not any(LOADING.match(line) for line in done.stdout.splitlines())
    assert iterations(done.stdout) == []


def test_a_truncated_shard_fails_the_load(repo_root, ckpt):
    record = damage_checkpoint("shard_truncated", ckpt / TRACKER, 4)
    assert record["path"] == "iter_0000004/__0_0.distcp"
    assert record["size_after"] == record["size_before"] // 2 > 0
    done = run_smoke(repo_root, ckpt, "--train-iters=6")
    assert done.returncode not in (0, None)
    assert "Traceback" in done.stderr
    assert iterations(done.stdout) == []


def losses(stdout: str) -> list[str]:
    return [m[4] for m in map(ITERATION.match, stdout.splitlines()) if m]


@pytest.fixture(scope="module")
def verified(repo_root, tmp_path_factory):
    """The same 4 iterations saved with --verify-integrity: each checkpoint has its integrity.json."""
    ckpt = tmp_path_factory.mktemp("verified") / "ckpt"
    done = run_smoke(repo_root, ckpt, "--train-iters=4", "--verify-integrity")
    assert done.returncode == 0, done.stderr
    return ckpt


def test_a_corrupted_shard_loads_without_an_error_and_trains_on_other_numbers(repo_root, ckpt):
    intact = run_smoke(repo_root, Path(shutil.copytree(ckpt, ckpt.parent / "intact")), "--train-iters=6")
    assert intact.returncode == 0, intact.stderr
    record = damage_checkpoint("shard_corrupted", ckpt / TRACKER, 4)
    shard = ckpt / record["path"]
    assert record["path"] == "iter_0000004/__0_0.distcp" and record["xor"] == 0xFF
    assert record["size_after"] == record["size_before"] == shard.stat().st_size
    assert 0 < record["offset"] < record["size_before"] and 0 < record["length"] <= 4096
    done = run_smoke(repo_root, ckpt, "--train-iters=6")
    assert done.returncode == 0, done.stderr  # torch's load checks no bytes: the damage goes unseen
    assert any(LOADING.match(line) for line in done.stdout.splitlines())
    assert iterations(done.stdout) == [5, 6]
    assert losses(done.stdout) != losses(intact.stdout)  # ... and the model it trains is another one


def test_the_damage_is_undone_by_the_same_xor(repo_root, ckpt):
    """Nothing is lost: the record says where, and inverting those bytes again restores the checkpoint."""
    shard = ckpt / "iter_0000004" / "__0_0.distcp"
    before = shard.read_bytes()
    record = damage_checkpoint("shard_corrupted", ckpt / TRACKER, 4)
    after = bytearray(shard.read_bytes())
    start, end = record["offset"], record["offset"] + record["length"]
    assert after != before and after[:start] == before[:start] and after[end:] == before[end:]
    after[start:end] = bytes(b ^ record["xor"] for b in after[start:end])
    assert bytes(after) == before


def test_verify_integrity_saves_a_manifest_and_loads_an_intact_checkpoint(repo_root, verified, tmp_path):
    ckpt = Path(shutil.copytree(verified, tmp_path / "ckpt"))
    manifest = json.loads((ckpt / "iter_0000004" / "integrity.json").read_text())
    assert manifest["algorithm"] == "sha256"
    assert set(manifest["files"]) == {p.name for p in (ckpt / "iter_0000004").iterdir()} - {"integrity.json"}
    assert {"__0_0.distcp", ".metadata", "metadata.json"} <= set(manifest["files"])
    done = run_smoke(repo_root, ckpt, "--train-iters=6", "--verify-integrity")
    assert done.returncode == 0, done.stderr
    assert iterations(done.stdout) == [5, 6]
    assert f"  verify_integrity {'.' * 32} True" in done.stdout.splitlines()


def test_verify_integrity_refuses_a_corrupted_shard(repo_root, verified, tmp_path):
    ckpt = Path(shutil.copytree(verified, tmp_path / "ckpt"))
    damage_checkpoint("shard_corrupted", ckpt / TRACKER, 4)
    done = run_smoke(repo_root, ckpt, "--train-iters=6", "--verify-integrity")
    assert done.returncode not in (0, None)
    assert (
        f"CheckpointingException: Checkpoint integrity verification failed for 1 file(s) in "
        f"{ckpt / 'iter_0000004'}:" in done.stderr
    )
    assert "  __0_0.distcp: hash mismatch (expected " in done.stderr
    assert iterations(done.stdout) == []


def test_verify_integrity_refuses_a_checkpoint_saved_without_it(repo_root, ckpt):
    done = run_smoke(repo_root, ckpt, "--train-iters=6", "--verify-integrity")
    assert done.returncode not in (0, None)
    assert f"Integrity manifest not found at {ckpt / 'iter_0000004' / 'integrity.json'}" in done.stderr
    assert iterations(done.stdout) == []


# --- the wrapper and the workload together, as two cycles of one run ------------------------------------


def wrapper(repo_root: Path, tmp_path: Path, ckpt: Path, cycle: int, *workload: str):
    env = {**smoke_env(), "TORCHELASTIC_RESTART_COUNT": str(cycle), "TORCHELASTIC_RUN_ID": "damage"}
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
        "--hang-placement",
        "immediate",
        "--checkpoint-damage",
        "tracker_not_a_number",
        "--",
        *smoke_args(ckpt, *workload),
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(300)
def test_a_replacement_meets_the_tracker_its_run_broke_and_ends_silently(repo_root, tmp_path):
    """Cycle 0 kills itself once the first checkpoint completes, after overwriting its tracker with NULs;
    cycle 1 (the replacement) runs the workload on it, which ends with status 0, as Megatron's ranks do:
    what ft_launcher takes for a finished worker."""
    ckpt = tmp_path / "ckpt"
    # slow steps: the poller sees the tracker at 2 long before the save of 4 could move it on
    first = wrapper(repo_root, tmp_path, ckpt, 0, "--train-iters=8", "--smoke-step-seconds=1")
    assert first.returncode == -signal.SIGKILL, first.stderr
    marker = json.loads((tmp_path / "fault_injected.json").read_text())
    assert marker["checkpoint_iteration"] == 2
    assert marker["damage"]["kind"] == "tracker_not_a_number" and marker["damage"]["iteration"] == 2
    assert (ckpt / TRACKER).read_bytes() == b"\0"

    second = wrapper(repo_root, tmp_path, ckpt, 1, "--train-iters=8")
    assert second.returncode == 0, second.stderr
    assert "the tracker was damaged by this run's injection (tracker_not_a_number)" in second.stderr
    assert ERROR.format(ckpt / TRACKER) in second.stdout.splitlines()
    assert iterations(second.stdout) == []
