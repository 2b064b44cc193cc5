"""Exact replay: after the restore, every figure printed equals the uninterrupted baseline's, as text.

Under `replay: exact` the recovered run prints, from the restore to the end, every figure the uninterrupted
baseline prints, character for character.

Both runs trained deterministically (Megatron-LM's --deterministic-mode with NCCL_ALGO and
CUBLAS_WORKSPACE_CONFIG set by ftqual, the smoke workload's deterministic algorithms), so a restore that
brought the state back exactly leaves nothing to forgive: every iteration after the restored iteration K, to
the end, must print each per-iteration figure (evidence/figures.py: loss, grad norm, learning rate, loss
scale, skipped and NaN iterations, zeros in the grads) as the baseline printed it. No tolerance, no transient
window. The first difference fails, named by its iteration and figure.

One difference has a known cause and is named, not forgiven: Megatron-LM's log accumulates the loss it prints
over the iterations since its last line, and the accumulator is not reset after the first line logged after
a restore, so the line of K+2 prints the mean of the losses of K+1 and K+2 while its other figures, and every
later line, equal the baseline's. Where the loss of K+2 (after any restore) equals that mean at the printed
precision and every other figure equals, the check passes and reports it as a finding of the stack
(`stack_finding`); a loss that differs in any other way fails.

The tolerance comparison (replay_consistency) still runs: it is the one for a job that is not deterministic.
"""

from __future__ import annotations

import math
import re

from ftqual.contract import family_of
from ftqual.verification.checks.replay import _not_comparable
from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, unready
from ftqual.verification.checks.spec import NO_RECOVERY, CheckInputs, CheckSpec
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.figures import Printed, printed_figures
from ftqual.verification.evidence.snapshot import RunSnapshot

EXACT = "exact_replay"
QUIRK = "loss_accumulator_not_reset"
QUIRK_TEXT = (
    "Megatron-LM's printed loss at {at} is the mean of the losses of {before} and {at} "
    "({printed} = ({a} + {b}) / 2) while every other figure there, and every later line, equals the "
    "baseline's: the state came back exactly and the log's loss accumulator was not reset after the first "
    "line logged after the restore (a finding of the stack, not of the recovery)"
)
_NUMBER = re.compile(r"^[-+]?\d*(?:\.(\d*))?(?:[eE]([-+]?\d+))?$")


def _unit(text: str) -> float | None:
    """One unit in the last printed digit of `text` (1e-6 for 6.419632E+00), or None if not a number."""
    hit = _NUMBER.match(text)
    if not hit:
        return None
    return 10.0 ** (int(hit.group(2) or 0) - len(hit.group(1) or ""))


def is_mean(printed: str, a: str, b: str) -> bool:
    """`printed` is (a + b) / 2 at its printed precision (a unit of its last digit: each of the three was
    rounded when printed), and differs from b (else there is no difference to explain)."""
    unit = _unit(printed)
    try:
        p, x, y = float(printed), float(a), float(b)
    except ValueError:
        return False
    if unit is None or not all(map(math.isfinite, (p, x, y))) or printed == b:
        return False
    return abs(p - (x + y) / 2) <= unit


def differing(ours: Printed, ref: Printed) -> list[tuple[str, str | None, str | None]]:
    """(figure, ours, the reference's) for each figure the two lines print otherwise, in FIGURES' order."""
    names = [n for n, _ in ref.values] + [n for n, _ in ours.values if ref.get(n) is None]
    return [(n, ours.get(n), ref.get(n)) for n in names if ours.get(n) != ref.get(n)]


def _where(iteration: int, k: int) -> str:
    return f"K+{iteration - k} (iteration {iteration})"


def exact_replay(snap: RunSnapshot, inputs: CheckInputs) -> CheckResult:
    """Invariant: from the restored iteration to the end, every iteration line prints every figure as the
    uninterrupted baseline's does, except the named loss-accumulator finding of the stack at K+2."""
    cid, exp, baseline = EXACT, inputs.exp, inputs.baseline
    early = unready(cid, snap, exp, "train_logs", no_fault="no fault in this scenario: nothing was replayed")
    if early is not None:
        return early
    if baseline is None:
        return inconclusive(
            cid,
            "replay exact compares the recovered run with the uninterrupted baseline, and none was given "
            "(no baseline ran, or verify without --baseline): exact recovery not shown",
        )
    why = _not_comparable(snap, baseline) or _not_exact(baseline)
    if why:
        return inconclusive(cid, f"baseline {baseline.meta.run_id} cannot be the exact reference: {why}")
    return compare_runs(snap, baseline)


def compare_runs(snap: RunSnapshot, baseline: RunSnapshot) -> CheckResult:
    """The comparison itself, whatever mode the runs ran in (the recorded fixtures, which were not
    deterministic, are read through it)."""
    cid = EXACT
    restored = derive.restore(snap)
    if restored is None:
        return inconclusive(cid, "no restored iteration: nothing to compare the iterations after it with")
    k = restored.iteration
    repl = derive.replacement_cycle(snap)
    ours = printed_figures((log.iterations for log in snap.train_logs if log.cycle >= repl), k)
    theirs = printed_figures((log.iterations for log in baseline.train_logs), k - 1, first_wins=True)
    return judge(ours, theirs, k, _restores(snap, k), baseline.meta.run_id)


