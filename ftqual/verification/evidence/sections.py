"""How long each FT section lasted in every cycle of a run: what ft_launcher's timeouts are measured against.

Pure functions of a `RunSnapshot` (its parsed facts only: no pattern of its own). NVRx's rank monitor times
four things per rank (Megatron's `ft_integration`): `setup` (opened in `pretrain()` before
`initialize_megatron`, closed by the first training step), `step` (each train step), `checkpointing`
(`save_checkpoint`, and each async finalize call) and the time out of any section (armed after the first
`step` of a cycle). The logs bound them as follows; each figure says which way it errs (`bound`):

- `setup`: to the first training step's start (the cycle's first iteration line's timestamp minus its
  elapsed time times the iterations it covers, i.e. since the checkpoint it loaded or 0) from the section's
  opening: Megatron's `[after in-job setup and before initialize_megatron] datetime:` milestone, a timestamp
  taken as `ft_integration.setup()` returns, right after it opened the section. Both ends lie inside the
  section, so it is an **under**-estimate by milliseconds (`bound: lower`). A log without that milestone
  (an older Megatron) is measured from the cycle's worker start instead (the earliest
  `Event: worker_start_started` of the cycle in launcher.log, else cycle_infos' `cycle_start_time`): an
  **over**-estimate (`bound: upper`) that also holds the process start and the imports before the section
  opens, which the monitor does not time (at least 3.4 s, up to 15 s, of an 18 s figure on one H200). A
  replacement cycle's setup holds its checkpoint load, as the rank monitor's does.
- `step`: each iteration line's `elapsed time per iteration (ms)`, Megatron's interval timer around the
  whole loop iteration (saves excluded): an **over**-estimate of the step section by the logging and data
  fetch around it (`bound: upper`). The cycle's first step (after a checkpoint load, or the fresh start's
  compile and warm-up) is reported apart from `step_max` and `step_p95`. With `--log-interval` > 1 a line's
  figure is the mean of the steps it covers, which can hide a longer one (`bound: mean`).
- `checkpointing`: each save's synchronous part, from `saving checkpoint at iteration N` to `scheduled an
  async checkpoint save at iteration N` (async) or to the timestamped `successfully saved checkpoint from
  iteration N` (a save without a scheduled line): both lines are printed inside `save_checkpoint`, so it is
  an **under**-estimate by the section's opening and closing (milliseconds; `bound: lower`). The first save
  of each cycle (each cycle is a new process, and NVRx's persistent checkpoint worker starts on it) is
  reported apart. Async finalize calls, also in the section, are not printed and not measured.
- `out_of_section`: the longest interval between two consecutive timestamped iteration lines of a cycle,
  with the synchronous saves inside it taken out. Such an interval holds one step and the out-of-section
  work around it, so the figure is an **upper** bound of any out-of-section stretch within one interval.
  Before the first step the monitor does not arm it; after the last iteration line it is not bounded. An
  interval that holds an evaluation has its duration (`evaluations.py`) taken out too where every eval step
  ran inside a `step` section (the log's --ft-num-warmup-iters is 0, as ftqual passes it): the stretches
  before and after the evaluation stay in the figure, the loss reductions between two eval steps (inside
  Megatron's `evaluate` timer) do not. Otherwise the evaluation stays in (still an upper bound).
- `eval_step` (only in a cycle that evaluated): the longest eval step, each evaluation's duration over its
  eval steps (`bound: mean` with more than one, `upper` with one or an unknown count), measured against the
  `step` timeout beside the training steps: an evaluation that follows no training step's timing (a larger
  eval batch, another data path) meets the same timeout.

A figure the logs cannot give is `None` with the reason, never a guess. Only lines with a timestamp (and
for steps an elapsed time) count.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from ftqual.contract import LIVE_FAULTS
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.evaluations import EvaluationSpan, eval_steps_in_sections, evaluation_spans
from ftqual.verification.evidence.iterations import HAS_ELAPSED, HAS_T, micros
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.snapshot import RunSnapshot
from ftqual.verification.evidence.train_log import SETUP_SECTION_OPENED, SaveEvent, TrainLog

# NVRx's rank monitor checks the section and out-of-section timeouts this often (FaultToleranceConfig.
# workload_check_interval, 0.7.0's default, which the launcher leaves alone): a live fault is detected at most
# this long after its timeout has passed.
RANK_MONITOR_INTERVAL_S = 5.0

SECTIONS = ("setup", "step", "checkpointing", "out_of_section")
WORKER_START = "worker_start_started"
P95 = 95.0


@dataclass(frozen=True)
class Figure:
    """One measured duration: seconds (None: not bounded, `reason` says why), which way it errs, lines."""

    seconds: float | None
    bound: str = ""  # "upper" | "lower" | "mean" | "" (not measured)
    reason: str = ""
    evidence: tuple[Ref, ...] = ()
    count: int | None = None  # how many intervals it was taken from (steps, saves)
    what: str = ""  # what the figure is of, where a section's figures differ in kind (an evaluation step)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "s": None if self.seconds is None else round(self.seconds, 4),
            "bound": self.bound or None,
            "reason": self.reason or None,
            "evidence": [item.as_dict() for item in self.evidence],
        }
        if self.count is not None:
            out["count"] = self.count
        if self.what:
            out["what"] = self.what
        return out


def unmeasured(reason: str) -> Figure:
    return Figure(None, reason=reason)


@dataclass(frozen=True)
class CycleSections:
    cycle: int
    log: str
    setup: Figure
    first_step: Figure  # the cycle's first step (after its checkpoint load, or the fresh start's first)
    step_max: Figure  # every later step
    step_p95: Figure
    first_save: Figure  # the cycle's first save: NVRx's persistent checkpoint worker starts on it
    save_max: Figure  # every later save
    out_of_section: Figure
    loaded: bool  # the cycle began from a checkpoint
    hung: str | None = None  # the section the injected hang held in this cycle (expected to exceed)
    eval_step: Figure | None = None  # the longest eval step; None: the cycle printed no evaluation
    evaluations: tuple[EvaluationSpan, ...] = ()

    def figures(self) -> dict[str, Figure]:
        extra = {"eval_step": self.eval_step} if self.eval_step is not None else {}
        return {
            "setup": self.setup,
            "first_step": self.first_step,
            "step_max": self.step_max,
            "step_p95": self.step_p95,
            "first_save": self.first_save,
            "save_max": self.save_max,
            "out_of_section": self.out_of_section,
            **extra,
        }

    def by_section(self) -> dict[str, tuple[Figure, ...]]:
        """The figures each timeout is measured against (p95 is descriptive: the max covers it)."""
        return {
            "setup": (self.setup,),
            "step": (self.first_step, self.step_max, *((self.eval_step,) if self.eval_step else ())),
            "checkpointing": (self.first_save, self.save_max),
            "out_of_section": (self.out_of_section,),
        }

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"cycle": self.cycle, "log": self.log, "loaded_checkpoint": self.loaded}
        out["hung_section"] = self.hung
        out.update({name: figure.as_dict() for name, figure in self.figures().items()})
        return out


@dataclass(frozen=True)
class RunSections:
    cycles: tuple[CycleSections, ...] = ()
    reason: str = ""  # why no cycle could be measured at all
    notes: tuple[str, ...] = field(default_factory=tuple)
    # the job's evaluation (interval, iters, where they were read) and what ran; None: none configured or seen
    evaluation: dict[str, object] | None = None

    def overall(self, include_hung: bool = False) -> dict[str, Figure]:
        """Per section the largest figure over every cycle (the hung section of a fault cycle left out)."""
        out: dict[str, Figure] = {}
        for name in SECTIONS:
            found = [
                figure
                for cycle in self.cycles
                if include_hung or cycle.hung != name
                for figure in cycle.by_section()[name]
                if figure.seconds is not None
            ]
            if found:
                out[name] = max(found, key=lambda f: f.seconds)  # type: ignore[arg-type, return-value]
            else:
                reasons = [
                    f"cycle {c.cycle}: {f.reason}"
                    for c in self.cycles
                    for f in c.by_section()[name]
                    if f.reason
                ]
                out[name] = unmeasured("; ".join(dict.fromkeys(reasons)) or self.reason or "no cycle")
        return out

    def as_dict(self) -> dict[str, object]:
        out = {
            "overall": {name: figure.as_dict() for name, figure in self.overall().items()},
            "cycles": [cycle.as_dict() for cycle in self.cycles],
            "reason": self.reason or None,
            "notes": list(self.notes),
        }
        if self.evaluation is not None:
            out["evaluation"] = self.evaluation
        return out


def _seconds(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds()


def _cycle_start(snap: RunSnapshot, cycle: int) -> tuple[datetime | None, Ref | None, str]:
    """The cycle's worker start: launcher.log's earliest `worker_start_started` of it, else cycle_infos."""
    if snap.launcher is not None:
        starts = [e for e in snap.launcher.events if e.event == WORKER_START and e.cycle == cycle and e.t]
        if starts:
            first = min(starts, key=lambda e: e.t)  # type: ignore[arg-type, return-value]
            return first.t, first.ref, ""
    info = snap.cycles.by_cycle(cycle) if snap.cycles is not None else None
    if info is not None and info.start is not None:
        return info.start, info.ref, ""
    return None, None, f"no worker start of cycle {cycle} (launcher.log's {WORKER_START}, cycle_infos)"


def _log_interval(log: TrainLog) -> int:
    item = log.args.get("log_interval")
    try:
        return max(1, int(item.value)) if item is not None else 1
    except ValueError:
        return 1


def _start_iteration(log: TrainLog, first_iteration: int) -> int:
    """The iteration the cycle's training loop began after: the checkpoint it loaded, else 0."""
    done = log.loads_of("done")
    if done and done[0].iteration < first_iteration:
        return done[0].iteration
    return 0


