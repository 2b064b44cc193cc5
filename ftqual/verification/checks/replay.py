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

The iterations are judged in windows (checks/series.py), every one of them, in memory that does not grow with
the run: the report keeps counts, spans and the first differences (ftqual/verification/evidence/DESIGN.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ftqual.contract import family_of
from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip, unready
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.series import Mask, Series, Spans, Window, relative
from ftqual.verification.checks.spec import NO_RECOVERY, CheckSpec, judged_per_fault
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.iterations import HAS_LOSS
from ftqual.verification.evidence.snapshot import RunSnapshot
from ftqual.verification.evidence.train_log import IterationLine

REPLAY = "replay_consistency"
TRANSIENT_ITERATIONS = 2  # K+1 and K+2 may report another loss after a restore (seen at K+2 on H200)
LOSS_JUMP_FACTOR = 2.0
MAX_LISTED = 5
MAX_OVERLAP_LISTED = 10_000  # replayed_iterations beyond: only counted (replayed_iterations_total)


@dataclass(frozen=True)
class Pair:
    iteration: int
    first: IterationLine  # the reference's line
    second: IterationLine  # the recovered run's line
    rel: float
    source: str = "first attempt"


def relative_difference(a: float | None, b: float | None) -> float:
    """|a - b| / max(|a|, |b|); infinite when either is unknown or not finite (NaN never equals NaN)."""
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b):
        return math.inf
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def classify(compared: list[Pair], tolerance: float, k: int) -> tuple[str, list[Pair]]:
    """The definition `_Tally.kind` computes from its summaries (the unit tests pin it down).
    ("identical" | "transient" | "uncovered_after" | "divergent", differing pairs) of one restore at K."""
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


def replay_consistency(snap: RunSnapshot, exp: RunPlan, baseline: RunSnapshot | None = None) -> CheckResult:
    """Invariant: every loss after the restore is finite, and agrees with every reference that covers it
    (the first attempt's overlap, a baseline with the same settings), except a difference confined to the
    first TRANSIENT_ITERATIONS iterations after the restore that later covered iterations show to be
    without consequence."""
    cid = REPLAY
    early = unready(cid, snap, exp, "train_logs", no_fault="no fault in this scenario: nothing was replayed")
    if early is not None:
        return early
    restored = derive.restore(snap)
    if restored is None:
        return inconclusive(cid, "no restored iteration: nothing to compare the iterations after it with")
    k = restored.iteration
    fault_log = snap.train_log(derive.fault_cycle(snap))
    if fault_log is None:
        return inconclusive(cid, f"no logs/train_cycle{derive.fault_cycle(snap)}.log (the fault cycle)")
    f = Findings(cid)
    tol = exp.replay_tolerance
    f.values.update(tolerance=tol, restored_iteration=k, transient_window=[k + 1, k + TRANSIENT_ITERATIONS])
    complete = all(log.complete for log in snap.train_logs if log.cycle >= derive.replacement_cycle(snap))
    repl = derive.replacement_cycle(snap)
    recovered = Series(tuple(log.iterations for log in snap.train_logs if log.cycle >= repl), _above(k))
    if derive.first_row(recovered.tables, _above(k)) is None:
        f.missing_fact(f"no iteration after the restored iteration {k}", complete)
        return f.result()
    start = derive.injected_at(snap)
    first = Series((fault_log.iterations,), lambda rows: _above(k)(rows) & derive.before_mask(rows, start))
    references = [("first attempt", first), *_later_attempts(snap, k)]
    if baseline is not None and _baseline(snap, baseline, exp, f):
        references.append((f"baseline {baseline.meta.run_id}", _first_lines(baseline)))
    tally = _Tally(k, tol, references, _ceiling(fault_log, start), _later_restores(snap, k))
    for window in recovered.windows(k + 1):
        tally.add(window, [ref.window(window.its) for _, ref in references])
    if not tally.covered_count and snap.meta.initial_checkpoint_iteration > 0 and not tally.bad_count:
        return skip(
            cid,
            f"no reference covers the iterations after the restore at {k}: the run resumed an existing "
            f"checkpoint at {snap.meta.initial_checkpoint_iteration}, the first attempt replayed nothing and "
            "no baseline started from that checkpoint",
        )
    f.values["replayed_iterations"] = tally.overlap
    _finite(f, tally, recovered)
    _judge(f, tally, recovered, tol, k)
    return f.result()


