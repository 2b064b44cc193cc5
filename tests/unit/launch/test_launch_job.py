"""The launcher's job settings: NVRX_MODEL, NVRX_MEGATRON_ARGS (the team's whole: the flags ftqual controls
replaced, the flags that define the job taken, a contradiction refused with exit 2 and nothing created) and
NVRX_CHECKPOINT_ROOT (each run's own directory below it), seen in the dry run's command."""

from __future__ import annotations

import shlex

import pytest

from ftqual.launch import command


@pytest.fixture
def megatron_env(base_env, megatron_checkout):
    return {**base_env, "NVRX_WORKLOAD": "megatron", "MEGATRON_PATH": str(megatron_checkout)}


def workload_args(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1 :]


def test_a_preset_is_in_the_command(megatron_env, run_launch):
    result = run_launch({**megatron_env, "NVRX_MODEL": "1.3b"})
    assert result.rc == 0, result.err
    args = workload_args(result.argv)
    assert "--num-layers=24" in args and "--hidden-size=2048" in args and "--mock-data" in args
    assert "--num-layers=4" not in args


def test_the_teams_arguments_are_in_the_command(megatron_env, run_launch):
    team = ["--num-layers=8", "--data-path", "/d/x_text_document", "--seed=9"]
    result = run_launch({**megatron_env, "NVRX_MEGATRON_ARGS": shlex.join(team)})
    assert result.rc == 0, result.err
    args = workload_args(result.argv)
    assert "--num-layers=8" in args and "--seed=9" in args
    assert args[args.index("--data-path") + 1] == "/d/x_text_document"
    assert "--mock-data" not in args
    assert args.count("--save-interval=5") == 1  # ftqual's own flags stay


@pytest.mark.parametrize(
    ("flag", "ftquals"),
    [("--save=/x", "--save="), ("--train-iters=3", "--train-iters=20"),
     ("--ft-num-warmup-iters=2", "--ft-num-warmup-iters=0"), ("--log-interval=9", "--log-interval=1")],
)  # fmt: skip
def test_a_flag_ftqual_controls_is_replaced_and_listed(megatron_env, run_launch, flag, ftquals):
    result = run_launch({**megatron_env, "NVRX_MEGATRON_ARGS": f"--seed=1 {flag}", "TRAIN_ITERS": "20"})
    assert result.rc == 0, result.err
    args = workload_args(result.argv)
    assert flag not in args and "--seed=1" in args
    assert any(a.startswith(ftquals) for a in args)
    env = {**megatron_env, "NVRX_MEGATRON_ARGS": f"--seed=1 {flag}"}
    (replaced,) = command.build_plan(*_settings_and_stack(env)).replaced
    assert replaced["given"] == flag and replaced["why"]
    assert replaced["runs_as"].startswith(ftquals.split("=")[0])


def test_the_jobs_batch_evaluation_and_layout_are_taken_from_its_arguments(megatron_env, run_launch):
    team = "--micro-batch-size 2 --global-batch-size 16 --eval-interval 5 --eval-iters 3 " \
        "--tensor-model-parallel-size 2"  # fmt: skip
    result = run_launch({**megatron_env, "NVRX_MEGATRON_ARGS": team, "GPUS_PER_NODE": "4"})
    assert result.rc == 0, result.err
    args = workload_args(result.argv)
    for expected in ("--micro-batch-size=2", "--global-batch-size=16", "--eval-interval=5", "--eval-iters=3",
                     "--tensor-model-parallel-size=2"):  # fmt: skip
        assert args.count(expected) == 1, (expected, args)
    assert "--eval-iters=0" not in args and "--micro-batch-size=1" not in args


def test_a_variable_that_contradicts_the_jobs_arguments_is_refused(megatron_env, work, run_launch):
    env = {**megatron_env, "NVRX_MEGATRON_ARGS": "--tensor-model-parallel-size 2", "TP": "1"}
    result = run_launch({**env, "GPUS_PER_NODE": "2"})
    assert result.rc == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert "TP=1 contradicts NVRX_MEGATRON_ARGS --tensor-model-parallel-size 2" in result.err
    assert not (work / "runs").exists()


def test_a_global_batch_the_world_cannot_split_is_refused(megatron_env, work, run_launch):
    env = {**megatron_env, "NVRX_MEGATRON_ARGS": "--global-batch-size 6 --micro-batch-size 4"}
    result = run_launch(env)
    assert result.rc == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert "--global-batch-size 6 is not a multiple of" in result.err
    assert not (work / "runs").exists()


