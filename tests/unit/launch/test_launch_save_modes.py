"""Synchronous saves (NVRX_ASYNC_SAVE=0) and kills timed to a phase of a save (NVRX_FAULT_TIMING=save_*):
the launcher's side, for both workloads."""

from __future__ import annotations

import pytest

from ftqual.launch import command, run, settings
from ftqual.rank.ids import SAVE_PHASES
from ftqual.stack import resolve as stack

ASYNC_FLAGS = {"--async-save", "--use-persistent-ckpt-worker"}


def wrapper(argv: list[str]) -> list[str]:
    return argv[argv.index(str(command.WORKER)) + 1 : argv.index("--")]


def body(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1 :]


@pytest.mark.parametrize("workload", ["smoke", "megatron"])
def test_saves_are_asynchronous_unless_told_otherwise(workload, base_env, megatron_checkout, run_launch):
    env = {**base_env, "NVRX_WORKLOAD": workload, "MEGATRON_PATH": str(megatron_checkout)}
    default = set(body(run_launch(env).argv))
    sync = set(body(run_launch({**env, "NVRX_ASYNC_SAVE": "0"}).argv))
    assert "--async-save" in default and not ASYNC_FLAGS & sync
    assert ("--use-persistent-ckpt-worker" in default) == (workload == "megatron")
    assert "--ckpt-format=torch_dist" in sync


def test_run_json_records_the_save_mode(base_env):
    for value, recorded in (("1", True), ("0", False)):
        s = settings.load_settings({**base_env, "NVRX_ASYNC_SAVE": value}, pid=1)
        choice = stack.resolve("local", "off", stack.Probe(False, False, False))
        assert (
            run.run_record(s, command.build_plan(s, choice, 1, "x"), choice, {}, "h").to_json()["async_save"]
            is recorded
        )


@pytest.mark.parametrize("workload", ["smoke", "megatron"])
def test_verify_integrity_is_megatron_s_flag_when_asked(workload, base_env, megatron_checkout, run_launch):
    env = {**base_env, "NVRX_WORKLOAD": workload, "MEGATRON_PATH": str(megatron_checkout)}
    assert "--verify-integrity" not in body(run_launch(env).argv)
    assert "--verify-integrity" in body(run_launch({**env, "NVRX_VERIFY_INTEGRITY": "1"}).argv)
    refused = run_launch({**env, "NVRX_VERIFY_INTEGRITY": "yes"})
    assert refused.rc == 2 and "NVRX_VERIFY_INTEGRITY" in refused.err


def test_run_json_records_verify_integrity(base_env):
    for value, recorded in (("1", True), ("0", False)):
        s = settings.load_settings({**base_env, "NVRX_VERIFY_INTEGRITY": value}, pid=1)
        choice = stack.resolve("local", "off", stack.Probe(False, False, False))
        plan = command.build_plan(s, choice, 1, "x")
        assert run.run_record(s, plan, choice, {}, "h").to_json()["verify_integrity"] is recorded


@pytest.mark.parametrize("phase", SAVE_PHASES)
def test_a_save_phase_reaches_the_wrapper_and_needs_a_kill(phase, base_env, run_launch):
    env = {**base_env, "NVRX_FAULT_TIMING": phase, "TRAIN_ITERS": "30"}
    args = wrapper(run_launch(env).argv)
    assert args[args.index("--fault-timing") + 1] == phase
    refused = run_launch({**env, "NVRX_DEMO_FAULT": "hang"})
    assert refused.rc == 2
    assert f"NVRX_FAULT_TIMING={phase} needs NVRX_DEMO_FAULT=kill (got 'hang')" in refused.err
