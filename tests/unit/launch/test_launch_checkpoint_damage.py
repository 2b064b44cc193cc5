"""checkpoint_damage on the launcher's side: NVRX_CHECKPOINT_DAMAGE reaches the wrapper and run.json, and a
damage the kill cannot leave is refused in one line with nothing launched."""

from __future__ import annotations

import pytest

from ftqual.launch import command, run, run_schema, settings
from ftqual.rank.ids import CHECKPOINT_DAMAGES
from ftqual.stack import resolve as stack


def wrapper(argv: list[str]) -> list[str]:
    return argv[argv.index(str(command.WORKER)) + 1 : argv.index("--")]


def test_the_variable_is_read_and_stripped_by_the_workflow():
    assert "NVRX_CHECKPOINT_DAMAGE" in settings.VARIABLES


def test_no_damage_by_default_and_no_flag_for_the_wrapper(base_env, run_launch):
    assert settings.load_settings(base_env, pid=1).checkpoint_damage == "none"
    result = run_launch(base_env)
    assert result.rc == 0, result.err
    assert "--checkpoint-damage" not in wrapper(result.argv)


@pytest.mark.parametrize("damage", CHECKPOINT_DAMAGES)
def test_each_damage_reaches_the_wrapper_and_run_json(damage, base_env, run_launch):
    env = {**base_env, "NVRX_CHECKPOINT_DAMAGE": damage}
    result = run_launch(env)
    assert result.rc == 0, result.err
    args = wrapper(result.argv)
    assert args[args.index("--checkpoint-damage") + 1] == damage
    s = settings.load_settings(env, pid=1)
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    record = run.run_record(s, command.build_plan(s, choice, 1, "x"), choice, {}, "h").to_json()
    assert record["checkpoint_damage"] == damage
    assert run_schema.problem({**record, "checkpoint_damage": "half"}) is not None


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"NVRX_CHECKPOINT_DAMAGE": "tracker_gone"}, "NVRX_CHECKPOINT_DAMAGE must be "),
        (
            {"NVRX_CHECKPOINT_DAMAGE": "tracker_removed", "NVRX_DEMO_FAULT": "hang"},
            "NVRX_CHECKPOINT_DAMAGE=tracker_removed needs NVRX_DEMO_FAULT=kill (got 'hang')",
        ),
        (
            {"NVRX_CHECKPOINT_DAMAGE": "shard_truncated", "NVRX_FAULT_TIMING": "in_save"},
            "needs NVRX_FAULT_TIMING=checkpoint and NVRX_INJECTIONS=1",
        ),
        (
            {"NVRX_CHECKPOINT_DAMAGE": "shard_truncated", "NVRX_INJECTIONS": "2"},
            "needs NVRX_FAULT_TIMING=checkpoint and NVRX_INJECTIONS=1",
        ),
    ],
)
def test_a_damage_the_kill_cannot_leave_is_refused(env, words, base_env, work, run_launch):
    result = run_launch({**base_env, **env})
    assert result.rc == 2, (result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], result.err
    assert not (work / "runs" / "r1").exists()
