"""The per-iteration figures an iteration line prints, as printed: what the exact replay compares.

"Bitwise" on a log means equal as printed: each figure (patterns.train.FIGURES: loss, grad norm, learning
rate, loss scale, skipped and NaN iterations, zeros in the grads) is kept as its text, never as a float, so
that two lines agree only where the log's characters do. The lines are read back from the logs by the byte
offsets the iteration tables hold (iterations.IterationTable.texts): the logs are read once more, only from
the iteration asked for on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ftqual.verification.evidence.iterations import IterationTable
from ftqual.verification.evidence.model import Ref, ref
from ftqual.verification.evidence.patterns.train import FIGURES

FIGURE_NAMES = tuple(name for name, _ in FIGURES)


@dataclass(frozen=True)
class Printed:
    """One iteration line's figures: (name, printed text) in FIGURES' order, those the line prints."""

    iteration: int
    values: tuple[tuple[str, str], ...]
    ref: Ref

    def get(self, name: str) -> str | None:
        return next((text for key, text in self.values if key == name), None)


def figures_of(text: str) -> tuple[tuple[str, str], ...]:
    """The figures a line prints, in FIGURES' order."""
    found = []
    for name, pattern in FIGURES:
        hit = pattern.search(text)
        if hit:
            found.append((name, hit.group(1)))
    return tuple(found)


def printed_figures(
    tables: Iterable[IterationTable], above: int, first_wins: bool = False
) -> dict[int, Printed]:
    """Each iteration above `above`: its line's figures over `tables` (in cycle order); a later line of the
    same iteration replaces an earlier one (a replacement cycle trained it again), or with `first_wins` never
    does (an uninterrupted baseline's reference)."""
    out: dict[int, Printed] = {}
    for table in tables:
        for iteration, line, text in table.texts(above):
            if first_wins and iteration in out:
                continue
            out[iteration] = Printed(iteration, figures_of(text), ref(table.rel, line, text))
    return out
