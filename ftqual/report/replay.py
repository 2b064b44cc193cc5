"""Replay consistency, descriptive: losses of iterations a later cycle redid, against the cycle before it.

The verifier's replay check (if it has one) gives the verdict; this module only shows what the timelines
hold, so a reader sees the numbers behind it. A difference followed by identical losses is "isolated"
(training state did not diverge); a difference that lasts to the last replayed iteration is "persistent".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ftqual.report.timeline import Timeline

REL_TOL = 5e-7  # Megatron prints losses with 7 significant digits
REPLAY_CHECK_WORDS = ("replay", "loss")


@dataclass(frozen=True)
class Difference:
    iteration: int
    before: float
    after: float
    cycle_before: int
    cycle_after: int


@dataclass(frozen=True)
class Replay:
    replayed: int = 0
    identical: int = 0
    pattern: str = "none"  # none | identical | isolated | persistent
    tolerance: float = REL_TOL
    differences: list[Difference] = field(default_factory=list)
    baseline_compared: int = 0
    baseline_identical: int = 0
    baseline_max_rel_diff: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def same(a: float, b: float, tol: float = REL_TOL) -> bool:
    return abs(a - b) <= tol * max(abs(a), abs(b), 1e-12)


def _losses(tl: Timeline) -> dict[int, dict[int, float]]:
    out: dict[int, dict[int, float]] = {}
    for p in tl.points:
        if p.loss is not None:
            out.setdefault(p.cycle, {})[p.iteration] = p.loss
    return out


def compare(tl: Timeline, baseline: Timeline | None = None, tol: float | None = None) -> Replay:
    """Replayed pairs equal within relative `tol` (default: the printed precision)."""
    tol = REL_TOL if tol is None else tol
    by_cycle = _losses(tl)
    pairs: list[tuple[int, float, float, int, int]] = []
    cycles = sorted(by_cycle)
    for idx, cycle in enumerate(cycles):
        for it, after in sorted(by_cycle[cycle].items()):
            earlier = next((c for c in reversed(cycles[:idx]) if it in by_cycle[c]), None)
            if earlier is not None:
                pairs.append((it, by_cycle[earlier][it], after, earlier, cycle))
    diffs = [Difference(it, b, a, cb, ca) for it, b, a, cb, ca in pairs if not same(b, a, tol)]
    if not pairs:
        pattern = "none"
    elif not diffs:
        pattern = "identical"
    else:
        pattern = "persistent" if not same(pairs[-1][1], pairs[-1][2], tol) else "isolated"
    result = Replay(
        replayed=len(pairs),
        identical=len(pairs) - len(diffs),
        pattern=pattern,
        differences=diffs,
        tolerance=tol,
    )
    if baseline is None:
        return result
    base = {it: loss for cycle_losses in _losses(baseline).values() for it, loss in cycle_losses.items()}
    final = {}
    for cycle in cycles:  # the loss that counted: the last cycle to commit each iteration
        final.update(by_cycle[cycle])
    common = sorted(set(base) & set(final))
    rel = [abs(final[i] - base[i]) / max(abs(base[i]), 1e-12) for i in common]
    return replace(
        result,
        baseline_compared=len(common),
        baseline_identical=sum(same(final[i], base[i]) for i in common),
        baseline_max_rel_diff=max(rel) if rel else None,
    )


def replay_checks(checks: list[dict]) -> list[dict]:
    """The verifier's checks about replayed losses (by id)."""
    return [c for c in checks if any(w in str(c.get("id", "")) for w in REPLAY_CHECK_WORDS)]