def _settings_and_stack(env):
    from ftqual.launch.settings import load_settings
    from ftqual.stack.resolve import StackChoice

    s = load_settings(env)
    stack = StackChoice(dist_optimizer=False, transformer_impl="local", megatron_flags=[])
    return s, stack, 1234, "ft_launcher"


def test_tp_is_bounded_by_the_jobs_heads(megatron_env, run_launch):
    env = {**megatron_env, "GPUS_PER_NODE": "2", "TP": "2", "NVRX_MODEL": "1.3b"}
    assert run_launch(env).rc == 0
    bad = run_launch({**env, "GPUS_PER_NODE": "32", "TP": "32"})
    assert bad.rc == 2 and "TP must be at most 16" in bad.err


def test_checkpoints_go_below_the_root_in_the_runs_own_directory(megatron_env, work, tmp_path, run_launch):
    root = tmp_path / "storage"
    root.mkdir()
    result = run_launch({**megatron_env, "NVRX_CHECKPOINT_ROOT": str(root)})
    assert result.rc == 0, result.err
    assert f"Checkpoint directory: {root / 'r1'}" in result.out
    args = workload_args(result.argv)
    assert f"--save={root / 'r1'}" in args and f"--load={root / 'r1'}" in args
    assert not (work / "runs" / "r1" / "checkpoints").exists()


def test_a_missing_root_is_refused_and_never_created(megatron_env, work, tmp_path, run_launch):
    """A mistyped root is not made on the disk above it (the run would qualify that disk instead)."""
    root = tmp_path / "nonexistent" / "ckpt"
    result = run_launch({**megatron_env, "NVRX_CHECKPOINT_ROOT": str(root)})
    assert result.rc == 2 and len(result.err.strip().splitlines()) == 1, result.err
    assert f"NVRX_CHECKPOINT_ROOT {root} does not exist" in result.err
    assert not (tmp_path / "nonexistent").exists() and not (work / "runs").exists()


def test_a_root_that_is_a_file_is_refused(megatron_env, tmp_path, run_launch):
    root = tmp_path / "storage"
    root.write_text("x")
    result = run_launch({**megatron_env, "NVRX_CHECKPOINT_ROOT": str(root)})
    assert result.rc == 2 and "is a file, not a directory" in result.err


def test_only_the_runs_own_directory_is_made_below_the_root(megatron_env, tmp_path):
    """make_dirs makes <root>/<run-id> alone: a root removed after the checks fails, and is not remade."""
    from ftqual.launch import run
    from ftqual.launch.settings import load_settings

    root = tmp_path / "storage"
    root.mkdir()
    s = load_settings({**megatron_env, "NVRX_CHECKPOINT_ROOT": str(root)}, pid=1)
    assert s.checkpoint_from_root
    root.rmdir()
    with pytest.raises(run.DirectoryError, match="No such file or directory"):
        run.make_dirs(s)
    assert not root.exists() and not s.run_dir.exists()
    root.mkdir()
    run.make_dirs(s)
    assert s.checkpoint_dir.is_dir() and s.checkpoint_dir.parent == root


def test_a_used_checkpoint_directory_below_the_root_is_refused(megatron_env, tmp_path, run_launch):
    root = tmp_path / "storage"
    (root / "r1").mkdir(parents=True)
    (root / "r1" / "latest_checkpointed_iteration.txt").write_text("5")
    result = run_launch({**megatron_env, "NVRX_CHECKPOINT_ROOT": str(root)})
    assert result.rc == 2 and "never reused" in result.err


def test_a_relative_root_is_refused(megatron_env, run_launch):
    result = run_launch({**megatron_env, "NVRX_CHECKPOINT_ROOT": "rel/ckpt"})
    assert result.rc == 2 and "NVRX_CHECKPOINT_ROOT must be absolute" in result.err


def test_the_default_job_keeps_the_walkthroughs_command(megatron_env, run_launch):
    args = workload_args(run_launch(megatron_env).argv)
    assert args[2:10] == ["--mock-data", "--tokenizer-type=NullTokenizer", *command.model_args()]


def test_the_run_record_names_the_job(megatron_env, work, run_launch):
    from ftqual.launch import run
    from ftqual.launch.settings import load_settings
    from ftqual.stack import resolve as stack

    s = load_settings({**megatron_env, "NVRX_MODEL": "125m"})
    choice = stack.resolve("local", "on", stack.probe())
    rec = run.job_record(s, choice)
    assert rec["model"] == "125m" and "--num-layers=12" in rec["megatron_args"]
    smoke = load_settings({**megatron_env, "NVRX_WORKLOAD": "smoke", "NVRX_MODEL": "1.3b"})
    assert "not run" in run.job_record(smoke, choice)["describe"]