def _later_restores(snap: RunSnapshot, k: int) -> tuple[int, ...]:
    """The iterations the second and later injections' replacement cycles restored (after k)."""
    found = (derive.restore(snap, marker) for marker in snap.markers[1:])
    return tuple(sorted({item.iteration for item in found if item is not None and item.iteration > k}))


def _later_attempts(snap: RunSnapshot, k: int) -> list[tuple[str, Series]]:
    """The attempts of the second and later injections: each struck cycle before its injection (the next
    cycle trained those iterations again), named by their cycle."""
    out = []
    for marker in snap.markers[1:]:
        log = snap.train_log(derive.fault_cycle(snap, marker))
        if log is None or marker.injected_at is None:
            continue
        at = marker.injected_at
        restored = derive.restore(snap, marker)
        low = max(k, restored.iteration if restored else (marker.checkpoint_iteration or k))
        out.append(
            (
                f"attempt of cycle {log.cycle}",
                Series(
                    (log.iterations,),
                    lambda rows, at=at, low=low: _above(low)(rows) & derive.before_mask(rows, at),
                ),
            )
        )
    return out


def _above(k: int) -> Mask:
    return lambda rows: rows["iteration"] > k


def _first_lines(run: RunSnapshot) -> Series:
    """Each iteration's first line over the run's logs (a baseline's reference losses)."""
    return Series(tuple(log.iterations for log in run.train_logs), first_wins=True)


def _ceiling(fault_log, start) -> float | None:
    """The largest finite loss the first attempt reported before the injection, or None."""
    best: float | None = None
    for _, rows in fault_log.iterations.chunks():
        loss = rows["loss"][derive.before_mask(rows, start) & ((rows["flags"] & HAS_LOSS) != 0)]
        loss = loss[np.isfinite(loss)]
        if len(loss) and (best is None or float(loss.max()) > best):
            best = float(loss.max())
    return best


@dataclass
class _Diff:
    iteration: int
    source: str
    loss: float
    reference: float
    rel: float
    locs: tuple[int, int]  # (reference's line, recovered line)
    ref_index: int


