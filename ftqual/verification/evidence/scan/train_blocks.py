"""A training log's block: iteration lines in bulk, the ranks that printed, the other keyword lines.

A training log's block: its iteration lines in bulk, the ranks that printed, where the other keyword lines
start. `train_log.parse_train_log` reads a block through these and hands the lines found to its `_Collector`
(the reference: the same facts as reading every line with it, `tests/unit/bench/test_parser_parity.py`,
`tests/unit/verification/evidence/test_block_scans.py`).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np

from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.iterations import DTYPE, HAS_ELAPSED, HAS_GBS, HAS_LOSS, HAS_T
from ftqual.verification.evidence.model import Ref, ref
from ftqual.verification.evidence.patterns import train as patterns
from ftqual.verification.evidence.safeio import MAX_LINE_BYTES
from ftqual.verification.evidence.scan import canonical, keywords


class Collector(Protocol):
    """What these scans need of `train_log._Collector`."""

    rel: str
    clock: Clock
    in_args: bool
    ranks: dict[int, Ref]
    rank_prefixes: np.ndarray

    def line(self, number: int, raw: str, offset: int = -1) -> None: ...

    def bulk(self, rows: np.ndarray) -> None: ...


# Logs are read in blocks of this many bytes (extended to the next newline). Within a block each keyword is
# found with bytes.find (C speed), and only the lines holding one are decoded and parsed: the chatter that
# makes a large log (per-rank warnings, NCCL INFO) is never split into Python strings.
BLOCK_BYTES = 4 << 20
NEEDLES = tuple(keyword.encode() for keyword in patterns.KEYWORDS)


# Iteration lines in Megatron's own layout are parsed a block at a time (`canonical.parse`: numpy over the
# bytes, no regex and no Python step per line); the other lines holding `consumed samples` go through the
# collector. The other keywords are sought only outside what the canonical lines are proven to hold.
_SAMPLES = b"consumed samples"
OTHER_NEEDLES = tuple(n for n in NEEDLES if n != _SAMPLES)
ARGUMENTS = patterns.ARGUMENTS.encode()
_MAX_SHIFT = 1 << 60  # microseconds; a forged tz_offset_s beyond it leaves the block to the collector
_BULK_MIN = 8  # iteration lines a block needs to be read in bulk (fewer cost less line by line)


def _other_starts(block: bytes, lo: np.ndarray, clean_end: np.ndarray) -> list[int]:
    """`keywords.candidate_starts(block, OTHER_NEEDLES)`, the keywords sought only outside [lo, clean_end)
    of the canonical lines when these make much of the block (`keywords.gaps`)."""
    gaps = keywords.gaps(block, lo, clean_end)
    if gaps is None:
        return keywords.candidate_starts(block, OTHER_NEEDLES)
    rest, gap_start, at_rest = gaps
    hits = keywords.keyword_hits(rest, OTHER_NEEDLES)
    return keywords.line_starts(block, keywords.in_block(hits, gap_start, at_rest)) if hits else []


def _sample_lines(block: bytes, total: int, newlines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of each line holding `consumed samples`, whether it holds them once), in line order."""
    pieces = np.fromiter(map(len, block.split(_SAMPLES)), dtype=np.int64, count=total + 1)[:-1]
    at = np.cumsum(pieces) + np.arange(total, dtype=np.int64) * len(_SAMPLES)
    line_of = np.searchsorted(newlines, at)  # newlines before each occurrence: the index of its line
    first = np.flatnonzero(np.concatenate(([True], line_of[1:] != line_of[:-1])))
    return line_of[first], np.diff(np.append(first, total)) == 1


# A block whose last PROBE bytes are mostly iteration lines is taken as iteration-dense without counting
# `consumed samples` over the whole of it: every line is tried, and the words are sought only outside the
# canonical lines (in a dense block: its chatter and the lines not proven). Only speed depends on the guess.
_PROBE = 64 << 10


def _dense_probe(block: bytes, newlines: np.ndarray) -> bool:
    if len(block) < 4 * _PROBE:
        return False
    start = len(block) - _PROBE
    found = block.count(_SAMPLES, start)
    return found > 0 and found * 2 >= len(newlines) - int(np.searchsorted(newlines, start))