def _setup(snap: RunSnapshot, log: TrainLog) -> Figure:
    first = None
    for start, rows in log.iterations.chunks():
        if len(rows):
            first = (start, rows[0])
            break
    if first is None:
        return unmeasured(f"{log.path} has no iteration line")
    index, rec = first
    flags = int(rec["flags"])
    if not flags & HAS_T:
        return unmeasured(f"{log.path}'s first iteration line has no timestamp")
    if not flags & HAS_ELAPSED:
        return unmeasured(f"{log.path}'s first iteration line has no elapsed time")
    covered = max(1, int(rec["iteration"]) - _start_iteration(log, int(rec["iteration"])))
    step_start = int(rec["t"]) - int(round(float(rec["elapsed"]) * 1000 * covered))
    step_ref = log.iterations.row(index).ref
    opened = log.milestone(SETUP_SECTION_OPENED)
    if opened is not None and opened.t is not None:
        seconds = (step_start - micros(opened.t)) / 1e6
        if seconds >= 0:
            return Figure(seconds, "lower", evidence=(opened.ref, step_ref))
    t0, where, why = _cycle_start(snap, log.cycle)
    if t0 is None:
        return unmeasured(why)
    seconds = (step_start - micros(t0)) / 1e6
    if seconds < 0:
        return unmeasured(f"{log.path}'s first step starts before the cycle's worker start (clocks disagree)")
    return Figure(seconds, "upper", evidence=(where, step_ref))  # type: ignore[arg-type]


