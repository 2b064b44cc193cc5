"""The fast paths of verify's fixed cost give what the slow ones gave: the report's text is
json.dumps(indent=2)'s byte for byte, and Clock.parse_local reads what strptime read."""

from __future__ import annotations

import enum
import json
import random
from datetime import datetime

import pytest

from ftqual.verification.evidence.clock import _NAIVE_FORMATS, Clock
from ftqual.verification.verify import (
    DEFAULT_BASELINE_TOLERANCE,
    DEFAULT_REPLAY_TOLERANCE,
    build_report,
    report_text,
)
from tests.unit.verification.parity_cases import cases


class _Code(enum.IntEnum):
    ONE = 1


_TRICKY = [
    {
        "a": [
            1,
            2.5,
            float("nan"),
            float("inf"),
            -float("inf"),
            None,
            True,
            False,
            'é\n"\u2028',
            [],
            {},
            (1,),
        ],
        "b": {"c": -0.0, "d": 1e300, "e": 10**30, "f": [[{}]], "g": ""},
    },
    [],
    {},
    "x",
    1,
    1.0,
    None,
    {1: 2},
    {"k": {True: 1}},
    [{"a": [{"b": []}]}],
    [{"a%s": 1, "b%%": "%s%d", "c": None}, {"a%s": 2.5, "b%%": None, "c": True}],
    [{"a": 1}, {"a": [1]}],
    [{"a": 1}, {"b": 1}],
    [{}, {}],
    [{"a": 1}, {"a": 2}, 3],
    [{"a": 1, "b": 2}, {"b": 2, "a": 1}],
    [{1: 2}, {1: 3}],
    ({"x": (1, 2)}, {"x": (3,)}),
    [{"é": "ü", "n": float("nan")}, {"é": "\u2028", "n": 1.5}],
    {"e": _Code.ONE, "f": [_Code.ONE]},
    [{"e": _Code.ONE}, {"e": 1}],
]


@pytest.mark.parametrize("value", _TRICKY, ids=range(len(_TRICKY)))
def test_report_text_is_json_dumps(value):
    assert report_text(value) == json.dumps(value, indent=2) + "\n"


def test_report_text_of_every_recorded_run():
    for name, run, baseline in cases():
        report = build_report(
            str(run),
            str(baseline) if baseline else None,
            DEFAULT_REPLAY_TOLERANCE,
            DEFAULT_BASELINE_TOLERANCE,
        )
        assert report_text(report) == json.dumps(report, indent=2) + "\n", name


def _strptime(clock: Clock, text: str) -> datetime | None:
    text = text.strip()
    for fmt in _NAIVE_FORMATS:
        try:
            return clock.local(datetime.strptime(text, fmt))
        except (ValueError, OverflowError):
            continue
    return None


def test_parse_local_reads_what_strptime_reads():
    samples = [
        "2026-11-29 14:19:08.761161",
        "2026-11-29 14:19:09,847",
        "2026-11-29 14:19:09",
        " 2026-11-29 14:19:09,8 \n",
        "0001-01-01 00:00:00,000",
        "9999-12-31 23:59:59.999999",
        "0000-01-01 00:00:00",
        "2026-02-29 00:00:00",
        "2024-02-29 00:00:00",
        "2026-13-01 00:00:00",
        "2026-01-00 00:00:00",
        "2026-01-01 24:00:00",
        "2026-01-01 23:59:60",
        "2026-01-01 23:59:61",
        "2026-01-01 23:59:59.1234567",
        "2026-01-01 23:59:59.",
        "2026-01-01  23:59:59",
        "2026-1-1 1:2:3",
        "\uff12026-01-01 00:00:00",
        "2026-01-01T00:00:00",
        "",
    ]
    rnd = random.Random(16)
    for _ in range(2000):
        sep = rnd.choice([".", ",", ""])
        frac = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 7))) if sep else ""
        year = rnd.choice(["0001", "9999", "2026", "0000", f"{rnd.randint(0, 9999):04d}"])
        fields = [
            rnd.randint(0, 13),
            rnd.randint(0, 32),
            rnd.randint(0, 25),
            rnd.randint(0, 60),
            rnd.randint(0, 62),
        ]
        month, day, hour, minute, second = (f"{field:02d}" for field in fields)
        samples.append(f"{year}-{month}-{day} {hour}:{minute}:{second}{sep}{frac}")
    for clock in (Clock(), Clock(3600.0, False), Clock(-7200.0, False), Clock(48 * 3600.0, False)):
        for text in samples:
            assert clock.parse_local(text) == _strptime(clock, text), (clock, text)
