"""Read Linux process facts from /proc: parent, process group, start time and run ID of each process.

`start_time` is field 22 of /proc/<pid>/stat (clock ticks since boot). A pid plus its start time names one
process for good, so a recorded pid that the kernel has since reused is never mistaken for ours. That a
process belongs to a run is proved by its environment: the launcher puts `FTQUAL_RUN_ID=<run id>` into the
environment of ft_launcher, which every worker, log server and checkpoint process inherits.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# Set by our launcher only (ftqual.launch.run.child_env), never by a user's shell, unlike NVRX_RUN_ID.
RUN_ID_ENV = "FTQUAL_RUN_ID"


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    pgid: int
    state: str
    start_time: int


def parse_stat(text: str) -> ProcStat:
    """Parse one /proc/<pid>/stat line; the command name may hold spaces and parentheses."""
    head, _, rest = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = rest.split()
    # fields[0] is field 3 (state); field N is fields[N - 3].
    return ProcStat(
        pid=pid, ppid=int(fields[1]), pgid=int(fields[2]), state=fields[0], start_time=int(fields[19])
    )


def read_stat(pid: int | str) -> ProcStat | None:
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None


def start_time(pid: int | str) -> int | None:
    stat = read_stat(pid)
    return stat.start_time if stat else None


def all_procs() -> list[ProcStat]:
    procs = []
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            stat = read_stat(entry.name)
            # Zombies are already dead: they hold no memory or GPU and ignore every signal.
            if stat is not None and stat.state != "Z":
                procs.append(stat)
    return procs


def descendants(root: int, procs: list[ProcStat]) -> list[ProcStat]:
    children: dict[int, list[ProcStat]] = {}
    for proc in procs:
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child.pid)
    return found


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


def read_environ(pid: int) -> list[bytes] | None:
    """The environment `pid` was started with (NUL-separated entries), or None when it cannot be read.

    Another user's process (EACCES), a vanished one and a kernel thread all give None: unprovable.
    """
    try:
        data = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    return data.split(b"\0")


def carries_run_id(pid: int, run_id: str) -> bool:
    """True when the environment of `pid` holds exactly FTQUAL_RUN_ID=<run_id>."""
    entries = read_environ(pid)
    return entries is not None and f"{RUN_ID_ENV}={run_id}".encode() in entries