def _steps(log: TrainLog) -> tuple[Figure, Figure, Figure, bool]:
    """(first step, max of the later ones, their p95, whether the cycle loaded a checkpoint)."""
    loaded = bool(log.loads_of("done"))
    bound = "upper" if _log_interval(log) == 1 else "mean"
    parts: list[np.ndarray] = []
    first: Figure | None = None
    best: tuple[float, int] | None = None
    for start, rows in log.iterations.chunks():
        has = (rows["flags"] & HAS_ELAPSED) != 0
        idx = np.flatnonzero(has)
        if not len(idx):
            continue
        if first is None:
            row = log.iterations.row(start + int(idx[0]))
            first = Figure(float(rows["elapsed"][idx[0]]) / 1000, bound, evidence=(row.ref,))
            idx = idx[1:]
            if not len(idx):
                continue
        values = rows["elapsed"][idx]
        at = int(values.argmax())
        if best is None or float(values[at]) > best[0]:
            best = (float(values[at]), start + int(idx[at]))
        parts.append(values.astype(np.float32))
    if first is None:
        why = f"{log.path} has no iteration line with an elapsed time"
        return unmeasured(why), unmeasured(why), unmeasured(why), loaded
    if best is None:
        why = f"{log.path} has one step only"
        return first, unmeasured(why), unmeasured(why), loaded
    values = np.concatenate(parts)
    peak = Figure(best[0] / 1000, bound, evidence=(log.iterations.row(best[1]).ref,), count=len(values))
    p95 = Figure(float(np.percentile(values, P95)) / 1000, bound, count=len(values))
    return first, peak, p95, loaded


