"""Derived facts shared by the checks and the metrics: pure functions of a RunSnapshot.

The fault cycle is the marker's `cycle` (TORCHELASTIC_RESTART_COUNT at injection), the replacement the next
one. Times within SLACK_S before the injection still count as after it (the marker and the logs use different
clocks with different resolutions). A failure report counts as the detection of the injection only when it
lies after the injection and in the injection's cycle (a timeout line names its cycle; an exit line must
precede the replacement cycle's start); for a hang only a timestamped timeout line qualifies. The checks and
the metrics both take the detection from `detection()`, so they cannot disagree on `detected_by`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from ftqual.contract import LIVE_FAULTS, family_of
from ftqual.verification.evidence.iterations import HAS_LOSS, HAS_T, micros
from ftqual.verification.evidence.launcher_log import TimeoutFired, WorkerExit
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.run_meta import FaultMarker
from ftqual.verification.evidence.snapshot import RunSnapshot
from ftqual.verification.evidence.train_log import IterationLine, LoadEvent, SaveEvent, TrainLog

SLACK_S = 1.0


@dataclass(frozen=True)
class Detection:
    detected_by: str | None  # "exit" | "section:<name>" | "out_of_section" | None (only cycle_end_time known)
    t: datetime | None
    ref: Ref | None
    local_rank: int | None
    exit_code: int | None
    timeout: TimeoutFired | None = None


def _of(snap: RunSnapshot, marker: FaultMarker | None) -> FaultMarker | None:
    """The injection a derived fact is about: `marker`, else the first one (fault_injected.json)."""
    return marker if marker is not None else snap.marker


def fault_cycle(snap: RunSnapshot, marker: FaultMarker | None = None) -> int:
    marker = _of(snap, marker)
    if marker is not None and marker.cycle is not None:
        return marker.cycle
    return 0


def replacement_cycle(snap: RunSnapshot, marker: FaultMarker | None = None) -> int:
    return fault_cycle(snap, marker) + 1


def injected_at(snap: RunSnapshot, marker: FaultMarker | None = None) -> datetime | None:
    marker = _of(snap, marker)
    return marker.injected_at if marker is not None else None


def _after_injection(snap: RunSnapshot, t: datetime | None, marker: FaultMarker | None = None) -> bool:
    start = injected_at(snap, marker)
    if start is None or t is None:
        return True
    return t >= start - timedelta(seconds=SLACK_S)


def _candidates(snap: RunSnapshot) -> list[WorkerExit | TimeoutFired]:
    if snap.launcher is None:
        return []
    items: list[WorkerExit | TimeoutFired] = [*snap.launcher.exits, *snap.launcher.timeouts]
    return sorted(items, key=lambda f: (f.t is None, f.t or datetime.min.replace(tzinfo=UTC), f.ref.line))


def in_fault_cycle(
    snap: RunSnapshot, fact: WorkerExit | TimeoutFired, marker: FaultMarker | None = None
) -> bool:
    """Whether a failure report belongs to the injection's cycle (see the module docstring)."""
    if isinstance(fact, TimeoutFired):
        return fact.cycle == fault_cycle(snap, marker)
    new = snap.cycles.by_cycle(replacement_cycle(snap, marker)) if snap.cycles else None
    if new is None or new.start is None or fact.t is None:
        return True
    return fact.t <= new.start + timedelta(seconds=SLACK_S)


def qualifying_failures(
    snap: RunSnapshot, marker: FaultMarker | None = None
) -> list[WorkerExit | TimeoutFired]:
    """Failure reports after the injection and in its cycle, in time order."""
    return [
        f
        for f in _candidates(snap)
        if _after_injection(snap, f.t, marker) and in_fault_cycle(snap, f, marker)
    ]


def failures_before_injection(snap: RunSnapshot) -> list[WorkerExit | TimeoutFired]:
    if injected_at(snap) is None:
        return []
    return [f for f in _candidates(snap) if f.t is not None and not _after_injection(snap, f.t)]


def detection(snap: RunSnapshot, marker: FaultMarker | None = None) -> Detection | None:
    """What the launcher reported first after the injection, in its cycle: for a hang the first timestamped
    section or out-of-section timeout (every live fault: the rank lives on), else (a kill and every fault the
    rank dies of) the first timeout or worker exit."""
    info = snap.cycles.by_cycle(fault_cycle(snap, marker)) if snap.cycles else None
    cycle_end = info.end if info is not None else None
    found = qualifying_failures(snap, marker)
    if snap.meta.fault in LIVE_FAULTS:
        timeouts = [f for f in found if isinstance(f, TimeoutFired) and f.t is not None]
        found = timeouts or found
    for fact in found:
        t = fact.t or _failure_detected_event(snap, marker) or cycle_end  # a line without timestamp
        if isinstance(fact, TimeoutFired):
            return Detection(fact.detected_by, t, fact.ref, fact.local_rank, None, fact)
        return Detection("exit", t, fact.ref, fact.local_rank, fact.exit_code)
    if info is not None and cycle_end is not None:
        return Detection(None, cycle_end, info.ref, None, None)
    return None


