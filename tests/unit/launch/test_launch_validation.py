"""Every refusal of the launcher: exit 2, its own one-line reason on stderr, nothing created or launched."""

from __future__ import annotations

import json
import os

import pytest

from ftqual.launch import procs
from tests.support.launch import checkpoint_dir, tree


def assert_refused(result, fragment: str) -> None:
    assert result.rc == 2, (result.out, result.err)
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert fragment in lines[0], lines[0]


# (environment changes, expected fragment of the one-line message); each line is a different rule.
ENV_CASES = [
    ({"NVRX_WORK_DIR": None}, "Set NVRX_WORK_DIR to an absolute directory"),
    ({"NVRX_WORK_DIR": "relative/dir"}, "NVRX_WORK_DIR must be absolute"),
    ({"NVRX_WORKLOAD": "bert"}, "NVRX_WORKLOAD must be megatron or smoke"),
    ({"NVRX_WORKLOAD": "megatron"}, "Set MEGATRON_PATH"),
    ({"NVRX_DEMO_FAULT": "crash"}, "NVRX_DEMO_FAULT must be one of none, kill, hang, node_loss, segfault"),
    ({"GPUS_PER_NODE": "3", "TP": "2"}, "World size 3 (NNODES*GPUS_PER_NODE) must be divisible by TP*PP=2"),
    ({"GPUS_PER_NODE": "3", "PP": "3"}, "PP=3 must divide the model's 4 layers"),
    ({"GPUS_PER_NODE": "3", "TP": "3"}, "TP=3 must divide the model's 8 attention heads"),
    ({"GPUS_PER_NODE": "16", "TP": "16"}, "TP must be at most 8"),
    ({"GPUS_PER_NODE": "65"}, "GPUS_PER_NODE must be at most 64"),
    ({"NNODES": "5000", "RDZV_ENDPOINT": "n:1"}, "NNODES must be at most 4096"),
    ({"NNODES": "2"}, "Set RDZV_ENDPOINT to a common reachable host:port"),
    (
        {"NNODES": "2", "RDZV_ENDPOINT": "node1:29400", "NVRX_RUN_ID": None},
        "Set NVRX_RUN_ID (or run under Slurm)",
    ),
    ({"RDZV_ENDPOINT": "node1"}, "RDZV_ENDPOINT must be host:port"),
    ({"RDZV_ENDPOINT": "node1:99999"}, "RDZV_ENDPOINT must be host:port"),
    # host names are checked: a shell substitution, a trailing newline, an empty label are not hosts
    ({"RDZV_ENDPOINT": "$(id):29400"}, "RDZV_ENDPOINT must be host:port with a valid host name"),
    ({"RDZV_ENDPOINT": "`id`:29400"}, "RDZV_ENDPOINT must be host:port with a valid host name"),
    ({"RDZV_ENDPOINT": "node1:29400\n"}, "RDZV_ENDPOINT holds a control or unprintable character"),
    ({"RDZV_ENDPOINT": "node1..x:29400"}, "RDZV_ENDPOINT must be host:port with a valid host name"),
    ({"RDZV_ENDPOINT": "-node1:29400"}, "RDZV_ENDPOINT must be host:port with a valid host name"),
    ({"RDZV_ENDPOINT": "[::g]:29400"}, "RDZV_ENDPOINT must be host:port with a valid host name"),
    ({"RDZV_ENDPOINT": "node1:+294"}, "RDZV_ENDPOINT must be host:port with a valid host name"),
    ({"RDZV_ENDPOINT": "node1:２９４００"}, "RDZV_ENDPOINT must be host:port with a valid host name"),
    ({"RDZV_ENDPOINT": "a" * 300 + ":1"}, "RDZV_ENDPOINT is too long (302 characters, at most 256)"),
    (
        {"NNODES": "2", "RDZV_ENDPOINT": "node1:0"},
        "RDZV_ENDPOINT needs a real port (1..65535) for several nodes",
    ),
    ({"NVRX_RUN_ID": "../escape"}, "Use letters, digits, underscores or hyphens in NVRX_RUN_ID"),
    ({"NVRX_RUN_ID": "a b"}, "Use letters, digits, underscores or hyphens in NVRX_RUN_ID"),
    # `^...$` would accept the trailing newline and create runs/abc\n/
    ({"NVRX_RUN_ID": "abc\n"}, "NVRX_RUN_ID holds a control or unprintable character (got 'abc\\n')"),
    (
        {"NVRX_RUN_ID": "-abc"},
        "Use letters, digits, underscores or hyphens in NVRX_RUN_ID, starting with a letter",
    ),
    ({"NVRX_RUN_ID": "a" * 129}, "at most 128 (got 'aaaa"),
    ({"NVRX_RUN_ID": "a" * 300}, "NVRX_RUN_ID is too long (300 characters, at most 256)"),
    ({"NVRX_RUN_ID": "r\u00e9sum\u00e9"}, "Use letters, digits, underscores or hyphens in NVRX_RUN_ID"),
    ({"NVRX_CHECKPOINT_DIR": "ckpt"}, "NVRX_CHECKPOINT_DIR must be absolute"),
    ({"NVRX_CHECKPOINT_DIR": "/tmp/../etc/ckpt"}, "NVRX_CHECKPOINT_DIR must not hold '.' or '..' components"),
    ({"NVRX_CHECKPOINT_DIR": "/tmp/a b"}, "NVRX_CHECKPOINT_DIR may hold only letters, digits"),
    ({"NVRX_CHECKPOINT_DIR": "/tmp/$(id)"}, "NVRX_CHECKPOINT_DIR may hold only letters, digits"),
    (
        {"NVRX_CHECKPOINT_DIR": "/tmp/" + "c" * 256},
        "NVRX_CHECKPOINT_DIR has a component longer than 255 bytes",
    ),
    ({"NVRX_WORK_DIR": "/tmp/" + "w" * 1100}, "NVRX_WORK_DIR is too long (1105 characters, at most 1024)"),
    ({"NVRX_WORK_DIR": "/tmp/w\n"}, "NVRX_WORK_DIR holds a control or unprintable character"),
    ({"NVRX_WORKLOAD": "megatron", "MEGATRON_PATH": "Megatron-LM"}, "MEGATRON_PATH must be absolute"),
    ({"NVRX_FAULT_RANK": "2"}, "NVRX_FAULT_RANK=2 is outside the world of 2 rank(s)"),
    (
        {"NVRX_DEMO_FAULT": "hang", "GPUS_PER_NODE": "1"},
        "NVRX_FAULT_RANK=1 is outside the world of 1 rank(s)",
    ),
    ({"NVRX_FAULT_RANK": "one"}, "NVRX_FAULT_RANK must be a non-negative integer"),
    ({"NVRX_FAULT_RANK": "-1"}, "NVRX_FAULT_RANK must be a non-negative integer"),
    ({"NVRX_DRY_RUN": "yes"}, "NVRX_DRY_RUN must be 0 or 1"),
    # ours
    ({"NVRX_SCENARIO": "kill me"}, "Use letters, digits, underscores or hyphens in NVRX_SCENARIO"),
    ({"NVRX_SCENARIO": "kill\n"}, "NVRX_SCENARIO holds a control or unprintable character"),
    ({"NVRX_SCENARIO": "k" * 65}, "NVRX_SCENARIO, starting with a letter or digit, at most 64"),
    ({"NVRX_SETTINGS_FINGERPRINT": "abc"}, "NVRX_SETTINGS_FINGERPRINT must be 8 to 64 lowercase hex digits"),
    ({"NVRX_SETTINGS_FINGERPRINT": "ABCDEF0123"}, "NVRX_SETTINGS_FINGERPRINT must be 8 to 64 lowercase hex"),
    ({"NVRX_SETTINGS_FINGERPRINT": "0" * 65}, "NVRX_SETTINGS_FINGERPRINT must be 8 to 64 lowercase hex"),
    ({"NVRX_SETTINGS_FINGERPRINT": "deadbeef\n"}, "NVRX_SETTINGS_FINGERPRINT holds a control"),
    # a checkpoint before the end is what a fault scenario injects on
    ({"TRAIN_ITERS": "10", "SAVE_INTERVAL": "20"}, "SAVE_INTERVAL=20 must be below TRAIN_ITERS=10"),
    ({"TRAIN_ITERS": "10", "SAVE_INTERVAL": "10"}, "fault kill needs a checkpoint before the last iteration"),
    (
        {"TRAIN_ITERS": "10", "SAVE_INTERVAL": "11", "NVRX_DEMO_FAULT": "none"},
        "SAVE_INTERVAL=11 must not exceed TRAIN_ITERS=10",
    ),
    ({"TRAIN_ITERS": "10000001"}, "TRAIN_ITERS must be at most 10000000"),
    ({"TRAIN_ITERS": "9" * 4301}, "TRAIN_ITERS is too long (4301 characters, at most 256)"),
    ({"TRAIN_ITERS": "9" * 200}, "TRAIN_ITERS must be a positive integer (got '9999"),
    ({"NVRX_FAULT_RANK": "9" * 5000}, "NVRX_FAULT_RANK is too long"),
    ({"NVRX_MAX_RESTARTS": "1001"}, "NVRX_MAX_RESTARTS must be at most 1000"),
    ({"NVRX_TERM_TIMEOUT": "3601"}, "NVRX_TERM_TIMEOUT must be at most 3600"),
    (
        {"NVRX_OUT_OF_SECTION_TIMEOUT": "1e3"},
        "NVRX_OUT_OF_SECTION_TIMEOUT must be a positive number of seconds",
    ),
    ({"NVRX_OUT_OF_SECTION_TIMEOUT": "1_000"}, "NVRX_OUT_OF_SECTION_TIMEOUT must be a positive number"),
    ({"NVRX_OUT_OF_SECTION_TIMEOUT": "９"}, "NVRX_OUT_OF_SECTION_TIMEOUT must be a positive number"),
    (
        {"NVRX_OUT_OF_SECTION_TIMEOUT": "9999999"},
        "NVRX_OUT_OF_SECTION_TIMEOUT must be at most 604800 seconds",
    ),
    (
        {"NVRX_SECTION_TIMEOUTS": "setup: 900,step:120,checkpointing:600"},
        "NVRX_SECTION_TIMEOUTS setup must be a positive number of seconds",
    ),
    ({"NVRX_SECTION_TIMEOUTS": "setup:900,step:120"}, "must give all of setup, step and checkpointing"),
    (
        {"NVRX_SECTION_TIMEOUTS": "setup:900,step:120,checkpointing:600,eval:5"},
        "NVRX_SECTION_TIMEOUTS must be setup:S,step:S,checkpointing:S",
    ),
    (
        {"NVRX_SECTION_TIMEOUTS": "setup=900,step=120,checkpointing=600"},
        "NVRX_SECTION_TIMEOUTS must be setup:S,step:S,checkpointing:S",
    ),
    ({"NVRX_SECTION_TIMEOUTS": "setup:900,step:120,step:1,checkpointing:600"}, "names section 'step' twice"),
    (
        {"NVRX_SECTION_TIMEOUTS": "setup:900,step:-1,checkpointing:600"},
        "NVRX_SECTION_TIMEOUTS step must be a positive number of seconds",
    ),
    (
        {"NVRX_SECTION_TIMEOUTS": "setup:900,step:nan,checkpointing:600"},
        "NVRX_SECTION_TIMEOUTS step must be a positive number of seconds",
    ),
    (
        {"NVRX_OUT_OF_SECTION_TIMEOUT": "0"},
        "NVRX_OUT_OF_SECTION_TIMEOUT must be a positive number of seconds",
    ),
    ({"NVRX_MAX_RESTARTS": "three"}, "NVRX_MAX_RESTARTS must be a non-negative integer"),
    ({"NVRX_TERM_TIMEOUT": "0"}, "NVRX_TERM_TIMEOUT must be a positive integer"),
    ({"NVRX_WORKERS_STOP_TIMEOUT": "1.5"}, "NVRX_WORKERS_STOP_TIMEOUT must be a positive integer"),
    ({"NVRX_LOG_SERVER_PORT": "70000"}, "NVRX_LOG_SERVER_PORT must be a TCP port 1..65535"),
    ({"NVRX_LOG_SERVER_PORT": "http"}, "NVRX_LOG_SERVER_PORT must be a TCP port 1..65535"),
    ({"NVRX_LOG_SERVER_PORT": "0"}, "NVRX_LOG_SERVER_PORT must be a TCP port 1..65535"),
    ({"NVRX_LOG_SERVER_PORT": "0" * 3000 + "1"}, "NVRX_LOG_SERVER_PORT is too long"),
    ({"NVRX_TRANSFORMER_IMPL": "te"}, "NVRX_TRANSFORMER_IMPL must be auto, local or transformer_engine"),
    ({"NVRX_DIST_OPTIMIZER": "yes"}, "NVRX_DIST_OPTIMIZER must be auto, on or off"),
    (
        {"NVRX_HANG_PLACEMENT": "later"},
        "NVRX_HANG_PLACEMENT must be step, immediate, checkpointing, out_of_section or setup",
    ),
    ({"NVRX_NODE_RANK": "1"}, "NVRX_NODE_RANK=1 must be below NNODES=1"),
    ({"NVRX_NODE_RANK": "x"}, "NVRX_NODE_RANK must be a non-negative integer"),
    ({"SLURM_NODEID": "3", "NNODES": "2", "RDZV_ENDPOINT": "n:1"}, "SLURM_NODEID=3 must be below NNODES=2"),
]


