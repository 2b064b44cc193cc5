"""logs/launcher.log (ft_launcher --ft-nvrx-logfile): failures, restarts, timeouts, progress, outcome.

Two prefixes occur: the NVRx logger's `2026-11-29 14:19:09,847 [INFO] [host] [workload:R(LR) infra:...]
file.py:N msg` (local time, the rank monitor's local rank in `(LR)`) and torch's glog `E1129 14:19:09.846000
PID file.py:N] msg` (local time, no year: taken from the last full timestamp seen, else from run.json's
started_at). One streaming pass; only facts are kept.

A multi-node run's log holds every node's launcher lines (NVRx's gRPC log server aggregates them): the NVRx
prefix names the host, a glog line only its launcher's pid, which the node ids (`<host>_<pid>_<n>`, in the
rendezvous lines) map to a host. `has joined the rendezvous ... as rank R in a world of size W` (R, W: node
rank and node count) is attributed to the cycle of that node's latest `Event: rendezvous_started`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from ftqual.evidence.clock import Clock, parse_utc
from ftqual.evidence.model import Ref, SourceStatus, missing, ref
from ftqual.evidence.safeio import bounded_lines, open_regular

LAUNCHER_LOG = "logs/launcher.log"
MAX_FACTS = 10000  # per kind: a runaway log must not exhaust memory

_NVRX = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \[(?P<level>\w+)\] \[(?P<host>[^\]]*)\] "
    r"\[workload:(?P<rank>[^(\s]*)\((?P<local>[^)]*)\)"
)
_GLOG = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+(\d+) ")
_NUM = r"(\d+(?:\.\d+)?)"
_EXIT = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")
_RESTART = re.compile(r"Worker group (UNHEALTHY|FAILED)\. (\d+)/(\d+) attempts left")
_TIMEOUT_IS = r" seconds\. Timeout is " + _NUM + " seconds"
_SECTION = re.compile(r"\[Cycle (\d+)\] Section '([^']+)' has been open for " + _NUM + _TIMEOUT_IS)
_OUT_OF_SECTION = re.compile(r"\[Cycle (\d+)\] Was out of section for " + _NUM + _TIMEOUT_IS)
_PROGRESS = re.compile(r"Training cycle #(\d+) made (NO )?progress: (-?\d+) (?:→|->) (-?\d+)")
_AGENT_EXIT = re.compile(r"Agent's exit code = (-?\d+)")
_PROFILE = re.compile(
    r"Cycle: (\d+) Event: (\w+) Node: (\S+) Rank: (\S+) Time: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) UTC"
)
_JOIN = re.compile(
    r"The node '(?P<node>[^']+)' has joined the rendezvous '(?P<id>[^']*)' as rank (?P<rank>\d+) "
    r"in a world of size (?P<world>\d+)"
)
_NODE_ID = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)_\d+$")
_NO_PROGRESS = ("EARLY TERMINATION", "no progress across restarts")


@dataclass(frozen=True)
class WorkerExit:
    t: datetime | None
    exit_code: int
    local_rank: int
    pid: int
    ref: Ref
    host: str | None = None  # the NVRx prefix's host, or the host of the launcher pid of a glog line


@dataclass(frozen=True)
class RestartDecision:
    t: datetime | None
    state: str  # UNHEALTHY (some local workers failed) or FAILED (all)
    attempts_left: int
    attempts_max: int
    ref: Ref


@dataclass(frozen=True)
class TimeoutFired:
    t: datetime | None
    cycle: int
    section: str | None  # None: the out-of-section timeout
    elapsed_s: float
    timeout_s: float
    local_rank: int | None
    host: str | None
    ref: Ref

    @property
    def detected_by(self) -> str:
        return f"section:{self.section}" if self.section else "out_of_section"


@dataclass(frozen=True)
class ProgressReport:
    t: datetime | None
    cycle: int
    progress: bool
    start: int
    end: int
    ref: Ref


@dataclass(frozen=True)
class ProfilingEvent:
    cycle: int
    event: str
    t: datetime | None
    ref: Ref
    node: str | None = None  # NVRx's node id, `<host>_<launcher pid>_<n>`


@dataclass(frozen=True)
class RendezvousJoin:
    """One node's `The node '<id>' has joined the rendezvous '<rdzv>' as rank R in a world of size W`."""

    cycle: int
    node: str
    host: str  # the NVRx prefix's host name, else the node id's
    rank: int  # the node's (agent's) rank, not a worker's global rank
    world_size: int  # number of nodes in the round
    rdzv_id: str
    t: datetime | None
    ref: Ref


