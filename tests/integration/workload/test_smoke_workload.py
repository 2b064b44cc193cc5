"""workloads/smoke_train.py on one rank, no ft_launcher: Megatron's line formats, exact resume, load
options."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

# Megatron core_v0.19's formats (training.py training_log, checkpointing.py), as regexes.
ITERATION = re.compile(
    r"^ \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] iteration +(\d+)/ +(\d+) \| consumed samples: +(\d+) \| "
    r"elapsed time per iteration \(ms\): \d+\.\d \| learning rate: \d\.\d{6}E[+-]\d\d \| "
    r"global batch size: +\d+ \| lm loss: (\d\.\d{6}E[+-]\d\d) \| loss scale: 1\.0 \| "
    r"grad norm: \d+\.\d{3} \| "
    r"number of skipped iterations: +0 \| number of nan iterations: +0 \|$"
)
SAVING = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] saving checkpoint at iteration +(\d+) "
    r"to (\S+) in torch_dist format$"
)
SCHEDULED = re.compile(r"^  \[[\d :.-]+\] scheduled an async checkpoint save at iteration +(\d+) to (\S+)$")
SAVED = re.compile(
    r"^  \[[\d :.-]+\] successfully saved checkpoint from iteration +(\d+) to (\S+) "
    r"\[ t 1/1, gtp_remat 1/1, p 1/1 \]$"
)
LOADING = re.compile(r"^ loading distributed checkpoint from (\S+) at iteration (\d+)$")
LOADED = re.compile(
    r"^  successfully loaded checkpoint from (\S+) \[ t 1/1, gtp_remat 1/1, p 1/1 \] "
    r"at iteration (\d+)$"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def smoke_env() -> dict[str, str]:
    """One rank of its own, on a free port: what the workload needs without ft_launcher."""
    return {
        **os.environ,
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "OMP_NUM_THREADS": "1",
    }


def smoke(repo_root: Path, ckpt: Path, *args: str) -> list[str]:
    env = smoke_env()
    cmd = [
        sys.executable,
        str(repo_root / "workloads" / "smoke_train.py"),
        f"--save={ckpt}",
        f"--load={ckpt}",
        "--save-interval=2",
        "--global-batch-size=2",
        "--smoke-step-seconds=0",
        "--async-save",
        "--unknown-megatron-flag=1",
        *args,
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def losses(lines: list[str]) -> dict[int, str]:
    return {int(m[1]): m[4] for m in map(ITERATION.match, lines) if m}


@pytest.fixture(scope="module")
def first(repo_root, tmp_path_factory):
    """4 iterations from scratch, checkpoints at 2 and 4."""
    ckpt = tmp_path_factory.mktemp("smoke") / "ckpt"
    return ckpt, smoke(repo_root, ckpt, "--train-iters=4")


def test_fresh_run_lines(first, shared_fixtures):
    ckpt, lines = first
    assert f"WARNING: could not find the metadata file {ckpt}/latest_checkpointed_iteration.txt" in lines
    assert "    will not load any checkpoints and will start from random" in lines
    its = [m for m in map(ITERATION.match, lines) if m]
    assert [(int(m[1]), int(m[2]), int(m[3])) for m in its] == [(i, 4, 2 * i) for i in range(1, 5)]
    assert [int(m[1]) for m in map(SAVING.match, lines) if m] == [2, 4]
    assert [int(m[1]) for m in map(SCHEDULED.match, lines) if m] == [2, 4]
    assert [int(m[1]) for m in map(SAVED.match, lines) if m] == [2, 4]
    assert lines.index("Unfinalized async checkpoint saves. Finalizing them synchronously now.") < max(
        i for i, line in enumerate(lines) if SAVED.match(line)
    )
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "4"
    for it in (2, 4):
        assert (ckpt / f"iter_{it:07d}" / ".metadata").is_file()
        assert (ckpt / f"iter_{it:07d}" / "metadata.json").is_file()
    assert "  no_load_optim ................................... None" in lines
    assert "  finetune ........................................ False" in lines
    assert "  use_distributed_optimizer ....................... False" in lines
    # The async save of iteration 2 is finalized only after iteration 3 ran, as in Megatron.
    saved_2 = next(i for i, line in enumerate(lines) if (m := SAVED.match(line)) and m[1] == "2")
    it_3 = next(i for i, line in enumerate(lines) if (m := ITERATION.match(line)) and m[1] == "3")
    assert it_3 < saved_2


def test_formats_match_the_recorded_megatron_logs(first, shared_fixtures):
    """The regexes match Megatron's own lines too, and fixed-width fields line up character by character."""
    recorded = (shared_fixtures / "kill-2gpu" / "logs" / "train_cycle1.log").read_text().splitlines()
    stripped = [line.split(": ", 1)[1] if re.match(r"^\d+: ", line) else line for line in recorded]
    for pattern in (ITERATION, SAVING, SCHEDULED, SAVED, LOADING, LOADED):
        assert any(pattern.match(line) for line in stripped), pattern.pattern
    theirs = next(line for line in stripped if ITERATION.match(line)).split(" | ")
    ours = next(line for line in first[1] if ITERATION.match(line)).split(" | ")
    assert len(ours) == len(theirs)
    for mine, megatron in zip(ours, theirs, strict=True):
        if not re.search(r"(ms\)|lm loss|grad norm|learning rate):", megatron):
            assert len(mine) == len(megatron), (mine, megatron)


