"""Plain helpers shared by the launcher's tests (fixtures live in conftest.py)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LaunchResult:
    rc: int
    out: str
    err: str

    @property
    def argv(self) -> list[str]:
        """The dry run's command line, split back into arguments."""
        return shlex.split(self.out.strip().splitlines()[-1])


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def checkpoint_dir(tmp_path: Path, tracker: str | bytes, iterations=()) -> str:
    """A checkpoint directory as a finished run leaves it: the tracker (as given) and iter_XXXXXXX folders."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    data = tracker.encode() if isinstance(tracker, str) else tracker
    (ckpt / "latest_checkpointed_iteration.txt").write_bytes(data)
    for iteration in iterations:
        (ckpt / f"iter_{iteration:07d}").mkdir()
    return str(ckpt)


# A fault run of the smoke workload that is over in seconds: 8 iterations of 0.05 s, a save every 4, a 5 s
# step timeout that catches a live rank at once (the fault catalog's and the stack dumps' e2e tests).
SHORT_FAULT_RUN = {
    "TRAIN_ITERS": "8",
    "SAVE_INTERVAL": "4",
    "NVRX_SECTION_TIMEOUTS": "setup:60,step:5,checkpointing:30",
    "NVRX_OUT_OF_SECTION_TIMEOUT": "20",
}
FAST_STEPS = ["--smoke-step-seconds=0.05"]


def launch_smoke(
    repo_root: Path, work: Path, run_id: str, fault: str, args: list[str], env: dict, timeout: float = 300
) -> Path:
    """`python -m ftqual.launch ARGS` with the smoke workload on two ranks, one restart and short stop
    timeouts, none of the caller's launcher or Slurm variables, and `env` on top (it may override them);
    the run directory."""
    full = {k: v for k, v in os.environ.items() if not k.startswith(("NVRX_", "SLURM_"))}
    full.update(
        NVRX_WORKLOAD="smoke",
        NVRX_WORK_DIR=str(work),
        NVRX_RUN_ID=run_id,
        NVRX_DEMO_FAULT=fault,
        GPUS_PER_NODE="2",
        NVRX_MAX_RESTARTS="1",
        NVRX_TERM_TIMEOUT="5",
        NVRX_WORKERS_STOP_TIMEOUT="5",
        TMPDIR="/tmp",  # NVRx's rank-monitor sockets live there; long paths break AF_UNIX
    )
    full.update(env)  # the caller's settings win (two injections need two restarts)
    proc = subprocess.run(
        [sys.executable, "-m", "ftqual.launch", *args],
        env=full,
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    run_dir = work / "runs" / run_id
    assert run_dir.is_dir(), proc.stderr
    return run_dir


def verify_run(repo_root: Path, run_dir: Path) -> tuple[int, dict]:
    """`ftqual verify RUN_DIR --json RUN_DIR.verify.json` as a user runs it: (its exit code, the report)."""
    out = run_dir.parent / f"{run_dir.name}.verify.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ftqual", "verify", str(run_dir), "--json", str(out)],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.is_file(), proc.stdout + proc.stderr
    return proc.returncode, json.loads(out.read_text())
