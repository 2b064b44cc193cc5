"""What a baseline run measured for the sizing of the fault scenarios (ftqual.scenario.sizing's model).

`finalize_lag` is the slowest completion of an asynchronous save in one training log: the iterations
trained between a save's start and its completion line (the final save, flushed at the end, excluded).
`measure_baseline` reads a baseline's run directory once and hands sizing plain numbers
(`sizing.Baseline`): that lag, the newest completed save and the workload; None when nothing can be
measured (no usable run.json, no training log).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ftqual.scenario.sizing import Baseline, FinalizeLag
from ftqual.verification.evidence.derive import completed_saves
from ftqual.verification.evidence.run_meta import RunMetaError
from ftqual.verification.evidence.snapshot import build_snapshot
from ftqual.verification.evidence.train_log import TrainLog


def _iteration_before(lines: np.ndarray, reached: np.ndarray, line: int) -> int | None:
    at = int(np.searchsorted(lines, line)) - 1
    return int(reached[at]) if at >= 0 else None


def finalize_lag(log: TrainLog) -> FinalizeLag | None:
    """The baseline's finalize lag (ftqual.scenario.sizing's docstring), from its one training log; None
    when no save completed with training after it (nothing measured, e.g. a run that saved only at its
    end)."""
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
            worst = FinalizeLag(lag, done.iteration, at, done.ref.path, done.ref.line, done.ref.text)
    return worst


def measure_baseline(run_dir: Path) -> Baseline | None:
    """What the baseline run in `run_dir` measured for sizing, or None when nothing can be measured (an
    unusable baseline run.json included): sizing then refuses nothing."""
    try:
        snap = build_snapshot(Path(run_dir))
        log = snap.train_log(0)
    except (OSError, ValueError, RunMetaError):
        return None
    if log is None:
        return None
    done = [e.iteration for e in log.saves_of("done")]
    return Baseline(finalize_lag(log), max(done) if done else 0, snap.meta.workload or "megatron")
