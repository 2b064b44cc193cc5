"""logs/launcher.log (ft_launcher --ft-nvrx-logfile): failures, restarts, timeouts, progress, outcome.

Two prefixes occur: the NVRx logger's `2026-11-29 14:19:09,847 [INFO] [host] [workload:R(LR) infra:...]
file.py:N msg` (local time, the rank monitor's local rank in `(LR)`) and torch's glog `E1129 14:19:09.846000
PID file.py:N] msg` (local time, no year: taken from the last full timestamp seen, else from run.json's
started_at). One streaming pass; only facts are kept. Shaped as train_log.py: a collector, and a table of
the kinds of line (_ONE_OF: a line is at most one of these; _FLAGS: lines that matter by their presence).

A multi-node run's log holds every node's launcher lines (NVRx's gRPC log server aggregates them): the NVRx
prefix names the host, a glog line only its launcher's pid, which the node ids (`<host>_<pid>_<n>`, in the
rendezvous lines) map to a host. `has joined the rendezvous ... as rank R in a world of size W` (R, W: node
rank and node count) is attributed to the cycle of that node's latest `Event: rendezvous_started`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from ftqual.verification.evidence.clock import Clock, parse_utc
from ftqual.verification.evidence.model import Ref, SourceStatus, missing, ref
from ftqual.verification.evidence.patterns import launcher as patterns
from ftqual.verification.evidence.safeio import line_block, open_regular
from ftqual.verification.evidence.scan.launcher_blocks import read_block

LAUNCHER_LOG = "logs/launcher.log"
MAX_FACTS = 10000  # per kind: a runaway log must not exhaust memory

_NVRX = patterns.NVRX_PREFIX
_GLOG = patterns.GLOG_PREFIX
_NODE_ID = patterns.NODE_ID


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


@dataclass(frozen=True)
class RendezvousJoin:
    """One node's `The node '<id>' has joined the rendezvous '<rdzv>' as rank R in a world of size W`."""

    cycle: int
    host: str  # the NVRx prefix's host name, else the node id's
    rank: int  # the node's (agent's) rank, not a worker's global rank
    world_size: int  # number of nodes in the round
    t: datetime | None
    ref: Ref


@dataclass(frozen=True)
class RendezvousTimeout:
    """`The node '<id>' rendezvous has timed out after X seconds (timeout: T s)`."""

    host: str
    waited_s: float
    timeout_s: float
    t: datetime | None
    ref: Ref


@dataclass(frozen=True)
class GpuReclaim:
    """NVRx's wait for a failed cycle's GPU memory before the replacement starts: `GPU g memory reclaimed in
    Ns` (reclaimed) or `Timeout waiting for GPU memory to be reclaimed after Ns` (it gave up, went on)."""

    t: datetime | None
    gpu: int | None  # None on the timeout line, which names none
    waited_s: float
    reclaimed: bool
    ref: Ref


@dataclass(frozen=True)
class Flagged:
    """A line that matters by its presence (success, no-progress stop, non-zero exit, agent exit code)."""

    t: datetime | None
    ref: Ref
    code: int | None = None


@dataclass(frozen=True)
class LauncherLog:
    lines: int
    complete: bool = True  # False when the last line has no newline (the file was cut)
    # The facts, one tuple per kind (the collector's kinds are these names), in line order.
    exits: tuple[WorkerExit, ...] = ()
    restarts: tuple[RestartDecision, ...] = ()
    timeouts: tuple[TimeoutFired, ...] = ()
    progress: tuple[ProgressReport, ...] = ()
    events: tuple[ProfilingEvent, ...] = ()
    successes: tuple[Flagged, ...] = ()
    no_progress_stops: tuple[Flagged, ...] = ()
    nonzero_exits: tuple[Flagged, ...] = ()
    agent_exit_codes: tuple[Flagged, ...] = ()
    joins: tuple[RendezvousJoin, ...] = ()
    rendezvous_timeouts: tuple[RendezvousTimeout, ...] = ()
    gpu_reclaims: tuple[GpuReclaim, ...] = ()

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


class _Head(NamedTuple):
    """What a line's prefix says (nothing for a line without one), and where the line is."""

    t: datetime | None
    host: str | None
    local_rank: int | None
    glog_pid: int | None  # the launcher pid of a glog line, whose host only the node ids tell
    ref: Ref


