"""The numpy reading of Megatron's iteration lines (`ftqual.verification.evidence.canonical`) gives exactly
the records of
the line-by-line parser, and hands every line it cannot prove to it.

Differential: logs of generated line variants (canonical lines with numbers of every width, signs,
exponents and timestamps at the edges of what `strptime` accepts, and lines that deviate from the layout
in one place: another field order, a missing field, `nan`/`inf`, tabs, non-ASCII digits, garbage bytes,
keywords in the rest of the line, a last line without newline, ...) are parsed by `parse_train_log` (block
path, numpy) and by the collector line by line; every record (bit for bit, floats included), every fact,
every line number must agree.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from ftqual.verification.evidence import train_log
from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.iterations import DTYPE
from ftqual.verification.evidence.safeio import MAX_LINE_BYTES
from ftqual.verification.evidence.scan import canonical, train_blocks

FIELDS = ("iteration", "train_iters", "consumed", "gbs", "loss", "elapsed", "t", "line", "flags")


def reference(path: Path, clock: Clock) -> train_log.TrainLog:
    collector = train_log._Collector(0, "x.log", clock)
    number, last_newline = 0, True
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for number, raw in enumerate(handle, start=1):
            last_newline = raw.endswith("\n")
            collector.line(number, raw)
    return collector.freeze(number, complete=last_newline)


def records(log: train_log.TrainLog) -> np.ndarray:
    parts = [data for _, data in log.iterations.chunks()]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=DTYPE)


def same_records(got: np.ndarray, want: np.ndarray) -> None:
    assert len(got) == len(want)
    for name in FIELDS:
        a, b = got[name], want[name]
        if a.dtype.kind == "f":  # bit for bit: -0.0, nan and the last ulp count
            a, b = a.view(np.int64), b.view(np.int64)
        bad = np.flatnonzero(a != b)
        assert not len(bad), f"{name} differs at row {bad[0]}: {got[bad[0]]} != {want[bad[0]]}"


def check(path: Path, clock: Clock) -> None:
    want = reference(path, clock)
    got = train_log.parse_train_log(path, "x.log", 0, clock)
    same_records(records(got), records(want))
    # the lines cited (read back from the log, or kept): a nan loss makes the tables' own == unequal
    assert [item.ref for item in got.iterations] == [item.ref for item in want.iterations]
    for name in train_log.TrainLog.__dataclass_fields__:
        if name != "iterations":
            assert getattr(got, name) == getattr(want, name), f"{name} differs"


def _num(rng: random.Random, digits: int) -> str:
    return str(rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1))


def _stamp(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.85:
        day = f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        time = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        return f"{day} {time}.{rng.randint(0, 999999):06d}"
    return rng.choice(
        [
            "2024-02-29 23:59:59.999999",  # a leap day
            "2026-02-29 10:00:00.000000",  # no such day: strptime refuses
            "2026-13-01 10:00:00.000000",
            "2026-00-10 10:00:00.000000",
            "2026-04-31 10:00:00.000000",
            "2026-01-01 24:00:00.000000",
            "2026-01-01 10:60:00.000000",
            "2026-01-01 10:00:60.000000",
            "2026-01-01 10:00:61.000000",
            "0001-01-01 00:00:00.000000",  # shifted before year 1: no time
            "9999-12-31 23:59:59.999999",
            "2026-01-01 10:00:00.12345",  # five fraction digits
            "2026-01-01 10:00:00.1234567",
            "2026-01-01 10:00:00",
            "1900-02-29 10:00:00.000000",
            "2000-02-29 10:00:00.000000",
        ]
    )


def _float(rng: random.Random, exponent: bool) -> str:
    r = rng.random()
    if r < 0.05:
        return rng.choice(["nan", "inf", "-inf", "NaN", "1.2.3", ".5", "5.", "1e5", "+3.0E+00"])
    if not exponent:
        return f"{rng.uniform(0, 10 ** rng.randint(0, 7)):.{rng.randint(1, 3)}f}"
    value = rng.choice(
        [0.0, -0.0, rng.uniform(-12, 12), rng.uniform(-1e-30, 1e30), 10 ** rng.uniform(-25, 25)]
    )
    text = f"{value:.{rng.choice([6, 6, 6, 1, 12, 16, 18])}E}"
    if rng.random() < 0.1:
        text = text.lower()
    if rng.random() < 0.05:
        text = text.replace("E+0", "E+").replace("E-0", "E-")
    if rng.random() < 0.05:
        text = text.replace("E+", "E+0").replace("E-", "E-0")
    return text


def line(rng: random.Random, rank: int) -> str:
    """One iteration line: Megatron's layout, or (a third of the time) one change to it."""
    width = rng.choice([8, 8, 8, 3, 12, 20])
    it = _num(rng, rng.choice([1, 4, 6, 8, 15, 16, 19]))
    total = _num(rng, rng.choice([4, 8, 15, 17]))
    consumed = _num(rng, rng.choice([5, 12, 15, 16, 19, 20]))
    gbs = _num(rng, rng.choice([1, 3, 5]))
    prefix = rng.choice([f"{rank}: ", f"{rank:>4}: ", f"{rank}:", "", "   ", f"{rank:04d}: "])
    fields = [
        f" [{_stamp(rng)}] iteration {it:>{width}}/{total:>{width}} |",
        f" consumed samples: {consumed:>12} |",
        f" elapsed time per iteration (ms): {_float(rng, False)} |",
        f" learning rate: {rng.choice(['1.000000E-04', '3.0E-4', '-1.5E+00', '0.000000E+00'])} |",
        f" global batch size: {gbs:>5} |",
        f" lm loss: {_float(rng, True)} |",
    ]
    tail = [" loss scale: 1.0 |", f" grad norm: {rng.uniform(0, 20):.3f} |"]
    tail += [" number of skipped iterations:   0 |", " number of nan iterations:   0 |"]
    r = rng.random()
    if r < 0.04:
        fields[1], fields[2] = fields[2], fields[1]  # another field order
    elif r < 0.08:
        del fields[rng.randint(1, 5)]  # a missing field
    elif r < 0.11:
        fields.insert(5, " mtp_1 loss: 1.000000E+00 |")  # another loss before lm loss
    elif r < 0.14:
        tail = [" number of skipped iterations:   1 |", " number of nan iterations:   0 |"]
        fields = fields[:5]  # a skipped iteration: no loss
    elif r < 0.17:
        k = rng.randint(0, 5)
        fields[k] = fields[k].replace(" ", "\t", 1)
    elif r < 0.19:
        fields[0] = fields[0].replace("1", "\u0661", 1)  # an Arabic-Indic digit
    elif r < 0.21:
        tail.append(rng.choice([" Error |", " checkpoint |", " consumed samples: 3 |", " FT: x |"]))
    elif r < 0.23:
        tail.append(" x" * rng.choice([40, 200]))  # a long line, beyond the bytes read at once
    elif r < 0.25:
        fields[rng.randint(0, 5)] += "\xff"
    elif r < 0.27:
        fields[3] = " learning rate: 1.0E-04 lm loss: 9.0E+00 |"  # words of a later field, earlier
    elif r < 0.29:
        fields[0] = fields[0].replace("iteration ", "iteration", 1)
    elif r < 0.31:
        fields[4] = " global batch size:  " + "9" * 17 + " |"
    return prefix + "".join(fields) + "".join(tail)


