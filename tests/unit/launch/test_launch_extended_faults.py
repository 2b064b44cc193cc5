"""Several injections, in-save kills, no-resume runs, resuming an existing checkpoint: the launcher's side
(NVRX_INJECTIONS, NVRX_FAULT_TIMING, NVRX_LOAD_CHECKPOINTS, run.json's new keys)."""

from __future__ import annotations

import pytest

from ftqual.launch import command, run, settings
from ftqual.stack import resolve as stack
from tests.support.launch import checkpoint_dir, tree

TWO_NODES = {"NNODES": "2", "GPUS_PER_NODE": "2", "RDZV_ENDPOINT": "n1:29400", "NVRX_RUN_ID": "r1"}


def assert_refused(result, fragment: str) -> None:
    assert result.rc == 2, (result.out, result.err)
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.err


def wrapper(argv: list[str]) -> list[str]:
    return argv[argv.index(str(command.WORKER)) + 1 : argv.index("--")]


def body(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1 :]


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_new_variables_are_read_and_stripped_by_the_workflow():
    for name in ("NVRX_INJECTIONS", "NVRX_FAULT_TIMING", "NVRX_LOAD_CHECKPOINTS"):
        assert name in settings.VARIABLES


def test_defaults_are_one_fault_after_a_checkpoint_with_load(base_env, work, run_launch):
    s = settings.load_settings(base_env, pid=1)
    assert (s.injections, s.fault_timing, s.checkpoint_load) == (1, "checkpoint", True)
    result = run_launch(base_env)
    assert result.rc == 0, result.err
    args = wrapper(result.argv)
    assert option(args, "--injections") == "1" and option(args, "--fault-timing") == "checkpoint"
    assert option(args, "--leftovers-dir") == str(work / "runs" / "r1" / "leftovers")
    assert (work / "runs" / "r1" / "leftovers").is_dir()


def test_settings_reach_the_wrapper(base_env, run_launch):
    env = {**base_env, "NVRX_INJECTIONS": "3", "NVRX_FAULT_TIMING": "in_save", "TRAIN_ITERS": "30"}
    args = wrapper(run_launch(env).argv)
    assert option(args, "--injections") == "3" and option(args, "--fault-timing") == "in_save"


