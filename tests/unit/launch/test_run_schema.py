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
    record = run_schema.RunRecord.from_json(GOOD)
    said = (
        record.injections,
        record.fault_timing,
        record.checkpoint_load,
        record.initial_checkpoint_iteration,
    )
    assert said == (1, "checkpoint", True, 0)
    record = run_schema.RunRecord.from_json({**GOOD, "injections": "2", "checkpoint_load": None})
    assert (record.injections, record.checkpoint_load) == (2, True)


def test_every_broken_field_is_said_at_once_and_the_reader_refuses_with_the_first():
    broken = {**GOOD, "save_interval": -5, "fault": "meteor", "injections": 0}
    said = run_schema.problems(broken)
    assert [line.split(" ")[0] for line in said] == ["'fault'", "'save_interval'", "'injections'"]
    with pytest.raises(run_schema.RunRecordError, match="^'fault'"):
        run_schema.RunRecord.from_json(broken)


def test_a_written_record_reads_back_as_itself():
    """The launcher's record through the file and the reader: every key the same value (run_id and
    scenario as written, times to the microsecond)."""
    given = {**GOOD, "started_at": "2026-11-29T14:18:36.123456Z", "timeouts": {"setup": 900}, "injections": 2}
    written = run_schema.RunRecord.from_json(given)
    again = run_schema.RunRecord.from_json(json.loads(json.dumps(written.to_json())))
    assert again == written
    assert written.to_json()["started_at"] == "2026-11-29T14:18:36.123456Z"


def test_a_key_of_only_some_runs_is_left_out_while_unset():
    assert "storage" not in run_schema.RunRecord().to_json()
    assert run_schema.RunRecord(storage={"cap_bytes": 1}).to_json()["storage"] == {"cap_bytes": 1}