def dense_without_count(
    block: bytes, a: np.ndarray, newlines: np.ndarray, starts: np.ndarray, ends: np.ndarray, shift: int
) -> tuple[canonical.Parsed, np.ndarray, np.ndarray, list[int] | None, int]:
    """Every line of an iteration-dense block parsed: (parsed, which lines hold `consumed samples`, which are
    canonical and hold them once, the other keyword lines' starts or None when not sought, the count of
    `consumed samples`). Where the canonical lines make most of the block, each holds the words once in its
    head, and an occurrence elsewhere lies outside their clean spans: the words and the other keywords are
    sought there only. Else (a wrong guess) they are counted over the whole block."""
    parsed = canonical.parse(a, starts, ends, shift, MAX_LINE_BYTES, NEEDLES)
    ok = parsed.ok
    gaps = keywords.gaps(block, starts[ok], parsed.clean_end[ok])
    if gaps is not None:
        rest, gap_start, at_rest = gaps
        held = ok.astype(np.int64)
        if extra := keywords.every(rest, _SAMPLES):
            line_of = np.searchsorted(newlines, keywords.in_block(extra, gap_start, at_rest))
            held += np.bincount(line_of, minlength=len(held))
        hits = keywords.keyword_hits(rest, OTHER_NEEDLES)
        others = keywords.line_starts(block, keywords.in_block(hits, gap_start, at_rest)) if hits else []
        return parsed, held > 0, ok & (held == 1), others, int(held.sum())
    total = block.count(_SAMPLES)
    if int(ok.sum()) == total:  # each canonical line holds the words once, no other line holds them
        return parsed, ok, ok, None, total
    where, once = _sample_lines(block, total, newlines)
    samples = np.zeros(len(ok), dtype=bool)
    samples[where] = True
    single = np.zeros(len(ok), dtype=bool)
    single[where] = once
    return parsed, samples, ok & single, None, total


def bulk_iterations(
    collector: Collector,
    block: bytes,
    base: int,
    number: int,
    arguments: bool,
    a: np.ndarray,
    newlines: np.ndarray,
) -> list[int] | None:
    """Record the block's iteration lines (`a`: the block's bytes, `newlines`: where its newlines are);
    return the other candidate lines' starts, or None (nothing recorded) when the block must be read line
    by line: an argument dump in it (`arguments`) or open, or a line with `consumed samples` that also holds
    another keyword (its facts must keep their order).

    Canonical lines become records at once; the other lines with `consumed samples` go through the collector
    in line order between them, so the table stays in line order and each number's first line wins."""
    if collector.in_args or arguments:
        return None
    count = len(newlines) + (not block.endswith(b"\n"))  # lines in the block
    starts = np.concatenate(([0], newlines + 1))[:count]
    ends = np.append(newlines, len(block))[:count]
    shift = canonical.shift_micros(collector.clock.tz_offset_s)
    if shift is not None and abs(shift) > _MAX_SHIFT:
        shift = None
    others: list[int] | None = None
    if shift is not None and _dense_probe(block, newlines):
        lines = np.arange(count)
        parsed, samples, ok, others, total = dense_without_count(block, a, newlines, starts, ends, shift)
        if total < _BULK_MIN:
            return None if total else keywords.candidate_starts(block, OTHER_NEEDLES)
    else:
        total = block.count(_SAMPLES)
        if not total:
            return keywords.candidate_starts(block, OTHER_NEEDLES)
        if total < _BULK_MIN or shift is None:
            return None
        if total * 2 >= count:  # iteration-dense: every line is tried, most are canonical
            lines = np.arange(count)
            parsed = canonical.parse(a, starts, ends, shift, MAX_LINE_BYTES, NEEDLES)
            ok = parsed.ok
            if int(ok.sum()) == total:  # each canonical line holds the words once, no other line holds them
                samples = ok
            else:
                where, once = _sample_lines(block, total, newlines)
                samples = np.zeros(count, dtype=bool)
                samples[where] = True
                single = np.zeros(count, dtype=bool)
                single[where] = once
                ok = ok & single
        else:
            lines, once = _sample_lines(block, total, newlines)
            parsed = canonical.parse(a, starts[lines], ends[lines], shift, MAX_LINE_BYTES, NEEDLES)
            ok = parsed.ok & once
            samples = np.ones(len(lines), dtype=bool)
    lo, hi = starts[lines], ends[lines]
    if others is None:
        others = _other_starts(block, lo[ok], parsed.clean_end[ok])
    if others:
        held = lo[samples]
        where = np.minimum(np.searchsorted(held, others), len(held) - 1)
        if (held[where] == np.array(others)).any():
            return None
    rows = np.zeros(int(ok.sum()), dtype=DTYPE)
    for name in ("iteration", "train_iters", "consumed", "gbs", "loss", "elapsed", "t"):
        rows[name] = getattr(parsed, name)[ok]
    rows["line"] = number + lines[ok] + 1
    rows["offset"] = base + lo[ok]
    rows["flags"] = HAS_GBS | HAS_LOSS | HAS_ELAPSED | HAS_T
    done = 0
    before = np.cumsum(ok) - ok  # canonical lines before each line
    for index in np.flatnonzero(samples & ~ok).tolist():  # in line order, between the records around them
        if (upto := int(before[index])) > done:
            collector.bulk(rows[done:upto])
            done = upto
        start, end = int(lo[index]), int(hi[index])
        raw = block[start : min(end + 1, len(block), start + MAX_LINE_BYTES)].decode("utf-8", "replace")
        collector.line(number + int(lines[index]) + 1, raw, base + start)
    if done < len(rows):
        collector.bulk(rows[done:])
    return others