@dataclass(frozen=True)
class Flagged:
    """A line that matters by its presence (success, no-progress stop, non-zero exit, agent exit code)."""

    t: datetime | None
    ref: Ref
    code: int | None = None


@dataclass(frozen=True)
class LauncherLog:
    exits: tuple[WorkerExit, ...]
    restarts: tuple[RestartDecision, ...]
    timeouts: tuple[TimeoutFired, ...]
    progress: tuple[ProgressReport, ...]
    events: tuple[ProfilingEvent, ...]
    successes: tuple[Flagged, ...]
    no_progress_stops: tuple[Flagged, ...]
    nonzero_exits: tuple[Flagged, ...]
    agent_exit_codes: tuple[Flagged, ...]
    lines: int
    complete: bool = True  # False when the last line has no newline (the file was cut)
    joins: tuple[RendezvousJoin, ...] = ()

    def event(self, name: str, cycle: int | None = None) -> ProfilingEvent | None:
        for item in self.events:
            if item.event == name and (cycle is None or item.cycle == cycle):
                return item
        return None


def node_host(node: str) -> str:
    """The host part of an NVRx node id `<host>_<pid>_<n>` (the id itself when it has another shape)."""
    m = _NODE_ID.match(node)
    return m["host"] if m else node


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and text.lstrip("-").isdigit() else None


