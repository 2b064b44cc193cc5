"""A block of launcher.log's whole lines: which lines `launcher_log._Collector` must read.

A line holding a needle (found with `bytes.find` over the block) goes to `collector.line`; one holding none
to `collector.plain` only if it may change the year (it starts with a digit or a non-ASCII byte, other than
the year's four digits: all lines' first four bytes compared at once, again after a year change). A block
with a line over MAX_LINE_BYTES is read line by line, as the reference does (`tests/unit/verification/
test_launcher_blocks.py`).
"""

from __future__ import annotations

import io
import re
from typing import Protocol

import numpy as np

from ftqual.verification.evidence.safeio import MAX_LINE_BYTES, bounded_lines
from ftqual.verification.evidence.scan import canonical


class Collector(Protocol):
    year_text: bytes

    def line(self, number: int, line: str) -> None: ...

    def plain(self, raw: bytes, ended: bool) -> None: ...


def read_block(
    collector: Collector, block: bytes, number: int, any_needle: re.Pattern, needles: tuple[bytes, ...]
) -> int:
    """Hand the block's lines to the collector; return the lines read so far. `any_needle`: one pattern
    finding any of the `needles` in a line's bytes."""
    a = np.frombuffer(block, dtype=np.uint8)
    newlines = np.flatnonzero(a == 10)
    starts = np.concatenate(([0], newlines + 1))
    ends = np.append(newlines, len(block))
    if block.endswith(b"\n"):  # no line after the last newline
        starts, ends = starts[:-1], ends[:-1]
    if int((ends - starts).max()) > MAX_LINE_BYTES:  # a line to cut: the plain reader cuts it
        read = 0
        for read, (raw, ended) in enumerate(bounded_lines(io.BytesIO(block)), start=1):
            if any_needle.search(raw) is None:
                collector.plain(raw, ended)
            else:
                collector.line(number + read, raw.decode("utf-8", "replace") + ("\n" if ended else ""))
        return number + read
    hits = []
    find = block.find
    for needle in needles:  # each line holding a needle once is enough
        pos = find(needle)
        while pos >= 0:
            hits.append(pos)
            end = find(b"\n", pos)
            pos = find(needle, end + 1) if end >= 0 else -1
    needle_line = np.zeros(len(starts), dtype=bool)
    needle_line[np.searchsorted(newlines, hits)] = True  # the newlines before a hit: its line's index
    # `plain` can act only on a line starting with a digit or a non-ASCII byte and not with the year's four
    # digits; the year changes rarely (a run across New Year), and the lines after a change are sought again.
    first = np.zeros(len(starts), dtype=np.uint8)
    nonempty = starts < ends
    first[nonempty] = a[starts[nonempty]]
    maybe_plain = ~needle_line & (((first >= ord("0")) & (first <= ord("9"))) | (first >= 0x80))
    four = ends - starts >= 4
    words = np.zeros(len(starts), dtype=np.uint32)
    words[four] = canonical.windows(a, starts[four], 4).view("<u4")[:, 0]
    lines_with_newline = len(newlines)
    since = 0
    while True:
        year = collector.year_text
        plain = maybe_plain & ~(four & (words == int.from_bytes(year, "little")))
        plain[:since] = False
        events = np.flatnonzero(needle_line | plain)
        events = events[events >= since].tolist()
        for i in events:
            raw = block[starts[i] : ends[i]]
            ended = i < lines_with_newline
            if needle_line[i]:
                collector.line(number + i + 1, raw.decode("utf-8", "replace") + ("\n" if ended else ""))
            else:
                collector.plain(raw, ended)
            if collector.year_text != year:
                since = i + 1
                break
        else:
            return number + len(starts)