_RANK_WIDTH = 24  # bytes of a line's start where its rank prefix is sought at once
_RANK_TABLE_MAX = 1 << 20  # ranks below this are looked up in a table
_RANK_PREFIX = 8  # a line's first bytes, as one word: lines starting like one whose rank is known are skipped


def new_ranks(collector: Collector, block: bytes, a: np.ndarray, newlines: np.ndarray, number: int) -> None:
    """Note the first line of every rank in the block not seen yet: what `train_log._Collector.rank_line`
    finds (the prefix `patterns.RANK_BYTES` matches at a line's start), read at every line start at once. A
    line whose prefix does not fit the window, or whose rank has more than 15 digits, is matched by
    `patterns.RANK_BYTES` itself."""
    starts = np.concatenate(([0], newlines + 1))
    starts = starts[starts < len(block)]
    m = len(starts)
    seen = collector.ranks
    if m < 256:  # a few lines: the regex at each start costs less
        for i, start in enumerate(starts.tolist()):
            if (match := patterns.RANK_BYTES.match(block, start)) and (rank := int(match[1])) not in seen:
                stop = block.find(b"\n", start)
                raw = block[start : len(block) if stop < 0 else stop].decode("utf-8", "replace")
                seen[rank] = ref(collector.rel, number + i + 1, raw)
        return
    # A line whose first 8 bytes are those of a line already read, whose rank prefix ended within them,
    # has that line's rank (the prefix depends on those bytes only): a rank seen, nothing to note.
    whole = starts + _RANK_PREFIX <= len(block)
    prefix = np.zeros(m, dtype=np.uint64)
    prefix[whole] = canonical.windows(a, starts[whole], _RANK_PREFIX).view(np.uint64)[:, 0]
    known_prefixes = collector.rank_prefixes
    if len(known_prefixes):
        at = np.minimum(np.searchsorted(known_prefixes, prefix), len(known_prefixes) - 1)
        index = np.flatnonzero(~(whole & (known_prefixes[at] == prefix)))
        if not len(index):
            return
        starts, prefix, whole = starts[index], prefix[index], whole[index]
    else:
        index = np.arange(m)
    # The same holds within the block: only the first line of each 8-byte prefix is read, and the later
    # ones too where that first line's rank prefix did not end within the 8 bytes (a second pass).
    first = _first_of_each(prefix, whole)
    tokens = _rank_tokens(a, len(block), starts[first])
    undecided = whole[first] & (tokens.end + 2 > _RANK_PREFIX)
    if undecided.any():
        again = np.isin(prefix, prefix[first][undecided]) & whole
        again[first] = True
        first = np.flatnonzero(again)
        tokens = _rank_tokens(a, len(block), starts[first])
    starts, prefix, whole, index = starts[first], prefix[first], whole[first], index[first]
    ranked, odd, end, value = tokens
    table = np.zeros(_RANK_TABLE_MAX, dtype=bool)
    table[[rank for rank in seen if rank < _RANK_TABLE_MAX]] = True
    new = ranked & ((value >= _RANK_TABLE_MAX) | ~table[np.minimum(value, _RANK_TABLE_MAX - 1)])
    lines = np.flatnonzero(new)
    ranks, first_line = np.unique(value[lines], return_index=True)  # each new rank's first line is enough
    found: list[tuple[int, int]] = list(zip(lines[first_line].tolist(), ranks.tolist(), strict=True))
    for i in np.flatnonzero(odd).tolist():
        if match := patterns.RANK_BYTES.match(block, int(starts[i])):
            found.append((i, int(match[1])))
    for i, rank in sorted(found):
        if rank not in seen:
            start = int(starts[i])
            stop = block.find(b"\n", start)
            raw = block[start : len(block) if stop < 0 else stop].decode("utf-8", "replace")
            seen[rank] = ref(collector.rel, number + int(index[i]) + 1, raw)
    fresh = prefix[ranked & whole & (end + 2 <= _RANK_PREFIX)]  # their ranks are all in `seen` now
    if len(fresh):
        merged = np.concatenate((known_prefixes, fresh))
        collector.rank_prefixes = np.unique(merged, return_index=True)[0]


