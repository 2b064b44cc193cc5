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

A pure model: the baseline's lag is measured by ftqual.verification.evidence.finalize_lag and handed in
as a number (`FinalizeLag`); ftqual.scenario.fit judges a scenario by it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ftqual.rank.ids import IN_SAVE_TIMINGS


@dataclass(frozen=True)
class FinalizeLag:
    """The slowest completion of an asynchronous save in a run: iterations trained between its start and
    its completion line (measured by ftqual.verification.evidence.finalize_lag)."""

    iterations: int
    save_iteration: int
    reached_iteration: int  # the last iteration logged before the completion line
    path: str  # the completion line ("successfully saved checkpoint from iteration ..."), relative to the run
    line: int
    text: str = ""


@dataclass(frozen=True)
class Baseline:
    """What a fault scenario's sizing needs of its baseline's run."""

    lag: FinalizeLag | None  # None: no save completed with training after it (nothing measured)
    last_completed_save: int  # the newest completed save (0: none), where `resume_from` starts
    workload: str  # the workload it ran: a campaign draws its plan from that workload's kinds


def needed_train_iters(start: int, save_interval: int, injections: int, timing: str, lag: int) -> int:
    """The shortest train_iters with which every fault arms with a step after it and the recovery after the
    last one reaches a later checkpoint (module docstring's model)."""
    i, n = save_interval, max(1, injections)
    recovery = start + (n + 1) * i
    if timing in IN_SAVE_TIMINGS:
        # any phase of a save: the first save begun at or after the tracker passed `start` (S + I + L),
        # in flight at its end
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
        f"[{lag.path}:{lag.line}]"
        if lag is not None
        else "with saves completed within their own iteration"
    )
    return (
        f"train_iters {train_iters} is too short for the fault to be certain to come: {seen}; starting at "
        f"iteration {start} with a save every {save_interval} and {injections} injection(s), the last fault "
        f"needs a checkpoint completed with a step after it and a later one after the restore: set "
        f"train_iters: {needed} (or more) for this scenario"
    )
