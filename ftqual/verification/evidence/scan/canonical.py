"""Megatron's iteration lines, parsed a block at a time with numpy: no regex and no Python step per line.

A training log holds one iteration line per step, in one layout (`training.py`'s `training_log`):

    <rank>: [YYYY-MM-DD HH:MM:SS.ffffff] iteration <N>/<M> | consumed samples: <C> | elapsed time per
    iteration (ms): <E> | learning rate: <LR> | global batch size: <G> | lm loss: <L> | <the rest>

A line's first WIDTH bytes with every digit replaced by `0` are its *shape*. The lines of one run share a few
shapes (Megatron prints its fields at fixed widths; a shape changes where a number gains a digit or the loss
its sign). `parse` gathers the lines as rows of bytes, computes their shapes and sorts the rows by shape: rows
equal to a shape already proven in this block (compared byte for byte, eight bytes a word), then the others
grouped by a hash of the row and compared byte for byte with their group's first row (a collision costs
speed, never a wrong record). Each distinct shape is proven once, in Python, by `_SHAPE`: every byte of the
head (up to the `|` after the loss) accounted for, each field in its place. The numbers of the rows of a
proven shape are then read from its digit columns with one matrix product. A line whose shape is not proven
(another field order, a missing field, `nan` or `inf`, a tab, a non-ASCII byte, a number too long for the
exact conversions below, ...) or whose values fail the checks below (a timestamp `strptime` would refuse, a
loss beyond the exact conversion) is marked not canonical, and the caller hands it to the line-by-line
parser (`train_log._Collector`), whose records the fast path reproduces exactly
(`tests/unit/verification/evidence/test_canonical_lines.py` compares them over generated variants of the
layout).

Conversions are exact, not approximations of Python's:
- integers: at most 15 digits, summed in float64 from digits times powers of ten (every partial sum an
  integer below 2**53, so exact): `int()`'s value;
- floats (`digits.digits`, the loss with an exponent): the mantissa's digits (at most 15) as an integer
  M < 2**53 and a power of ten 10**k with |k| <= 22, both exact doubles, so M / 10**k (or M * 10**k) is one
  correctly rounded IEEE operation: the correctly rounded value `float()` returns (Clinger's fast path, the
  first step of every correct `strtod`); a loss outside these bounds is not canonical;
- timestamps: the fields' ranges checked as `strptime` and `datetime` check them (month 1-12, day within the
  month, hour < 24, minute and second < 60; six fraction digits), days since the epoch from the civil date,
  the clock's shift subtracted as `Clock.local` subtracts it; a second whose shifted value would leave
  `datetime`'s range (where `Clock.parse_local` returns None) is not canonical.

The shape also says whether the rest of the line (when the whole line was read) holds a keyword of
`train_log` (no keyword holds a digit, so the shape holds one exactly when the line does): `clean_end` lets
the caller skip the keyword search over such lines.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ftqual.verification.evidence.iterations import EPOCH

WIDTH = 384  # bytes of a line read: the head (about 200 bytes) and, in Megatron's lines, the rest
MAX_SHAPES = 64  # distinct shapes read per block; lines of further shapes go line by line
MAX_DIGITS = 15  # integers and mantissas: below 2**53, so float64 sums of digits are exact

# A head's shape (digits as `0`), as `_PREFIX`, `_ITER_TS`, `_ITERATION`, `_ELAPSED`, `_GBS` and `_LOSS` of
# train_log read it (spaces only where they accept any whitespace; the learning rate's characters cannot
# make a later field's words). The rank prefix: spaces, or spaces, digits, `:` and spaces.
_SHAPE = re.compile(
    rb"(?P<prefix> *(?:0+: *)?)\[0000-00-00 00:00:00\.000000\] "
    rb"iteration +(?P<iteration>0+)/ *(?P<total>0+) \| "
    rb"consumed samples: +(?P<consumed>0+) \| elapsed time per iteration \(ms\): (?P<ew>0+)\.(?P<ef>0+) \| "
    rb"learning rate: [-+.0Ee]+ \| global batch size: +(?P<gbs>0+) \| "
    rb"lm loss: (?P<sign>[-+]?)(?P<lw>0+)\.(?P<lf>0+)[Ee](?P<esign>[-+]?)(?P<exp>0+) \|"
)
# the timestamp's digits after `[`: year, month, day, hour, minute, second, microsecond
_STAMP = ((1, 4), (6, 2), (9, 2), (12, 2), (15, 2), (18, 2), (21, 6))
# the numbers read per row, in the order of the columns of a shape's weights
_OUT = ("year", "month", "day", "hour", "minute", "second", "micro")
_OUT += ("iteration", "total", "consumed", "gbs", "elapsed", "loss", "exp")
_COLUMN = {name: k for k, name in enumerate(_OUT)}
_ONES = np.uint64(0x0101010101010101)  # a word of eight true bools
_EXACT10 = np.array([float(10**k) for k in range(23)])  # 10**0 .. 10**22: exact doubles
_MONTH_DAYS = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
_DATETIME_MIN = (datetime.min.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
_DATETIME_MAX = (datetime.max.replace(tzinfo=UTC) - EPOCH) // timedelta(microseconds=1)
# row L: 0xFF in the first L columns, 0 after (a head's bytes, the rest of the row cleared)
_KEEP = np.ascontiguousarray(
    np.where(np.arange(WIDTH)[None, :] < np.arange(WIDTH + 1)[:, None], 0xFF, 0).astype(np.uint8)
).view(f"V{WIDTH}")[:, 0]


def _odd_constants(count: int, seed: int = 16) -> np.ndarray:
    """`count` odd 64-bit multipliers from splitmix64: fixed, and no `numpy.random` import (about 20 ms)."""
    out, state, mask = [], seed, (1 << 64) - 1
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = ((state ^ (state >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        out.append((z ^ (z >> 31)) | 1)
    return np.array(out, dtype=np.uint64)


_HASH = _odd_constants(WIDTH // 8)  # a row's hash: its words times these, summed (wrapping)


@dataclass(frozen=True)
class Parsed:
    """Per line given to `parse`: `ok` (canonical) and, where ok, its numbers (elsewhere meaningless)."""

    ok: np.ndarray
    iteration: np.ndarray
    train_iters: np.ndarray
    consumed: np.ndarray
    gbs: np.ndarray
    loss: np.ndarray
    elapsed: np.ndarray
    t: np.ndarray  # microseconds since the epoch, UTC
    head_end: np.ndarray  # one past the `|` after the loss: the rest of the line holds no field read
    clean_end: np.ndarray  # [line start, clean_end) holds no keyword: the line's end where all was read


@dataclass(frozen=True)
class _Shape:
    columns: np.ndarray  # the digit columns read
    weights: np.ndarray  # columns x _OUT: each digit's weight in each number
    elapsed_frac: int  # digits after the elapsed time's dot
    loss_frac: int
    loss_negative: bool
    exp_negative: bool
    head: int  # the head's length
    clean: bool  # the rest of the shape holds no keyword


def shift_micros(tz_offset_s: float) -> int | None:
    """The clock's shift as `Clock.local` subtracts it (a timedelta, so rounded to microseconds); None when
    no timedelta holds it."""
    try:
        return timedelta(seconds=tz_offset_s) // timedelta(microseconds=1)
    except (OverflowError, ValueError, TypeError):
        return None


@functools.lru_cache(maxsize=256)
def _shape(line: bytes, max_head: int, keywords: tuple[bytes, ...]) -> _Shape | None:
    """How to read the lines of one shape (`line`: the shape of as much of the line as was read), or None
    when `_SHAPE` does not prove its head."""
    m = _SHAPE.match(line)
    if m is None or m.end() > max_head:
        return None
    bracket = m.end("prefix")
    fields = [
        (_OUT[k], (bracket + first, bracket + first + width)) for k, (first, width) in enumerate(_STAMP)
    ]
    # each number's digits; a mantissa is its whole part's digits then its fraction's, as one integer
    parts = {"iteration": ("iteration",), "total": ("total",), "consumed": ("consumed",), "gbs": ("gbs",)}
    parts |= {"exp": ("exp",), "elapsed": ("ew", "ef"), "loss": ("lw", "lf")}
    for name, groups in parts.items():
        fields.append((name, *(m.span(group) for group in groups)))
    columns: list[int] = []
    weights: list[np.ndarray] = []
    for name, *spans in fields:
        left = sum(end - first for first, end in spans)  # digits not yet weighed, left to right
        if left > MAX_DIGITS:
            return None
        for first, end in spans:
            for column in range(first, end):
                left -= 1
                weight = np.zeros(len(_OUT))
                weight[_COLUMN[name]] = 10.0**left
                columns.append(column)
                weights.append(weight)
    return _Shape(
        np.array(columns),
        np.array(weights),
        len(m["ef"]),
        len(m["lf"]),
        m["sign"] == b"-",
        m["esign"] == b"-",
        m.end(),
        not any(keyword in line[m.end() :] for keyword in keywords),
    )


def _groups(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct key, largest group first; the group of every row)."""
    _, first, inverse, counts = np.unique(keys, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse.reshape(-1)]


