"""Pure helpers over a verify report's `timeline`: times since run start, iteration pace, save blocking.

The timeline (docs/interfaces.md) is `{"iterations": [{cycle, iteration, t, loss, ...}], "events": [{kind,
t, cycle, iteration, detail}]}` with UTC ISO-8601 times; any entry may lack a time or a loss.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import UTC, datetime

# Marker kinds drawn and tabulated, in causal order.
MARK_KINDS = ("injection", "detection", "restart", "first_step")


@dataclass(frozen=True)
class Point:
    cycle: int
    iteration: int
    s: float  # seconds since run start
    loss: float | None


@dataclass(frozen=True)
class Mark:
    kind: str  # injection | detection | restart | first_step | checkpoint_saved | checkpoint_loaded | exit
    s: float | None
    cycle: int | None
    iteration: int | None
    detail: str


@dataclass(frozen=True)
class Timeline:
    start: datetime | None
    points: tuple[Point, ...]
    marks: tuple[Mark, ...]

    def cycles(self) -> list[int]:
        return sorted({p.cycle for p in self.points})


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def build_timeline(doc: dict | None) -> Timeline:
    """The report's view of one verify report's timeline (empty when there is none)."""
    raw = (doc or {}).get("timeline") or {}
    iterations = [i for i in raw.get("iterations") or [] if isinstance(i, dict)]
    events = [e for e in raw.get("events") or [] if isinstance(e, dict)]
    start = _run_start(doc or {}, iterations, events)

    def since(value: object) -> float | None:
        t = parse_time(value)
        return None if t is None or start is None else (t - start).total_seconds()

    points = []
    for item in iterations:
        s, it = since(item.get("t")), _int(item.get("iteration"))
        if s is None or it is None:
            continue
        points.append(Point(_int(item.get("cycle")) or 0, it, s, _float(item.get("loss"))))
    marks = []
    for ev in events:
        kind = str(ev.get("kind") or "")
        cycle = _int(ev.get("cycle"))
        if kind == "cycle_start":
            if not cycle:  # the first cycle's start is the run start, not a restart
                continue
            kind = "restart"
        marks.append(
            Mark(kind, since(ev.get("t")), cycle, _int(ev.get("iteration")), str(ev.get("detail") or ""))
        )
    points.sort(key=lambda p: (p.s, p.cycle, p.iteration))
    return Timeline(start, tuple(points), tuple(marks))


def _run_start(doc: dict, iterations: list[dict], events: list[dict]) -> datetime | None:
    for ev in events:
        if ev.get("kind") == "cycle_start" and not ev.get("cycle"):
            t = parse_time(ev.get("t"))
            if t is not None:
                return t
    t = parse_time(doc.get("started_at"))
    if t is not None:
        return t
    times = [parse_time(x.get("t")) for x in [*iterations, *events]]
    known = [t for t in times if t is not None]
    return min(known) if known else None


def iteration_time_s(tl: Timeline) -> float | None:
    """Median time between consecutive committed iterations of one cycle (robust to save stalls)."""
    deltas = _deltas(tl)
    return statistics.median(deltas.values()) if deltas else None


def save_blocking_s(tl: Timeline, save_interval: int | None) -> float | None:
    """Median extra time of the step after a save over the median step: how long one save blocks training."""
    if not save_interval or save_interval <= 0:
        return None
    deltas = _deltas(tl)
    if len(deltas) < 3:
        return None
    pace = statistics.median(deltas.values())
    excess = [d - pace for (cycle, it), d in deltas.items() if it % save_interval == 0]
    return max(0.0, statistics.median(excess)) if excess else None


def _deltas(tl: Timeline) -> dict[tuple[int, int], float]:
    """(cycle, k) -> time from iteration k to k+1 in the same cycle."""
    by_key = {(p.cycle, p.iteration): p.s for p in tl.points}
    return {
        (cycle, it): by_key[(cycle, it + 1)] - s
        for (cycle, it), s in by_key.items()
        if (cycle, it + 1) in by_key
    }


def recovery_marks(tl: Timeline) -> dict[str, Mark]:
    """The first injection, then the first detection, restart and first step that follow it in time."""
    out: dict[str, Mark] = {}
    after = float("-inf")
    for kind in MARK_KINDS:
        mark = next((m for m in tl.marks if m.kind == kind and m.s is not None and m.s >= after), None)
        if mark is None:
            continue
        out[kind] = mark
        after = mark.s
    return out


def marks_summary(tl: Timeline) -> dict[str, float | None]:
    """Seconds since run start of the injection, detection, restart and first step after the restart."""
    marks = recovery_marks(tl)
    return {f"{kind}_s": round(marks[kind].s, 3) if kind in marks else None for kind in MARK_KINDS}