@pytest.mark.parametrize(("changes", "fragment"), ENV_CASES, ids=[c[1][:40] for c in ENV_CASES])
def test_bad_environment_is_refused(changes, fragment, base_env, work, run_launch):
    env = {**base_env}
    for key, value in changes.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    before = tree(work.parent)
    assert_refused(run_launch(env), fragment)
    assert tree(work.parent) == before


@pytest.mark.parametrize("name", ["NNODES", "GPUS_PER_NODE", "TP", "PP", "TRAIN_ITERS", "SAVE_INTERVAL"])
@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "08"])
def test_shape_and_iteration_settings_must_be_positive_integers(name, value, base_env, work, run_launch):
    before = tree(work.parent)
    result = run_launch({**base_env, name: value})
    assert_refused(result, f"{name} must be a positive integer (got {value!r})")
    assert tree(work.parent) == before


def test_megatron_path_must_hold_pretrain_gpt(base_env, work, tmp_path, run_launch):
    empty = tmp_path / "not-megatron"
    empty.mkdir()
    before = tree(work.parent)
    result = run_launch({**base_env, "NVRX_WORKLOAD": "megatron", "MEGATRON_PATH": str(empty)})
    assert_refused(result, f"pretrain_gpt.py not found in MEGATRON_PATH ({empty})")
    assert tree(work.parent) == before


