"""Iteration lines kept in flat memory: one fixed-size record per line, in chunks spilled to a temporary file.

A training log holds one iteration line per step, so a long run holds millions. Each becomes a 73-byte
record (numbers, flags, line number, byte offset of the line in the log); a chunk of CHUNK_ROWS records stays
in memory, full chunks go to an unlinked temporary file (page cache, not the process's RSS; which directory,
and what a full one says: `spill.py`). Readers walk the chunks in log order as numpy arrays, using each
chunk's iteration range to skip it. The line's text (the `Ref` a check cites) is read back from the log by
its byte offset only for the few rows a check cites; lines that were parsed from decoded text (a block
holding a carriage return, the line-by-line reference reader) keep their text beside the table.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np

from ftqual.verification.evidence.model import MAX_TEXT, Ref, ref
from ftqual.verification.evidence.safeio import open_regular
from ftqual.verification.evidence.spill import open_spill, spill_failed

CHUNK_ROWS = 1 << 15
MAX_KEPT_TEXTS = 200_000  # text kept beside the table for lines without an offset (hostile CR logs)
INT64_MAX = (1 << 63) - 1
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HAS_GBS, HAS_LOSS, HAS_ELAPSED, HAS_T = 1, 2, 4, 8
DTYPE = np.dtype(
    [
        ("iteration", "<i8"),
        ("train_iters", "<i8"),
        ("consumed", "<i8"),
        ("gbs", "<i8"),
        ("loss", "<f8"),
        ("elapsed", "<f8"),
        ("t", "<i8"),  # microseconds since the epoch, UTC
        ("line", "<i8"),
        ("offset", "<i8"),  # byte offset of the line in the log, -1: text kept beside the table
        ("flags", "u1"),
    ]
)
_READ_BACK = 4096  # bytes of a line read back for its Ref: more than MAX_TEXT * 4 characters need


@dataclass(frozen=True)
class IterationLine:
    cycle: int
    iteration: int
    train_iters: int
    consumed_samples: int
    global_batch_size: int | None
    loss: float | None
    elapsed_ms: float | None
    t: datetime | None
    ref: Ref


def micros(moment: datetime) -> int:
    """An aware datetime as microseconds since the epoch (exact, unlike a float timestamp)."""
    return (moment - EPOCH) // timedelta(microseconds=1)


def from_micros(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=int(value))


@dataclass(frozen=True)
class _Chunk:
    start: int  # index of its first row in the table
    rows: int
    low: int  # smallest and largest iteration
    high: int
    data: np.ndarray | None  # in memory, or None: on disk at `at`
    at: int = 0
    ordered: bool = False  # iterations strictly increase row after row (then low is the first, high the last)


class IterationTable:
    """The iteration lines of one log, in log order (append while parsing, then `close`)."""

    def __init__(self, cycle: int, rel: str, source: Path | None = None, root: Path | None = None) -> None:
        self.cycle, self.rel, self.source, self.root = cycle, rel, source, root
        self._pending: list[tuple] = []  # rows appended one by one, not yet converted
        # converted rows, fewer than CHUNK_ROWS in all, not copied together until a chunk is stored
        self._pieces: list[np.ndarray] = []
        self._piece_rows = 0
        self._chunks: list[_Chunk] = []
        self._file = None
        self._texts: dict[int, str] = {}
        self._rows = 0

    # -- writing -------------------------------------------------------------------------------------
    def append(self, values: tuple, raw: str | None) -> None:
        """`values` in DTYPE's order with offset -1 when `raw` (the line's text) is given."""
        if raw is not None and len(self._texts) < MAX_KEPT_TEXTS:
            self._texts[self._rows] = raw[: MAX_TEXT * 4]  # all that ref() reads of a line
        self._pending.append(values)
        self._rows += 1
        if len(self._pending) >= CHUNK_ROWS:
            self._flush(spill=True)

    def extend(self, rows: np.ndarray) -> None:
        """Append records (DTYPE) parsed a block at a time (kept as given until stored: not to be changed)."""
        self._flush_tuples()
        self._rows += len(rows)
        while len(rows):
            take = min(len(rows), CHUNK_ROWS - self._piece_rows)
            self._pieces.append(rows[:take])
            self._piece_rows += take
            rows = rows[take:]
            if self._piece_rows == CHUNK_ROWS:
                self._store(spill=True)

    def _flush_tuples(self) -> None:
        if self._pending:
            rows = np.array(self._pending, dtype=DTYPE)
            self._pending = []
            self._rows -= len(rows)
            self.extend(rows)

    def _flush(self, spill: bool) -> None:
        """Store what is pending (as a spilled chunk, or in memory when the table is closed)."""
        self._flush_tuples()
        if self._pieces:
            self._store(spill)

    def _store(self, spill: bool) -> None:
        """Store the pieces as one chunk. Spilled, each piece is written as it is (no copy joining them)."""
        pieces, rows = self._pieces, self._piece_rows
        self._pieces, self._piece_rows = [], 0
        start = self._chunks[-1].start + self._chunks[-1].rows if self._chunks else 0
        low = min(int(piece["iteration"].min()) for piece in pieces)
        high = max(int(piece["iteration"].max()) for piece in pieces)
        ordered = all(bool((piece["iteration"][1:] > piece["iteration"][:-1]).all()) for piece in pieces)
        ordered = ordered and all(
            int(after["iteration"][0]) > int(before["iteration"][-1])
            for before, after in zip(pieces, pieces[1:], strict=False)
        )
        if not spill:
            data = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
            self._chunks.append(_Chunk(start, rows, low, high, data, ordered=ordered))
            return
        if self._file is None:
            self._file = open_spill()
        try:
            at = self._file.seek(0, os.SEEK_END)
            for piece in pieces:
                self._file.write(np.ascontiguousarray(piece))
        except OSError as exc:  # a full disk is the machine's problem, never an unreadable log
            raise spill_failed(exc) from exc
        self._chunks.append(_Chunk(start, rows, low, high, None, at, ordered))

    def close(self) -> IterationTable:
        self._flush(spill=False)
        return self

    # -- reading -------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._rows

    def _load(self, chunk: _Chunk) -> np.ndarray:
        if chunk.data is not None:
            return chunk.data
        try:
            self._file.seek(chunk.at)  # flushes what is still buffered: the last write's error comes here
            data = self._file.read(chunk.rows * DTYPE.itemsize)
        except OSError as exc:
            raise spill_failed(exc) from exc
        if len(data) != chunk.rows * DTYPE.itemsize:
            raise spill_failed(OSError(0, "the temporary file is shorter than what was written to it"))
        return np.frombuffer(data, dtype=DTYPE)

    def chunks(self, low: int | None = None, high: int | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """(index of the first row, rows) in log order; with low/high only chunks holding an iteration in
        [low, high) (they may hold others too)."""
        for chunk in self._chunks:
            if low is not None and chunk.high < low or high is not None and chunk.low >= high:
                continue
            yield chunk.start, self._load(chunk)

    def chunk_ranges(self) -> list[tuple[int, int, Callable[[], np.ndarray]]]:
        """(lowest iteration, highest iteration, a loader of its rows) of every chunk."""
        return [(chunk.low, chunk.high, partial(self._load, chunk)) for chunk in self._chunks]

    def count_iterations(self, low: int | None = None, high: int | None = None) -> int:
        """Rows whose iteration is in [low, high) (None: unbounded); chunks wholly inside or outside the
        range are counted by their iteration range, without reading them."""
        count = 0
        for chunk in self._chunks:
            if (low is not None and chunk.high < low) or (high is not None and chunk.low >= high):
                continue
            if (low is None or chunk.low >= low) and (high is None or chunk.high < high):
                count += chunk.rows
                continue
            its = self._load(chunk)["iteration"]
            inside = np.ones(len(its), dtype=bool)
            if low is not None:
                inside &= its >= low
            if high is not None:
                inside &= its < high
            count += int(np.count_nonzero(inside))
        return count

    def first_turn(self) -> int | None:
        """Index of the first row whose iteration is not above the previous row's (rows are in line order);
        a chunk known to be in order is not read."""
        prev: int | None = None
        for chunk in self._chunks:
            if chunk.ordered:
                if prev is not None and chunk.low <= prev:
                    return chunk.start
                prev = chunk.high
                continue
            its = self._load(chunk)["iteration"]
            if prev is not None and its[0] <= prev:
                return chunk.start
            hits = np.flatnonzero(its[1:] <= its[:-1])
            if len(hits):
                return chunk.start + int(hits[0]) + 1
            prev = int(its[-1])
        return None

    def iteration_range(self) -> tuple[int, int] | None:
        if not self._chunks:
            return None
        return min(c.low for c in self._chunks), max(c.high for c in self._chunks)

    def record(self, index: int) -> np.void:
        for chunk in self._chunks:
            if chunk.start <= index < chunk.start + chunk.rows:
                return self._load(chunk)[index - chunk.start]
        raise IndexError(index)

    def row(self, index: int) -> IterationLine:
        """Row `index` as an IterationLine, its Ref text read back from the log."""
        return self.line(index, self.record(index))

    def line(self, index: int, rec: np.void, text: bool = True) -> IterationLine:
        """Record `rec` (row `index`) as an IterationLine; text=False leaves its Ref without the line's text
        (no read back)."""
        flags = int(rec["flags"])
        raw = self._texts.get(index, "")
        if text and index not in self._texts:
            raw = self._read_back(int(rec["offset"]))
        return IterationLine(
            cycle=self.cycle,
            iteration=int(rec["iteration"]),
            train_iters=int(rec["train_iters"]),
            consumed_samples=int(rec["consumed"]),
            global_batch_size=int(rec["gbs"]) if flags & HAS_GBS else None,
            loss=float(rec["loss"]) if flags & HAS_LOSS else None,
            elapsed_ms=float(rec["elapsed"]) if flags & HAS_ELAPSED else None,
            t=from_micros(int(rec["t"])) if flags & HAS_T else None,
            ref=ref(self.rel, int(rec["line"]), raw),
        )

    def _read_back(self, offset: int) -> str:
        """The line at `offset` in the log (read once more: the run directory is evidence at rest)."""
        if offset < 0 or self.source is None:
            return ""
        try:
            with open_regular(self.source, *((self.root,) if self.root is not None else ())) as opened:
                return _line_at(opened, offset)
        except OSError:
            return ""

    def texts(self, above: int) -> Iterator[tuple[int, int, str]]:
        """(iteration, line number, the line's text) of every row whose iteration is above `above`, in log
        order; the log is opened once and each line read back by its offset (the exact replay's figures)."""
        handle = None
        try:
            for start, data in self.chunks(low=above + 1):
                for offset, rec in enumerate(data):
                    if int(rec["iteration"]) <= above:
                        continue
                    index = start + offset
                    text = self._texts.get(index)
                    if text is None:
                        if handle is None:
                            handle = self._open()
                        text = _line_at(handle, int(rec["offset"])) if handle and rec["offset"] >= 0 else ""
                    yield int(rec["iteration"]), int(rec["line"]), text
        finally:
            if handle:
                handle.close()

    def _open(self):
        """The log opened for reading back, or False where it cannot be (its rows then have no text)."""
        if self.source is None:
            return False
        try:
            return open_regular(self.source, *((self.root,) if self.root is not None else ()))
        except OSError:
            return False

    def __iter__(self) -> Iterator[IterationLine]:
        """Every row as an IterationLine (for small logs and tests: each one reads its line back)."""
        for start, data in self.chunks():
            for offset, rec in enumerate(data):
                yield self.line(start + offset, rec)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IterationTable):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"IterationTable({self.rel!r}, {self._rows} rows)"


def _line_at(handle, offset: int) -> str:
    handle.seek(offset)
    data = handle.read(_READ_BACK)
    end = data.find(b"\n")
    return data[: len(data) if end < 0 else end + 1].decode("utf-8", "replace")


def empty_table(cycle: int = 0, rel: str = "") -> IterationTable:
    return IterationTable(cycle, rel).close()