def parse_launcher_log(
    path: Path, rel: str, clock: Clock, default_year: int, root: Path | None = None
) -> LauncherLog:
    """One pass over launcher.log. Raises OSError if the file cannot be opened, is not a regular file, or
    (with `root`) resolves outside it. Lines are cut at safeio.MAX_LINE_BYTES."""
    kinds: dict[str, list] = {
        k: []
        for k in (
            "exits",
            "restarts",
            "timeouts",
            "progress",
            "events",
            "successes",
            "no_progress_stops",
            "nonzero_exits",
            "agents",
            "joins",
        )
    }
    node_cycle: dict[str, int] = {}  # node id -> cycle of its latest rendezvous_started event
    node_joins: dict[str, int] = {}  # node id -> joins seen (the cycle when no event names one)
    pid_host: dict[int, str] = {}  # launcher pid -> host, from node ids
    exit_pids: dict[int, int] = {}  # index in kinds["exits"] -> launcher pid of a glog line

    def keep(kind: str, fact: object) -> None:
        if len(kinds[kind]) < MAX_FACTS:
            kinds[kind].append(fact)

    year = default_year
    number = 0
    last_newline = True
    with open_regular(path, *((root,) if root is not None else ())) as handle:
        for number, (raw, ended) in enumerate(bounded_lines(handle), start=1):
            last_newline = ended
            line = raw.decode("utf-8", "replace") + ("\n" if ended else "")
            try:  # a number too long for int() (a forged line) yields no fact, never a traceback
                t: datetime | None = None
                host: str | None = None
                local_rank: int | None = None
                glog_pid: int | None = None
                head = _NVRX.match(line)
                if head:
                    t = clock.parse_local(head["ts"])
                    year = int(head["ts"][:4])
                    host = head["host"]
                    local_rank = _int_or_none(head["local"])
                elif glog := _GLOG.match(line):
                    t = clock.parse_glog(line, year)
                    glog_pid = int(glog[1])
                here = ref(rel, number, line)
                if "exitcode:" in line and (m := _EXIT.search(line)):
                    if glog_pid is not None and len(kinds["exits"]) < MAX_FACTS:
                        exit_pids[len(kinds["exits"])] = glog_pid
                    keep("exits", WorkerExit(t, int(m[1]), int(m[2]), int(m[3]), here, host))
                elif "attempts left" in line and (m := _RESTART.search(line)):
                    keep("restarts", RestartDecision(t, m[1], int(m[2]), int(m[3]), here))
                elif "[Cycle " in line and (m := _SECTION.search(line)):
                    keep(
                        "timeouts",
                        TimeoutFired(t, int(m[1]), m[2], float(m[3]), float(m[4]), local_rank, host, here),
                    )
                elif "[Cycle " in line and (m := _OUT_OF_SECTION.search(line)):
                    keep(
                        "timeouts",
                        TimeoutFired(t, int(m[1]), None, float(m[2]), float(m[3]), local_rank, host, here),
                    )
                elif "Training cycle #" in line and (m := _PROGRESS.search(line)):
                    keep("progress", ProgressReport(t, int(m[1]), m[2] is None, int(m[3]), int(m[4]), here))
                elif " Event: " in line and (m := _PROFILE.search(line)):
                    keep("events", ProfilingEvent(int(m[1]), m[2], parse_utc(m[5] + " UTC"), here, m[3]))
                    if m[2] == "rendezvous_started" and len(node_cycle) < MAX_FACTS:
                        node_cycle[m[3]] = int(m[1])
                elif "has joined the rendezvous" in line and (m := _JOIN.search(line)):
                    node = m["node"]
                    name = host or node_host(node)  # the prefix's host: a single node's id says "localhost"
                    if (nid := _NODE_ID.match(node)) and len(pid_host) < MAX_FACTS:
                        pid_host[int(nid["pid"])] = name
                    cycle = node_cycle.get(node, node_joins.get(node, 0))
                    if len(node_joins) < MAX_FACTS:
                        node_joins[node] = node_joins.get(node, 0) + 1
                    join = RendezvousJoin(
                        cycle, node, name, int(m["rank"]), int(m["world"]), m["id"], t, here
                    )
                    keep("joins", join)
                elif "worker group successfully finished" in line:
                    keep("successes", Flagged(t, here))
                if any(marker in line for marker in _NO_PROGRESS):
                    keep("no_progress_stops", Flagged(t, here))
                if "exited with non-zero exit code" in line:
                    keep("nonzero_exits", Flagged(t, here))
                if "exit code = " in line and (m := _AGENT_EXIT.search(line)):
                    keep("agents", Flagged(t, here, int(m[1])))
            except ValueError:
                continue
    exits = [
        replace(item, host=pid_host.get(exit_pids[i])) if i in exit_pids and item.host is None else item
        for i, item in enumerate(kinds["exits"])
    ]
    return LauncherLog(
        exits=tuple(exits),
        restarts=tuple(kinds["restarts"]),
        timeouts=tuple(kinds["timeouts"]),
        progress=tuple(kinds["progress"]),
        events=tuple(kinds["events"]),
        successes=tuple(kinds["successes"]),
        no_progress_stops=tuple(kinds["no_progress_stops"]),
        nonzero_exits=tuple(kinds["nonzero_exits"]),
        agent_exit_codes=tuple(kinds["agents"]),
        lines=number,
        complete=last_newline,
        joins=tuple(kinds["joins"]),
    )


def read_launcher_log(
    run_dir: Path, clock: Clock, default_year: int
) -> tuple[LauncherLog | None, SourceStatus]:
    path = run_dir / LAUNCHER_LOG
    if not path.exists() and not path.is_symlink():
        return None, missing("launcher_log", f"{LAUNCHER_LOG} is absent")
    try:
        log = parse_launcher_log(path, LAUNCHER_LOG, clock, default_year, run_dir)
    except OSError as exc:
        return None, missing("launcher_log", f"{LAUNCHER_LOG} unreadable: {exc}", LAUNCHER_LOG)
    if log.lines == 0:
        return log, SourceStatus(
            "launcher_log", ok=True, complete=False, reason=f"{LAUNCHER_LOG} is empty", paths=(LAUNCHER_LOG,)
        )
    if not log.complete:
        reason = f"{LAUNCHER_LOG} cut short (last line without newline)"
        return log, SourceStatus(
            "launcher_log", ok=True, complete=False, reason=reason, paths=(LAUNCHER_LOG,)
        )
    return log, SourceStatus("launcher_log", ok=True, paths=(LAUNCHER_LOG,))
