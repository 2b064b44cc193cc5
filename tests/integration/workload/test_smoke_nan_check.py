"""The smoke workload's NaN check (Megatron's --check-for-nan-in-loss-and-grad, on by default): a batch whose
embeddings are NaN (ftqual.rank.recurring.Poison, nan_loss's injection) makes the loss NaN through the model,
and the check raises Megatron's RuntimeError in its words; with --no-check-for-nan-in-loss-and-grad the job
trains on with NaN, as Megatron does. One rank, no ft_launcher."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.workload.test_smoke_workload import smoke_env

# The poison on from the first forward: what nan_loss's injection turns on at iteration K+1.
POISONED = (
    "import runpy, sys\n"
    "import torch\n"
    "from ftqual.rank.recurring import Poison\n"
    "Poison().start(0)\n"
    "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)
# Megatron core_v0.19's rerun state machine, reruns disabled (validate_result's RuntimeError; a 0-d tensor
# formats as its value in an f-string: "nan").
MEGATRON_NAN = re.compile(
    r"RuntimeError: Rank 0, node \S+, device cpu, iteration 1: Unexpected result nan "
    r"\(message='found NaN in local forward loss calculation'\)"
)


def poisoned_run(repo_root: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", POISONED, str(repo_root / "workloads" / "smoke_train.py")]
    cmd += ["--train-iters=3", "--smoke-step-seconds=0", f"--save={tmp_path / 'ckpt'}", *args]
    return subprocess.run(cmd, env=smoke_env(), cwd=repo_root, capture_output=True, text=True, timeout=120)


def test_a_nan_loss_raises_megatrons_error(repo_root, tmp_path):
    done = poisoned_run(repo_root, tmp_path)
    assert done.returncode == 1, done.stderr
    assert MEGATRON_NAN.search(done.stderr), done.stderr[-2000:]
    assert " iteration        1/" not in done.stdout  # no iteration completed with a NaN loss


def test_without_the_check_the_job_trains_on_with_nan(repo_root, tmp_path):
    done = poisoned_run(repo_root, tmp_path, "--no-check-for-nan-in-loss-and-grad")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Unexpected result" not in done.stderr
    lines = [line for line in done.stdout.splitlines() if " iteration " in line and "lm loss:" in line]
    assert len(lines) == 3 and all("lm loss: NAN" in line for line in lines), lines
    assert re.search(r"^  check_for_nan_in_loss_and_grad \.+ False$", done.stdout, re.M)  # said to be off


def test_the_check_on_by_default_is_not_printed(repo_root, tmp_path):
    """Every earlier run's arguments block stays as it was: the flag is printed only when turned off."""
    cmd = [sys.executable, str(repo_root / "workloads" / "smoke_train.py"), "--train-iters=1"]
    cmd += ["--smoke-step-seconds=0"]
    done = subprocess.run(cmd, env=smoke_env(), cwd=repo_root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "check_for_nan_in_loss_and_grad" not in done.stdout
