"""launcher.log is read a block of whole lines at a time (`scan/launcher_blocks.py`): the facts, line numbers
and completeness are those of reading it line by line (the reference), on logs built from every recorded
launcher.log:
lines shuffled among blocks of several sizes, the year changing mid-block (glog lines take theirs from the
last full timestamp), lines longer than MAX_LINE_BYTES, non-ASCII and empty lines, with and without a last
newline."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ftqual.verification.evidence import launcher_log
from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.safeio import MAX_LINE_BYTES, bounded_lines

DATA = Path(__file__).resolve().parents[3] / "data"


def _line_by_line(path: Path, clock: Clock, year: int) -> launcher_log.LauncherLog:
    """The reader before blocks: every line through `bounded_lines`."""
    collector = launcher_log._Collector(launcher_log.LAUNCHER_LOG, clock, year)
    number, last = 0, True
    with path.open("rb") as handle:
        for number, (raw, ended) in enumerate(bounded_lines(handle), start=1):
            last = ended
            if launcher_log._ANY_NEEDLE.search(raw) is None:
                collector.plain(raw, ended)
            else:
                collector.line(number, raw.decode("utf-8", "replace") + ("\n" if ended else ""))
    return collector.freeze(number, last)


def _recorded_lines() -> list[bytes]:
    lines = []
    for path in sorted(DATA.rglob("launcher.log")):
        lines.extend(path.read_bytes().splitlines())
    assert len(lines) > 2_000
    return lines


_ODD = [
    b"",
    b"   ",
    b"2027-01-01 00:00:01,000 [INFO] [node-b] [workload:0(0) infra:?(?)] launcher.py:1 new year",
    b"2025-12-31 23:59:59,999 [INFO] [node-a] [workload:?(?) infra:?(?)] launcher.py:1 an earlier year",
    b"E0101 00:00:02.000000 4242 api.py:1] failed (exitcode: -9) local_rank: 0 (pid: 77) of binary: x",
    b"I1231 23:59:59.000000 4242 api.py:1] [default] Worker group FAILED. 2/3 attempts left; will restart",
    b"\xc3\xa9t\xc3\xa9 2026 exit code = 3",
    b"\xff\xfe 2026-bad",
    b"7 Agent's exit code = 1",
    b"12",
    b"2026",
]


@pytest.mark.parametrize("seed", range(6))
def test_blocks_read_what_lines_read(tmp_path: Path, monkeypatch, seed: int):
    rng = random.Random(seed)
    recorded = _recorded_lines()
    lines = rng.choices(recorded, k=4_000)
    for _ in range(60):
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(_ODD))
    if seed % 2:  # lines to cut, one of them holding a needle beyond the cut
        for _ in range(3):
            lines.insert(rng.randrange(len(lines) + 1), b"x" * (MAX_LINE_BYTES + rng.randrange(-2, 3000)))
        lines.insert(rng.randrange(len(lines)), b"y" * MAX_LINE_BYTES + b" exit code = 9")
    data = b"\n".join(lines) + (b"\n" if seed % 3 else b"")
    path = tmp_path / "launcher.log"
    path.write_bytes(data)
    clock = Clock()
    expected = _line_by_line(path, clock, 2026)
    assert expected.lines >= 4_000
    for block in (4 << 20, 65_536, 9_973, 700):
        monkeypatch.setattr(launcher_log, "_BLOCK_BYTES", block)
        got = launcher_log.parse_launcher_log(path, launcher_log.LAUNCHER_LOG, clock, 2026)
        assert got == expected, (seed, block)


def test_a_year_change_reaches_the_glog_lines_after_it(tmp_path: Path):
    """The plain lines are skipped by their first four bytes: a line of another year still sets the year."""
    data = (
        b"2026-12-31 23:59:58,000 [INFO] [n] [workload:?(?) infra:?(?)] launcher.py:1 before\n"
        + b"2026-12-31 23:59:59,000 [INFO] [n] [workload:?(?) infra:?(?)] launcher.py:1 chatter\n" * 50
        + b"2027-01-01 00:00:00,500 [INFO] [n] [workload:?(?) infra:?(?)] launcher.py:1 chatter\n"
        + b"E0101 00:00:01.000000 4242 api.py:1] failed (exitcode: -9) local_rank: 0 (pid: 77) of binary: x\n"
    )
    path = tmp_path / "launcher.log"
    path.write_bytes(data)
    log = launcher_log.parse_launcher_log(path, launcher_log.LAUNCHER_LOG, Clock(), 2026)
    (exit_,) = log.exits
    assert exit_.t is not None and exit_.t.year == 2027 and exit_.ref.line == 53
    assert log == _line_by_line(path, Clock(), 2026)