def save_spans(log: TrainLog) -> list[tuple[SaveEvent, SaveEvent]]:
    """Each save's synchronous part: its `saving checkpoint` line and the first later `scheduled` line of
    the same iteration, else its first later timestamped `successfully saved` line (a synchronous save).
    A save that never got there (killed in it) has no span."""
    spans: list[tuple[SaveEvent, SaveEvent]] = []
    open_: dict[int, SaveEvent] = {}
    for event in log.saves:
        if event.kind == "start":
            open_[event.iteration] = event
        elif event.iteration in open_ and event.t is not None:
            if event.kind == "scheduled" or (event.kind == "done" and not log.saves_of("scheduled")):
                spans.append((open_.pop(event.iteration), event))
    return [(a, b) for a, b in spans if a.t is not None and b.t is not None and b.t >= a.t]


def _saves(log: TrainLog, spans: list[tuple[SaveEvent, SaveEvent]]) -> tuple[Figure, Figure]:
    if not spans:
        why = f"{log.path} has no save with both its start and its end"
        return unmeasured(why), unmeasured(why)
    a, b = spans[0]
    first = Figure(_seconds(a.t, b.t), "lower", evidence=(a.ref, b.ref), count=1)  # type: ignore[arg-type]
    if len(spans) == 1:
        return first, unmeasured(f"{log.path} has one save only")
    a, b = max(spans[1:], key=lambda s: _seconds(s[0].t, s[1].t))  # type: ignore[arg-type]
    later = Figure(_seconds(a.t, b.t), "lower", evidence=(a.ref, b.ref), count=len(spans) - 1)  # type: ignore[arg-type]
    return first, later


def _in_section_evaluations(log: TrainLog, evaluations: tuple[EvaluationSpan, ...]) -> list[tuple[int, int]]:
    """(a moment inside the interval that holds it, its duration) in microseconds of each train-loop
    evaluation whose eval steps were all inside `step` sections; none where the log does not say so."""
    if not evaluations or not eval_steps_in_sections(log):
        return []
    out = []
    for span in evaluations:
        duration = span.duration_s
        at = _line_micros(log, span.iteration) if span.on is None and duration is not None else None
        if at is not None:
            out.append((at + 1, int(duration * 1e6)))  # type: ignore[operator]  # after the line it follows
    return out


