"""Where a block's lines hold any of a set of keywords.

Where a block's lines hold any of a set of keywords: `bytes.find` per keyword, and for a large block the
keywords of >= 7 bytes in one numpy pass over its aligned words. Same lines as `bytes.find` for each keyword
(`tests/unit/verification/evidence/test_block_scans.py`)."""

from __future__ import annotations

import numpy as np

# Keywords of at least 7 bytes are sought in a large block by its aligned 4-byte words at once: such a
# keyword at offset p covers the whole word at p + k, k = -p mod 4, which holds its bytes k..k+3. Words are
# screened by a 16-bit multiplicative hash against the keywords' fragments, the few left are compared with
# the fragments exactly, and each is confirmed by comparing the keyword's bytes where it would start
# (numpy over the candidates). Same hits as bytes.find, less time: one pass instead of one per keyword.
FRAGMENT_MIN = 7  # keyword bytes for a whole aligned word to lie within every occurrence
FRAGMENT_BLOCK = 1 << 20  # smaller blocks are searched with bytes.find
_FRAGMENT_MUL = np.uint32(0x9E3779B1)


def _fragments(needles: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, bytes]]]:
    """The hash table, the sorted fragments and (fragment, k, keyword) for the keywords of >= 7 bytes."""
    table = np.zeros(1 << 16, dtype=bool)
    entries = []
    for needle in needles:
        if len(needle) >= FRAGMENT_MIN:
            for k in range(4):
                entries.append((int.from_bytes(needle[k : k + 4], "little"), k, needle))
    values = np.array([value for value, _, _ in entries], dtype=np.uint32)
    table[(values * _FRAGMENT_MUL) >> np.uint32(16)] = True
    return table, np.sort(values), entries


_FRAGMENT_CACHE: dict[tuple[bytes, ...], tuple[np.ndarray, np.ndarray, list[tuple[int, int, bytes]]]] = {}


def long_keyword_hits(block: bytes, needles: tuple[bytes, ...]) -> list[int]:
    """Every offset where one of the `needles` of >= 7 bytes starts in `block` (unordered)."""
    if (found := _FRAGMENT_CACHE.get(needles)) is None:
        found = _FRAGMENT_CACHE[needles] = _fragments(needles)
    table, values, entries = found
    if not entries:
        return []
    words = np.frombuffer(block, dtype="<u4", count=len(block) // 4)
    candidates = np.flatnonzero(table[(words * _FRAGMENT_MUL) >> np.uint32(16)])
    word = words[candidates]
    exact = values[np.minimum(np.searchsorted(values, word), len(values) - 1)] == word
    candidates, word = candidates[exact], word[exact]
    if not len(candidates):
        return []
    a = np.frombuffer(block, dtype=np.uint8)
    hits: list[int] = []
    for value, k, needle in entries:
        start = candidates[word == value] * 4 - k
        start = start[(start >= 0) & (start + len(needle) <= len(block))]
        if len(start):
            pattern = np.frombuffer(needle, dtype=np.uint8)
            same = (a[start[:, None] + np.arange(len(needle))] == pattern).all(axis=1)
            hits.extend(start[same].tolist())
    return hits


def keyword_hits(block: bytes, needles: tuple[bytes, ...]) -> list[int]:
    """Where a keyword is in `block`: for each keyword, at least its first offset in each line holding it
    (callers keep the lines)."""
    hits: list[int] = []
    find = block.find
    if len(block) >= FRAGMENT_BLOCK:
        hits = long_keyword_hits(block, needles)
        needles = tuple(needle for needle in needles if len(needle) < FRAGMENT_MIN)
    for needle in needles:
        pos = find(needle)
        while pos >= 0:
            hits.append(pos)
            end = find(b"\n", pos)
            if end < 0:
                break
            pos = find(needle, end + 1)
    return hits


def candidate_starts(block: bytes, needles: tuple[bytes, ...]) -> list[int]:
    """Sorted offsets of the lines in `block` that contain a keyword (the same test as a substring test of
    each decoded line: the keywords are ASCII, so a keyword is in the decoded line exactly when its bytes are
    in the raw one)."""
    rfind = block.rfind
    return sorted({rfind(b"\n", 0, pos) + 1 for pos in keyword_hits(block, needles)})


def gaps(block: bytes, lo: np.ndarray, clean_end: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray] | None:
    """What lies outside [lo, clean_end) of the canonical lines: (those bytes joined, where each gap starts in
    the block, where in the joined bytes), or None when these spans make less than a quarter of the block
    (searching it whole then costs less). No keyword lies within the spans (`canonical` proves it: a head
    holds only its layout's words, digits, spaces and marks, one `consumed samples`; a rest read to the
    line's end was searched), and none is cut by leaving them out: a keyword would have to hold the newline
    before a line's start or after its end, or the `|` that ends a head."""
    if int((clean_end - lo).sum()) * 4 < len(block):
        return None
    gap_start = np.concatenate(([0], clean_end))
    gap_size = np.append(lo, len(block)) - gap_start
    keep = np.flatnonzero(gap_size > 0)
    gap_start, gap_size = gap_start[keep], gap_size[keep]
    rest = b"".join([block[s : s + k] for s, k in zip(gap_start.tolist(), gap_size.tolist(), strict=True)])
    return rest, gap_start, np.concatenate(([0], np.cumsum(gap_size)))


def in_block(found: list[int], gap_start: np.ndarray, at_rest: np.ndarray) -> np.ndarray:
    """Offsets in the joined gaps (`gaps`) as offsets in the block."""
    where = np.array(found, dtype=np.int64)
    gap = np.searchsorted(at_rest, where, side="right") - 1
    return gap_start[gap] + where - at_rest[gap]


def line_starts(block: bytes, offsets: np.ndarray) -> list[int]:
    """The sorted starts of the lines holding these offsets."""
    rfind = block.rfind
    return sorted({rfind(b"\n", 0, pos) + 1 for pos in offsets.tolist()})


def every(data: bytes, needle: bytes) -> list[int]:
    """Every offset of `needle` in `data` (occurrences of these needles cannot overlap)."""
    found, pos, find = [], data.find(needle), data.find
    while pos >= 0:
        found.append(pos)
        pos = find(needle, pos + len(needle))
    return found


def newlines_in(newlines: np.ndarray, first: int, end: int) -> int:
    """Newlines in block[first:end] (`newlines`: their positions in the block)."""
    return int(np.searchsorted(newlines, end) - np.searchsorted(newlines, first))
