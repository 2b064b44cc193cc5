"""The same command works after an interruption: Snakemake's directory lock, released when its holder is gone.

Snakemake locks the working directory (`.snakemake/locks/`) while it runs and releases the lock when it
ends, also on Ctrl-C or SIGTERM. A workflow killed outright (SIGKILL, the OOM killer, a node reboot) leaves
the lock behind, and the next run refuses with a LockException until someone runs `--unlock`. So every
ftqual workflow that may lock records itself (`.snakemake/ftqual-owners/<pid>.json`: pid, process start
time in clock ticks, host, command line) and removes its record when it ends. Before the next run plans,
`release_stale` looks at the lock and at the records:

- no lock: nothing to do (records of workflows that are gone are tidied away);
- a lock, and a recorded workflow on this host is still alive (same pid, same start time): the lock is
  its own; one line names it, and Snakemake refuses as it should;
- a lock, and every recorded workflow is provably gone (this host, its pid absent or reused): the lock is
  stale; it is removed, with one line saying whose it was;
- a lock nobody recorded (another tool, a workflow on another host of a shared filesystem): left alone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ftqual.jsonfile import write_json_atomic
from ftqual.launch import procs

OWNERS = Path(".snakemake") / "ftqual-owners"
LOCKS = Path(".snakemake") / "locks"


@dataclass(frozen=True)
class Owner:
    pid: int
    start_ticks: int
    host: str
    argv: str

    def alive(self) -> bool:
        return self.host == socket.gethostname() and procs.alive(self.pid, self.start_ticks)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} ({self.argv[:120]})"


def _owners(workdir: Path) -> list[tuple[Path, Owner]]:
    found = []
    try:
        paths = sorted((workdir / OWNERS).glob("*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            owner = Owner(int(data["pid"]), int(data["start_ticks"]), str(data["host"]), str(data["argv"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue  # half-written or foreign: not evidence of anything
        found.append((path, owner))
    return found


def _locked(workdir: Path) -> bool:
    try:
        return any((workdir / LOCKS).iterdir())
    except OSError:
        return False


def release_stale(workdir: Path, say: Callable[[str], None]) -> str:
    """Decide about the lock before this run takes it (module docstring); returns what was decided."""
    owners = _owners(workdir)
    living = [o for _, o in owners if o.alive()]
    for path, owner in owners:
        if owner.host == socket.gethostname() and not owner.alive():
            path.unlink(missing_ok=True)  # its workflow is gone: the record is spent
    if not _locked(workdir):
        return "unlocked"
    if living:
        say(
            f"ftqual: this directory is locked by a workflow that is still running: {living[0].describe()}; "
            "Snakemake refuses a run whose outputs overlap with its: wait for it to end, or stop it"
        )
        return "held"
    if owners and all(o.host == socket.gethostname() for _, o in owners):
        shutil.rmtree(workdir / LOCKS, ignore_errors=True)
        who = ", ".join(o.describe() for _, o in owners)
        say(f"ftqual: released the lock left by a workflow that is gone ({who})")
        return "released"
    return "foreign"


def record_self(workdir: Path) -> Path:
    """Record this workflow process as a holder of the directory's lock (removed by `forget_self`)."""
    path = workdir / OWNERS / f"{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "pid": os.getpid(),
        "start_ticks": procs.start_time(os.getpid()),
        "host": socket.gethostname(),
        "argv": " ".join(sys.argv),
    }
    write_json_atomic(path, data)
    return path


def forget_self(workdir: Path) -> None:
    (workdir / OWNERS / f"{os.getpid()}.json").unlink(missing_ok=True)


def hangup_as_interrupt() -> bool:
    """A closed terminal (SIGHUP) stops the workflow as Ctrl-C does, so Snakemake cancels its jobs and
    releases its lock (by default SIGHUP ends the process on the spot, lock and all). A SIGHUP that is
    ignored (nohup) stays ignored. Returns whether the handler was installed."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        return False

    def interrupt(signum, frame):
        raise KeyboardInterrupt("SIGHUP")

    signal.signal(signal.SIGHUP, interrupt)
    return True
