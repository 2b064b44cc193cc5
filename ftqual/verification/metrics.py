"""Timeline and metrics of one run: pure functions of a RunSnapshot, all times on one UTC clock.

Fault runs: injection -> detection (`detection_s`, by the launcher's exit line, a timeout line, or
cycle_end_time) -> teardown -> rendezvous -> replacement cycle start (`restart_s` from cycle end) ->
checkpoint load -> first committed step (`failure_to_first_step_s`); these keys describe the first
injection, and `faults` lists every injection's (injection, cycle, checkpoint_iteration, restored_iteration,
detected_by, detection_s, restart_s). An unwinding fault (exception, sigint: ftqual.contract.UNWINDING_FAULTS)
adds its linger (ftqual.verification.checks.linger): `linger_s` from the injection to the rank's end,
`linger_ended_by`
(`exit`: by itself; `timeout`: cut by the open section's timeout, `linger_cut_by_timeout` true, and
`linger_s` a lower bound; `killed`: by another's kill), `linger_section` and `linger_bound_s` (the section
whose timeout bounds it, and that timeout), and `held_by` (what held the rank, from a stack dump: None
without one). Baselines: wall time, steady iterations per second, save durations.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from ftqual.contract import UNWINDING_FAULTS, family_of
from ftqual.verification.checks import linger
from ftqual.verification.evidence import derive, endings
from ftqual.verification.evidence.clock import iso_z, seconds
from ftqual.verification.evidence.iterations import HAS_LOSS, HAS_T, IterationTable, from_micros, micros
from ftqual.verification.evidence.snapshot import RunSnapshot
from ftqual.verification.evidence.train_log import MODEL_BUILT, TrainLog

EVENT_KINDS = (
    "cycle_start",
    "cycle_end",
    "injection",
    "detection",
    "checkpoint_saved",
    "checkpoint_loaded",
    "first_step",
    "exit",
)

# Two cycle times this close are one instant written twice (NVRx 0.6's end of a cycle = start of the next).
SAME_INSTANT_S = 0.01


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


# A long run saves thousands of times (every 1,000 of 6 million steps: 6,200 saves). Every save enters the
# save-time figures, but beyond MAX_SAVES_LISTED only some are listed (checkpoint_saves, the timeline's
# checkpoint_saved events and the points kept near them): every stride-th save, each log's first and last,
# and those at an iteration an injection or a restore names; `checkpoint_saves_total` then counts them
# all. 5,000 saves all listed made verify.json 10.8 MB (and pairing each save with its start took seconds).
MAX_SAVES_LISTED = 500


def checkpoint_saves(snap: RunSnapshot) -> list[dict[str, object]]:
    """Every completed save: `saving checkpoint` line -> `successfully saved` line of the same cycle."""
    return [
        {
            "cycle": log.cycle,
            "iteration": done.iteration,
            "started_at": iso_z(start.t) if start else None,
            "completed_at": iso_z(done.t),
            "save_s": seconds(start.t, done.t) if start else None,
        }
        for log in snap.train_logs
        for done, start in derive.completed_saves(log)
    ]


def listed_saves(snap: RunSnapshot) -> list[bool] | None:
    """Which completed saves (every log's `successfully saved` lines, in log order, as `checkpoint_saves`
    lists them) the report lists; None: all of them (up to MAX_SAVES_LISTED)."""
    done = [(log.cycle, event.iteration) for log in snap.train_logs for event in log.saves_of("done")]
    if len(done) <= MAX_SAVES_LISTED:
        return None
    named = {m.checkpoint_iteration for m in snap.markers}
    named |= {r.iteration for m in snap.markers if (r := derive.restore(snap, m)) is not None}
    stride = -(-len(done) // (MAX_SAVES_LISTED // 2))
    keep = [n % stride == 0 or iteration in named for n, (_, iteration) in enumerate(done)]
    ends: dict[int, list[int]] = {}  # cycle -> [index of its first save, of its last]
    for n, (cycle, _) in enumerate(done):
        ends.setdefault(cycle, [n, n])[1] = n
    for first, last in ends.values():
        keep[first] = keep[last] = True
    return keep


def _save_summary(snap: RunSnapshot) -> dict[str, object]:
    saves = checkpoint_saves(snap)
    durations = [s["save_s"] for s in saves if isinstance(s["save_s"], float | int)]
    keep = listed_saves(snap)
    listed = saves if keep is None else [save for save, kept in zip(saves, keep, strict=True) if kept]
    summary: dict[str, object] = {
        "checkpoint_saves": listed,
        "checkpoint_save_s_max": max(durations) if durations else None,
        "checkpoint_save_s_mean": _round(sum(durations) / len(durations)) if durations else None,
    }
    if keep is not None:
        summary["checkpoint_saves_total"] = len(saves)
    return summary


def iterations_per_s(table: IterationTable) -> float | None:
    """Steps per second between the lowest and the highest timestamped iteration of one log."""
    low: tuple[int, int] | None = None  # (iteration, t); a log never repeats an iteration
    high: tuple[int, int] | None = None
    for _, rows in table.chunks():
        timed = rows[(rows["flags"] & HAS_T) != 0]
        if not len(timed):
            continue
        a, b = timed[int(timed["iteration"].argmin())], timed[int(timed["iteration"].argmax())]
        if low is None or int(a["iteration"]) < low[0]:
            low = (int(a["iteration"]), int(a["t"]))
        if high is None or int(b["iteration"]) > high[0]:
            high = (int(b["iteration"]), int(b["t"]))
    if low is None or high is None or low == high:
        return None
    span = (from_micros(high[1]) - from_micros(low[1])).total_seconds()
    steps = high[0] - low[0]
    return round(steps / span, 3) if span > 0 and steps > 0 else None


def _wall(snap: RunSnapshot) -> float | None:
    if snap.meta.started_at and snap.meta.finished_at:
        return seconds(snap.meta.started_at, snap.meta.finished_at)
    if snap.cycles and snap.cycles.records:
        return seconds(snap.cycles.records[0].start, snap.cycles.records[-1].end)
    return None


def load_s(log: TrainLog | None) -> float | None:
    if log is None:
        return None
    timers = [t for t in log.timers if t.name == "load-checkpoint"]
    return round(timers[0].max_ms / 1000.0, 3) if timers else None


def teardown_s(snap: RunSnapshot, detected: datetime | None, replacement: int) -> float | None:
    launcher = snap.launcher
    if launcher is None or detected is None:
        return None
    floor = detected - timedelta(seconds=derive.SLACK_S)
    for event in launcher.events:
        if event.event == "worker_terminated" and event.t is not None and event.t >= floor:
            return seconds(detected, event.t)
    new = snap.cycles.by_cycle(replacement) if snap.cycles else None
    rdzv_start = launcher.event("rendezvous_started", replacement)
    rdzv_done = launcher.event("rendezvous_completed", replacement)
    if new is None or new.start is None or not (rdzv_start and rdzv_done and rdzv_start.t and rdzv_done.t):
        return None
    return _round((new.start - detected).total_seconds() - (rdzv_done.t - rdzv_start.t).total_seconds())


def failed_cycle_end(old, new, detected):
    """When the failed cycle ended. NVRx 0.7 writes its cycle_end_time as it handles the failure; NVRx 0.6
    writes it as the next cycle starts (the two times agree to the microsecond, seen on H200), which would
    make every restart 0 s: there the detection stands in."""
    if old is None or old.end is None:
        return None
    if new is not None and new.start is not None and detected is not None:
        if abs((new.start - old.end).total_seconds()) < SAME_INSTANT_S and detected < old.end:
            return detected
    return old.end


def fault_metrics(snap: RunSnapshot) -> dict[str, object]:
    failed, replacement = derive.fault_cycle(snap), derive.replacement_cycle(snap)
    injected = derive.injected_at(snap)
    found = derive.detection(snap)
    detected = found.t if found else None
    old = snap.cycles.by_cycle(failed) if snap.cycles else None
    new = snap.cycles.by_cycle(replacement) if snap.cycles else None
    replay_log = snap.train_log(replacement)
    restored = derive.restore(snap)
    first = derive.first_step_after(replay_log, restored.ref.line if restored else 0)
    fault_it = derive.fault_iteration(snap)
    restored_it = restored.iteration if restored else None
    metrics: dict[str, object] = {
        "checkpoint_iteration": snap.marker.checkpoint_iteration if snap.marker else None,
        "fault_iteration": fault_it.iteration if fault_it else None,
        "restored_iteration": restored_it,
        "lost_iterations": (fault_it.iteration - restored_it)
        if fault_it and restored_it is not None
        else None,
        "injected_at": iso_z(injected),
        "detected_at": iso_z(detected),
        "detected_by": found.detected_by if found else None,
        "detection_source": found.ref.path if found and found.ref else None,
        "detected_local_rank": found.local_rank if found else None,
        "detection_s": seconds(injected, detected),
        "teardown_s": teardown_s(snap, detected, replacement),
        "restart_s": seconds(failed_cycle_end(old, new, detected), new.start if new else None),
        "checkpoint_load_s": load_s(replay_log),
        "replacement_startup_s": seconds(new.start if new else None, first.t if first else None),
        "failure_to_first_step_s": seconds(injected, first.t if first else None),
        "first_step_iteration": first.iteration if first else None,
        "cycles": derive.cycle_count(snap)[0],
        "wall_time_s": _wall(snap),
    }
    if snap.meta.fault in UNWINDING_FAULTS:
        metrics.update(linger_metrics(snap))
    metrics.update(_save_summary(snap))
    metrics["faults"] = [_one_fault(snap, marker) for marker in snap.markers] if snap.markers else []
    return metrics


def linger_metrics(snap: RunSnapshot, marker=None) -> dict[str, object]:
    """An unwinding fault's linger and what held its rank (the first injection's by default)."""
    marker = marker or snap.marker
    found = linger.linger(snap, marker)
    held = linger.held_by(snap, marker)
    if found is None:  # no injection, or no launcher.log to read its end from
        return dict.fromkeys(linger.METRICS) | {"held_by": held}
    return found.metrics(held)


def _one_fault(snap: RunSnapshot, marker) -> dict[str, object]:
    """One injection's figures (`faults`; the first one's equal the single-fault keys above)."""
    failed, replacement = derive.fault_cycle(snap, marker), derive.replacement_cycle(snap, marker)
    found = derive.detection(snap, marker)
    detected = found.t if found else None
    old = snap.cycles.by_cycle(failed) if snap.cycles else None
    new = snap.cycles.by_cycle(replacement) if snap.cycles else None
    restored = derive.restore(snap, marker)
    return {
        "injection": marker.number,
        "cycle": marker.cycle,
        "checkpoint_iteration": marker.checkpoint_iteration,
        "restored_iteration": restored.iteration if restored else None,
        "detected_by": found.detected_by if found else None,
        "detection_s": seconds(marker.injected_at, detected),
        "restart_s": seconds(failed_cycle_end(old, new, detected), new.start if new else None),
    }


def baseline_metrics(snap: RunSnapshot) -> dict[str, object]:
    log = snap.train_logs[-1] if snap.train_logs else None
    info = snap.cycles.by_cycle(0) if snap.cycles else None
    first = derive.first_step_after(log) if log else None
    metrics: dict[str, object] = {
        "wall_time_s": _wall(snap),
        "cycles": derive.cycle_count(snap)[0],
        "iterations": log.iterations.iteration_range()[1] if log and len(log.iterations) else None,
        "iterations_per_s": iterations_per_s(log.iterations) if log else None,
        "time_to_first_step_s": seconds(info.start if info else None, first.t if first else None),
    }
    metrics.update(_save_summary(snap))
    return metrics


# verify.json's optional metrics of how a run ended (the report's exit-code table, ftqual.report.exit_codes)
ENDING_METRICS = (
    "launcher_exit_code",
    "rank_exit_codes",
    "silent_end",
    "scratch_restarts",
    "no_progress_cycles",
    "stopped_by",
    "stop_exit_code",
    "burned_cycles",
    "burned_wall_s",
    "burned_gpu_s",
)


def compute_metrics(snap: RunSnapshot) -> dict[str, object]:
    metrics = fault_metrics(snap) if family_of(snap.meta.fault) != "none" else baseline_metrics(snap)
    # how the run ended where its exit code misleads (optional keys, present only with a finding)
    metrics.update(endings.ending_metrics(snap))
    metrics.update(exit_metrics(snap))
    return metrics


def exit_metrics(snap: RunSnapshot) -> dict[str, object]:
    """The final exit codes a scheduler sees (the report's exit-code table): the launcher's (run.json) and
    the ranks' in the last cycle (launcher.log's `failed (exitcode: N)` lines from that cycle's start in
    cycle_infos; [0] where the launcher said the worker group finished and no rank of that cycle failed;
    absent where neither says)."""
    out: dict[str, object] = {"launcher_exit_code": snap.meta.exit_code}
    if snap.launcher is None:
        return out
    numbers = snap.cycles.cycle_numbers if snap.cycles is not None else ()
    info = snap.cycles.by_cycle(numbers[-1]) if snap.cycles is not None and numbers else None
    start = info.start if info is not None else None
    exits = snap.launcher.exits
    if start is not None:
        final = [e.exit_code for e in exits if e.t is not None and e.t >= start]
    else:  # no cycle records: only the last reported exit is surely the final cycle's
        final = [max(exits, key=lambda e: e.ref.line).exit_code] if exits else []
    if final:
        out["rank_exit_codes"] = sorted(set(final))
    elif snap.launcher.successes:
        out["rank_exit_codes"] = [0]
    return out


# The timeline's iteration points are bounded: up to ALL_POINTS every line is a point (every recorded run);
# beyond, every stride-th line of each log (about STRIDED_POINTS in all), plus every line within NEAR
# iterations of an event (checkpoint saved or loaded, injection, restore, fault iteration) and the whole
# replayed overlap when it is at most MAX_OVERLAP iterations long.
# 2,000 points draw a loss curve as finely as the report's plots show it; 10,000 made verify.json 2.3 MB and
# its writing 70 ms of a 0.6 s verify of a 50 MB log.
ALL_POINTS = 5_000
STRIDED_POINTS = 2_000
NEAR = 3
MAX_OVERLAP = 2_000


def _event_iterations(snap: RunSnapshot) -> tuple[np.ndarray, tuple[int, int] | None]:
    """(sorted iterations the timeline keeps points near, the replayed overlap [K+1, fault] or None)."""
    keep = listed_saves(snap)
    if keep is None:
        marks = {e.iteration for log in snap.train_logs for e in log.saves}
    else:  # near the listed saves only: near all of them would keep every line of a long run
        done = (e.iteration for log in snap.train_logs for e in log.saves_of("done"))
        marks = {iteration for iteration, kept in zip(done, keep, strict=True) if kept}
    marks |= {e.iteration for log in snap.train_logs for e in log.loads}
    restored, fault = derive.restore(snap), derive.fault_iteration(snap)
    for item in (restored, fault):
        if item is not None:
            marks.add(item.iteration)
    if snap.marker is not None and snap.marker.checkpoint_iteration is not None:
        marks.add(snap.marker.checkpoint_iteration)
    overlap = None
    if restored is not None and fault is not None and 0 < fault.iteration - restored.iteration <= MAX_OVERLAP:
        overlap = (restored.iteration + 1, fault.iteration)
    bounded = [m for m in marks if -(1 << 62) < m < 1 << 62]
    return np.array(sorted(bounded), dtype=np.int64), overlap


def _kept(rows: np.ndarray, start: int, stride: int, marks: np.ndarray, overlap) -> np.ndarray:
    its = rows["iteration"]
    keep = (np.arange(start, start + len(rows)) % stride) == 0
    if len(marks):
        at = np.clip(np.searchsorted(marks, its), 1, len(marks)) - 1
        above = np.minimum(at + 1, len(marks) - 1)
        keep |= (np.abs(its - marks[at]) <= NEAR) | (np.abs(its - marks[above]) <= NEAR)
    if overlap is not None:
        keep |= (its >= overlap[0]) & (its <= overlap[1])
    return keep


def timeline_points(snap: RunSnapshot) -> list[dict[str, object]]:
    """The timeline's iteration points, in log order (see ALL_POINTS); each log's first and last line kept."""
    total = sum(len(log.iterations) for log in snap.train_logs)
    marks, overlap = _event_iterations(snap) if total > ALL_POINTS else (np.array([], np.int64), None)
    stride = 1 if total <= ALL_POINTS else -(-total // STRIDED_POINTS)
    out: list[dict[str, object]] = []
    for log in snap.train_logs:
        table, last = log.iterations, len(log.iterations) - 1
        for start, rows in table.chunks():
            keep = _kept(rows, start, stride, marks, overlap) if stride > 1 else np.ones(len(rows), bool)
            if start + len(rows) - 1 == last:
                keep[-1] = True
            out.extend(_points(table.cycle, table.rel, rows[keep]))
    return out


# Microseconds since the epoch of the years whose `iso_z` numpy writes alike (strftime writes a year
# below 1000 with fewer than four digits; numpy pads it).
_ISO_LOW = micros(datetime(1000, 1, 1, tzinfo=UTC))
_ISO_HIGH = micros(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC))


def _iso_times(t: np.ndarray, timed: np.ndarray) -> list[str | None]:
    """iso_z(from_micros(t)) of each timed row (None for the others), converted by numpy in bulk."""
    out: list[str | None] = [None] * len(t)
    plain = timed & (t >= _ISO_LOW) & (t <= _ISO_HIGH)
    where = np.flatnonzero(plain).tolist()
    texts = np.datetime_as_string(t[plain].astype("datetime64[us]"), unit="us").tolist()
    for index, text in zip(where, texts, strict=True):
        out[index] = text + "Z"
    for index in np.flatnonzero(timed & ~plain).tolist():
        out[index] = iso_z(from_micros(int(t[index])))
    return out


def _points(cycle: int, path: str, rows: np.ndarray) -> list[dict[str, object]]:
    """The timeline points of `rows` (records of one log), as IterationTable.line would give them."""
    flags = rows["flags"]
    losses = rows["loss"].tolist()
    has_loss = ((flags & HAS_LOSS) != 0).tolist()
    times = _iso_times(rows["t"], (flags & HAS_T) != 0)
    return [
        {
            "cycle": cycle,
            "iteration": iteration,
            "t": t,
            "loss": loss if with_loss else None,
            "consumed_samples": consumed,
            "line": line,
            "path": path,
        }
        for iteration, t, loss, with_loss, consumed, line in zip(
            rows["iteration"].tolist(),
            times,
            losses,
            has_loss,
            rows["consumed"].tolist(),
            rows["line"].tolist(),
            strict=True,
        )
    ]


def _event(
    kind: str, t: datetime | None, cycle: int | None, iteration: int | None = None, detail: str = "", ref=None
) -> dict[str, object]:
    out: dict[str, object] = {
        "kind": kind,
        "t": iso_z(t),
        "cycle": cycle,
        "iteration": iteration,
        "detail": detail,
    }
    if ref is not None:
        out.update(path=ref.path, line=ref.line)
    return out


def timeline(snap: RunSnapshot) -> dict[str, list[dict[str, object]]]:
    iterations = timeline_points(snap)
    events: list[dict[str, object]] = []
    for record in snap.cycles.records if snap.cycles else ():
        events.append(_event("cycle_start", record.start, record.cycle, ref=record.ref))
        if record.end is not None:
            events.append(_event("cycle_end", record.end, record.cycle, ref=record.ref))
    for marker in snap.markers if snap.marker is not None else ():
        events.append(
            _event(
                "injection",
                marker.injected_at,
                marker.cycle,
                marker.checkpoint_iteration,
                f"{marker.fault} rank {marker.rank} (local {marker.local_rank}) on {marker.host}",
                marker.ref,
            )
        )
        found = derive.detection(snap, marker)
        if found is not None:
            events.append(
                _event(
                    "detection",
                    found.t,
                    derive.fault_cycle(snap, marker),
                    None,
                    found.detected_by or "cycle_end_time",
                    found.ref,
                )
            )
    keep = iter(listed_saves(snap) or ())
    for log in snap.train_logs:
        for done in log.saves_of("done"):
            if next(keep, True):  # every save where all are listed
                events.append(_event("checkpoint_saved", done.t, log.cycle, done.iteration, ref=done.ref))
        for load in log.loads_of("done"):
            built = log.milestone(MODEL_BUILT)
            t = built.t if built and built.ref.line > load.ref.line else None
            events.append(_event("checkpoint_loaded", t, log.cycle, load.iteration, ref=load.ref))
        if log.cycle > 0 and len(log.iterations):
            first = log.iterations.row(0)  # rows are in line order
            events.append(_event("first_step", first.t, log.cycle, first.iteration, ref=first.ref))
    if snap.meta.exit_code is not None:
        events.append(
            _event(
                "exit", snap.meta.finished_at, None, None, f"exit code {snap.meta.exit_code}", snap.meta.ref
            )
        )
    events.sort(key=lambda e: (e["t"] is None, e["t"] or ""))
    return {"iterations": iterations, "events": events}