class _Tally:
    """Bounded summaries of every recovered iteration, fed window by window in increasing order."""

    def __init__(
        self,
        k: int,
        tol: float,
        refs: list[tuple[str, Series]],
        before: float | None,
        later: tuple[int, ...] = (),
    ) -> None:
        self.k, self.tol, self.refs, self.before = k, tol, refs, before
        self.restores = (k, *later)  # each restore's first TRANSIENT_ITERATIONS may differ
        self.recovered = self.unreported_count = self.bad_count = self.covered_count = 0
        self.unreported, self.covered, self.uncovered, self.iters = Spans(), Spans(), Spans(), Spans()
        self.bad: list[tuple[int, float, int]] = []  # first MAX_LISTED: (iteration, loss, loc)
        self.overlap: list[int] = []
        self.overlap_count = 0
        self.jump: tuple[int, float, int] | None = None
        self.sources: set[str] = set()
        self.worst: list[tuple[float, int, int, int] | None] = [None] * len(refs)  # rel, it, ref loc, loc
        self.covered_last: int | None = None
        # covered iterations after each iteration a transient difference may end at (K+1 .. K+TRANSIENT)
        self.covered_after = {
            r + n: Spans() for r in self.restores for n in range(1, TRANSIENT_ITERATIONS + 1)
        }
        self.outside_last: int | None = None  # the last differing iteration outside every transient window
        self.diff_count = 0  # distinct iterations
        self.diff_last: int | None = None
        self.differing: list[_Diff] = []  # the first 50 in (iteration, source) order
        self.diff_final: _Diff | None = None

    def add(self, rec: Window, refs: list[Window]) -> None:
        at = rec.its
        self.recovered += int(rec.has.sum())
        silent = rec.has & ~rec.reported
        self.unreported_count += int(silent.sum())
        self.unreported.feed(at[silent])
        with np.errstate(invalid="ignore"):
            bad = rec.has & rec.reported & (~np.isfinite(rec.loss) | (rec.loss < 0))
        self.bad_count += int(bad.sum())
        for i in np.flatnonzero(bad)[: MAX_LISTED - len(self.bad)] if len(self.bad) < MAX_LISTED else ():
            self.bad.append((int(at[i]), float(rec.loss[i]), int(rec.loc[i])))
        both = rec.has & refs[0].has
        self.overlap_count += int(both.sum())
        room = MAX_OVERLAP_LISTED - len(self.overlap)
        self.overlap.extend(at[both][: max(room, 0)].tolist())
        self._jumps(rec, refs)
        self._compare(rec, refs)

    def _jumps(self, rec: Window, refs: list[Window]) -> None:
        if self.before is None or self.jump is not None:
            return
        covered = np.zeros_like(rec.has)
        for ref in refs:
            covered |= ref.has
        with np.errstate(invalid="ignore"):
            up = (
                rec.has
                & ~covered
                & rec.reported
                & np.isfinite(rec.loss)
                & (rec.loss > LOSS_JUMP_FACTOR * self.before)
            )
        hits = np.flatnonzero(up)
        if len(hits):
            i = int(hits[0])
            self.jump = (int(rec.its[i]), float(rec.loss[i]), int(rec.loc[i]))

    def _compare(self, rec: Window, refs: list[Window]) -> None:
        at, union = rec.its, np.zeros_like(rec.has)
        found: list[tuple[np.ndarray, ...]] = []
        for number, ((name, _), ref) in enumerate(zip(self.refs, refs, strict=True)):
            pair = ref.has & ref.reported & rec.has & rec.reported
            idx = np.flatnonzero(pair)
            if not len(idx):
                continue
            self.sources.add(name)
            union |= pair
            rel = relative(ref.loss[idx], rec.loss[idx])
            top = int(rel.argmax())
            best = self.worst[number]
            if best is None or rel[top] > best[0]:
                self.worst[number] = (
                    float(rel[top]),
                    int(at[idx[top]]),
                    int(ref.loc[idx[top]]),
                    int(rec.loc[idx[top]]),
                )
            over = rel > self.tol
            found.append(
                (
                    idx[over],
                    rel[over],
                    np.full(int(over.sum()), number),
                    ref.loss[idx[over]],
                    ref.loc[idx[over]],
                )
            )
        covered = np.flatnonzero(union)
        self.covered_count += len(covered)
        self.covered.feed(at[covered])
        for after, spans in self.covered_after.items():
            spans.feed(at[covered][at[covered] > after])
        self.uncovered.feed(at[rec.has & ~union])
        if len(covered):
            self.covered_last = int(at[covered[-1]])
        self._differing(rec, found)

    def _differing(self, rec: Window, found: list[tuple[np.ndarray, ...]]) -> None:
        if not found:
            return
        idx, rel, number, ref_loss, ref_loc = (np.concatenate(parts) for parts in zip(*found, strict=True))
        if not len(idx):
            return
        names = [name for name, _ in self.refs]
        rank = np.array([sorted(names).index(names[int(n)]) for n in number], dtype=np.int64)
        order = np.lexsort((rank, idx))
        distinct = np.unique(idx, return_index=True)[0]  # plain np.unique imports numpy.ma (20 ms)
        self.diff_count += len(distinct)
        self.iters.feed(rec.its[distinct])
        self.diff_last = int(rec.its[distinct[-1]])
        its = rec.its[distinct]
        inside = np.zeros(len(its), dtype=bool)
        for r in self.restores:
            inside |= (its > r) & (its <= r + TRANSIENT_ITERATIONS)
        if (~inside).any():
            self.outside_last = int(its[~inside][-1])
        names_at = [names[int(n)] for n in number]

        def diff(j: int) -> _Diff:
            i = int(idx[j])
            locs = (int(ref_loc[j]), int(rec.loc[i]))
            n = int(number[j])
            return _Diff(
                int(rec.its[i]), names_at[j], float(rec.loss[i]), float(ref_loss[j]), float(rel[j]), locs, n
            )

        self.differing.extend(diff(int(j)) for j in order[: max(50 - len(self.differing), 0)])
        self.diff_final = diff(int(order[-1]))

    def pair(self, item: _Diff, recovered: Series) -> Pair:
        return Pair(
            item.iteration,
            self.refs[item.ref_index][1].line(item.locs[0]),
            recovered.line(item.locs[1]),
            item.rel,
            item.source,
        )

    def kind(self) -> str:
        """classify() on the tallies."""
        if self.diff_last is None:
            return "identical"
        if self.outside_last is not None:
            return "divergent"
        if self.covered_last is None or self.covered_last <= self.diff_last:
            return "uncovered_after"
        return "transient"