def _line_micros(log: TrainLog, iteration: int) -> int | None:
    for _, rows in log.iterations.chunks(iteration, iteration + 1):
        hit = np.flatnonzero((rows["iteration"] == iteration) & ((rows["flags"] & HAS_T) != 0))
        if len(hit):
            return int(rows["t"][int(hit[0])])
    return None


def _out_of_section(
    log: TrainLog, spans: list[tuple[SaveEvent, SaveEvent]], evaluations: tuple[EvaluationSpan, ...] = ()
) -> Figure:
    taken = [(micros(a.t), micros(b.t) - micros(a.t)) for a, b in spans]  # type: ignore[arg-type]
    taken += _in_section_evaluations(log, evaluations)
    save_at = np.array([at for at, _ in taken], dtype=np.int64)
    save_len = np.array([length for _, length in taken], dtype=np.int64)
    order = np.argsort(save_at, kind="stable")
    save_at, save_len = save_at[order], np.cumsum(save_len[order])
    prev: tuple[int, int] | None = None  # (t, row) of the last timestamped line of the previous chunk
    best: tuple[int, int, int] | None = None  # (gap us, row before, row after)
    for start, rows in log.iterations.chunks():
        idx = np.flatnonzero((rows["flags"] & HAS_T) != 0)
        if not len(idx):
            continue
        t = rows["t"][idx]
        index = idx + start
        if prev is not None:
            t = np.concatenate(([prev[0]], t))
            index = np.concatenate(([prev[1]], index))
        prev = (int(t[-1]), int(index[-1]))
        if len(t) < 2:
            continue
        gaps = np.diff(t)
        if len(save_at):  # take out the synchronous saves that began inside each interval
            lo = np.searchsorted(save_at, t[:-1], side="right")
            hi = np.searchsorted(save_at, t[1:], side="right")
            total = np.concatenate(([0], save_len))
            gaps = gaps - (total[hi] - total[lo])
        at = int(gaps.argmax())
        if best is None or int(gaps[at]) > best[0]:
            best = (int(gaps[at]), int(index[at]), int(index[at + 1]))
    if best is None:
        return unmeasured(f"{log.path} has fewer than two timestamped iteration lines")
    refs = (log.iterations.row(best[1]).ref, log.iterations.row(best[2]).ref)
    return Figure(max(0, best[0]) / 1e6, "upper", evidence=refs)


def _hung_sections(snap: RunSnapshot) -> dict[int, str]:
    """The fault cycle of each injected hang -> the section it held (the timeout that caught it, else the
    placement the run asked for)."""
    if snap.meta.fault not in LIVE_FAULTS:  # a hang, a held GIL, a kernel that never ends
        return {}
    out: dict[int, str] = {}
    for marker in snap.markers or ((snap.marker,) if snap.marker else ()):
        found = derive.detection(snap, marker)
        name = found.detected_by if found is not None else None
        if name and name.startswith("section:"):
            name = name.split(":", 1)[1]
        elif name != "out_of_section" and marker.placement == "setup":
            name = "setup"  # a replacement stopped in its setup (the run's first hang sits in a step)
        elif name != "out_of_section":
            name = getattr(snap.meta, "hang_placement", None) or "step"
        out[derive.fault_cycle(snap, marker)] = str(name)
    return out


def _eval_step(evaluations: tuple[EvaluationSpan, ...]) -> Figure | None:
    """The longest eval step of the cycle's evaluations; None where it printed none."""
    if not evaluations:
        return None
    measured = [span for span in evaluations if span.step_s is not None]
    if not measured:
        return unmeasured("no evaluation of the cycle has an `evaluate` timer or timestamped lines around it")
    span = max(measured, key=lambda item: item.step_s)  # type: ignore[arg-type, return-value]
    return Figure(
        span.step_s, span.step_bound, evidence=span.evidence, count=len(measured), what=span.describe()
    )


