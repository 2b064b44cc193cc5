"""How long a fault scenario must train for its faults to be certain to come, from what the baseline measured.

A fault is armed by a checkpoint completed in its own cycle: the worker wrapper injects at the first step
after the tracker passes the iteration the cycle started from (timing `checkpoint`), or at the end of the
first checkpointing section after that with a newer save still in flight (`in_save`). The tracker moves
only when an asynchronous save is finalized, which on a fast GPU can be a whole save interval after the save
began (on one H200: the save of iteration 5 completed after iteration 10, when the next save was
scheduled). A run that is too short then ends with every save finalized in the end-of-training flush, the
fault never armed, and NVRx stops with exit 93: a FAIL that says nothing about recovery.

The model, for a cycle k (1-based) of n injections, a save every I iterations from the start S and a
finalize lag of L iterations (the most iterations the baseline trained between a save's start and its
completion): cycle k restores S + (k-1)·I, its tracker passes that at S + k·I, completed after iteration
S + k·I + L, so its fault needs a step after that, S + k·I + L + 1 <= train_iters; the recovery after the
last fault needs a later checkpoint, S + (n+1)·I <= train_iters (the final save is finalized at the end).
`needed_train_iters` is the smallest length meeting both (for `in_save`, the first save begun after the
tracker passed S must come before the end); `sizing_problem` refuses a scenario shorter than that, before
it is launched, in one line saying the length it needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ftqual.verification.evidence.derive import completed_saves
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.train_log import TrainLog


@dataclass(frozen=True)
class FinalizeLag:
    """The slowest completion of an asynchronous save in a run: iterations trained between its start and
    its completion line."""

    iterations: int
    save_iteration: int
    reached_iteration: int  # the last iteration logged before the completion line
    ref: Ref  # the completion line ("successfully saved checkpoint from iteration ...")


def _iteration_before(lines: np.ndarray, reached: np.ndarray, line: int) -> int | None:
    at = int(np.searchsorted(lines, line)) - 1
    return int(reached[at]) if at >= 0 else None


def finalize_lag(log: TrainLog) -> FinalizeLag | None:
    """The baseline's finalize lag (module docstring), from its one training log; None when no save completed
    with training after it (nothing measured, e.g. a run that saved only at its end)."""
    parts = [(rows["line"], rows["iteration"]) for _, rows in log.iterations.chunks()]
    if not parts:
        return None
    lines = np.concatenate([p[0] for p in parts])
    order = np.argsort(lines, kind="stable")
    lines = lines[order]
    reached = np.maximum.accumulate(np.concatenate([p[1] for p in parts])[order])
    last = int(reached[-1]) if len(reached) else 0
    worst: FinalizeLag | None = None
    for done, _start in completed_saves(log):
        if done.iteration >= last:
            continue  # the final save: finalized by the end-of-training flush, after the last step
        at = _iteration_before(lines, reached, done.ref.line)
        if at is None:
            continue
        lag = max(0, at - done.iteration)
        if worst is None or lag > worst.iterations:
            worst = FinalizeLag(lag, done.iteration, at, done.ref)
    return worst


def needed_train_iters(start: int, save_interval: int, injections: int, timing: str, lag: int) -> int:
    """The shortest train_iters with which every fault arms with a step after it and the recovery after the
    last one reaches a later checkpoint (module docstring's model)."""
    i, n = save_interval, max(1, injections)
    recovery = start + (n + 1) * i
    if timing == "in_save":
        # the first save begun at or after the tracker passed `start` (S + I + L), in flight at its end
        first = start + i * max(2, 1 + math.ceil(lag / i)) if lag > 0 else start + 2 * i
        return max(first + 1, recovery)
    return max(start + n * i + lag + 1, recovery)


def sizing_problem(
    train_iters: int, start: int, save_interval: int, injections: int, timing: str, lag: FinalizeLag | None
) -> str | None:
    """Why this scenario's faults cannot be certain to come at this length (one line), or None."""
    measured = lag.iterations if lag is not None else 0
    needed = needed_train_iters(start, save_interval, injections, timing, measured)
    if train_iters >= needed:
        return None
    seen = (
        f"the baseline completed its save of iteration {lag.save_iteration} only after iteration "
        f"{lag.reached_iteration} (a finalize lag of {lag.iterations} iterations) "
        f"[{lag.ref.path}:{lag.ref.line}]"
        if lag is not None
        else "with saves completed within their own iteration"
    )
    return (
        f"train_iters {train_iters} is too short for the fault to be certain to come: {seen}; starting at "
        f"iteration {start} with a save every {save_interval} and {injections} injection(s), the last fault "
        f"needs a checkpoint completed with a step after it and a later one after the restore: set "
        f"train_iters: {needed} (or more) for this scenario"
    )


def scenario_problem(baseline_run_dir: Path, scenario) -> str | None:
    """`sizing_problem` for a scenario (ftqual.scenario.model.Scenario) judged by its baseline's run: the lag
    it
    measured, and for `resume_from` the baseline's last completed checkpoint as the start."""
    if scenario.fault == "none":
        return None
    from ftqual.verification.evidence.run_meta import RunMetaError
    from ftqual.verification.evidence.snapshot import build_snapshot

    try:
        snap = build_snapshot(Path(baseline_run_dir))
        log = snap.train_log(0)
    except (OSError, ValueError, RunMetaError):
        return None  # nothing measured to judge by (an unusable baseline run.json included)
    if log is None:
        return None
    start = 0
    # A fault placed in a checkpointing section lands in the next save after the tracker passed, as an
    # in-save kill does: it needs that save to begin with training left.
    in_a_save = scenario.fault_timing == "in_save" or scenario.hang_placement == "checkpointing"
    timing = "in_save" if in_a_save else scenario.fault_timing
    if scenario.resume_from:
        done = [e.iteration for e in log.saves_of("done")]
        start = max(done) if done else 0
    if scenario.fault == "campaign" and scenario.campaign is not None:
        from ftqual.scenario import campaign_setup
        from ftqual.scenario.campaign_plan import PlanError

        measured = finalize_lag(log)
        # The plan the launcher will draw: its default kinds are the workload's (the baseline ran the same
        # one), and another workload's kinds draw other faults at other iterations from the same seed.
        workload = snap.meta.workload or "megatron"
        try:
            plan = campaign_setup.plan_from_env(
                scenario.campaign.env(), workload, scenario.world_size, scenario.save_interval
            )
        except PlanError:
            return None  # the config's own check says why
        lag = measured.iterations if measured is not None else 0
        problem = campaign_setup.sizing_problem(plan, scenario.train_iters, "train_iters", lag)
        return None if problem is None else f"refused before launch: {problem}"
    problem = sizing_problem(
        scenario.train_iters,
        start,
        scenario.save_interval,
        scenario.injections,
        timing,
        finalize_lag(log),
    )
    return None if problem is None else f"refused before launch: {problem}"
