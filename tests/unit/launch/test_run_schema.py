"""run.json's schema (ftqual.launch.run_schema): every recorded run's run.json passes it, and each broken
field
is one sentence naming that field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.launch import run_schema

DATA = Path(__file__).resolve().parents[2] / "data"
RECORDED = sorted(p for p in DATA.glob("*/**/run.json") if (p.parent / "logs").is_dir())
GOOD = {"schema": "ftqual.run/v1", "run_id": "r", "fault": "kill", "fault_rank": 1, "train_iters": 30,
        "save_interval": 5, "world_size": 2, "max_restarts": 3}  # fmt: skip


def test_every_recorded_run_json_passes():
    assert len(RECORDED) > 20
    for path in RECORDED:
        assert run_schema.problem(json.loads(path.read_text())) is None, path


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        ({"schema": "ftqual.run/v9"}, "'schema'"),
        ({"save_interval": -5}, "'save_interval'"),
        ({"train_iters": "3.5"}, "'train_iters'"),
        ({"max_restarts": True}, "'max_restarts'"),
        ({"fault": "meteor"}, "'fault'"),
        ({"fault_rank": "one"}, "'fault_rank'"),
        ({"tz_offset_s": 10**9}, "'tz_offset_s'"),
        ({"injections": 0}, "'injections'"),
        ({"fault_timing": "later"}, "'fault_timing'"),
        ({"checkpoint_load": "yes"}, "'checkpoint_load'"),
        ({"verify_integrity": 1}, "'verify_integrity'"),
        ({"storage": "ext4"}, "'storage'"),
        ({"storage": {"cap_bytes": "big"}}, "'storage'"),
        ({"initial_checkpoint_iteration": -1}, "'initial_checkpoint_iteration'"),
    ],
)
def test_a_broken_field_is_named(edit, field):
    said = run_schema.problem({**GOOD, **edit})
    assert said is not None and said.startswith(field) and "\n" not in said, said


def test_absent_extensions_take_their_defaults():
    assert run_schema.problem(GOOD) is None
    assert run_schema.extensions(GOOD) == (1, "checkpoint", True, 0)
    assert run_schema.extensions({**GOOD, "injections": "2", "checkpoint_load": None}) == (
        2,
        "checkpoint",
        True,
        0,
    )