@pytest.mark.parametrize("workload", ["smoke", "megatron"])
def test_no_resume_drops_load_but_keeps_save(workload, base_env, megatron_checkout, work, run_launch):
    env = {**base_env, "NVRX_WORKLOAD": workload, "MEGATRON_PATH": str(megatron_checkout)}
    ckpt = work / "runs" / "r1" / "checkpoints"
    loaded = body(run_launch(env).argv)
    assert f"--load={ckpt}" in loaded and f"--save={ckpt}" in loaded
    unloaded = body(run_launch({**env, "NVRX_LOAD_CHECKPOINTS": "0"}).argv)
    assert not [a for a in unloaded if a.startswith("--load")] and f"--save={ckpt}" in unloaded
    assert [a for a in loaded if not a.startswith("--load")] == unloaded


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"NVRX_INJECTIONS": "0"}, "NVRX_INJECTIONS must be a positive integer (got '0')"),
        ({"NVRX_INJECTIONS": "two"}, "NVRX_INJECTIONS must be a positive integer (got 'two')"),
        ({"NVRX_INJECTIONS": "1001"}, "NVRX_INJECTIONS must be at most 1000 (got 1001)"),
        (
            {"NVRX_INJECTIONS": "2", "NVRX_DEMO_FAULT": "none"},
            "NVRX_INJECTIONS must be 1 with NVRX_DEMO_FAULT=none (got 2)",
        ),
        (
            {"NVRX_INJECTIONS": "5", "TRAIN_ITERS": "25"},
            "NVRX_INJECTIONS*SAVE_INTERVAL=25 must be below TRAIN_ITERS=25",
        ),
        (
            {"NVRX_FAULT_TIMING": "later"},
            "NVRX_FAULT_TIMING must be checkpoint, in_save, save_staged, save_shards_partial, "
            "save_shards_complete or save_finalized (got 'later')",
        ),
        (
            {"NVRX_FAULT_TIMING": "in_save", "NVRX_DEMO_FAULT": "hang"},
            "NVRX_FAULT_TIMING=in_save needs NVRX_DEMO_FAULT=kill (got 'hang')",
        ),
        (
            {"NVRX_FAULT_TIMING": "in_save", "NVRX_DEMO_FAULT": "none"},
            "NVRX_FAULT_TIMING=in_save needs NVRX_DEMO_FAULT=kill (got 'none')",
        ),
        ({"NVRX_LOAD_CHECKPOINTS": "yes"}, "NVRX_LOAD_CHECKPOINTS must be 0 or 1 (got 'yes')"),
        ({"NVRX_LOAD_CHECKPOINTS": "2"}, "NVRX_LOAD_CHECKPOINTS must be 0 or 1 (got '2')"),
        ({"NVRX_DEMO_FAULT": "node_loss"}, "NVRX_DEMO_FAULT=node_loss needs NNODES >= 2"),
        (
            {"NVRX_DEMO_FAULT": "node_loss", **TWO_NODES, "NVRX_FAULT_RANK": "1"},
            "NVRX_FAULT_RANK=1 is on the first node, which hosts the rendezvous store",
        ),
        (
            {"NVRX_DEMO_FAULT": "node_loss", **TWO_NODES, "NVRX_FAULT_RANK": "2", "NVRX_INJECTIONS": "2"},
            "NVRX_DEMO_FAULT=node_loss takes one injection",
        ),
        ({"NVRX_RDZV_JOIN_TIMEOUT": "0"}, "NVRX_RDZV_JOIN_TIMEOUT must be a positive integer (got '0')"),
        ({"NVRX_RDZV_JOIN_TIMEOUT": "1m"}, "NVRX_RDZV_JOIN_TIMEOUT must be a positive integer (got '1m')"),
        ({**TWO_NODES, "NVRX_NODE_RANK": "2"}, "NVRX_NODE_RANK=2 must be below NNODES=2"),
        (
            {**TWO_NODES, "NVRX_SPARE_NODES": "1", "NVRX_NODE_RANK": "3"},
            "NVRX_NODE_RANK=3 must be below NNODES+NVRX_SPARE_NODES=3",
        ),
        ({"NVRX_SPARE_NODES": "x"}, "NVRX_SPARE_NODES must be a non-negative integer (got 'x')"),
    ],
)
def test_bad_values_are_refused_in_one_line(changes, message, base_env, work, run_launch):
    before = tree(work)
    assert_refused(run_launch({**base_env, **changes}), message)
    assert tree(work) == before


def test_node_loss_and_join_timeout_reach_ft_launcher_and_run_json(base_env, run_launch):
    env = {**base_env, **TWO_NODES, "NVRX_DEMO_FAULT": "node_loss", "NVRX_FAULT_RANK": "3"}
    env["NVRX_RDZV_JOIN_TIMEOUT"] = "45"
    s = settings.load_settings(env, pid=1)
    assert (s.fault, s.fault_rank, s.join_timeout) == ("node_loss", 3, 45)
    result = run_launch(env)
    assert result.rc == 0, result.err
    assert "--rdzv-conf=join_timeout=45" in result.argv
    assert option(wrapper(result.argv), "--fault") == "node_loss"
    assert record_for(env)["join_timeout"] == 45 and record_for(base_env)["join_timeout"] is None
    plain = run_launch(base_env)
    assert not [a for a in plain.argv if a.startswith("--rdzv-conf")]


def test_spare_nodes_widen_nnodes_and_admit_one_more_launcher(base_env, run_launch):
    env = {**base_env, **TWO_NODES, "NVRX_DEMO_FAULT": "node_loss", "NVRX_FAULT_RANK": "2"}
    env |= {"NVRX_SPARE_NODES": "1", "NVRX_NODE_RANK": "2"}  # the spare's own launcher
    s = settings.load_settings(env, pid=1)
    assert (s.nnodes, s.spare_nodes, s.launchers, s.world_size, s.nnodes_arg) == (2, 1, 3, 4, "2:3")
    result = run_launch(env)
    assert result.rc == 0, result.err
    assert "--nnodes=2:3" in result.argv and "--nproc-per-node=2" in result.argv
    assert record_for(env)["spare_nodes"] == 1 and record_for(base_env)["spare_nodes"] == 0
    assert "--nnodes=1" in run_launch(base_env).argv


def test_several_injections_fit_when_each_has_a_checkpoint(base_env, run_launch):
    assert run_launch({**base_env, "NVRX_INJECTIONS": "4", "TRAIN_ITERS": "21"}).rc == 0