def configured_evaluation(snap: RunSnapshot) -> tuple[int | None, int | None, str]:
    """(interval, iters, where read) of the job's evaluation: run.json's `evaluation`, else the first log's
    arguments (a run.json written before it), else (None, None, "")."""
    given = snap.meta.evaluation if isinstance(getattr(snap.meta, "evaluation", None), dict) else None
    if given is not None:
        interval, iters = given.get("interval"), given.get("iters")
        if isinstance(iters, int) and not isinstance(iters, bool):
            return (interval if isinstance(interval, int) else None), iters, "run.json"
    for log in snap.train_logs if snap.ok("train_logs") else ():
        iters = log.args.get("eval_iters")
        if iters is not None:
            interval = log.args.get("eval_interval")
            try:
                every = int(interval.value) if interval is not None else None
            except ValueError:
                every = None
            try:
                return every, int(iters.value), f"{log.path}'s arguments"
            except ValueError:
                continue
    return None, None, ""


def cycle_sections(
    snap: RunSnapshot, log: TrainLog, hung: str | None = None, eval_iters: int | None = None
) -> CycleSections:
    spans = save_spans(log)
    first_step, step_max, step_p95, loaded = _steps(log)
    first_save, save_max = _saves(log, spans)
    evaluations = evaluation_spans(log, eval_iters)
    return CycleSections(
        cycle=log.cycle,
        log=log.path,
        setup=_setup(snap, log),
        first_step=first_step,
        step_max=step_max,
        step_p95=step_p95,
        first_save=first_save,
        save_max=save_max,
        out_of_section=_out_of_section(log, spans, evaluations),
        loaded=loaded,
        hung=hung,
        eval_step=_eval_step(evaluations),
        evaluations=evaluations,
    )


MAX_LISTED_EVALUATIONS = 50  # verify.json lists the first ones (and the longest); `count` says how many ran


def _evaluation_record(snap: RunSnapshot, cycles: tuple[CycleSections, ...]) -> dict[str, object] | None:
    """sections.evaluation: what the job asked (interval, iters), what ran, the longest eval step; None when
    no evaluation was configured and none printed (a run from before evaluation was modelled)."""
    interval, iters, source = configured_evaluation(snap)
    ran = [span for cycle in cycles for span in cycle.evaluations]
    if not ran and not (iters and iters > 0):
        return None
    longest = largest(cycle.eval_step for cycle in cycles if cycle.eval_step is not None)
    return {
        "interval": interval,
        "iters": iters,
        "source": source or None,
        "count": len(ran),
        "in_step_sections": all(eval_steps_in_sections(log) for log in snap.train_logs) if ran else None,
        "longest_step": longest.as_dict() if longest is not None else None,
        "evaluations": [span.as_dict() for span in ran[:MAX_LISTED_EVALUATIONS]],
    }


def run_sections(snap: RunSnapshot) -> RunSections:
    """Every cycle's figures (baseline and recovery cycles alike)."""
    if not snap.ok("train_logs"):
        return RunSections(reason=snap.reason("train_logs"))
    hung = _hung_sections(snap)
    _, iters, _ = configured_evaluation(snap)
    cycles = tuple(cycle_sections(snap, log, hung.get(log.cycle), iters) for log in snap.train_logs)
    notes: list[str] = []
    if not snap.ok("launcher_log") and not snap.ok("cycle_infos"):
        notes.append("no worker start (launcher.log and cycle_infos/ missing): setup not bounded")
    evaluation = _evaluation_record(snap, cycles)
    if evaluation is not None and not evaluation["count"]:
        notes.append(
            f"no evaluation ran (the job evaluates every {evaluation['interval']} iterations): "
            "the step and out-of-section figures do not cover one"
        )
    return RunSections(cycles=cycles, notes=tuple(notes), evaluation=evaluation)


def largest(figures: Iterable[Figure]) -> Figure | None:
    found = [f for f in figures if f.seconds is not None]
    return max(found, key=lambda f: f.seconds) if found else None  # type: ignore[arg-type, return-value]