class _Collector:
    """Mutable accumulator used only inside parse_launcher_log; frozen into a LauncherLog at the end."""

    def __init__(self, rel: str, clock: Clock, default_year: int) -> None:
        self.rel, self.clock, self.year = rel, clock, default_year
        self.year_text = b"%04d" % default_year  # the year as an NVRx prefix writes it
        self.lists: dict[str, list] = {}
        self.node_cycle: dict[str, int] = {}  # node id -> cycle of its latest rendezvous_started event
        self.node_joins: dict[str, int] = {}  # node id -> joins seen (the cycle when no event names one)
        self.pid_host: dict[int, str] = {}  # launcher pid -> host, from node ids
        self.exit_pids: dict[int, int] = {}  # index in the exits -> launcher pid of a glog line
        self.last_ts: str | None = None  # the latest NVRx timestamp read by `_head`, and its time
        self.last_t: datetime | None = None

    def add(self, kind: str, fact: object) -> bool:
        items = self.lists.setdefault(kind, [])
        if len(items) < MAX_FACTS:
            items.append(fact)
            return True
        return False

    def line(self, number: int, line: str) -> None:
        try:
            self._line(number, line)
        except ValueError:  # a number too long for int() (a forged line) yields no fact, never a traceback
            pass

    def plain(self, raw: bytes, ended: bool) -> None:
        """A line holding no needle (most lines of a large log): no kind of line can take it, only the year
        of its NVRx prefix matters (glog lines take theirs from it). A line that begins with the year's own
        four digits cannot change it."""
        if raw[:4] != self.year_text and (raw[:1].isdigit() or raw[:1] >= b"\x80"):
            line = raw.decode("utf-8", "replace") + ("\n" if ended else "")
            if nvrx := _NVRX.match(line):
                self._set_year(nvrx["ts"])
                self.last_ts = None  # the next `_head` sets the year again

    def _set_year(self, ts: str) -> None:
        self.year = int(ts[:4])
        self.year_text = b"%04d" % self.year

    def _line(self, number: int, line: str) -> None:
        head = self._head(number, line)
        for needle, pattern, take in _ONE_OF:
            if needle in line and (m := pattern.search(line)):
                take(self, m, head)
                break
        for needles, kind, code in _FLAGS:
            for needle in needles:
                if needle in line:
                    if code is None:
                        self.add(kind, Flagged(head.t, head.ref))
                    elif m := code.search(line):
                        self.add(kind, Flagged(head.t, head.ref, int(m[1])))
                    break

    def _head(self, number: int, line: str) -> _Head:
        here = ref(self.rel, number, line)
        if nvrx := _NVRX.match(line):
            ts = nvrx["ts"]
            if ts != self.last_ts:  # lines in a burst share their timestamp: parsed once
                self.last_ts, self.last_t = ts, self.clock.parse_local(ts)
                self._set_year(ts)
            t = self.last_t
            return _Head(t, nvrx["host"], _int_or_none(nvrx["local"]), None, here)
        if glog := _GLOG.match(line):
            return _Head(self.clock.parse_glog(line, self.year), None, None, int(glog[1]), here)
        return _Head(None, None, None, None, here)

    def exit(self, m: re.Match, at: _Head) -> None:
        fact = WorkerExit(at.t, int(m[1]), int(m[2]), int(m[3]), at.ref, at.host)
        if self.add("exits", fact) and at.glog_pid is not None:
            self.exit_pids[len(self.lists["exits"]) - 1] = at.glog_pid

    def restart(self, m: re.Match, at: _Head) -> None:
        self.add("restarts", RestartDecision(at.t, m[1], int(m[2]), int(m[3]), at.ref))

    def section_timeout(self, m: re.Match, at: _Head) -> None:
        self._timeout(at, m[1], m[2], m[3], m[4])

    def out_of_section_timeout(self, m: re.Match, at: _Head) -> None:
        self._timeout(at, m[1], None, m[2], m[3])

    def _timeout(self, at: _Head, cycle: str, section: str | None, elapsed: str, limit: str) -> None:
        fired = TimeoutFired(
            at.t, int(cycle), section, float(elapsed), float(limit), at.local_rank, at.host, at.ref
        )
        self.add("timeouts", fired)

    def progress(self, m: re.Match, at: _Head) -> None:
        self.add("progress", ProgressReport(at.t, int(m[1]), m[2] is None, int(m[3]), int(m[4]), at.ref))

    def event(self, m: re.Match, at: _Head) -> None:
        self.add("events", ProfilingEvent(int(m[1]), m[2], parse_utc(m[5] + " UTC"), at.ref))
        if m[2] == "rendezvous_started" and len(self.node_cycle) < MAX_FACTS:
            self.node_cycle[m[3]] = int(m[1])

    def join(self, m: re.Match, at: _Head) -> None:
        node = m["node"]
        host = at.host or node_host(node)  # the prefix's host: a single node's id says "localhost"
        if (nid := _NODE_ID.match(node)) and len(self.pid_host) < MAX_FACTS:
            self.pid_host[int(nid["pid"])] = host
        cycle = self.node_cycle.get(node, self.node_joins.get(node, 0))
        if len(self.node_joins) < MAX_FACTS:
            self.node_joins[node] = self.node_joins.get(node, 0) + 1
        self.add("joins", RendezvousJoin(cycle, host, int(m["rank"]), int(m["world"]), at.t, at.ref))

    def rendezvous_timeout(self, m: re.Match, at: _Head) -> None:
        host = at.host or node_host(m["node"])
        self.add("rendezvous_timeouts", RendezvousTimeout(host, float(m[2]), float(m[3]), at.t, at.ref))

    def gpu_reclaimed(self, m: re.Match, at: _Head) -> None:
        self.add("gpu_reclaims", GpuReclaim(at.t, int(m[1]), float(m[2]), True, at.ref))

    def gpu_reclaim_timeout(self, m: re.Match, at: _Head) -> None:
        self.add("gpu_reclaims", GpuReclaim(at.t, None, float(m[1]), False, at.ref))

    def success(self, _m: re.Match, at: _Head) -> None:
        self.add("successes", Flagged(at.t, at.ref))

    def freeze(self, lines: int, complete: bool) -> LauncherLog:
        facts = {kind: tuple(items) for kind, items in self.lists.items()}
        # A glog exit line names no host: its launcher pid does, once a node id has mapped it.
        facts["exits"] = tuple(
            replace(item, host=self.pid_host.get(self.exit_pids[i]))
            if i in self.exit_pids and item.host is None
            else item
            for i, item in enumerate(facts.get("exits", ()))
        )
        return LauncherLog(lines=lines, complete=complete, **facts)