def test_smoke_workload_ignores_megatron_path(base_env, run_launch):
    result = run_launch({**base_env, "MEGATRON_PATH": "/nowhere"})
    assert result.rc == 0, result.err


def test_fault_rank_is_ignored_without_a_fault(base_env, run_launch):
    env = {**base_env, "NVRX_DEMO_FAULT": "none", "NVRX_FAULT_RANK": "99", "GPUS_PER_NODE": "1"}
    result = run_launch(env)
    assert result.rc == 0, result.err
    assert "--fault-rank" not in result.argv


def run_dir(work, run_id="r1"):
    path = work / "runs" / run_id
    path.mkdir(parents=True)
    return path


def test_old_injection_marker_is_refused(base_env, work, run_launch):
    (run_dir(work) / "fault_injected.json").write_text("{}")
    before = tree(work)
    assert_refused(run_launch(base_env), "This run ID already has an injection marker; use a new NVRX_RUN_ID")
    assert tree(work) == before


def test_second_launch_of_a_run_id_is_refused(base_env, work, run_launch):
    (run_dir(work) / "run.json").write_text(json.dumps({"schema": "ftqual.run/v1"}))
    before = tree(work)
    assert_refused(run_launch(base_env), "already holds run.json from an earlier launch")
    assert tree(work) == before