def test_resume_is_exact(first, repo_root, tmp_path):
    ckpt = tmp_path / "ckpt"
    shutil.copytree(first[0], ckpt)
    resumed = smoke(repo_root, ckpt, "--train-iters=6")
    assert any((m := LOADING.match(line)) and m[1] == str(ckpt) and m[2] == "4" for line in resumed)
    assert any((m := LOADED.match(line)) and m[2] == "4" for line in resumed)
    its = [m for m in map(ITERATION.match, resumed) if m]
    assert [(int(m[1]), int(m[3])) for m in its] == [(5, 10), (6, 12)]
    straight = smoke(repo_root, tmp_path / "straight", "--train-iters=6")
    assert losses(resumed) == {k: v for k, v in losses(straight).items() if k > 4}


def test_no_load_optim_and_finetune(first, repo_root, tmp_path):
    ckpt = tmp_path / "a"
    shutil.copytree(first[0], ckpt)
    lines = smoke(repo_root, ckpt, "--train-iters=6", "--no-load-optim")
    assert "  no_load_optim ................................... True" in lines
    assert any((m := LOADED.match(line)) and m[2] == "4" for line in lines)
    ckpt = tmp_path / "b"
    shutil.copytree(first[0], ckpt)
    lines = smoke(repo_root, ckpt, "--train-iters=2", "--finetune")
    assert "  finetune ........................................ True" in lines
    assert any((m := LOADED.match(line)) and m[2] == "0" for line in lines)
    assert [int(m[1]) for m in map(ITERATION.match, lines) if m] == [1, 2]


def test_every_save_holds_the_checkpoint_payload(repo_root, tmp_path):
    """The payload is in the rank's own torch_dist shard (one rank here: `__0_0.distcp`), random (zlib cannot
    shrink it), in every save; the run's last-rank output prints Megatron's save-checkpoint timer."""
    import zlib

    ckpt = tmp_path / "ckpt"
    out = smoke(repo_root, ckpt, "--train-iters=4", "--smoke-checkpoint-mb=2")
    shards = sorted(ckpt.glob("iter_*/__0_0.distcp"))
    assert [p.parent.name for p in shards] == ["iter_0000002", "iter_0000004"]
    for shard in shards:
        data = shard.read_bytes()
        assert 2 << 20 <= len(data) < 3 << 20
        assert len(zlib.compress(data[-(1 << 20) :])) > 0.9 * (1 << 20)  # incompressible
    assert not list(ckpt.glob("iter_*/smoke_payload.bin"))
    timers = [line for line in out if line.startswith("    save-checkpoint ")]
    assert len(timers) == 2 and all(
        line.startswith("    save-checkpoint " + "." * 32 + ": (") for line in timers
    )
    # a second run loads the last save, payload included, and says how long the load took
    again = smoke(repo_root, ckpt, "--train-iters=6", "--smoke-checkpoint-mb=2")
    assert any("successfully loaded checkpoint" in line and "at iteration 4" in line for line in again)
    assert any(line.startswith("    load-checkpoint " + "." * 32 + ": (") for line in again)
