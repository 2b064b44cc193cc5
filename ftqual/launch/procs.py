"""Process facts: psutil lists the processes, ftqual.rank.procfs parses each one's stat.

Process facts from /proc/<pid>/stat: parent, process group, state and start time of each process, parsed
by ftqual.rank.procfs, the rank's reader (psutil lists the processes and reads their environments).

`start_time` is the kernel's start time in clock ticks since boot (field 22 of /proc/<pid>/stat): the unit
the stdlib-only worker wrapper records in pids/*.json. A pid plus its start time names one process for good,
so a recorded pid that the kernel has since reused is never mistaken for ours. That a process belongs to a
run is proved by its environment: the launcher puts `FTQUAL_RUN_ID=<run id>` into the environment of
ft_launcher, which every worker, log server and checkpoint process inherits.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable

import psutil

from ftqual.rank import procfs
from ftqual.rank.procfs import ProcStat

# Set by our launcher only (ftqual.launch.run.child_env), never by a user's shell, unlike NVRX_RUN_ID.
RUN_ID_ENV = "FTQUAL_RUN_ID"


def read_stat(pid: int | str) -> ProcStat | None:
    """The process `pid` (a zombie included), or None when it is gone or cannot be read: one read of
    /proc/<pid>/stat through the rank's reader (ftqual.rank.procfs, the one parser of it).

    Never psutil's create_time(): that is boot time + ticks, with the boot time read again from /proc/stat's
    `btime` for every new psutil.Process, and `btime` (whole seconds of wall clock minus uptime) flips by one
    second when the clock is adjusted: on VMs it does during a run, and then the same process looks like
    another one (and psutil's parents() and children() skip it)."""
    return procfs.read_stat(pid)


def start_time(pid: int | str) -> int | None:
    stat = read_stat(pid)
    return stat.start_time if stat else None


def all_procs() -> list[ProcStat]:
    """Every live process; zombies are already dead: they hold no memory or GPU and ignore every signal."""
    found = (read_stat(pid) for pid in psutil.pids())
    return [stat for stat in found if stat is not None and stat.state != "Z"]


def descendants(root: int) -> list[ProcStat]:
    """The live processes below `root` (children, theirs, ...); none when `root` is gone.

    Walks the parent links of one process-table snapshot itself: psutil's children() drops a child whose
    create_time() is before its parent's, and those epoch times can differ by the one-second flips of the
    boot time (read_stat), so a child started with its parent could be missed."""
    top = read_stat(root)
    if top is None or top.state == "Z":
        return []
    by_parent: dict[int, list[ProcStat]] = {}
    for stat in all_procs():
        by_parent.setdefault(stat.ppid, []).append(stat)
    found, todo = [], [top.pid]
    while todo:
        for child in by_parent.get(todo.pop(), []):
            if child.start_time >= top.start_time and child.pid != top.pid:  # not a reused parent pid
                found.append(child)
                todo.append(child.pid)
    return found


def ancestry() -> list[tuple[int, int]]:
    """(pid, start ticks) of every process above this one up to init: what runs us (the workflow)."""
    chain: list[tuple[int, int]] = []
    stat = read_stat(os.getpid())
    # parent links by hand: psutil's parents() stops at a parent whose create_time() looks later than ours
    while stat is not None and stat.ppid > 1 and len(chain) < 64:
        stat = read_stat(stat.ppid)
        if stat is None:
            break
        chain.append((stat.pid, stat.start_time))
    return chain


def first_gone(chain: Iterable[tuple[int, int]]) -> int | None:
    """The pid of the first process of `chain` (from ancestry()) that is gone: exited, a zombie (where
    nobody reaps a killed Snakemake it stays one), or its pid now names another process."""
    for pid, started in chain:
        if not alive(pid, started):
            return pid
    return None


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
