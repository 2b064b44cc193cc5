"""Iteration-dense blocks read without counting `consumed samples` over the whole block (`_dense_probe`).

Such a block is recognised by its last bytes; every line is tried, and the words and the other keywords
are sought only outside the canonical lines. Lines there that hold the words (a line not proven, one that
holds them twice, chatter quoting them) must be found exactly as the counting path finds them: the same
facts as a plain line-by-line read, whatever the block size, and with the probe actually taken.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ftqual.verification.evidence import train_log
from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.scan import train_blocks
from tests.support.synthetic.runs import Spec, generate
from tests.unit.bench.test_parser_parity import reference

ODD_LINES = (
    # not canonical: fields missing, in another order, a tab (no nan: it never equals itself)
    "7: [2026-11-30 06:00:00.000000] iteration {i:8d}/ 9000 | consumed samples: {c:12d} | lm loss: 2.5 |",
    "7: [2026-11-30 06:00:00.000000] iteration {i:8d}/ 9000 | lm loss: 1.0E+00 | consumed samples: {c:12d} |",
    "7:\t[2026-11-30 06:00:00.000000] iteration {i:8d}/ 9000 | consumed samples: {c:12d} |",
    # the words twice, and with another keyword after the head
    "7: [2026-11-30 06:00:00.000000] iteration {i:8d}/ 9000 | consumed samples: {c:12d} | elapsed time per "
    "iteration (ms): 10.0 | learning rate: 1.0E-04 | global batch size:     8 | lm loss: 1.0E+00 | "
    "consumed samples: 1 |",
    "7: [2026-11-30 06:00:00.000000] iteration {i:8d}/ 9000 | consumed samples: {c:12d} | elapsed time per "
    "iteration (ms): 10.0 | learning rate: 1.0E-04 | global batch size:     8 | lm loss: 1.0E+00 | "
    "saving checkpoint |",
    # chatter holding the words or another keyword
    "3: warning: consumed samples differ from the plan",
    "0: FT: closed.",
    "2: RuntimeError: boom",
)


def dense_log(tmp_path: Path, seed: int, odd: float) -> Path:
    """A generated dense log (8 ranks, one iteration line per step) with odd lines put in at random."""
    generate(Spec(ranks=8, iters=1500, restarts=0, seed=seed, chatter_per_rank=1), tmp_path / "run")
    source = sorted((tmp_path / "run" / "logs").glob("train_cycle*.log"))[-1]
    rng = random.Random(seed)
    out = []
    for text in source.read_text().splitlines():
        out.append(text)
        if rng.random() < odd:
            i = rng.randint(1, 9000)
            out.append(rng.choice(ODD_LINES).format(i=i, c=8 * i))
    path = tmp_path / "train_cycle0.log"
    path.write_text("\n".join(out) + ("\n" if seed % 2 else ""))
    return path


@pytest.mark.parametrize("seed, odd", [(1, 0.0), (2, 0.002), (3, 0.02), (4, 0.2)])
def test_dense_blocks_without_counting(tmp_path, monkeypatch, seed, odd):
    path = dense_log(tmp_path, seed, odd)
    want = reference(path)
    calls = []
    parse = train_blocks.dense_without_count

    def spy(*args):
        calls.append(1)
        return parse(*args)

    monkeypatch.setattr(train_blocks, "dense_without_count", spy)
    monkeypatch.setattr(train_blocks, "_PROBE", 2048)
    for size in (8192, 65536, 4 << 20):
        monkeypatch.setattr(train_blocks, "BLOCK_BYTES", size)
        calls.clear()
        got = train_log.parse_train_log(path, "x.log", 0, Clock())
        # one block of 4 MB holds the whole log, whose last bytes (the end of training) are not dense
        assert calls or size > path.stat().st_size, f"block {size}: the probe was never taken"
        for name in train_log.TrainLog.__dataclass_fields__:
            assert getattr(got, name) == getattr(want, name), f"seed {seed}, block {size}: {name} differs"