def _finite(f: Findings, tally: _Tally, recovered: Series) -> None:
    """Every reported loss after the restore is finite and >= 0; an uncovered one is no jump above what
    the first attempt reported (all its iterations before the injection)."""
    if tally.bad_count:
        shown = ", ".join(f"{it}: {loss!r}" for it, loss, _ in tally.bad)
        f.problem(
            f"{tally.bad_count} loss(es) after the restore are not finite or negative ({shown})",
            recovered.line(tally.bad[0][2]).ref,
        )
    if tally.unreported_count == tally.recovered:
        f.unknown("no iteration line after the restore reports an lm loss")
    elif tally.unreported_count:
        f.note(f"iteration(s) {tally.unreported.text()} after the restore report no loss")
    if tally.before is not None and tally.jump is not None:
        iteration, loss, loc = tally.jump
        f.problem(
            f"loss jumps after the restore: iteration {iteration} reports {loss!r}, over "
            f"{LOSS_JUMP_FACTOR:g} x the largest loss of the first attempt ({tally.before!r})",
            recovered.line(loc).ref,
        )


def _worst(tally: _Tally, recovered: Series) -> Pair:
    """The largest difference, the first in (reference, iteration) order."""
    best: tuple[int, tuple[float, int, int, int]] | None = None
    for number, item in enumerate(tally.worst):
        if item is not None and (best is None or item[0] > best[1][0]):
            best = (number, item)
    number, (rel, iteration, ref_loc, loc) = best  # type: ignore[misc]
    name, series = tally.refs[number]
    return Pair(iteration, series.line(ref_loc), recovered.line(loc), rel, name)


def _judge(f: Findings, tally: _Tally, recovered: Series, tol: float, k: int) -> None:
    covered_text = tally.covered.text()
    f.values.update(
        compared_iterations=tally.covered_count,
        covered=covered_text,
        uncovered=tally.uncovered.text(),
        sources=sorted(tally.sources),
    )
    if not tally.covered_count:
        f.values["classification"] = "uncovered"
        f.note(
            f"no reference covers the iterations after the restore at {k} (no overlap with the first "
            "attempt, no comparable baseline): their losses were only checked to be finite"
        )
        if not f.problems and not f.unknowns:
            f.fact(f"{tally.recovered} iterations after the restore at {k}, all losses finite; none covered")
        return
    worst = _worst(tally, recovered)
    f.values.update(
        max_rel_dev=worst.rel if math.isfinite(worst.rel) else None, max_dev_iteration=worst.iteration
    )
    kind = tally.kind()
    f.values["classification"] = kind
    differing = tally.differing
    f.values["differences"] = [
        {
            "iteration": p.iteration,
            "loss": p.loss,
            "reference": p.reference,
            "source": p.source,
            "rel": p.rel if math.isfinite(p.rel) else None,
        }
        for p in differing
    ]
    if tally.overlap_count > len(tally.overlap):
        f.values["replayed_iterations_total"] = tally.overlap_count
    span = f"{tally.covered_count} covered iteration(s) after the restore at {k} ({covered_text})"
    refs = " and ".join(sorted(tally.sources))
    if kind == "identical":
        f.fact(
            f"{span} agree with the {refs} within relative {tol:g}; largest difference {worst.rel:.2e} at "
            f"iteration {worst.iteration}",
            worst.second.ref,
        )
        return
    first, last = tally.pair(differing[0], recovered), tally.pair(tally.diff_final, recovered)
    iters_text = tally.iters.text()
    if kind == "transient":
        iters = sorted({p.iteration for p in differing})
        f.values["transient_iterations"] = iters
        later = tally.covered_after[iters[-1]].text()
        f.fact(
            f"{span} compared with the {refs} at relative {tol:g}: iteration(s) {iters_text} differ, "
            f"within the first {TRANSIENT_ITERATIONS} after the restore, and every later covered iteration "
            f"({later}) agrees",
            first.first.ref,
            first.second.ref,
        )
        shown = [tally.pair(p, recovered) for p in differing[:3]]
        f.note(
            f"difference confined to iteration(s) {iters_text} after the restore at {k}: "
            + "; ".join(_fmt(p) for p in shown)
        )
    elif kind == "uncovered_after":
        f.unknown(
            f"iteration(s) {iters_text} after the restore at {k} differ ({_fmt(last)}) and no "
            "reference covers a later iteration: a lasting divergence is not ruled out (give --baseline)",
            last.first.ref,
            last.second.ref,
        )
    else:
        lasting = tally.diff_last == tally.covered_last
        what = "diverge from iteration" if lasting else "differ at iteration(s)"
        where = (
            f"{differing[0].iteration} to the last covered iteration {tally.covered_last}"
            if lasting
            else iters_text
        )
        f.problem(
            f"losses after the restore at {k} {what} {where} ({tally.diff_count}/{tally.covered_count} "
            f"covered iterations differ beyond relative {tol:g}, not confined to the first "
            f"{TRANSIENT_ITERATIONS}); largest {_fmt(worst)}",
            first.first.ref,
            first.second.ref,
            last.second.ref,
        )