def test_existing_run_checkpoints_are_accepted_for_resuming(base_env, tmp_path, run_launch):
    ckpt = checkpoint_dir(tmp_path, "20\n", [5, 10, 15, 20])
    env = {**base_env, "NVRX_CHECKPOINT_DIR": ckpt, "TRAIN_ITERS": "40"}
    result = run_launch(env)
    assert result.rc == 0, result.err
    assert f"--load={ckpt}" in body(result.argv)


def test_corrupt_tracker_of_an_existing_run_is_refused(base_env, tmp_path, run_launch):
    ckpt = checkpoint_dir(tmp_path, "2O", [20])
    assert_refused(
        run_launch({**base_env, "NVRX_CHECKPOINT_DIR": ckpt, "TRAIN_ITERS": "40"}),
        "does not hold an integer iteration (got '2O')",
    )


@pytest.mark.parametrize(
    ("tracker", "injections", "accepted"),
    [("30", "1", True), ("34", "1", True), ("35", "1", False), ("25", "2", True), ("30", "2", False)],
)
def test_resumed_run_needs_a_save_point_per_injection(
    tracker, injections, accepted, base_env, tmp_path, run_launch
):
    # TRAIN_ITERS 40, a save every 5: the save of 40 comes after the last step, so it cannot trigger one
    ckpt = checkpoint_dir(tmp_path, tracker, [int(tracker)])
    env = {**base_env, "NVRX_CHECKPOINT_DIR": ckpt, "TRAIN_ITERS": "40", "NVRX_INJECTIONS": injections}
    result = run_launch(env)
    if accepted:
        assert result.rc == 0, result.err
    else:
        assert_refused(result, f"too few for NVRX_INJECTIONS={injections}")


def record_for(env: dict[str, str]) -> dict:
    s = settings.load_settings(env, pid=1)
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    return run.run_record(s, command.build_plan(s, choice, 1, "x"), choice, {}, "h").to_json()


def test_run_record_defaults(base_env):
    record = record_for(base_env)
    assert {k: record[k] for k in ("injections", "fault_timing", "checkpoint_load")} == {
        "injections": 1,
        "fault_timing": "checkpoint",
        "checkpoint_load": True,
    }
    assert record["initial_checkpoint_iteration"] == 0


def test_run_record_new_keys(base_env, tmp_path):
    ckpt = checkpoint_dir(tmp_path, "15", [15])
    env = {
        **base_env,
        "NVRX_CHECKPOINT_DIR": ckpt,
        "TRAIN_ITERS": "40",
        "NVRX_INJECTIONS": "2",
        "NVRX_FAULT_TIMING": "in_save",
        "NVRX_LOAD_CHECKPOINTS": "0",
    }
    record = record_for(env)
    assert (record["injections"], record["fault_timing"], record["checkpoint_load"]) == (2, "in_save", False)
    assert record["initial_checkpoint_iteration"] == 15


def test_initial_iteration_of_a_tracker_gone_bad_is_zero(base_env, tmp_path):
    ckpt = checkpoint_dir(tmp_path, "", [])
    s = settings.load_settings({**base_env, "NVRX_CHECKPOINT_DIR": ckpt}, pid=1)
    assert run.initial_checkpoint_iteration(s) == 0


def test_a_megatron_run_resuming_a_longer_schedule_overrides_the_checkpoints_scheduler(
    base_env, megatron_checkout, tmp_path, run_launch
):
    """Megatron asserts when the checkpoint's schedule length differs from the run's (seen on 2 x H200:
    'OptimizerParamScheduler: class input value 80 and checkpoint value 60'); a fresh run keeps its own."""
    env = {**base_env, "NVRX_WORKLOAD": "megatron", "MEGATRON_PATH": str(megatron_checkout)}
    fresh = run_launch(env)
    assert fresh.rc == 0 and command.OVERRIDE_SCHEDULER not in body(fresh.argv)
    ckpt = checkpoint_dir(tmp_path, "20\n", [20])
    resumed = run_launch({**env, "NVRX_CHECKPOINT_DIR": ckpt, "TRAIN_ITERS": "40"})
    assert resumed.rc == 0, resumed.err
    assert body(resumed.argv).count(command.OVERRIDE_SCHEDULER) == 1
    assert (
        "adapted: --override-opt_param-scheduler added: the checkpoint directory already holds iteration 20"
        in (resumed.err)
    )
    smoke = run_launch({**base_env, "NVRX_CHECKPOINT_DIR": ckpt, "TRAIN_ITERS": "40"})
    assert command.OVERRIDE_SCHEDULER not in body(smoke.argv)
