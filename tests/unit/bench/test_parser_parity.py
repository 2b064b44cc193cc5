"""The block-scanning train-log parser gives exactly what a plain line-by-line read gives.

Reference: text mode (universal newlines, UTF-8 with replacement), every line handed to the collector.
The fast path must agree on every fact, line number and text, whatever the block size: on the recorded
runs, generated runs and fuzzed logs (carriage returns, invalid UTF-8, argument dumps cut by block ends,
a last line without newline).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ftqual.verification.evidence import train_log
from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.scan import train_blocks
from tests.support.synthetic.runs import Spec, generate


def reference(path: Path) -> train_log.TrainLog:
    collector = train_log._Collector(0, "x.log", Clock())
    number, last_newline = 0, True
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        for number, raw in enumerate(handle, start=1):
            last_newline = raw.endswith("\n")
            collector.line(number, raw)
    return collector.freeze(number, complete=last_newline)


def check(path: Path, monkeypatch, blocks=(13, 200, 4096, 4 << 20)) -> None:
    want = reference(path)
    for size in blocks:
        monkeypatch.setattr(train_blocks, "BLOCK_BYTES", size)
        got = train_log.parse_train_log(path, "x.log", 0, Clock())
        for name in train_log.TrainLog.__dataclass_fields__:
            assert getattr(got, name) == getattr(want, name), f"{path.name}, block {size}: {name} differs"


def test_recorded_logs(shared_fixtures, monkeypatch):
    logs = sorted(shared_fixtures.glob("*/logs/train_cycle*.log"))
    assert logs
    for path in logs:
        check(path, monkeypatch)


def test_generated_logs(tmp_path, monkeypatch):
    for defect in (None, "resumed_from_zero_on_one_rank"):
        out = tmp_path / str(defect)
        generate(Spec(ranks=16, iters=30, seed=3, chatter_per_rank=6, noise_per_iter=2, defect=defect), out)
        for path in sorted((out / "logs").glob("train_cycle*.log")):
            check(path, monkeypatch, blocks=(512, 4 << 20))


@pytest.mark.parametrize("seed", range(4))
def test_fuzzed_logs(shared_fixtures, tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    pool = (shared_fixtures / "kill-2gpu" / "logs" / "train_cycle1.log").read_bytes().split(b"\n")
    start = next(i for i, line in enumerate(pool) if b"------ arguments ------" in line)
    args = pool[start : start + 40] + [next(line for line in pool if b"end of arguments" in line)]
    path = tmp_path / "fuzz.log"
    for _ in range(40):
        lines = [rng.choice(pool) for _ in range(rng.randint(0, 50))]
        if rng.random() < 0.5:
            at = rng.randint(0, len(lines))
            lines[at:at] = args
        out = []
        for line in lines:
            r = rng.random()
            if r < 0.04:
                line += b"\r"
            elif r < 0.07:
                line = line.replace(b" ", b"\r", 1)
            elif r < 0.10:
                line += b"\xe2\x82"
            elif r < 0.12:
                line = b"\xff" + line
            elif r < 0.14:
                line = b"  3: ValueError: boom"
            elif r < 0.16:
                line = b"0: Traceback (most recent call last):"
            out.append(line)
        data = (
            b"\n".join(out) + (b"\n" if rng.random() < 0.5 else b"") + (b"\r" if rng.random() < 0.1 else b"")
        )
        path.write_bytes(data)
        check(path, monkeypatch, blocks=(7, 64, 4096))
