"""The one /proc reader, for the rank and the launcher: stat fields, parents, descendants, open files.

The one reader of /proc for a rank and for the launcher (ftqual.launch.procs parses through it): a
process's stat line (state, parent, process group, start time, the CPU it last ran on), the parent links of
every process, the walks over them, the files a process holds open and its command line.

A pid plus its start time (field 22 of /proc/<pid>/stat, clock ticks since boot) names one process for good:
a recorded pid that the kernel has since reused is never taken for ours, and a process whose parent pid
names a process started after it (a reused parent pid) is not that process's child.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# fields after the command name, counted from 0 at `state` (field 3 of proc(5))
STATE, PPID, PGRP, START_TIME, PROCESSOR = 0, 1, 2, 19, 36


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    pgid: int
    state: str  # the kernel's letter: R, S, D, T, Z, ...
    start_time: int  # clock ticks since boot


def stat_fields(pid: int | str, tid: int | str | None = None) -> list[str]:
    """The fields of /proc/<pid>/stat (of /proc/<pid>/task/<tid>/stat with `tid`) after the command name,
    which may hold spaces and parentheses: they follow its last ')'. OSError when it cannot be read."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path, "rb") as fh:
        text = fh.read()
    return text[text.rindex(b")") + 2 :].decode("ascii", "replace").split()


def read_stat(pid: int | str) -> ProcStat | None:
    """The process `pid` (a zombie included), or None when it is gone or cannot be read: one read of
    /proc/<pid>/stat."""
    try:
        fields = stat_fields(int(pid))
        return ProcStat(
            int(pid), int(fields[PPID]), int(fields[PGRP]), fields[STATE], int(fields[START_TIME])
        )
    except (OSError, ValueError, IndexError):
        return None


def proc_start_time(pid: int | str = "self") -> int:
    """Field 22 of /proc/<pid>/stat: start time in clock ticks since boot (OSError, ValueError when gone)."""
    return int(stat_fields(pid)[START_TIME])


def last_cpu(pid: int) -> int | None:
    """The CPU `pid`'s main thread last ran on (field 39, `processor`); None where it cannot be read."""
    try:
        return int(stat_fields(pid)[PROCESSOR])
    except (OSError, ValueError, IndexError):
        return None


def all_stats(pids=None) -> list[ProcStat]:
    """Every process /proc shows (or of `pids`), zombies included; those that vanish meanwhile left out."""
    if pids is None:
        pids = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    found = (read_stat(pid) for pid in pids)
    return [stat for stat in found if stat is not None]


def parent_pids(stats: list[ProcStat] | None = None) -> dict[int, int]:
    """pid -> parent pid of every process (of `stats`, default all_stats()); a link to a parent started
    after the child (the parent's pid was reused) is left out."""
    stats = all_stats() if stats is None else stats
    started = {stat.pid: stat.start_time for stat in stats}
    return {
        stat.pid: stat.ppid
        for stat in stats
        if stat.ppid not in started or started[stat.ppid] <= stat.start_time
    }


def descendants_of(root: int, parents: dict[int, int]) -> list[int]:
    """Every process below `root` (children, theirs, ...), parents before children."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in sorted(children.get(todo.pop(0), ())):
            if child != root:
                found.append(child)
                todo.append(child)
    return found


def is_ancestor(pid: int, of: int, parents: dict[int, int]) -> bool:
    seen = set()
    while of in parents and of not in seen:
        seen.add(of)
        of = parents[of]
        if of == pid:
            return True
    return False


def is_alive(pid: int, start_time: int) -> bool:
    """The recorded process still runs: /proc/<pid>/stat has its start time (not a reused pid)."""
    try:
        return proc_start_time(pid) == start_time
    except (OSError, ValueError, IndexError):
        return False


def threads_stopped(pid: int) -> bool | None:
    """Whether every thread of `pid` is stopped (state T or t in /proc); None where /proc cannot tell."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            state = stat_fields(pid, tid)[STATE]
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended
        if state not in ("T", "t"):
            return False
    return True


def open_files_under(pid: int, directory: Path) -> list[str]:
    """The files below `directory` that process `pid` holds open (names relative to it); [] if unreadable."""
    found = []
    prefix = str(directory) + os.sep
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            found.append(target[len(prefix) :])
    return sorted(set(found))


def command_of(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200]


def cmdline(pid: int) -> list[str]:
    """The arguments of `pid` as /proc/<pid>/cmdline holds them; [] when gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def caught(pid: int, signum: int) -> bool:
    """Whether `pid` has a handler for `signum` (SigCgt in /proc/<pid>/status): a signal it does not catch
    would end it."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError):
        pass
    return False


def module_env(checkout: Path) -> dict[str, str]:
    """This process's environment with `checkout` (the folder that holds ftqual/) first on PYTHONPATH: what
    a child started as `python -m ftqual.rank.<module>` needs to import the package, installed or not."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(checkout), env.get("PYTHONPATH"))))
    return env