class _Kind(NamedTuple):
    """One kind of line: `needle` (a cheap substring test) before `pattern`; `take` records the match."""

    needle: str
    pattern: re.Pattern
    take: Callable[[_Collector, re.Match, _Head], None]


# A line is at most one of these: the first whose needle and pattern match takes it.
_ONE_OF = (
    _Kind("exitcode:", patterns.WORKER_EXIT, _Collector.exit),
    _Kind("attempts left", patterns.RESTART, _Collector.restart),
    _Kind("[Cycle ", patterns.SECTION_TIMEOUT, _Collector.section_timeout),
    _Kind("[Cycle ", patterns.OUT_OF_SECTION, _Collector.out_of_section_timeout),
    _Kind("Training cycle #", patterns.PROGRESS, _Collector.progress),
    _Kind(" Event: ", patterns.PROFILE_EVENT, _Collector.event),
    _Kind("has joined the rendezvous", patterns.RENDEZVOUS_JOIN, _Collector.join),
    _Kind(patterns.SUCCESS, patterns.SUCCESS_LINE, _Collector.success),
    _Kind("rendezvous has timed out", patterns.RENDEZVOUS_TIMEOUT, _Collector.rendezvous_timeout),
    _Kind("memory reclaimed in", patterns.GPU_RECLAIMED, _Collector.gpu_reclaimed),
    _Kind("GPU memory to be reclaimed", patterns.GPU_RECLAIM_TIMEOUT, _Collector.gpu_reclaim_timeout),
)


class _Flag(NamedTuple):
    """A line that matters by its presence, whatever else it is: any of `needles`; `code`, when the line
    must also hold the code it reports."""

    needles: tuple[str, ...]
    kind: str
    code: re.Pattern | None = None


_FLAGS = (
    _Flag(patterns.NO_PROGRESS_NEEDLES, "no_progress_stops"),
    _Flag((patterns.NONZERO_EXIT,), "nonzero_exits"),
    _Flag((patterns.AGENT_EXIT_NEEDLE,), "agent_exit_codes", patterns.AGENT_EXIT),
)


# Any needle of either table, searched in a line's bytes before it is decoded (the needles are ASCII: a
# line holds one exactly when its bytes do, whatever else it holds).
_NEEDLES = [kind.needle for kind in _ONE_OF] + [needle for flag in _FLAGS for needle in flag.needles]
_ANY_NEEDLE = re.compile(b"|".join(re.escape(needle.encode("ascii")) for needle in dict.fromkeys(_NEEDLES)))


_BLOCK_BYTES = 4 << 20  # read a block of whole lines at a time: only lines holding a needle become strings
_NEEDLE_BYTES = tuple(needle.encode("ascii") for needle in dict.fromkeys(_NEEDLES))


def parse_launcher_log(
    path: Path, rel: str, clock: Clock, default_year: int, root: Path | None = None
) -> LauncherLog:
    """One pass over launcher.log. Raises OSError if the file cannot be opened, is not a regular file, or
    (with `root`) resolves outside it. Lines are cut at safeio.MAX_LINE_BYTES.

    Same lines, line numbers and facts as reading it line by line with `bounded_lines` and handing each line
    holding a needle to `_Collector.line`, each other to `_Collector.plain`; a block is read that way when
    one of its lines is longer than MAX_LINE_BYTES."""
    collector = _Collector(rel, clock, default_year)
    number = 0
    last_newline = True
    with open_regular(path, *((root,) if root is not None else ())) as handle:
        while block := line_block(handle, _BLOCK_BYTES):
            last_newline = block.endswith(b"\n")
            number = read_block(collector, block, number, _ANY_NEEDLE, _NEEDLE_BYTES)
    return collector.freeze(number, last_newline)


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