def _failure_detected_event(snap: RunSnapshot, marker: FaultMarker | None = None) -> datetime | None:
    """NVRx's profiling `Event: failure_detected` (UTC), the first at or after the injection."""
    if snap.launcher is None:
        return None
    for event in snap.launcher.events:
        if (
            event.event == "failure_detected"
            and event.t is not None
            and _after_injection(snap, event.t, marker)
        ):
            return event.t
    return None


def exits_after_injection(snap: RunSnapshot, marker: FaultMarker | None = None) -> list[WorkerExit]:
    """Worker exits after the injection and in its cycle, in log order."""
    if snap.launcher is None:
        return []
    return [
        item
        for item in sorted(snap.launcher.exits, key=lambda f: f.ref.line)
        if _after_injection(snap, item.t, marker) and in_fault_cycle(snap, item, marker)
    ]


def marker_mismatches(snap: RunSnapshot, marker: FaultMarker | None = None) -> tuple[list[str], list[str]]:
    """(conflicts, unknowns) between an injection marker (the first by default) and what run.json asked
    for: the fault kind, the rank and the run id must be the requested ones, and so must the
    `[ftqual-inject]` lines' (checked with the first marker only)."""
    first = marker is None or marker is snap.marker
    marker, meta = _of(snap, marker), snap.meta
    name = marker.ref.path if marker is not None else "fault_injected.json"
    conflicts: list[str] = []
    unknowns: list[str] = []
    if marker is None:
        return conflicts, unknowns
    want_fault, want_rank = requested(snap, marker)
    asked = (("fault", want_fault, marker.fault), ("rank", want_rank, marker.rank))
    for what, want, got in (*asked, ("run_id", meta.run_id, marker.run_id)):
        if want is None:
            unknowns.append(f"run.json does not name the requested {what}")
        elif got is None:
            unknowns.append(f"{name} has no {what}")
        elif got != want:
            conflicts.append(f"{name} says {what} {got!r}, run.json asked for {want!r}")
    world = meta.world_size
    if marker.rank is not None and world is not None and not 0 <= marker.rank < world:
        conflicts.append(f"{name} says rank {marker.rank}, outside the world of {world}")
    host = _node_host(snap, marker.rank, marker)
    if host is not None and marker.host is not None and host != marker.host:
        conflicts.append(
            f"{name} puts rank {marker.rank} on {marker.host}, but the rendezvous put that "
            f"rank's node on {host}"
        )
    for line in snap.injections if first else ():
        payload = line.payload
        line_fault, line_rank = meta.fault, meta.fault_rank
        if snap.campaign is not None:  # each line is its own plan entry's
            entry = snap.campaign_entry(_as_int(payload.get("injection")))
            line_fault, line_rank = (entry.fault, entry.rank) if entry else (None, None)
        for key, want in (("fault", line_fault), ("rank", line_rank), ("run_id", meta.run_id)):
            got = payload.get(key)
            if got is not None and want is not None and got != want:
                conflicts.append(f"the [ftqual-inject] line says {key} {got!r}, run.json asked for {want!r}")
    return conflicts, unknowns


