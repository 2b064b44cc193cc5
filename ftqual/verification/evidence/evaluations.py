"""Each evaluation of a cycle's log, and the eval step measured against the `step` timeout.

Each evaluation of one cycle's log as the timeout figures need it: the iteration it followed, how long it
took, and the lines that say so. Pure functions of a parsed `TrainLog` (its facts only: no pattern of its
own).

Megatron core_v0.19's train loop evaluates after the iteration line of every iteration N with
N % eval_interval == 0 and before N's save (`train()`: training_log, then evaluate_and_print_results, then
checkpoint_and_decide_exit), with its interval timer stopped, so `elapsed time per iteration` leaves the
evaluation out; pretrain() evaluates again after training (`iteration N on validation set`, `... on test
set`). Each eval step is a forward of the global batch inside NVRx's `step` section
(ft_integration.on_eval_step_start/end, after --ft-num-warmup-iters eval steps of that evaluation; ftqual
passes 0). None of the results lines carries a timestamp. An evaluation's duration is read two ways:

- `timer_s`: Megatron's `evaluate` timer (max over ranks), logged by evaluate() right before the results: the
  whole evaluation, its eval steps and the loss reductions between them;
- `window_s`: wall time from the line before it (the iteration line N; for pretrain()'s, the last
  timestamped line before) to the first timestamped line after the results (a save's `saving checkpoint`,
  the next iteration line or a milestone): an **upper** bound of the evaluation. Where that next line is an
  iteration line, `training_s` is the training it holds (its interval time x the iterations it covers) and
  `window_s - training_s` bounds the evaluation closer.

`duration_s` is the timer where printed, else the window less its training, else the window.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ftqual.verification.evidence.iterations import HAS_ELAPSED, HAS_T, micros
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.train_log import Evaluation, TrainLog


@dataclass(frozen=True)
class EvaluationSpan:
    cycle: int
    iteration: int  # the iteration it followed
    on: str | None  # None: the train loop's; "validation" | "test": pretrain()'s after training
    steps: int | None  # eval steps (--eval-iters), None: unknown
    timer_s: float | None
    window_s: float | None
    training_s: float | None  # the training inside the window (the next iteration line's interval)
    evidence: tuple[Ref, ...]  # the window's first line, the timer, the results line, the window's last line

    @property
    def duration_s(self) -> float | None:
        if self.timer_s is not None:
            return self.timer_s
        if self.window_s is not None and self.training_s is not None:
            return max(0.0, self.window_s - self.training_s)
        return self.window_s

    @property
    def step_s(self) -> float | None:
        """One eval step: the duration over the steps (a mean where there are several); the whole duration
        where the count is unknown (no step is longer than the evaluation that holds it)."""
        duration = self.duration_s
        if duration is None:
            return None
        return duration / self.steps if self.steps else duration

    @property
    def step_bound(self) -> str:
        return "mean" if self.steps and self.steps > 1 else "upper"

    def describe(self) -> str:
        where = f" on {self.on} set" if self.on else ""
        return f"evaluation step at iteration {self.iteration}{where}"

    def as_dict(self) -> dict[str, object]:
        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "cycle": self.cycle,
            "iteration": self.iteration,
            "on": self.on,
            "steps": self.steps,
            "timer_s": r(self.timer_s),
            "window_s": r(self.window_s),
            "training_s": r(self.training_s),
            "duration_s": r(self.duration_s),
            "step_s": r(self.step_s),
            "step_bound": self.step_bound,
            "evidence": [item.as_dict() for item in self.evidence],
        }


def _int_arg(log: TrainLog, name: str) -> int | None:
    item = log.args.get(name)
    try:
        return int(item.value) if item is not None else None
    except ValueError:
        return None


def eval_steps(log: TrainLog, configured: int | None = None) -> int | None:
    """The eval steps of each evaluation: run.json's (`configured`), else the log's `eval_iters` argument."""
    if configured is not None and configured > 0:
        return configured
    found = _int_arg(log, "eval_iters")
    return found if found is not None and found > 0 else None


def eval_steps_in_sections(log: TrainLog) -> bool:
    """Whether every eval step was inside a `step` section: --ft-num-warmup-iters 0 as the log's arguments
    print it (with W > 0 an evaluation's first W steps run outside any section)."""
    return _int_arg(log, "ft_num_warmup_iters") == 0


class _Stamps:
    """The log's timestamped lines other than iteration lines (saves, milestones), by line number."""

    def __init__(self, log: TrainLog) -> None:
        found = [(e.ref.line, micros(e.t), e.ref) for e in log.saves if e.t is not None]
        found += [(m.ref.line, micros(m.t), m.ref) for m in log.milestones if m.t is not None]
        found.sort(key=lambda item: item[0])
        self.lines = [item[0] for item in found]
        self.items = found

    def after(self, line: int) -> tuple[int, int, Ref] | None:
        at = bisect.bisect_right(self.lines, line)
        return self.items[at] if at < len(self.items) else None

    def before(self, line: int) -> tuple[int, int, Ref] | None:
        at = bisect.bisect_left(self.lines, line)
        return self.items[at - 1] if at > 0 else None


def _iteration_row(log: TrainLog, iteration: int, before_line: int):
    """(index, row) of iteration `iteration`'s line when it precedes `before_line` and has a timestamp."""
    for start, rows in log.iterations.chunks(iteration, iteration + 1):
        hits = np.flatnonzero(
            (rows["iteration"] == iteration) & (rows["line"] < before_line) & ((rows["flags"] & HAS_T) != 0)
        )
        if len(hits):
            return start + int(hits[0]), rows[int(hits[0])]
    return None


def _row_after(log: TrainLog, line: int, low: int | None):
    """(index, row) of the first timestamped iteration line after `line` (iterations from `low` on)."""
    for start, rows in log.iterations.chunks(low, None):
        hits = np.flatnonzero((rows["line"] > line) & ((rows["flags"] & HAS_T) != 0))
        if len(hits):
            return start + int(hits[0]), rows[int(hits[0])]
    return None


def _last_row_before(log: TrainLog, line: int):
    best = None
    for start, rows in log.iterations.chunks():
        hits = np.flatnonzero((rows["line"] < line) & ((rows["flags"] & HAS_T) != 0))
        if len(hits):
            best = (start + int(hits[-1]), rows[int(hits[-1])])
    return best


def _span(
    log: TrainLog, item: Evaluation, steps: int | None, stamps: _Stamps, previous: int
) -> EvaluationSpan:
    line = item.ref.line
    start: tuple[int, Ref] | None = None  # (t, ref)
    if item.on is None:
        found = _iteration_row(log, item.iteration, line)
        if found is not None:
            start = (int(found[1]["t"]), log.iterations.row(found[0]).ref)
    else:  # after training: the last timestamped line before it, unless another evaluation lies between
        row = _last_row_before(log, line)
        stamp = stamps.before(line)
        row_line = int(row[1]["line"]) if row is not None else -1
        if stamp is not None and stamp[0] > row_line and stamp[0] > previous:
            start = (stamp[1], stamp[2])
        elif row is not None and row_line > previous:
            start = (int(row[1]["t"]), log.iterations.row(row[0]).ref)
    end: tuple[int, Ref] | None = None
    training = None
    row = _row_after(log, line, item.iteration + 1)
    stamp = stamps.after(line)
    if row is not None and (stamp is None or int(row[1]["line"]) < stamp[0]):
        end = (int(row[1]["t"]), log.iterations.row(row[0]).ref)
        if int(row[1]["flags"]) & HAS_ELAPSED:
            covered = max(1, int(row[1]["iteration"]) - item.iteration)
            training = float(row[1]["elapsed"]) / 1000 * covered
    elif stamp is not None:
        end = (stamp[1], stamp[2])
    window = None
    if start is not None and end is not None and end[0] >= start[0]:
        window = (end[0] - start[0]) / 1e6
    else:
        training = None
    timer = item.timer_ms / 1000 if item.timer_ms is not None else None
    refs = [start[1]] if start is not None and window is not None else []
    refs += [item.timer_ref] if item.timer_ref is not None else []
    refs += [item.ref]
    refs += [end[1]] if end is not None and window is not None else []
    return EvaluationSpan(log.cycle, item.iteration, item.on, steps, timer, window, training, tuple(refs))


def evaluation_spans(log: TrainLog, configured_steps: int | None = None) -> tuple[EvaluationSpan, ...]:
    """Every evaluation of the log, in log order (none where no results line was printed: an evaluation
    is never inferred from the configuration alone)."""
    if not log.evaluations:
        return ()
    steps = eval_steps(log, configured_steps)
    stamps = _Stamps(log)
    spans, previous = [], -1
    for item in log.evaluations:
        spans.append(_span(log, item, steps, stamps, previous))
        previous = item.ref.line
    return tuple(spans)