def test_multinode_host_that_already_launched_is_refused(base_env, work, run_launch):
    pids = run_dir(work) / "pids"
    pids.mkdir()
    (pids / f"{procs.host_name()}.launcher.json").write_text("{}")
    env = {**base_env, "NNODES": "2", "RDZV_ENDPOINT": "node1:29400", "NVRX_NODE_RANK": "1"}
    before = tree(work)
    assert_refused(run_launch(env), f"Host {procs.host_name()} already launched run r1")
    assert tree(work) == before


def test_multinode_other_node_may_find_run_json(base_env, work, run_launch):
    (run_dir(work) / "run.json").write_text("{}")  # node 0 was faster
    env = {**base_env, "NNODES": "2", "RDZV_ENDPOINT": "node1:29400", "NVRX_NODE_RANK": "1"}
    assert run_launch(env).rc == 0


def test_calculated_ft_state_is_refused(base_env, work, tmp_path, run_launch):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "ft_state.json").write_text("{}")
    before = tree(tmp_path)
    assert_refused(
        run_launch({**base_env, "NVRX_CHECKPOINT_DIR": str(ckpt)}),
        "requires a checkpoint directory without calculated ft_state.json",
    )
    assert tree(tmp_path) == before


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"", "is empty"),
        (b"  \n", "is empty"),
        (b"release", "does not hold an integer iteration (got 'release')"),
        (b"-5", "does not hold an integer iteration"),
        (b"\xff\xfe", "is unreadable"),
    ],
)
def test_untrustworthy_tracker_is_refused(content, fragment, base_env, tmp_path, run_launch):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "latest_checkpointed_iteration.txt").write_bytes(content)
    before = tree(tmp_path)
    assert_refused(run_launch({**base_env, "NVRX_CHECKPOINT_DIR": str(ckpt)}), fragment)
    assert tree(tmp_path) == before


