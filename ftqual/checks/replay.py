"""Replay consistency: the training after the restore is the training that would have happened anyway.

Every iteration after the restored checkpoint K, to the end of the run, is judged:
- its loss must be finite and not negative (a NaN or an infinity never matches anything, itself included);
- where a reference covers the iteration, the loss must agree with it within the relative tolerance.
  References: the first attempt (the iterations K+1.. it committed before the injection, which the
  replacement trained again) and, with `--baseline`, an uninterrupted run with the same settings (run.json's
  trajectory keys agree; a baseline with other settings is compared for information only).
- A difference confined to the first TRANSIENT_ITERATIONS iterations after the restore, with every later
  covered iteration in agreement, passes with a note naming the iterations (on H200 the second iteration
  after a restore reports another loss while every later one equals the uninterrupted run's). A difference
  anywhere else, or one that lasts, fails. When no reference covers any iteration after the difference,
  a lasting divergence cannot be ruled out: inconclusive.
- An iteration no reference covers is only checked to be finite and not to exceed LOSS_JUMP_FACTOR times
  the largest loss the first attempt reported.
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
TRANSIENT_ITERATIONS = 2  # K+1 and K+2 may report another loss after a restore (seen at K+2 on H200)
LOSS_JUMP_FACTOR = 2.0
MAX_LISTED = 5


@dataclass(frozen=True)
class Pair:
    iteration: int
    first: IterationLine  # the reference's line
    second: IterationLine  # the recovered run's line
    rel: float
    source: str = "first attempt"


@dataclass(frozen=True)
class Reference:
    name: str
    lines: dict[int, IterationLine]


def relative_difference(a: float | None, b: float | None) -> float:
    """|a - b| / max(|a|, |b|); infinite when either is unknown or not finite (NaN never equals NaN)."""
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b):
        return math.inf
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def pairs(first: dict[int, IterationLine], second: dict[int, IterationLine], source: str = "") -> list[Pair]:
    """Iterations both report a loss for, compared (an iteration line without a loss covers nothing)."""
    common = sorted(k for k in first.keys() & second.keys() if first[k].loss is not None)
    return [
        Pair(k, first[k], second[k], relative_difference(first[k].loss, second[k].loss), source)
        for k in common
        if second[k].loss is not None
    ]


def classify(compared: list[Pair], tolerance: float, k: int) -> tuple[str, list[Pair]]:
    """("identical" | "transient" | "uncovered_after" | "divergent", differing pairs) of one restore at K."""
    differing = sorted((p for p in compared if p.rel > tolerance), key=lambda p: (p.iteration, p.source))
    if not differing:
        return "identical", differing
    last = max(p.iteration for p in differing)
    if last > k + TRANSIENT_ITERATIONS:
        return "divergent", differing
    if not any(p.iteration > last for p in compared):
        return "uncovered_after", differing
    return "transient", differing


def _fmt(pair: Pair) -> str:
    return (
        f"iteration {pair.iteration}: {pair.second.loss!r} vs {pair.first.loss!r} in the {pair.source} "
        f"(rel {pair.rel:.2e})"
    )


def _spans(numbers: list[int]) -> str:
    items = sorted(set(numbers))
    if not items:
        return "none"
    out, start, prev = [], items[0], items[0]
    for n in [*items[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def replay_consistency(
    snap: RunSnapshot, exp: Expectations, baseline: RunSnapshot | None = None
) -> CheckResult:
    """Invariant: every loss after the restore is finite, and agrees with every reference that covers it
    (the first attempt's overlap, a baseline with the same settings), except a difference confined to the
    first TRANSIENT_ITERATIONS iterations after the restore that later covered iterations show to be
    without consequence."""
    cid = REPLAY
    if not exp.faulty:
        return skip(cid, "no fault in this scenario: nothing was replayed")
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    restored = derive.restore(snap)
    if restored is None:
        return inconclusive(cid, "no restored iteration: nothing to compare the iterations after it with")
    k = restored.iteration
    fault_log = snap.train_log(derive.fault_cycle(snap))
    if fault_log is None:
        return inconclusive(cid, f"no logs/train_cycle{derive.fault_cycle(snap)}.log (the fault cycle)")
    recovered = derive.after_restore(snap, k)
    f = Findings(cid)
    tol = exp.replay_tolerance
    f.values.update(tolerance=tol, restored_iteration=k, transient_window=[k + 1, k + TRANSIENT_ITERATIONS])
    complete = all(log.complete for log in snap.train_logs if log.cycle >= derive.replacement_cycle(snap))
    if not recovered:
        f.missing_fact(f"no iteration after the restored iteration {k}", complete)
        return f.result()
    first = _first_attempt(snap, fault_log, k)
    references = [Reference("first attempt", first)]
    f.values["replayed_iterations"] = sorted(first.keys() & recovered.keys())
    if baseline is not None:
        comparable = _baseline(snap, baseline, exp, f)
        if comparable:
            references.append(Reference(f"baseline {baseline.meta.run_id}", _first_lines(baseline)))
    start = derive.injected_at(snap)
    attempt = [i for i in fault_log.iterations if start is None or i.t is None or i.t <= start]
    _finite(f, recovered, attempt, references)
    compared = [p for ref in references for p in pairs(ref.lines, recovered, ref.name)]
    _judge(f, compared, recovered, tol, k)
    return f.result()


def _first_attempt(snap: RunSnapshot, fault_log, k: int) -> dict[int, IterationLine]:
    start = derive.injected_at(snap)
    return {
        i.iteration: i
        for i in fault_log.iterations
        if i.iteration > k and (start is None or i.t is None or i.t <= start)
    }


def _first_lines(run: RunSnapshot) -> dict[int, IterationLine]:
    out: dict[int, IterationLine] = {}
    for log in run.train_logs:
        for item in log.iterations:
            out.setdefault(item.iteration, item)
    return out


def _finite(
    f: Findings, recovered: dict[int, IterationLine], attempt: list[IterationLine], refs: list[Reference]
) -> None:
    """Every reported loss after the restore is finite and >= 0; an uncovered one is no jump above what
    the first attempt reported (all its iterations before the injection)."""
    bad = [i for i in recovered.values() if i.loss is not None and (not math.isfinite(i.loss) or i.loss < 0)]
    if bad:
        shown = ", ".join(f"{i.iteration}: {i.loss!r}" for i in bad[:MAX_LISTED])
        f.problem(f"{len(bad)} loss(es) after the restore are not finite or negative ({shown})", bad[0].ref)
    unreported = [i.iteration for i in recovered.values() if i.loss is None]
    if len(unreported) == len(recovered):
        f.unknown("no iteration line after the restore reports an lm loss")
    elif unreported:
        f.note(f"iteration(s) {_spans(unreported)} after the restore report no loss")
    before = [i.loss for i in attempt if i.loss is not None and math.isfinite(i.loss)]
    covered = {n for ref in refs for n in ref.lines}
    if not before:
        return
    ceiling = LOSS_JUMP_FACTOR * max(before)
    jumps = [
        i
        for i in recovered.values()
        if i.iteration not in covered and i.loss is not None and math.isfinite(i.loss) and i.loss > ceiling
    ]
    if jumps:
        f.problem(
            f"loss jumps after the restore: iteration {jumps[0].iteration} reports {jumps[0].loss!r}, over "
            f"{LOSS_JUMP_FACTOR:g} x the largest loss of the first attempt ({max(before)!r})",
            jumps[0].ref,
        )


def _judge(
    f: Findings, compared: list[Pair], recovered: dict[int, IterationLine], tol: float, k: int
) -> None:
    covered = sorted({p.iteration for p in compared})
    uncovered = sorted(recovered.keys() - set(covered))
    f.values.update(
        compared_iterations=len(covered),
        covered=_spans(covered),
        uncovered=_spans(uncovered),
        sources=sorted({p.source for p in compared}),
    )
    if not compared:
        f.values["classification"] = "uncovered"
        f.note(
            f"no reference covers the iterations after the restore at {k} (no overlap with the first "
            "attempt, no comparable baseline): their losses were only checked to be finite"
        )
        if not f.problems and not f.unknowns:
            f.fact(f"{len(recovered)} iterations after the restore at {k}, all losses finite; none covered")
        return
    worst = max(compared, key=lambda p: p.rel)
    f.values.update(
        max_rel_dev=worst.rel if math.isfinite(worst.rel) else None, max_dev_iteration=worst.iteration
    )
    kind, differing = classify(compared, tol, k)
    f.values["classification"] = kind
    f.values["differences"] = [
        {
            "iteration": p.iteration,
            "loss": p.second.loss,
            "reference": p.first.loss,
            "source": p.source,
            "rel": p.rel if math.isfinite(p.rel) else None,
        }
        for p in differing[:50]
    ]
    iters = sorted({p.iteration for p in differing})
    span = f"{len(covered)} covered iteration(s) after the restore at {k} ({_spans(covered)})"
    refs = " and ".join(sorted({p.source for p in compared}))
    if kind == "identical":
        f.fact(
            f"{span} agree with the {refs} within relative {tol:g}; largest difference {worst.rel:.2e} at "
            f"iteration {worst.iteration}",
            worst.second.ref,
        )
    elif kind == "transient":
        f.values["transient_iterations"] = iters
        later = [n for n in covered if n > iters[-1]]
        f.fact(
            f"{span} compared with the {refs} at relative {tol:g}: iteration(s) {_spans(iters)} differ, "
            f"within the first {TRANSIENT_ITERATIONS} after the restore, and every later covered iteration "
            f"({_spans(later)}) agrees",
            differing[0].first.ref,
            differing[0].second.ref,
        )
        f.note(
            f"difference confined to iteration(s) {_spans(iters)} after the restore at {k}: "
            + "; ".join(_fmt(p) for p in differing[:3])
        )
    elif kind == "uncovered_after":
        f.unknown(
            f"iteration(s) {_spans(iters)} after the restore at {k} differ ({_fmt(differing[-1])}) and no "
            "reference covers a later iteration: a lasting divergence is not ruled out (give --baseline)",
            differing[-1].first.ref,
            differing[-1].second.ref,
        )
    else:
        lasting = iters[-1] == covered[-1]
        what = "diverge from iteration" if lasting else "differ at iteration(s)"
        where = f"{iters[0]} to the last covered iteration {covered[-1]}" if lasting else _spans(iters)
        f.problem(
            f"losses after the restore at {k} {what} {where} ({len(iters)}/{len(covered)} covered iterations "
            f"differ beyond relative {tol:g}, not confined to the first {TRANSIENT_ITERATIONS}); "
            f"largest {_fmt(worst)}",
            differing[0].first.ref,
            differing[0].second.ref,
            differing[-1].second.ref,
        )


def _baseline(snap: RunSnapshot, baseline: RunSnapshot, exp: Expectations, f: Findings) -> bool:
    """Record the whole-trajectory comparison with the baseline; True when it may serve as a reference."""
    trajectory: dict[int, IterationLine] = {}
    for log in snap.train_logs:  # later cycles overwrite replayed iterations
        for item in log.iterations:
            trajectory[item.iteration] = item
    compared = pairs(_first_lines(baseline), trajectory, f"baseline {baseline.meta.run_id}")
    why = _not_comparable(snap, baseline)
    f.values.update(baseline_run_id=baseline.meta.run_id, baseline_used=not why)
    if why:
        f.note(f"baseline {baseline.meta.run_id} not used as a reference: {why}")
    if not compared:
        f.note("baseline: no common iterations to compare")
        return not why
    worst = max(compared, key=lambda p: p.rel)
    within = worst.rel <= exp.baseline_tolerance
    f.values.update(
        baseline_compared=len(compared),
        baseline_max_rel_dev=worst.rel if math.isfinite(worst.rel) else None,
        baseline_max_dev_iteration=worst.iteration,
        baseline_within_tolerance=within,
    )
    return not why


def _not_comparable(snap: RunSnapshot, baseline: RunSnapshot) -> str:
    """Why the baseline cannot be a reference ('' when it can): not a no-fault run, or other settings."""
    if baseline.meta.fault != "none":
        return f"it is a '{baseline.meta.fault}' run, not a no-fault baseline"
    ours, theirs = snap.meta.settings, baseline.meta.settings
    differ = [
        f"{key} {ours[key]!r} vs {theirs[key]!r}"
        for key in ours
        if key in theirs and ours[key] != theirs[key]
    ]
    if differ:
        return "settings differ (" + ", ".join(differ) + ")"
    if not ours.keys() & theirs.keys():
        return "run.json records none of the settings that shape the losses in both runs"
    return ""
