"""The dry run: the exact, copy-pasteable ft_launcher command, artifact paths, directories, no launch."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from ftqual.contract import FAULTS
from ftqual.launch import command, settings
from ftqual.stack import resolve as stack
from tests.support.launch import tree

SEED_MEGATRON_ARGS = [
    "--enable-ft-package",
    "--ft-num-warmup-iters=0",
    "--mock-data",
    "--tokenizer-type=NullTokenizer",
    "--vocab-size=1024",
    "--num-layers=4",
    "--hidden-size=512",
    "--num-attention-heads=8",
    "--seq-length=256",
    "--max-position-embeddings=256",
    "--tensor-model-parallel-size=1",
    "--pipeline-model-parallel-size=1",
    "--micro-batch-size=1",
    "--global-batch-size=2",
    "--train-iters=100",
    "--lr=0.0001",
    "--lr-decay-style=constant",
    "--bf16",
    "--save-interval=5",
    "--ckpt-format=torch_dist",
    "--async-save",
    "--use-persistent-ckpt-worker",
    "--eval-iters=0",
    "--log-interval=1",
]


def launcher_flags(argv: list[str]) -> list[str]:
    return argv[1 : argv.index(str(command.WORKER))]


def workload_args(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1 :]


@pytest.fixture
def megatron_env(base_env, megatron_checkout):
    return {**base_env, "NVRX_WORKLOAD": "megatron", "MEGATRON_PATH": str(megatron_checkout)}


def test_dry_run_prints_paths_and_command(megatron_env, work, run_launch):
    result = run_launch(megatron_env)
    assert result.rc == 0, result.err
    run = work / "runs" / "r1"
    lines = result.out.strip().splitlines()
    assert lines[0] == f"Run artifacts: {run}"
    assert lines[1] == f"Checkpoint directory: {run / 'checkpoints'}"
    assert len(lines) == 3
    flags = launcher_flags(result.argv)
    assert result.argv[0].endswith("ft_launcher")
    for flag in [
        "--nnodes=1",
        "--nproc-per-node=2",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=localhost:0",
        "--rdzv-id=r1",
        "--max-restarts=3",
        "--ft-rank-section-timeouts=setup:900,step:120,checkpointing:600",
        "--ft-rank-out-of-section-timeout=180",
        f"--ft-checkpoint-iteration-file={run / 'checkpoints' / 'latest_checkpointed_iteration.txt'}",
        f"--ft-cycle-info-dir={run / 'cycle_infos'}",
        f"--ft-per-cycle-applog-prefix={run / 'logs' / 'train.log'}",
        f"--ft-nvrx-logfile={run / 'logs' / 'launcher.log'}",
        "--term-timeout=15",
        "--workers-stop-timeout=15",
        "--ft-gpu-memory-poll-interval=0.25",
    ]:
        assert flag in flags, flag
    port = [f for f in flags if f.startswith("--ft-log-server-port=")]
    assert len(port) == 1 and 1 <= int(port[0].split("=")[1]) <= 65535


def test_dry_run_creates_artifact_directories_only(megatron_env, work, run_launch):
    assert run_launch(megatron_env).rc == 0
    assert tree(work / "runs" / "r1") == {"logs", "cycle_infos", "checkpoints", "pids", "leftovers"}
    # A dry run leaves no run.json behind, so the real launch of the same ID is still allowed.
    assert run_launch(megatron_env).rc == 0


def test_wrapper_and_megatron_arguments(megatron_env, megatron_checkout, work, run_launch):
    argv = run_launch(megatron_env).argv
    run = work / "runs" / "r1"
    start = argv.index(str(command.WORKER))
    wrapper = argv[start + 1 : argv.index("--")]
    assert wrapper == [
        "--entrypoint",
        str(megatron_checkout / "pretrain_gpt.py"),
        "--checkpoint-dir",
        str(run / "checkpoints"),
        "--fault-marker",
        str(run / "fault_injected.json"),
        "--fault",
        "kill",
        "--fault-rank",
        "1",
        "--run-id",
        "r1",
        "--hang-placement",
        "step",
        "--pid-dir",
        str(run / "pids"),
        "--injections",
        "1",
        "--fault-timing",
        "checkpoint",
        "--leftovers-dir",
        str(run / "leftovers"),
        "--dump-dir",
        str(run / "dumps"),
        "--dump-timeouts",
        '{"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180}',
        *(["--dump-tool", tool] if (tool := command.stack_dump_tool(os.environ)) else []),
    ]
    body = workload_args(argv)
    for arg in SEED_MEGATRON_ARGS:
        assert arg in body, arg
    assert f"--load={run / 'checkpoints'}" in body and f"--save={run / 'checkpoints'}" in body
    eval_interval = [a for a in body if a.startswith("--eval-interval=")]
    assert len(eval_interval) == 1 and int(eval_interval[0].split("=")[1]) > 100


def test_extra_arguments_are_appended_and_quoted(megatron_env, run_launch):
    extra = ["--seed=7", '--note=it\'s a "test" $HOME']
    result = run_launch(megatron_env, extra)
    assert result.argv[-2:] == extra
    assert "'" in result.out.splitlines()[-1]  # quoted, so a shell gives back the same arguments


def test_printed_command_survives_a_shell(megatron_env, run_launch):
    extra = ["--odd=a b;c|d"]
    line = run_launch(megatron_env, extra).out.splitlines()[-1]
    echoed = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {line}"], capture_output=True, text=True, check=True
    )
    assert echoed.stdout.splitlines() == shlex.split(line)


def test_custom_checkpoint_dir_and_shape(megatron_env, tmp_path, run_launch):
    ckpt = tmp_path / "shared" / "ckpt"
    env = {
        **megatron_env,
        "NVRX_CHECKPOINT_DIR": str(ckpt),
        "GPUS_PER_NODE": "4",
        "TP": "2",
        "PP": "2",
        "TRAIN_ITERS": "30",
        "SAVE_INTERVAL": "10",
        "NVRX_DEMO_FAULT": "hang",
        "NVRX_FAULT_RANK": "3",
    }
    result = run_launch(env)
    assert result.rc == 0, result.err
    argv = result.argv
    assert f"--ft-checkpoint-iteration-file={ckpt / 'latest_checkpointed_iteration.txt'}" in argv
    body = workload_args(argv)
    for arg in [
        "--tensor-model-parallel-size=2",
        "--pipeline-model-parallel-size=2",
        "--global-batch-size=4",
        "--train-iters=30",
        "--save-interval=10",
        f"--load={ckpt}",
        f"--save={ckpt}",
    ]:
        assert arg in body
    assert ["--fault", "hang", "--fault-rank", "3"] == argv[argv.index("--fault") : argv.index("--fault") + 4]
    assert ckpt.is_dir()


def test_our_variables_reach_the_command(base_env, run_launch):
    env = {
        **base_env,
        "NVRX_SECTION_TIMEOUTS": "setup:60,step:10.5,checkpointing:30",
        "NVRX_OUT_OF_SECTION_TIMEOUT": "20",
        "NVRX_MAX_RESTARTS": "0",
        "NVRX_TERM_TIMEOUT": "5",
        "NVRX_WORKERS_STOP_TIMEOUT": "7",
        "NVRX_LOG_SERVER_PORT": "45678",
        "NVRX_HANG_PLACEMENT": "immediate",
        "RDZV_ENDPOINT": "127.0.0.1:29500",
    }
    flags = launcher_flags(run_launch(env).argv)
    for flag in [
        "--ft-rank-section-timeouts=setup:60,step:10.5,checkpointing:30",
        "--ft-rank-out-of-section-timeout=20",
        "--max-restarts=0",
        "--term-timeout=5",
        "--workers-stop-timeout=7",
        "--ft-log-server-port=45678",
        "--rdzv-endpoint=127.0.0.1:29500",
    ]:
        assert flag in flags
    argv = run_launch(env).argv
    assert argv[argv.index("--hang-placement") + 1] == "immediate"


def test_smoke_workload_command(base_env, run_launch):
    argv = run_launch(base_env).argv
    assert argv[argv.index("--entrypoint") + 1] == str(command.SMOKE)
    body = workload_args(argv)
    assert "--mock-data" not in body and "--bf16" not in body
    for arg in [
        "--enable-ft-package",
        "--ft-num-warmup-iters=0",
        "--train-iters=100",
        "--save-interval=5",
        "--global-batch-size=2",
        "--eval-iters=0",
        "--log-interval=1",
    ]:
        assert arg in body


def test_default_run_id_is_a_utc_stamp_and_pid(base_env, work, run_launch):
    env = dict(base_env)
    env.pop("NVRX_RUN_ID")
    result = run_launch(env)
    run_id = result.out.splitlines()[0].rsplit("/", 1)[1]
    assert re.fullmatch(rf"\d{{8}}T\d{{6}}-{os.getpid()}", run_id)


def test_no_fault_has_no_fault_rank(base_env, run_launch):
    argv = run_launch({**base_env, "NVRX_DEMO_FAULT": "none"}).argv
    assert "--fault-rank" not in argv and argv[argv.index("--fault") + 1] == "none"


@pytest.mark.parametrize(("mode", "present"), [("on", True), ("off", False), ("auto", None)])
def test_distributed_optimizer_setting(mode, present, megatron_env, run_launch):
    body = workload_args(run_launch({**megatron_env, "NVRX_DIST_OPTIMIZER": mode}).argv)
    expected = present if present is not None else stack.resolve("auto", "auto", stack.probe()).dist_optimizer
    assert ("--use-distributed-optimizer" in body) == expected


def test_stack_flags_come_from_the_resolution(megatron_env, run_launch):
    body = workload_args(run_launch(megatron_env).argv)
    choice = stack.resolve("auto", "auto", stack.probe())
    flags = choice.megatron_flags
    start = body.index(flags[0])
    assert body[start : start + len(flags)] == flags


def test_explicit_transformer_engine_without_it_warns(megatron_env, run_launch):
    result = run_launch({**megatron_env, "NVRX_TRANSFORMER_IMPL": "transformer_engine"})
    assert result.rc == 0
    if not stack.probe().transformer_engine:
        assert "warning: NVRX_TRANSFORMER_IMPL=transformer_engine" in result.err
    body = workload_args(result.argv)
    assert body[body.index("--transformer-impl") + 1] == "transformer_engine"


def test_plan_is_a_pure_function_of_settings(base_env):
    s = settings.load_settings({**base_env, "NVRX_DRY_RUN": "0"}, ["--x"], pid=1)
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    plan = command.build_plan(s, choice, 5555, "ft_launcher")
    assert plan.argv == command.build_plan(s, choice, 5555, "ft_launcher").argv
    assert plan.shell == shlex.join(plan.argv)
    assert plan.argv[-1] == "--x" and plan.log_server_port == 5555
    assert plan.megatron_flags == []  # the smoke workload takes no Megatron stack flags


def test_seed_entry_script_dry_run(repo_root, megatron_checkout, work):
    """The contract command: NVRX_DRY_RUN=1 bash scripts/run_megatron_gpt.sh with the walkthrough's
    variables."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "FTQUAL_PYTHON": sys.executable,
        "MEGATRON_PATH": str(megatron_checkout),
        "NVRX_WORK_DIR": str(work),
        "NVRX_RUN_ID": "gpt-recovery-001",
        "GPUS_PER_NODE": "2",
        "NVRX_DRY_RUN": "1",
    }
    ok = subprocess.run(
        ["bash", str(repo_root / "scripts" / "run_megatron_gpt.sh"), "--seed=3"],
        env=env,
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert ok.returncode == 0, ok.stderr
    line = ok.stdout.strip().splitlines()[-1]
    assert "--rdzv-id=gpt-recovery-001" in line and line.endswith("--seed=3")
    bad = subprocess.run(
        ["bash", str(repo_root / "scripts" / "run_megatron_gpt.sh")],
        env={**env, "NVRX_DEMO_FAULT": "meteor"},
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.strip() == f"NVRX_DEMO_FAULT must be one of {', '.join(FAULTS)} (got 'meteor')"


def test_multinode_log_server_port_is_common_to_all_nodes(base_env, run_launch):
    env = {**base_env, "NNODES": "2", "GPUS_PER_NODE": "4", "RDZV_ENDPOINT": "node1:29400"}
    assert "--ft-log-server-port=50051" in run_launch(env).argv
    assert "--ft-log-server-port=6000" in run_launch({**env, "NVRX_LOG_SERVER_PORT": "6000"}).argv
