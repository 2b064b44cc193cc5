"""The block scanner's shortcuts (`ftqual/verification/evidence/scan/`) find what the plain scans find.

- Keywords of 7 bytes or more are sought in a large block by its aligned 4-byte words
  (`keywords.long_keyword_hits`): the lines found are those `bytes.find` finds, keywords at every alignment,
  at the block's ends, overlapping, or cut by the block's end.
- `_new_ranks` skips lines whose first 8 bytes are those of a line whose rank is known: the ranks and their
  first lines are those a regex at every line start finds, at every block size.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from ftqual.verification.evidence import train_log
from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.scan import keywords, train_blocks


def _reference_starts(block: bytes, needles: tuple[bytes, ...]) -> list[int]:
    starts = set()
    for needle in needles:
        pos = block.find(needle)
        while pos >= 0:
            starts.add(block.rfind(b"\n", 0, pos) + 1)
            pos = block.find(needle, pos + 1)
    return sorted(starts)


def test_long_keywords_found_as_bytes_find_finds_them():
    rng = random.Random(16)
    alphabet = b"abcdefghij kl\n:]-ETFxcheckpointUnableTraceback[] 0123"
    assert keywords.FRAGMENT_BLOCK <= 1 << 20
    for trial in range(12):
        size = (1 << 20) + rng.randrange(-3, 4000) if trial else keywords.FRAGMENT_BLOCK
        pattern = bytes(rng.choice(alphabet) for _ in range(4099))
        block = bytearray((pattern * (size // len(pattern) + 1))[:size])
        for _ in range(rng.randrange(0, 60)):
            needle = rng.choice(train_blocks.NEEDLES)
            edge = [0, 1, 2, 3, size - len(needle), size - len(needle) - 1, size - len(needle) - 3]
            pos = rng.choice(edge) if rng.random() < 0.3 else rng.randrange(0, size - len(needle) + 1)
            block[pos : pos + len(needle)] = needle
        if trial % 3 == 0:  # a keyword cut by the end: no hit
            block[-5:] = b"check"
        data = bytes(block)
        for needles in (train_blocks.NEEDLES, train_blocks.OTHER_NEEDLES):
            assert keywords.candidate_starts(data, needles) == _reference_starts(data, needles), trial


def _reference_ranks(text: str) -> dict[int, tuple[int, str]]:
    rank = re.compile(r"[ \t]*([0-9]+): ")
    found: dict[int, tuple[int, str]] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        if (m := rank.match(line)) and int(m[1]) not in found:
            found[int(m[1])] = (number, line)
    return found


def test_new_ranks_with_known_prefixes(tmp_path: Path, monkeypatch):
    rng = random.Random(7)
    for trial in range(8):
        lines = []
        for _ in range(rng.randrange(2000, 6000)):
            rank = rng.randrange(0, rng.choice([4, 40, 3000, 10**9]))
            lead = rng.choice(["", " ", "   ", "\t", " \t"])
            sep = rng.choice([": ", ": ", ": ", ":", " :"])
            rest = rng.choice(["x", "NCCL INFO a", "", "[2026-01-01 00:00:00] b", ":", "1: z", "12345678"])
            lines.append(f"{lead}{rank}{sep}{rest}")
        text = "\n".join(lines) + rng.choice(["", "\n"])
        path = tmp_path / f"train_cycle{trial}.log"
        path.write_text(text)
        expected = _reference_ranks(text)
        for block in (4 << 20, 20_000, 3_001):
            monkeypatch.setattr(train_blocks, "BLOCK_BYTES", block)
            log = train_log.parse_train_log(path, path.name, 0, Clock())
            got = {rank: (r.line, r.text) for rank, r in log.ranks.items()}
            assert got.keys() == expected.keys(), (trial, block)
            assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in expected.items()}, (trial, block)


def test_new_ranks_when_lines_share_their_first_bytes(tmp_path: Path, monkeypatch):
    """Lines sharing their first 8 bytes are read once when those bytes hold the whole rank prefix, every one
    when they do not (long ranks, deep indentation): the ranks found are the regex's, at every block size."""
    rng = random.Random(11)
    for trial in range(6):
        lines = []
        for _ in range(rng.randrange(3000, 8000)):
            kind = rng.random()
            if kind < 0.4:  # the same 8 bytes, ranks that differ after them
                line = f"{rng.choice(['', ' '])}{100_000_000 + rng.randrange(0, 500)}: x"
            elif kind < 0.6:
                line = f"{' ' * rng.randrange(6, 12)}{rng.randrange(0, 9000)}: y"
            elif kind < 0.8:
                line = f"{rng.randrange(0, 64):>4}: NCCL INFO {rng.randrange(0, 10**6)}"
            else:
                line = rng.choice(["        at frame", "12345678", "1234567: z", "   ", ""])
            lines.append(line)
        text = "\n".join(lines) + rng.choice(["", "\n"])
        path = tmp_path / f"train_cycle{trial}.log"
        path.write_text(text)
        expected = _reference_ranks(text)
        for block in (4 << 20, 50_000, 4_099):
            monkeypatch.setattr(train_blocks, "BLOCK_BYTES", block)
            log = train_log.parse_train_log(path, path.name, 0, Clock())
            got = {rank: (r.line, r.text) for rank, r in log.ranks.items()}
            assert got == {k: (v[0], v[1]) for k, v in expected.items()}, (trial, block)