def _baseline(snap: RunSnapshot, baseline: RunSnapshot, exp: RunPlan, f: Findings) -> bool:
    """Record the whole-trajectory comparison with the baseline; True when it may serve as a reference."""
    trajectory = Series(tuple(log.iterations for log in snap.train_logs))  # later cycles' lines win
    reference = _first_lines(baseline)
    count, top = 0, None  # top: (rel, iteration), the first largest
    for window in trajectory.windows(0):
        ref = reference.window(window.its)
        idx = np.flatnonzero(ref.has & ref.reported & window.has & window.reported)
        if not len(idx):
            continue
        count += len(idx)
        rel = relative(ref.loss[idx], window.loss[idx])
        at = int(rel.argmax())
        if top is None or rel[at] > top[0]:
            top = (float(rel[at]), int(window.its[idx[at]]))
    why = _not_comparable(snap, baseline)
    f.values.update(baseline_run_id=baseline.meta.run_id, baseline_used=not why)
    if why:
        f.note(f"baseline {baseline.meta.run_id} not used as a reference: {why}")
    if top is None:
        f.note("baseline: no common iterations to compare")
        return not why
    within = top[0] <= exp.baseline_tolerance
    f.values.update(
        baseline_compared=count,
        baseline_max_rel_dev=top[0] if math.isfinite(top[0]) else None,
        baseline_max_dev_iteration=top[1],
        baseline_within_tolerance=within,
    )
    return not why


def _not_comparable(snap: RunSnapshot, baseline: RunSnapshot) -> str:
    """Why the baseline cannot be a reference ('' when it can): not a no-fault run, or other settings."""
    if family_of(baseline.meta.fault) != "none":
        return f"it is a '{baseline.meta.fault}' run, not a no-fault baseline"
    ours, theirs = snap.meta.settings, baseline.meta.settings
    differ = [
        f"{key} {ours[key]!r} vs {theirs[key]!r}"
        for key in ours
        if key in theirs and ours[key] != theirs[key]
    ]
    if differ:
        return "settings differ (" + ", ".join(differ) + ")"
    ours_k, theirs_k = snap.meta.initial_checkpoint_iteration, baseline.meta.initial_checkpoint_iteration
    if ours_k != theirs_k:
        return (
            f"the run started from an existing checkpoint at iteration {ours_k}, the baseline from "
            f"{theirs_k or 'scratch'}"
        )
    if not ours.keys() & theirs.keys():
        return "run.json records none of the settings that shape the losses in both runs"
    return ""


SPEC = CheckSpec(
    "replay_consistency",
    "every loss after the restore is finite and agrees with each source that covers it (the first attempt's"
    " overlap, a baseline with the same settings); a difference confined to the first iterations after the"
    " restore, with agreement after it, passes with a note",
    judged_per_fault("replay_consistency", lambda i: replay_consistency(i.snap, i.exp, i.baseline)),
    waived_by=NO_RECOVERY,
)