CHUNK = 2048  # lines handled at once: their rows of bytes stay in cache


def _records(a: np.ndarray, width: int) -> np.ndarray:
    """`a`'s windows of `width` bytes as records: taking rows is a 1-D gather, not a 2-D fancy index."""
    return sliding_window_view(a, width).view(f"V{width}")[:, 0]


def windows(a: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """a[start : start + width] for each start (each within the array), a row each."""
    return _records(a, width)[starts].view(np.uint8).reshape(len(starts), width)


_TAIL16 = np.arange(16)[None, :] >= 16 - np.arange(17)[:, None]  # row L: the last L of 16 columns
_POW16 = np.array([float(10 ** (15 - j)) for j in range(16)])  # exact doubles


def number_before(a: np.ndarray, end: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The integers written by the `size` (0 to 15) digits before each `end` (16 <= end <= len(a)): the
    digits weighed in float64, every partial sum below 2**53, so exact."""
    rows = windows(a, end - 16, 16)
    return (((rows - np.uint8(ord("0"))) * _TAIL16[size]).astype(np.float64) @ _POW16).astype(np.int64)


def _same(words: np.ndarray, row: np.ndarray) -> np.ndarray:
    """Which rows of `words` (uint64) equal `row`."""
    return ((words == row).view(np.uint64) == _ONES).all(axis=1)


class _Reader:
    """The rows of one block's lines, a chunk at a time, and the shapes proven in it."""

    def __init__(self, a: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        self.a, self.lo = a, lo
        self.read = np.minimum(hi - lo, WIDTH)  # bytes of each line in its shape
        self.whole = _records(a, WIDTH) if len(a) >= WIDTH else None
        self.late = lo + WIDTH > len(a)
        if self.late.any():  # the last lines: from a copy of the block's end, padded
            self.edge = int(lo[self.late].min())
            self.tail = _records(np.concatenate((a[self.edge :], np.zeros(WIDTH, dtype=np.uint8))), WIDTH)
        self.digits = np.empty((CHUNK, WIDTH), dtype=np.uint8)  # byte - '0'
        self.is_digit = np.empty((CHUNK, WIDTH), dtype=bool)
        self.shapes = np.empty((CHUNK, WIDTH), dtype=np.uint8)

    def chunk(self, c0: int) -> tuple[np.ndarray, np.ndarray]:
        """(byte - '0', shape as uint64 words) of the rows of lines c0 .. c0 + CHUNK."""
        at = self.lo[c0 : c0 + CHUNK]
        m = len(at)
        if self.whole is not None:
            rows = self.whole[np.minimum(at, len(self.a) - WIDTH)].view(np.uint8).reshape(m, WIDTH)
        else:
            rows = np.empty((m, WIDTH), dtype=np.uint8)
        if (back := self.late[c0 : c0 + CHUNK]).any():
            rows[back] = self.tail[at[back] - self.edge].view(np.uint8).reshape(-1, WIDTH)
        digits, is_digit, shapes = self.digits[:m], self.is_digit[:m], self.shapes[:m]
        np.subtract(rows, np.uint8(ord("0")), out=digits)
        np.less(digits, 10, out=is_digit)
        np.multiply(digits, is_digit.view(np.uint8), out=shapes)
        np.subtract(rows, shapes, out=shapes)  # every digit a `0`
        shapes &= _KEEP[self.read[c0 : c0 + CHUNK]].view(np.uint8).reshape(m, WIDTH)
        return digits, shapes.view(np.uint64)


def parse(
    a: np.ndarray, lo: np.ndarray, hi: np.ndarray, shift: int, max_line: int, keywords: tuple[bytes, ...]
) -> Parsed:
    """Lines [lo, hi) of block `a` (uint8; `hi` at the newline or the block's end); `shift`: the clock's
    shift in microseconds; `max_line`: how much of a line the line-by-line parser reads (the head must lie
    within it); `keywords`: what `clean_end` rules out (ASCII, without digits)."""
    n = len(lo)
    ok = np.zeros(n, dtype=bool)
    values = np.zeros((n, len(_OUT)))
    props = np.zeros(
        (n, 6), dtype=np.int64
    )  # elapsed_frac, loss_frac, loss_negative, exp_negative, head, clean
    reader = _Reader(a, lo, hi)
    proven: list[tuple[np.ndarray, _Shape]] = []  # (shape as words, how to read it)

    def take(c0: int, digits: np.ndarray, members: np.ndarray, shape: _Shape) -> None:
        index = c0 + members
        ok[index] = True
        taken = digits[members][:, shape.columns] if len(members) < len(digits) else digits[:, shape.columns]
        values[index] = taken.astype(np.float64) @ shape.weights
        props[index] = (
            shape.elapsed_frac,
            shape.loss_frac,
            shape.loss_negative,
            shape.exp_negative,
            shape.head,
            shape.clean,
        )

    for c0 in range(0, n, CHUNK):
        digits, words = reader.chunk(c0)
        left = np.ones(len(words), dtype=bool)
        for row, shape in proven:  # the shapes proven in earlier chunks
            rest = np.flatnonzero(left)
            if not len(rest):
                break
            members = rest[_same(words[rest] if len(rest) < len(words) else words, row)]
            take(c0, digits, members, shape)
            left[members] = False
        rest = np.flatnonzero(left)
        if not len(rest):
            continue
        firsts, group = _groups(words[rest] @ _HASH)  # the other rows by shape, the largest group first
        for g, first in enumerate(firsts[:MAX_SHAPES].tolist()):
            rep = rest[first]
            shape = _shape(reader.shapes[rep, : reader.read[c0 + rep]].tobytes(), max_line, keywords)
            if shape is None:  # not canonical: left to the line-by-line parser
                continue
            members = rest[group == g]
            members = members[_same(words[members], words[rep])]  # a hash collision: left out
            if len(proven) < MAX_SHAPES:
                proven.append((words[rep].copy(), shape))
            take(c0, digits, members, shape)

    year, month, day, hour, minute, second, micro, iteration, total, consumed, gbs = values[
        :, : _COLUMN["elapsed"]
    ].T.astype(np.int64)
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_days = _MONTH_DAYS[np.clip(month, 0, 12)] + (leap & (month == 2))
    ok &= (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= month_days)
    ok &= (hour <= 23) & (minute <= 59) & (second <= 59)
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * np.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    local = (((days * 24 + hour) * 60 + minute) * 60 + second) * 1_000_000 - shift
    ok &= (local >= _DATETIME_MIN) & (local <= _DATETIME_MAX)  # else Clock.local overflows: no time

    elapsed_frac, loss_frac, loss_negative, exp_negative, head, clean = props.T
    elapsed = values[:, _COLUMN["elapsed"]] / _EXACT10[elapsed_frac]
    exponent = values[:, _COLUMN["exp"]].astype(np.int64)
    scale = np.where(exp_negative == 1, -exponent, exponent) - loss_frac  # loss = mantissa * 10**scale
    ok &= np.abs(scale) <= 22
    power = _EXACT10[np.where(ok, np.abs(scale), 0)]
    mantissa = values[:, _COLUMN["loss"]]
    loss = np.where(scale < 0, mantissa / power, mantissa * power)
    loss = np.where(loss_negative == 1, -loss, loss) + 0.0  # -0.0 -> 0.0: the parser stores `value or 0.0`
    # a line read to its end without a keyword after its head is clean to its end
    clean_end = np.where((clean == 1) & (hi - lo <= WIDTH), np.minimum(hi + 1, len(a)), lo + head)
    return Parsed(ok, iteration, total, consumed, gbs, loss, elapsed, local + micro, lo + head, clean_end)
