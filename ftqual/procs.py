"""Process facts through psutil: parent, process group, state and start time of each process.

`start_time` is the kernel's start time in clock ticks since boot (field 22 of /proc/<pid>/stat): the unit
the stdlib-only worker wrapper records in pids/*.json, so psutil's epoch seconds are turned back into it. A
pid plus its start time names one process for good, so a recorded pid that the kernel has since reused is
never mistaken for ours. That a process belongs to a run is proved by its environment: the launcher puts
`FTQUAL_RUN_ID=<run id>` into the environment of ft_launcher, which every worker, log server and checkpoint
process inherits.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass

import psutil

# Set by our launcher only (ftqual.launch.run.child_env), never by a user's shell, unlike NVRX_RUN_ID.
RUN_ID_ENV = "FTQUAL_RUN_ID"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# psutil's status names as the kernel's one-letter states (the letters tests and logs speak in).
_STATE = {
    psutil.STATUS_RUNNING: "R",
    psutil.STATUS_SLEEPING: "S",
    psutil.STATUS_DISK_SLEEP: "D",
    psutil.STATUS_STOPPED: "T",
    psutil.STATUS_TRACING_STOP: "t",
    psutil.STATUS_ZOMBIE: "Z",
    psutil.STATUS_DEAD: "X",
    psutil.STATUS_IDLE: "I",
    psutil.STATUS_PARKED: "P",
    psutil.STATUS_WAKING: "W",
}


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    pgid: int
    state: str  # the kernel's letter: R, S, D, T, Z, ...
    start_time: int  # clock ticks since boot


def _stat(proc: psutil.Process) -> ProcStat | None:
    try:
        with proc.oneshot():
            # create_time() is boot time + start ticks; boot time is read again at once, so a clock step
            # in between (microseconds) is the only way to be off, and then the process is not proven ours.
            ticks = round((proc.create_time() - psutil.boot_time()) * CLOCK_TICKS)
            state = _STATE.get(proc.status(), "?")
            return ProcStat(proc.pid, proc.ppid(), os.getpgid(proc.pid), state, ticks)
    except (psutil.Error, OSError):
        return None


def read_stat(pid: int | str) -> ProcStat | None:
    """The process `pid` (a zombie included), or None when it is gone or cannot be read."""
    try:
        return _stat(psutil.Process(int(pid)))
    except (psutil.Error, ValueError):
        return None


def start_time(pid: int | str) -> int | None:
    stat = read_stat(pid)
    return stat.start_time if stat else None


def all_procs() -> list[ProcStat]:
    """Every live process; zombies are already dead: they hold no memory or GPU and ignore every signal."""
    found = (read_stat(pid) for pid in psutil.pids())
    return [stat for stat in found if stat is not None and stat.state != "Z"]


def descendants(root: int) -> list[ProcStat]:
    """The live processes below `root` (children, theirs, ...); none when `root` is gone."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return []
    found = (_stat(child) for child in children)
    return [stat for stat in found if stat is not None and stat.state != "Z"]


def pid_record(pid: int) -> dict[str, int]:
    """The {"pid", "pgid", "start_time"} triple recorded in a run's pids/ folder."""
    stat = read_stat(pid)
    if stat is None:
        raise ProcessLookupError(f"process {pid} is gone")
    return {"pid": pid, "pgid": stat.pgid, "start_time": stat.start_time}


def host_name() -> str:
    """The host name used in pids/<host>.*.json; the worker wrapper computes it the same way."""
    return socket.gethostname()


def alive(pid: int, start: int) -> bool:
    """True while the process `pid` that started at `start` still runs (a zombie counts as gone)."""
    stat = read_stat(pid)
    return stat is not None and stat.start_time == start and stat.state != "Z"


def wait_gone(stats: Iterable[ProcStat], timeout: float, poll_s: float = 0.02) -> list[ProcStat]:
    """Wait up to `timeout` seconds until every one of `stats` is gone (a zombie counts as gone); returns
    those still alive. Polls instead of psutil.wait_procs, which reaps our own children with waitpid and
    so would take ft_launcher's exit status from the subprocess.Popen that waits for it."""
    deadline = time.monotonic() + timeout
    left = list(stats)
    while True:
        left = [s for s in left if alive(s.pid, s.start_time)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def carries_run_id(pid: int, run_id: str) -> bool:
    """True when the environment `pid` was started with holds FTQUAL_RUN_ID=<run_id>.

    Another user's process (access denied), a vanished one and a kernel thread all give False: unprovable.
    """
    try:
        return psutil.Process(pid).environ().get(RUN_ID_ENV) == run_id
    except (psutil.Error, OSError):
        return False
