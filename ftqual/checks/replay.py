"""Replay consistency: iterations trained again after the restore reproduce their first losses.

Iterations between the restored checkpoint K and the failure ran twice: in the fault cycle and again in the
replacement. Each pair is compared by relative difference. A difference followed by agreeing iterations to
the end of the overlap is an isolated reporting difference (the training state did not diverge: seen at the
second replayed iteration on real H200 runs); differences that continue to the end of the overlap are a
divergence. A baseline run, when given, is compared for information only (it may use another optimizer
configuration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ftqual.checks import derive
from ftqual.checks.expectations import Expectations
from ftqual.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.evidence.snapshot import RunSnapshot
from ftqual.evidence.train_log import IterationLine

REPLAY = "replay_consistency"


@dataclass(frozen=True)
class Pair:
    iteration: int
    first: IterationLine
    second: IterationLine
    rel: float


def relative_difference(a: float | None, b: float | None) -> float:
    if a is None or b is None or math.isnan(a) or math.isnan(b):
        return 0.0 if (a is None or math.isnan(a)) and (b is None or math.isnan(b)) else math.inf
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def pairs(first: dict[int, IterationLine], second: dict[int, IterationLine]) -> list[Pair]:
    return [
        Pair(k, first[k], second[k], relative_difference(first[k].loss, second[k].loss))
        for k in sorted(first.keys() & second.keys())
    ]


def classify(compared: list[Pair], tolerance: float) -> tuple[str, list[Pair]]:
    """("identical" | "isolated" | "persistent" | "ambiguous", differing pairs)."""
    differing = [p for p in compared if p.rel > tolerance]
    if not differing:
        return "identical", differing
    trailing = 0
    for pair in reversed(compared):
        if pair.rel <= tolerance:
            break
        trailing += 1
    if trailing == 0:
        return "isolated", differing
    return ("persistent" if trailing >= 2 else "ambiguous"), differing


def _fmt(pair: Pair) -> str:
    return f"iteration {pair.iteration}: {pair.first.loss!r} vs {pair.second.loss!r} (rel {pair.rel:.2e})"


def replay_consistency(
    snap: RunSnapshot, exp: Expectations, baseline: RunSnapshot | None = None
) -> CheckResult:
    cid = REPLAY
    if not exp.faulty:
        return skip(cid, "no fault in this scenario: nothing was replayed")
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    restored = derive.restore(snap)
    k = restored.iteration if restored else None
    if k is None:
        return inconclusive(cid, "no restored iteration: nothing to compare replayed iterations against")
    fault_log = snap.train_log(derive.fault_cycle(snap))
    replay_log = snap.train_log(derive.replacement_cycle(snap))
    if fault_log is None or replay_log is None:
        return inconclusive(cid, "the fault cycle's or the replacement cycle's log is missing")
    start = derive.injected_at(snap)
    before = {
        i.iteration: i
        for i in fault_log.iterations
        if i.iteration > k and (start is None or i.t is None or i.t <= start)
    }
    after = {i.iteration: i for i in replay_log.iterations}
    compared = pairs(before, after)
    f = Findings(cid)
    tol = exp.replay_tolerance
    f.values.update(tolerance=tol, replayed_iterations=[p.iteration for p in compared])
    if baseline is not None:
        _baseline(snap, baseline, exp, f)
    if not compared:
        detail = f"no iteration after the restored {k} ran before the failure: nothing was replayed"
        return CheckResult(cid, "skip", detail, tuple(f.evidence), tuple(f.notes), dict(f.values))
    worst = max(compared, key=lambda p: p.rel)
    f.values.update(
        max_rel_dev=worst.rel if math.isfinite(worst.rel) else None, max_dev_iteration=worst.iteration
    )
    kind, differing = classify(compared, tol)
    f.values["classification"] = kind
    lo, hi = compared[0].iteration, compared[-1].iteration
    noun = "replayed iterations" if len(compared) > 1 else "replayed iteration"
    span = f"{len(compared)} {noun} ({lo}-{hi})" if hi > lo else f"{len(compared)} {noun} ({lo})"
    if kind == "identical":
        f.fact(
            f"{span}: losses match within relative {tol:g}; "
            f"largest difference {worst.rel:.2e} at iteration {worst.iteration}",
            worst.first.ref,
            worst.second.ref,
        )
    elif kind == "isolated":
        f.fact(
            f"{span} compared at relative tolerance {tol:g}: isolated "
            f"reporting difference at iteration(s) {[p.iteration for p in differing]}, every later replayed "
            f"iteration agrees (no divergence); largest {_fmt(worst)}",
            differing[0].first.ref,
            differing[0].second.ref,
        )
        f.note(f"isolated difference: {'; '.join(_fmt(p) for p in differing[:3])}")
    elif kind == "ambiguous":
        f.unknown(
            f"only the last replayed iteration differs ({_fmt(differing[-1])}); nothing follows to tell an "
            f"isolated difference from a divergence",
            differing[-1].first.ref,
            differing[-1].second.ref,
        )
    else:
        f.problem(
            f"replayed losses diverge from iteration {differing[0].iteration} to the end of the overlap "
            f"({len(differing)}/{len(compared)} differ beyond relative {tol:g}); largest {_fmt(worst)}",
            differing[0].first.ref,
            differing[0].second.ref,
            differing[-1].second.ref,
        )
    return f.result()


def _baseline(snap: RunSnapshot, baseline: RunSnapshot, exp: Expectations, f: Findings) -> None:
    """Informative only: the recovered trajectory vs an uninterrupted run, at the looser tolerance."""
    trajectory: dict[int, IterationLine] = {}
    for log in snap.train_logs:  # later cycles overwrite replayed iterations
        for item in log.iterations:
            trajectory[item.iteration] = item
    reference: dict[int, IterationLine] = {}
    for log in baseline.train_logs:
        for item in log.iterations:
            reference.setdefault(item.iteration, item)
    compared = pairs(reference, trajectory)
    if not compared:
        f.note("baseline: no common iterations to compare")
        return
    worst = max(compared, key=lambda p: p.rel)
    within = worst.rel <= exp.baseline_tolerance
    f.values.update(
        baseline_run_id=baseline.meta.run_id,
        baseline_compared=len(compared),
        baseline_max_rel_dev=worst.rel if math.isfinite(worst.rel) else None,
        baseline_max_dev_iteration=worst.iteration,
        baseline_within_tolerance=within,
    )
    verdict = "within" if within else "beyond"
    f.note(
        f"baseline {baseline.meta.run_id}: {len(compared)} common iterations, largest relative difference "
        f"{worst.rel:.2e} at iteration {worst.iteration}, {verdict} the informative tolerance "
        f"{exp.baseline_tolerance:g}"
    )
