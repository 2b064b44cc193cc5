"""Derived facts shared by the checks and the metrics: pure functions of a RunSnapshot.

The fault cycle is the marker's `cycle` (TORCHELASTIC_RESTART_COUNT at injection), the replacement the next
one. Times within SLACK_S before the injection still count as after it (the marker and the logs use different
clocks with different resolutions).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ftqual.evidence.launcher_log import TimeoutFired, WorkerExit
from ftqual.evidence.model import Ref
from ftqual.evidence.snapshot import RunSnapshot
from ftqual.evidence.train_log import IterationLine, LoadEvent, SaveEvent, TrainLog

SLACK_S = 1.0


@dataclass(frozen=True)
class Detection:
    detected_by: str | None  # "exit" | "section:<name>" | "out_of_section" | None (only cycle_end_time known)
    t: datetime | None
    ref: Ref | None
    local_rank: int | None
    exit_code: int | None
    timeout: TimeoutFired | None = None


def fault_cycle(snap: RunSnapshot) -> int:
    if snap.marker is not None and snap.marker.cycle is not None:
        return snap.marker.cycle
    return 0


def replacement_cycle(snap: RunSnapshot) -> int:
    return fault_cycle(snap) + 1


def injected_at(snap: RunSnapshot) -> datetime | None:
    return snap.marker.injected_at if snap.marker is not None else None


def _after_injection(snap: RunSnapshot, t: datetime | None) -> bool:
    start = injected_at(snap)
    if start is None or t is None:
        return True
    return t >= start - timedelta(seconds=SLACK_S)


def _candidates(snap: RunSnapshot) -> list[WorkerExit | TimeoutFired]:
    if snap.launcher is None:
        return []
    items: list[WorkerExit | TimeoutFired] = [*snap.launcher.exits, *snap.launcher.timeouts]
    return sorted(items, key=lambda f: (f.t is None, f.t or datetime.min, f.ref.line))


def failures_before_injection(snap: RunSnapshot) -> list[WorkerExit | TimeoutFired]:
    if injected_at(snap) is None:
        return []
    return [f for f in _candidates(snap) if f.t is not None and not _after_injection(snap, f.t)]


def detection(snap: RunSnapshot) -> Detection | None:
    """What the launcher reported first after the injection: a timeout or a worker exit."""
    info = snap.cycles.by_cycle(fault_cycle(snap)) if snap.cycles else None
    cycle_end = info.end if info is not None else None
    for fact in _candidates(snap):
        if not _after_injection(snap, fact.t):
            continue
        t = fact.t or _failure_detected_event(snap) or cycle_end  # a line without timestamp
        if isinstance(fact, TimeoutFired):
            return Detection(fact.detected_by, t, fact.ref, fact.local_rank, None, fact)
        return Detection("exit", t, fact.ref, fact.local_rank, fact.exit_code)
    if info is not None and cycle_end is not None:
        return Detection(None, cycle_end, info.ref, None, None)
    return None


def _failure_detected_event(snap: RunSnapshot) -> datetime | None:
    """NVRx's profiling `Event: failure_detected` (UTC), the first at or after the injection."""
    if snap.launcher is None:
        return None
    for event in snap.launcher.events:
        if event.event == "failure_detected" and event.t is not None and _after_injection(snap, event.t):
            return event.t
    return None


def first_exit_after_injection(snap: RunSnapshot) -> WorkerExit | None:
    if snap.launcher is None:
        return None
    for item in sorted(snap.launcher.exits, key=lambda f: f.ref.line):
        if _after_injection(snap, item.t):
            return item
    return None


def restore(snap: RunSnapshot) -> LoadEvent | None:
    log = snap.train_log(replacement_cycle(snap))
    done = log.loads_of("done") if log else ()
    return done[0] if done else None


def first_step_after(log: TrainLog | None, line: int = 0) -> IterationLine | None:
    if log is None:
        return None
    later = [item for item in log.iterations if item.ref.line > line]
    return min(later, key=lambda item: item.ref.line) if later else None


def fault_iteration(snap: RunSnapshot) -> IterationLine | None:
    """The last iteration committed in the fault cycle before the injection."""
    log = snap.train_log(fault_cycle(snap))
    if log is None or not log.iterations:
        return None
    start = injected_at(snap)
    before = [i for i in log.iterations if start is None or i.t is None or i.t <= start]
    return max(before, key=lambda i: i.iteration) if before else None


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


def save_start(log: TrainLog, done: SaveEvent) -> SaveEvent | None:
    """The `saving checkpoint` line that began the save `done` completed (same iteration, earlier line)."""
    starts = [
        s for s in log.saves_of("start") if s.iteration == done.iteration and s.ref.line < done.ref.line
    ]
    return starts[-1] if starts else None


def train_iters(snap: RunSnapshot) -> int | None:
    if snap.meta.train_iters is not None:
        return snap.meta.train_iters
    totals = {item.train_iters for item in snap.iterations}
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