def _not_exact(baseline: RunSnapshot) -> str:
    replay = baseline.meta.replay
    return "" if replay == "exact" else f"it ran with replay {replay!r}, not deterministically"


def _restores(snap: RunSnapshot, k: int) -> tuple[int, ...]:
    found = (derive.restore(snap, marker) for marker in snap.markers[1:])
    return (k, *sorted({r.iteration for r in found if r is not None and r.iteration > k}))


def judge(
    ours: dict[int, Printed], theirs: dict[int, Printed], k: int, restores: tuple[int, ...], source: str
) -> CheckResult:
    """The verdict on the recovered lines (`ours`, iterations above K) against the baseline's (`theirs`)."""
    f = Findings(EXACT)
    f.values.update(restored_iteration=k, baseline_run_id=source)
    if not ours:
        f.unknown(f"no iteration line after the restored iteration {k}")
        return f.result()
    compared, uncovered, findings = 0, [], []
    for iteration in sorted(ours):
        line, ref = ours[iteration], theirs.get(iteration)
        if ref is None:
            uncovered.append(iteration)
            continue
        compared += 1
        diffs = differing(line, ref)
        if not diffs:
            continue
        quirk = _quirk(iteration, diffs, ours, theirs, restores)
        if quirk is not None:
            findings.append(quirk)
            continue
        name, printed, expected = diffs[0]
        f.values.update(
            exact="differs",
            first_difference={
                "iteration": iteration,
                "after_restore": iteration - k,
                "figure": name,
                "printed": printed,
                "baseline": expected,
                "figures": [d[0] for d in diffs],
            },
        )
        also = f" (also differ: {', '.join(d[0] for d in diffs[1:])})" if diffs[1:] else ""
        f.problem(
            f"{name} at {_where(iteration, k)}: {printed or 'not printed'} against "
            f"{expected or 'not printed'} in baseline {source}{also}",
            ref.ref,
            line.ref,
        )
        break
    f.values.update(compared_iterations=compared)
    if findings:
        record = {key: value for key, value in findings[0].items() if key not in ("ref", "text")}
        f.values["stack_finding"] = {"id": QUIRK, "iterations": [q["iteration"] for q in findings], **record}
    if f.problems:
        return f.result()
    if uncovered:
        f.unknown(
            f"iteration(s) {uncovered[0]}..{uncovered[-1]} after the restore have no line in baseline "
            f"{source}: their exactness is not shown"
        )
        return f.result()
    last = max(ours)
    span = f"{compared} iteration(s) {k + 1}..{last} after the restore at {k}"
    if findings:
        f.values["exact"] = "bitwise_except_stack_finding"
        first = findings[0]
        f.fact(
            f"{span} print every figure bitwise as baseline {source}, except the loss at "
            f"{', '.join(_where(q['iteration'], k) for q in findings)}",
            first["ref"],
        )
        f.note(QUIRK_TEXT.format(**first["text"]))
        return f.result()
    f.values["exact"] = "bitwise"
    f.fact(f"{span} print every figure bitwise as baseline {source}: no difference")
    return f.result()


def _quirk(
    iteration: int,
    diffs: list[tuple[str, str | None, str | None]],
    ours: dict[int, Printed],
    theirs: dict[int, Printed],
    restores: tuple[int, ...],
) -> dict | None:
    """The loss-accumulator finding at `iteration`, or None: it is K+2 of a restore, the loss is the only
    figure that differs, K+1 printed as the baseline did, and the loss is the mean of the baseline's two."""
    if [d[0] for d in diffs] != ["loss"] or not any(iteration == r + 2 for r in restores):
        return None
    before, prev_ref, ref = ours.get(iteration - 1), theirs.get(iteration - 1), theirs.get(iteration)
    if before is None or prev_ref is None or ref is None or differing(before, prev_ref):
        return None
    printed, a, b = ours[iteration].get("loss"), prev_ref.get("loss"), ref.get("loss")
    if printed is None or a is None or b is None or not is_mean(printed, a, b):
        return None
    k = next(r for r in restores if iteration == r + 2)
    return {
        "iteration": iteration,
        "printed": printed,
        "baseline": b,
        "baseline_previous": a,
        "ref": ours[iteration].ref,
        "text": {
            "at": f"K+2 (iteration {iteration})",
            "before": f"K+1 (iteration {k + 1})",
            "printed": printed,
            "a": a,
            "b": b,
        },
    }


def _carried(inputs: CheckInputs) -> bool:
    """Reports of fault runs that ran with replay exact (older reports keep the checks they listed)."""
    family = family_of(inputs.exp.fault)
    return inputs.snap.meta.replay == "exact" and family not in ("none", "campaign")


SPEC = CheckSpec(
    EXACT,
    "replay exact: from the restored iteration to the end, every figure each iteration line prints (loss,"
    " grad norm, learning rate, loss scale, skipped and NaN iterations, zeros in the grads) equals the"
    " deterministic baseline's as printed; Megatron-LM's loss at K+2 printed as the mean of K+1 and K+2 is"
    " named as a finding of the stack",
    lambda inputs: exact_replay(inputs.snap, inputs),
    carried=_carried,
    waived_by=NO_RECOVERY,
)


__all__ = ["EXACT", "QUIRK", "SPEC", "differing", "exact_replay", "is_mean", "judge"]