CHATTER = (
    "0: NCCL INFO Channel 00/02 : 0 1",
    "3: /opt/mlm/megatron/core/models/gpt/gpt_layer_specs.py:74: UserWarning: Apex is not installed.",
    "1:   warnings.warn(",
    "0: [after training is done] datetime: 2026-11-30 07:00:00",
    "2: saving checkpoint at iteration     100 to /ckpt",
)


def write_log(path: Path, rng: random.Random, lines: int, chatter: float) -> None:
    out = []
    for _ in range(lines):
        if rng.random() < chatter:
            out.append(rng.choice(CHATTER))
        else:
            out.append(line(rng, rng.randint(0, 15)))
    text = "\n".join(out) + ("\n" if rng.random() < 0.7 else "")
    path.write_bytes(text.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff"))


@pytest.mark.parametrize("seed", range(12))
def test_logs_of_variants(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    path = tmp_path / "train_cycle0.log"
    write_log(path, rng, rng.randint(300, 900), rng.choice([0.0, 0.02, 0.3, 0.8]))
    clock = rng.choice([Clock(), Clock(3600.0, False), Clock(-19800.5, False), Clock(1e12, False)])
    for size in (1 << 12, 1 << 15, 4 << 20):
        monkeypatch.setattr(train_blocks, "BLOCK_BYTES", size)
        check(path, clock)


def test_the_fast_path_reads_canonical_lines(tmp_path):
    """A log of Megatron's lines is read in bulk (the test above would pass with no fast path at all)."""
    rng = random.Random(7)
    lines = []
    for i in range(2000):
        stamp = f"2026-11-30 06:{i // 60 % 60:02d}:{i % 60:02d}.{rng.randint(0, 999999):06d}"
        lines.append(
            f"{i % 8}:  [{stamp}] iteration {i + 1:8d}/{9000:8d} | consumed samples: {8 * (i + 1):12d} | "
            f"elapsed time per iteration (ms): {rng.uniform(100, 3000):.1f} | learning rate: 1.000000E-04 | "
            f"global batch size: {8:5d} | lm loss: {rng.uniform(-1, 12):.6E} | loss scale: 1.0 | "
            f"grad norm: {rng.uniform(0, 9):.3f} | number of skipped iterations:   0 | "
            "number of nan iterations:   0 |"
        )
    data = ("\n".join(lines) + "\n").encode()
    a = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(a == 10)
    lo = np.concatenate(([0], newlines[:-1] + 1))
    parsed = canonical.parse(a, lo, newlines, 0, MAX_LINE_BYTES, train_blocks.NEEDLES)
    assert parsed.ok.all()
    assert (parsed.clean_end == newlines + 1).all()
    path = tmp_path / "train_cycle0.log"
    path.write_bytes(data)
    check(path, Clock(7200.0, False))


def test_each_variant_alone(tmp_path):
    """Line by line: where canonical.parse says ok, its numbers are the collector's; and it says ok for
    most of the canonical variants."""
    rng = random.Random(3)
    accepted = 0
    for k in range(3000):
        text = line(rng, k % 16)
        data = text.encode("utf-8", "surrogateescape")
        a = np.frombuffer(data + b"\n", dtype=np.uint8)
        shift = rng.choice([0, 3_600_000_000, -19_800_500_000])
        parsed = canonical.parse(
            a, np.array([0]), np.array([len(data)]), shift, MAX_LINE_BYTES, train_blocks.NEEDLES
        )
        clock = Clock(shift / 1e6, False)
        assert canonical.shift_micros(clock.tz_offset_s) == shift
        collector = train_log._Collector(0, "x.log", clock)
        collector.line(1, data.decode("utf-8", "replace") + "\n")
        table = collector.freeze(1, True).iterations
        if not parsed.ok[0]:
            continue
        accepted += 1
        assert len(table) == 1, text
        rec = records_of(table)[0]
        assert int(rec["flags"]) == 15, text
        for name in ("iteration", "train_iters", "consumed", "gbs", "t"):
            assert int(getattr(parsed, name)[0]) == int(rec[name]), (name, text)
        for name in ("loss", "elapsed"):
            got, want = np.array([getattr(parsed, name)[0]]), np.array([rec[name]])
            assert got.view(np.int64)[0] == want.view(np.int64)[0], (name, text)
    assert accepted > 200


def records_of(table) -> np.ndarray:
    return np.concatenate([data for _, data in table.chunks()])