def test_tracker_that_is_not_a_file_is_refused(base_env, tmp_path, run_launch):
    ckpt = tmp_path / "ckpt"
    (ckpt / "latest_checkpointed_iteration.txt").mkdir(parents=True)  # a directory: reading it fails
    result = run_launch({**base_env, "NVRX_CHECKPOINT_DIR": str(ckpt)})
    assert_refused(result, "is not a regular file")


@pytest.mark.timeout(20)
def test_tracker_fifo_is_refused_without_blocking(base_env, tmp_path, run_launch):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    os.mkfifo(ckpt / "latest_checkpointed_iteration.txt")  # reading it would wait for a writer forever
    assert_refused(run_launch({**base_env, "NVRX_CHECKPOINT_DIR": str(ckpt)}), "is not a regular file")


def test_valid_existing_tracker_is_accepted(base_env, tmp_path, run_launch):
    ckpt = checkpoint_dir(tmp_path, b"30", [30])
    assert run_launch({**base_env, "NVRX_CHECKPOINT_DIR": ckpt}).rc == 0


@pytest.mark.parametrize(
    ("tracker", "iterations", "env", "fragment"),
    [
        (
            b"30",
            [],
            {},
            "names iteration 30 but iter_0000030 is missing there: not a checkpoint of this layout",
        ),
        (b"30", [5], {}, "iter_0000030 is missing"),
        (b"release", [], {}, "does not hold an integer iteration (got 'release')"),
        (b"1e3", [], {}, "does not hold an integer iteration"),
        (b"\xd9\xa3", [], {}, "is unreadable (UnicodeDecodeError)"),  # an Arabic-Indic digit three
        (b"9" * 5000, [], {}, "is larger than 64 bytes"),
        (b"9" * 40, [], {}, "does not hold an integer iteration"),
        (b"200", [200], {}, "is at iteration 200, past TRAIN_ITERS=100: a checkpoint of another run"),
        (b"100", [100], {}, "nothing is left to train, so fault kill could never be injected"),
    ],
)
def test_foreign_tracker_is_refused(tracker, iterations, env, fragment, base_env, tmp_path, run_launch):
    ckpt = checkpoint_dir(tmp_path, tracker, iterations)
    before = tree(tmp_path)
    assert_refused(run_launch({**base_env, "NVRX_CHECKPOINT_DIR": ckpt, **env}), fragment)
    assert tree(tmp_path) == before