def _first_of_each(prefix: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """Sorted indexes of the lines to read: the first line of each prefix, and every line without one."""
    with_prefix = np.flatnonzero(whole)
    keep = np.ones(len(prefix), dtype=bool)
    keep[with_prefix] = False
    keep[with_prefix[np.unique(prefix[with_prefix], return_index=True)[1]]] = True
    return np.flatnonzero(keep)


class _RankTokens(NamedTuple):
    ranked: np.ndarray  # the line starts with a rank prefix read here
    odd: np.ndarray  # left to `patterns.RANK_BYTES`: the window cannot tell
    end: np.ndarray  # where the digits end, from the line's start
    value: np.ndarray  # the rank, where ranked


def _rank_tokens(a: np.ndarray, size: int, starts: np.ndarray) -> _RankTokens:
    """The rank prefix (`[ \\t]*digits: `) of the lines at `starts` (sorted), read in a window of _RANK_WIDTH
    bytes at each."""
    m = len(starts)
    padded = m > 0 and size - int(starts[-1]) < _RANK_WIDTH
    source = None
    if padded:
        source = np.concatenate((a[-2 * _RANK_WIDTH :], np.zeros(_RANK_WIDTH, dtype=np.uint8)))
    rows = np.empty((m, _RANK_WIDTH), dtype=np.uint8)
    inside = starts + _RANK_WIDTH <= size
    if inside.any():
        rows[inside] = canonical.windows(a, starts[inside], _RANK_WIDTH)
    if source is not None:
        offset = size - min(size, 2 * _RANK_WIDTH)
        rows[~inside] = canonical.windows(source, starts[~inside] - offset, _RANK_WIDTH)
    columns = np.arange(_RANK_WIDTH)
    blank = (rows == ord(" ")) | (rows == ord("\t"))
    lead = np.where(blank.all(axis=1), _RANK_WIDTH, (~blank).argmax(axis=1))
    digit = ((rows - np.uint8(ord("0"))) < 10) | (columns < lead[:, None])
    end = np.where(digit.all(axis=1), _RANK_WIDTH, (~digit).argmax(axis=1))  # after the digits
    width = end - lead
    known = end + 2 <= _RANK_WIDTH
    colon = rows[np.arange(m), np.minimum(end, _RANK_WIDTH - 1)] == ord(":")
    space = rows[np.arange(m), np.minimum(end + 1, _RANK_WIDTH - 1)] == ord(" ")
    ranked = known & (width >= 1) & colon & space
    token_end = starts + end
    odd = ~known | (ranked & ((width > canonical.MAX_DIGITS) | (token_end < 16) | ~inside))  # regex below
    ranked &= ~odd
    value = np.zeros(m, dtype=np.int64)
    if ranked.any():
        value[ranked] = canonical.number_before(a, token_end[ranked], width[ranked])
    return _RankTokens(ranked, odd, end, value)


def after_arguments(block: bytes, head: int) -> int | None:
    """Where to end a block holding the argument dump at `head` (which is read line by line) so that the
    iteration lines after it are read in bulk: after the line that ends the dump, when much of the block
    follows."""
    end = block.find(b"end of arguments", head) if head >= 0 else -1
    cut = block.find(b"\n", end) + 1 if end >= 0 else 0
    return cut if 0 < cut < len(block) - (64 << 10) and b"\r" not in block else None