def requested(snap: RunSnapshot, marker: FaultMarker) -> tuple[str | None, int | None]:
    """The fault and rank a marker had to be: run.json's, or in a campaign its plan entry's (k-th marker,
    k-th entry; None when the plan has no such entry or could not be read)."""
    if family_of(snap.meta.fault) != "campaign":
        return snap.meta.fault, snap.meta.fault_rank
    entry = snap.campaign_entry(marker.number)
    return (entry.fault, entry.rank) if entry is not None else (None, None)


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _node_host(snap: RunSnapshot, rank: int | None, marker: FaultMarker | None = None) -> str | None:
    """The host of the node that runs global rank `rank` in the fault cycle: node rank rank // gpus_per_node,
    from the rendezvous join lines (None when the shape or the joins are unknown, or for one node)."""
    gpn, nnodes = snap.meta.gpus_per_node, snap.meta.nnodes
    if rank is None or not gpn or gpn < 1 or not nnodes or nnodes < 2 or snap.launcher is None:
        return None
    hosts = {j.rank: j.host for j in snap.launcher.joins if j.cycle == fault_cycle(snap, marker)}
    return hosts.get(rank // gpn)


def restore(snap: RunSnapshot, marker: FaultMarker | None = None) -> LoadEvent | None:
    log = snap.train_log(replacement_cycle(snap, marker))
    done = log.loads_of("done") if log else ()
    return done[0] if done else None


def first_step_after(log: TrainLog | None, line: int = 0) -> IterationLine | None:
    """The first iteration line of `log` after line `line` (rows are in line order)."""
    if log is None:
        return None
    for start, rows in log.iterations.chunks():
        at = int(np.searchsorted(rows["line"], line, side="right"))
        if at < len(rows):
            return log.iterations.row(start + at)
    return None


def before_mask(rows: np.ndarray, start: datetime | None) -> np.ndarray:
    """Rows committed before the injection at `start`: without a timestamp, or at or before it."""
    if start is None:
        return np.ones(len(rows), dtype=bool)
    return ((rows["flags"] & HAS_T) == 0) | (rows["t"] <= micros(start))


def fault_iteration(snap: RunSnapshot, marker: FaultMarker | None = None) -> IterationLine | None:
    """The last iteration committed in the fault cycle before the injection."""
    log = snap.train_log(fault_cycle(snap, marker))
    if log is None:
        return None
    start_t = injected_at(snap, marker)
    best: tuple[int, int] | None = None  # (iteration, row); a log never repeats an iteration
    for start, rows in log.iterations.chunks():
        its = rows["iteration"][before_mask(rows, start_t)]
        if len(its) and (best is None or int(its.max()) > best[0]):
            index = int(np.flatnonzero(before_mask(rows, start_t))[int(its.argmax())])
            best = (int(its.max()), start + index)
    return log.iterations.row(best[1]) if best else None


def saves_done(
    snap: RunSnapshot, iteration: int, min_cycle: int = 0, before_cycle: int | None = None
) -> list[SaveEvent]:
    """`successfully saved checkpoint from iteration N` lines, in cycles min_cycle <= c < before_cycle."""
    return [
        event
        for log in snap.train_logs
        if log.cycle >= min_cycle and (before_cycle is None or log.cycle < before_cycle)
        for event in log.saves_of("done")
        if event.iteration == iteration
    ]


def completed_saves(log: TrainLog) -> list[tuple[SaveEvent, SaveEvent | None]]:
    """Each `successfully saved` line with the `saving checkpoint` line that began it (the last one of the
    same iteration on an earlier line, or None), in one pass over the log's saves: they are in line order,
    so every start seen before a line is on an earlier one."""
    last_start: dict[int, SaveEvent] = {}
    out: list[tuple[SaveEvent, SaveEvent | None]] = []
    for event in log.saves:
        if event.kind == "start":
            last_start[event.iteration] = event
        elif event.kind == "done":
            out.append((event, last_start.get(event.iteration)))
    return out


def train_iters(snap: RunSnapshot) -> int | None:
    if snap.meta.train_iters is not None:
        return snap.meta.train_iters
    totals = [
        int(rows["train_iters"].max()) for log in snap.train_logs for _, rows in log.iterations.chunks()
    ]
    return max(totals) if totals else None


def global_batch_size(snap: RunSnapshot, line: IterationLine | None = None) -> int | None:
    if line is not None and line.global_batch_size is not None:
        return line.global_batch_size
    if snap.meta.global_batch_size is not None:
        return snap.meta.global_batch_size
    for log in snap.train_logs:
        arg = log.args.get("global_batch_size")
        if arg is not None and arg.value.isdigit():
            return int(arg.value)
    return None


def cycle_count(snap: RunSnapshot) -> tuple[int | None, str]:
    """How many cycles ran, from cycle_infos (else from the per-cycle logs), and which source said so."""
    if snap.cycles is not None:
        return len(snap.cycles.cycle_numbers), "cycle_infos"
    if snap.train_logs:
        return len(snap.train_logs), "train logs"
    return None, ""


def first_row(tables, mask, low: int | None = None, high: int | None = None) -> IterationLine | None:
    """The first row, in the order of `tables` and of their rows, for which mask(rows) holds. With `low` or
    `high` (the mask holds only for iterations in [low, high)), chunks outside that range are not read."""
    for table in tables:
        for start, rows in table.chunks(low, high):
            hits = np.flatnonzero(mask(rows))
            if len(hits):
                return table.row(start + int(hits[0]))
    return None


def max_iteration(tables) -> int | None:
    ranges = [r for table in tables if (r := table.iteration_range()) is not None]
    return max(high for _, high in ranges) if ranges else None


def bad_loss(rows: np.ndarray) -> np.ndarray:
    """Rows reporting a loss that is not finite or is negative."""
    loss = rows["loss"]
    with np.errstate(invalid="ignore"):
        return ((rows["flags"] & HAS_LOSS) != 0) & (~np.isfinite(loss) | (loss < 0))
