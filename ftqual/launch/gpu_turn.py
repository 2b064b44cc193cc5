"""One scenario run at a time on a machine's GPUs, when the workflow runs scenarios itself (no Slurm).

Why: nothing gives two scenarios of one machine different GPUs, and it would not help: ft_launcher (NVRx
0.7.0) starts a restart only once GPUs 0 to local_world_size-1 (NVML's indexes, whatever
CUDA_VISIBLE_DEVICES says) hold 512 MB or less, waiting up to `--ft-gpu-memory-reclaim-timeout` (50 s). A
scenario beside another therefore saw the other's memory and waited out the whole 50 s at every restart: a
"latency over budget" that ftqual itself caused (1 x H200, kill beside hang: restart 52.5 s; alone 2.6-4.4 s).
Overlapping runs also share the GPUs' compute, so every timing they report is someone else's too.

How: an exclusive `flock` on one file per user in the temporary directory, taken (polling, so that the run
script still answers SIGTERM and notices a vanished workflow) before ft_launcher starts and kept until what
the run left behind is cleaned up. The kernel drops it when its holder dies. Under Slurm the scheduler gives
each job its own GPUs, so no turn is taken there.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

LOCK_ENV = "FTQUAL_GPU_LOCK"  # another lock file (tests; machines whose users share GPUs and a folder)


def lock_path(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    chosen = env.get(LOCK_ENV)
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / f"ftqual-gpus-{os.getuid()}.lock"


def needed(env: dict[str, str] | None = None) -> bool:
    """A turn is taken unless Slurm placed this run (it gives each job its own GPUs)."""
    env = os.environ if env is None else env
    return not env.get("SLURM_JOB_ID")


@dataclass
class GpuTurn:
    """The machine's GPUs for one run: take() until it returns True, release() when the run is over."""

    path: Path
    holder: str  # written into the lock file while held: who has the GPUs (shown to whoever waits)
    fd: int | None = None
    held: bool = False

    def take(self) -> bool:
        """Try once; True when this run now has the GPUs."""
        if self.held:
            return True
        if self.fd is None:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"{self.holder}\n".encode(), 0)
        self.held = True
        return True

    def current_holder(self) -> str:
        """Who holds the GPUs now, as that run wrote it ('' when unknown)."""
        try:
            return self.path.read_text(errors="replace").strip()[:300]
        except OSError:
            return ""

    def release(self) -> None:
        if self.fd is not None:
            if self.held:
                os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing drops the flock
        self.fd, self.held = None, False