def test_finished_checkpoint_is_accepted_for_a_baseline(base_env, tmp_path, run_launch):
    ckpt = checkpoint_dir(tmp_path, b"100", [100])
    assert run_launch({**base_env, "NVRX_CHECKPOINT_DIR": ckpt, "NVRX_DEMO_FAULT": "none"}).rc == 0


@pytest.mark.parametrize(
    "endpoint", ["node1:29400", "10.0.0.1:29400", "[::1]:29500", "node-17.cluster.example:1", "node_17:29400"]
)
def test_valid_endpoints_are_accepted(endpoint, base_env, run_launch):
    result = run_launch({**base_env, "RDZV_ENDPOINT": endpoint})
    assert result.rc == 0, result.err
    assert f"--rdzv-endpoint={endpoint}" in result.argv


def test_baseline_may_save_only_at_its_end(base_env, run_launch):
    env = {**base_env, "NVRX_DEMO_FAULT": "none", "TRAIN_ITERS": "10", "SAVE_INTERVAL": "10"}
    assert run_launch(env).rc == 0


def test_trailing_slash_of_a_path_is_normalised(base_env, work, run_launch):
    result = run_launch({**base_env, "NVRX_WORK_DIR": str(work) + "/"})
    assert result.rc == 0, result.err
    assert result.out.splitlines()[0] == f"Run artifacts: {work / 'runs' / 'r1'}"


def test_multinode_run_id_defaults_to_slurm_job_id(base_env, run_launch):
    env = {**base_env, "NNODES": "2", "RDZV_ENDPOINT": "node1:29400", "SLURM_JOB_ID": "4242"}
    env.pop("NVRX_RUN_ID")
    result = run_launch(env)
    assert result.rc == 0, result.err
    assert "--rdzv-id=4242" in result.argv


def test_real_run_without_ft_launcher_is_refused(base_env, work, run_launch, monkeypatch):
    from ftqual.launch import command

    monkeypatch.setattr(command, "ft_launcher_executable", lambda: None)
    before = tree(work)
    assert_refused(run_launch({**base_env, "NVRX_DRY_RUN": "0"}), "ft_launcher not found")
    assert tree(work) == before


def test_environment_is_not_read_from_os_environ_when_given(base_env, monkeypatch, run_launch):
    monkeypatch.setenv("NVRX_DEMO_FAULT", "crash")  # ignored: main() reads the mapping it is given
    assert run_launch(base_env).rc == 0
    assert os.environ["NVRX_DEMO_FAULT"] == "crash"
