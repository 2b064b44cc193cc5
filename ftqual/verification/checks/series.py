"""Loss series read window by window: the replay check's references without holding a run in memory.

A `Series` is one way of reading iteration -> line from tables of iteration records (a run's logs in order,
rows filtered by a mask, the first or the last line of an iteration winning). `windows` walks the series'
distinct iterations in increasing order, WINDOW of them at a time; `window(its)` fills arrays aligned with
such sorted iterations (present, loss, loss reported, where the line lies, to cite it), so that another
series is read on the same iterations. A window holds WINDOW iterations however sparse they are, so a log
whose iterations are scattered (forged) costs a few windows, not one per iteration; a chunk is read only for
the windows its iteration range overlaps (once or twice for a log in order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from ftqual.verification.evidence.iterations import HAS_LOSS, IterationLine, IterationTable

WINDOW = 1 << 18
_ROW_BITS = 40  # loc = table index << 40 | row index
Mask = Callable[[np.ndarray], np.ndarray]


def _all(rows: np.ndarray) -> np.ndarray:
    return np.ones(len(rows), dtype=bool)


@dataclass(frozen=True)
class Window:
    its: np.ndarray  # the window's iterations, sorted, distinct
    has: np.ndarray
    loss: np.ndarray
    reported: np.ndarray  # the line reports a loss
    loc: np.ndarray


@dataclass(frozen=True)
class Series:
    tables: tuple[IterationTable, ...]
    mask: Mask = _all
    first_wins: bool = False  # True: an iteration's first line (in table order) wins; False: its last

    def window(self, its: np.ndarray) -> Window:
        """This series on the iterations `its` (sorted, distinct)."""
        size = len(its)
        has = np.zeros(size, dtype=bool)
        loss = np.zeros(size, dtype=np.float64)
        reported = np.zeros(size, dtype=bool)
        loc = np.full(size, -1, dtype=np.int64)
        if not size:
            return Window(its, has, loss, reported, loc)
        lo, hi = int(its[0]), int(its[-1]) + 1
        for number, table in enumerate(self.tables):
            for start, rows in table.chunks(lo, hi):
                values = rows["iteration"]
                idx = np.flatnonzero((values >= lo) & (values < hi) & self.mask(rows))
                pos = np.searchsorted(its, values[idx])
                hit = its[np.minimum(pos, size - 1)] == values[idx]
                idx, pos = idx[hit], pos[hit]
                if self.first_wins:  # a table never repeats an iteration: only earlier tables can hold it
                    fresh = ~has[pos]
                    idx, pos = idx[fresh], pos[fresh]
                has[pos] = True
                loss[pos] = rows["loss"][idx]
                reported[pos] = (rows["flags"][idx] & HAS_LOSS) != 0
                loc[pos] = (number << _ROW_BITS) | (start + idx)
        return Window(its, has, loss, reported, loc)

    def line(self, loc: int) -> IterationLine:
        return self.tables[loc >> _ROW_BITS].row(loc & ((1 << _ROW_BITS) - 1))

    def _next(self, x: int) -> np.ndarray:
        """The smallest WINDOW distinct iterations >= x of this series, sorted."""
        chunks = sorted(
            (item for table in self.tables for item in table.chunk_ranges() if item[1] >= x),
            key=lambda item: item[0],
        )
        best = np.empty(0, dtype=np.int64)
        for low, _, load in chunks:
            if len(best) >= WINDOW and low > best[-1]:
                break  # chunks come by their lowest iteration: none later holds a smaller one
            rows = load()
            values = rows["iteration"][(rows["iteration"] >= x) & self.mask(rows)]
            if not len(values):
                continue
            ordered = bool((values[1:] > values[:-1]).all())
            if ordered and (not len(best) or values[0] > best[-1]):
                best = np.concatenate((best, values))[:WINDOW]  # a log in order: no sort
            else:
                best = np.unique(np.concatenate((best, values)), return_index=True)[0][:WINDOW]
        return best

    def windows(self, start: int) -> Iterator[Window]:
        """The series' iterations >= start, WINDOW distinct ones at a time, in increasing order."""
        its = self._next(start)
        while len(its):
            yield self.window(its)
            its = self._next(int(its[-1]) + 1)


def relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """replay.relative_difference, elementwise, with the same float64 operations."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        finite = np.isfinite(a) & np.isfinite(b)
        scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), 1e-12)
        rel = np.abs(a - b) / scale
    return np.where(finite, np.where(a == b, 0.0, rel), np.inf)


class Spans:
    """`replay._spans` of increasing numbers fed in batches, cut after MAX_SPANS spans."""

    MAX_SPANS = 1000

    def __init__(self) -> None:
        self.out: list[str] = []
        self.start: int | None = None
        self.prev: int | None = None
        self.more = 0

    def feed(self, numbers: np.ndarray) -> None:
        if not len(numbers):
            return
        breaks = np.flatnonzero(np.diff(numbers) != 1)
        heads = [0, *(breaks + 1).tolist()]
        tails = [*breaks.tolist(), len(numbers) - 1]
        for head, tail in zip(heads, tails, strict=True):
            first, last = int(numbers[head]), int(numbers[tail])
            if self.prev is not None and first == self.prev + 1:
                self.prev = last
                continue
            self._close()
            self.start, self.prev = first, last

    def _close(self) -> None:
        if self.start is None:
            return
        if len(self.out) < self.MAX_SPANS:
            self.out.append(str(self.start) if self.start == self.prev else f"{self.start}-{self.prev}")
        else:
            self.more += 1

    def text(self) -> str:
        self._close()
        self.start = self.prev = None
        if not self.out:
            return "none"
        return ", ".join(self.out) + (f", ... ({self.more} more spans)" if self.more else "")
