"""ftqual.launch.run against a stand-in ft_launcher: run.json before and after, pid records, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ftqual.launch import command, procs, run, settings
from ftqual.stack import resolve as stack
from tests.support.wait import stays, wait_until

CONTRACT_KEYS = [
    "schema",
    "run_id",
    "scenario",
    "fault",
    "fault_rank",
    "world_size",
    "train_iters",
    "save_interval",
    "checkpoint_dir",
    "max_restarts",
    "timeouts",
    "started_at",
    "finished_at",
    "exit_code",
]
EXTENSION_KEYS = [
    "workload",
    "hang_placement",
    "global_batch_size",
    "tz_offset_s",
    "command",
    "nnodes",
    "gpus_per_node",
    "tp",
    "pp",
    "megatron_flags",
    "log_server_port",
    "launcher_error",
    "settings_fingerprint",
]

# A stand-in for ft_launcher: starts one "worker" in its own session that records itself like the wrapper
# does and stops itself (a hung rank), then behaves as MODE says.
FAKE_LAUNCHER = textwrap.dedent("""
    import json, os, signal, socket, subprocess, sys, time
    run_dir, mode = sys.argv[1], sys.argv[2]
    worker = subprocess.Popen([sys.executable, "-c", '''
    import json, os, signal, socket, sys
    stat = open("/proc/self/stat").read().rpartition(")")[2].split()
    rec = {"pid": os.getpid(), "pgid": os.getpgrp(), "start_time": int(stat[19])}
    path = os.path.join(sys.argv[1], "pids", socket.gethostname() + ".cycle0.rank1.json")
    open(path, "w").write(json.dumps(rec))
    os.kill(os.getpid(), signal.SIGSTOP)
    '''.replace("\\n    ", "\\n"), run_dir], start_new_session=True)
    open(os.path.join(run_dir, "worker.pid"), "w").write(str(worker.pid))
    if mode == "exit7":  # once the worker recorded itself (a leftover our launcher must find and kill)
        deadline = time.monotonic() + 20
        while open(f"/proc/{worker.pid}/stat").read().rpartition(")")[2].split()[0] != "T":  # stopped: done
            if time.monotonic() > deadline:
                sys.exit("the stand-in worker never recorded itself")
            time.sleep(0.05)
        sys.exit(7)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a launcher that never finishes its shutdown
    open(os.path.join(run_dir, "launcher.ready"), "w").close()  # after SIG_IGN: the test may signal now
    time.sleep(300)
""")

DRIVER = textwrap.dedent("""
    import json, os, sys
    from ftqual.launch import procs
    from ftqual.launch import command, run, settings
    from ftqual.stack import resolve as stack
    run.SHUTDOWN_MARGIN_S = float(os.environ.get("FTQUAL_TEST_MARGIN_S", "1"))
    env = json.loads(sys.argv[1])
    s = settings.load_settings(env, [], pid=os.getpid())
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    plan = command.LaunchPlan(launcher=[sys.executable, sys.argv[2], str(s.run_dir), sys.argv[3]],
                              workload=[], megatron_flags=[], log_server_port=1)
    run.make_dirs(s)
    sys.exit(run.launch(s, plan, choice, procs.host_name()))
""")


@pytest.fixture
def env(work):
    return {
        "NVRX_WORK_DIR": str(work),
        "NVRX_WORKLOAD": "smoke",
        "NVRX_RUN_ID": "r1",
        "NVRX_TERM_TIMEOUT": "1",
        "NVRX_DEMO_FAULT": "hang",
        "TRAIN_ITERS": "12",
        "SAVE_INTERVAL": "4",
    }


def start_driver(repo_root, tmp_path, env, mode, nohup=False, extra_env=None):
    fake = tmp_path / "fake_ft_launcher.py"
    fake.write_text(FAKE_LAUNCHER)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}  # a suite run in a job
    child_env.update({"PYTHONPATH": str(repo_root), **(extra_env or {})})
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(env), str(fake), mode],
        env=child_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # nohup: SIGHUP ignored, which exec keeps; otherwise the default, whatever this test run inherited
        # (a suite started under nohup would otherwise pass its ignored SIGHUP on to every child)
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN if nohup else signal.SIG_DFL),
    )


def wait_for_worker(run_dir):
    """The stand-in worker recorded itself and the stand-in launcher ignores SIGTERM (a signal sent before
    that would kill it, on a busy machine, and the test would see SIGTERM's exit, not SIGKILL's)."""
    pid_dir = run_dir / "pids"
    wait_until(
        lambda: list(pid_dir.glob("*.cycle0.rank1.json")) and (run_dir / "launcher.ready").exists(),
        20, what="the stand-in worker's pid record and the stand-in launcher ready",
    )  # fmt: skip


def test_run_record_has_contract_and_extension_keys(env):
    s = settings.load_settings(env, ["--extra"], pid=1)
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    plan = command.build_plan(s, choice, 1234, "ft_launcher")
    record = run.run_record(s, plan, choice, run.child_env({}), "h").to_json()
    assert list(record)[: len(CONTRACT_KEYS)] == CONTRACT_KEYS
    assert all(key in record for key in EXTENSION_KEYS)
    assert record["schema"] == "ftqual.run/v1"
    assert record["timeouts"] == {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180}
    assert (record["fault"], record["fault_rank"], record["scenario"]) == ("hang", 1, "hang")
    assert record["checkpoint_dir"] == "checkpoints" and record["exit_code"] is None
    assert record["finished_at"] is None and record["started_at"].endswith("Z")
    assert record["tz_offset_s"] == 0 and record["command"] == plan.argv and record["log_server_port"] == 1234
    assert record["global_batch_size"] == 2 and record["hang_placement"] == "step"


def test_baseline_record_has_no_fault_rank_and_custom_checkpoint_dir(env, tmp_path):
    s = settings.load_settings(
        {
            **env,
            "NVRX_DEMO_FAULT": "none",
            "NVRX_SCENARIO": "baseline",
            "NVRX_CHECKPOINT_DIR": str(tmp_path / "c"),
        },
        pid=1,
    )
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    record = run.run_record(s, command.build_plan(s, choice, 1, "x"), choice, {}, "h").to_json()
    assert (record["fault_rank"], record["scenario"], record["hang_placement"]) == (None, "baseline", None)
    assert record["checkpoint_dir"] == str(tmp_path / "c")


def test_child_environment_keeps_our_settings():
    env = run.child_env({"TZ": "Europe/Paris", "NCCL_NVLS_ENABLE": "1", "KEEP": "x"})
    assert env["TZ"] == "UTC" and env["NCCL_NVLS_ENABLE"] == "0" and env["KEEP"] == "x"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert env["PYTHONUNBUFFERED"] == "1"


def test_settings_fingerprint_is_recorded(env):
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    for given, recorded in [(None, None), ("0123456789abcdef", "0123456789abcdef")]:
        extra = {"NVRX_SETTINGS_FINGERPRINT": given} if given else {}
        s = settings.load_settings({**env, **extra}, pid=1)
        record = run.run_record(s, command.build_plan(s, choice, 1, "x"), choice, {}, "h").to_json()
        assert record["settings_fingerprint"] == recorded and record["launcher_error"] is None


def test_everything_the_launcher_starts_carries_the_run_id():
    assert run.child_env({}, run_id="r1")[procs.RUN_ID_ENV] == "r1"
    assert run.child_env({procs.RUN_ID_ENV: "stale"}, run_id="r2")[procs.RUN_ID_ENV] == "r2"


def test_tensor_parallel_runs_get_one_cuda_connection():
    assert run.child_env({}, tp=2)["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert run.child_env({"CUDA_DEVICE_MAX_CONNECTIONS": "8"}, tp=4)["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert "CUDA_DEVICE_MAX_CONNECTIONS" not in run.child_env({}, tp=1)


def test_free_port_is_bindable():
    port = run.free_port()
    assert 1024 <= port <= 65535


@pytest.mark.timeout(60)
def test_exit_code_is_ft_launchers_and_nothing_survives(repo_root, tmp_path, env, work):
    driver = start_driver(repo_root, tmp_path, env, "exit7")
    out, err = driver.communicate(timeout=40)
    assert driver.returncode == 7, err
    run_dir = work / "runs" / "r1"
    record = json.loads((run_dir / "run.json").read_text())
    assert record["exit_code"] == 7 and record["finished_at"] and record["interrupted_by"] is None
    launcher = json.loads((run_dir / "pids" / f"{procs.host_name()}.launcher.json").read_text())
    assert {"pid", "pgid", "start_time"} <= set(launcher) and launcher["pid"] == launcher["pgid"]
    worker_pid = int((run_dir / "worker.pid").read_text())
    assert procs.read_stat(worker_pid) is None or procs.read_stat(worker_pid).state == "Z"
    assert "killed 1 leftover process(es) of run r1" in err
    assert (run_dir / "command.txt").read_text().strip().endswith("exit7")
    recorded = json.loads((run_dir / "checkpoint_record" / "record.json").read_text())  # after run.json's end
    assert recorded["checkpoint_dir"] == record["checkpoint_dir"] and recorded["hashed_up_to"] > 0


def test_launcher_that_cannot_start_is_recorded(env, work):
    s = settings.load_settings(env, [], pid=1)
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    plan = command.LaunchPlan(
        launcher=[str(work / "no-such-ft_launcher")], workload=[], megatron_flags=[], log_server_port=1
    )
    run.make_dirs(s)
    assert run.launch(s, plan, choice, procs.host_name(), {"PATH": "/usr/bin"}) == run.EXIT_CANNOT_START
    record = json.loads((s.run_dir / "run.json").read_text())
    assert record["exit_code"] == run.EXIT_CANNOT_START and record["finished_at"]


@pytest.mark.timeout(60)
def test_closed_terminal_stops_the_run_cleanly(repo_root, tmp_path, env, work):
    """SIGHUP (a closed terminal) is handled like SIGTERM: nothing of the run is left behind."""
    run_dir = work / "runs" / "r1"
    driver = start_driver(repo_root, tmp_path, env, "ignore-term")
    wait_for_worker(run_dir)
    driver.send_signal(signal.SIGHUP)
    driver.communicate(timeout=30)
    assert driver.returncode == 128 + signal.SIGKILL
    record = json.loads((run_dir / "run.json").read_text())
    assert record["interrupted_by"] == "SIGHUP"
    # stopped from outside: the checkpoint record is still made, quick (nothing hashed)
    assert json.loads((run_dir / "checkpoint_record" / "record.json").read_text())["hashed_up_to"] == 0
    stat = procs.read_stat(int((run_dir / "worker.pid").read_text()))
    assert stat is None or stat.state == "Z"


@pytest.mark.timeout(60)
def test_nohup_run_outlives_the_terminal_and_sigterm_is_forwarded_then_everything_is_killed(
    repo_root, tmp_path, env, work
):
    """Under nohup a closed terminal leaves the run alone; SIGTERM then reaches ft_launcher, and a worker
    that ignores it is killed (one launch for both: nohup only changes SIGHUP's disposition)."""
    run_dir = work / "runs" / "r1"
    driver = start_driver(repo_root, tmp_path, env, "ignore-term", nohup=True)
    wait_for_worker(run_dir)
    driver.send_signal(signal.SIGHUP)
    stays(lambda: driver.poll() is None, 1.5, "the run lives on under nohup")  # the user chose to survive it
    started = time.monotonic()
    driver.send_signal(signal.SIGTERM)
    out, err = driver.communicate(timeout=30)
    took = time.monotonic() - started
    assert driver.returncode == 128 + signal.SIGKILL  # the stand-in ignored SIGTERM, so it was killed
    assert took < 1 + 1 + 10  # term-timeout + margin + cleanup
    record = json.loads((run_dir / "run.json").read_text())
    assert record["interrupted_by"] == "SIGTERM" and record["exit_code"] == -signal.SIGKILL
    worker_pid = int((run_dir / "worker.pid").read_text())
    stat = procs.read_stat(worker_pid)
    assert stat is None or stat.state == "Z"


def test_directories_a_peer_node_made_meanwhile_are_taken_as_they_are(env, work, monkeypatch):
    """Every node's launcher starts at once: a directory made by a peer between our look and our mkdir is
    not an error (seen on 2 x H200 with three launchers: the first node refused with 'File exists')."""
    s = settings.load_settings(
        {**env, "NNODES": "2", "RDZV_ENDPOINT": "n1:29400", "GPUS_PER_NODE": "1"}, [], pid=1
    )
    s.run_dir.mkdir(parents=True)  # the peer's
    real_is_dir = type(s.run_dir).is_dir
    looked = []

    def stale_is_dir(path):
        if path == s.run_dir and not looked:  # our first look predates the peer's mkdir
            looked.append(path)
            return False
        return real_is_dir(path)

    monkeypatch.setattr(type(s.run_dir), "is_dir", stale_is_dir)
    run.make_dirs(s)
    assert looked and all(real_is_dir(path) for path in s.run_dirs)


def test_a_file_where_a_directory_goes_is_still_refused_and_nothing_is_left(env, work):
    s = settings.load_settings(env, [], pid=1)
    (work / "runs").mkdir(parents=True)
    s.run_dir.write_text("not a directory")
    with pytest.raises(run.DirectoryError, match="File exists"):
        run.make_dirs(s)
    assert sorted(p.name for p in (work / "runs").iterdir()) == ["r1"] and s.run_dir.is_file()


def fake_scontrol(tmp_path, kill_wait_s):
    """A directory holding an `scontrol` that prints a config with this KillWait (the real one is asked in
    tests/integration/slurm)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "scontrol"
    tool.write_text(f"#!/bin/sh\necho 'Configuration data'\necho 'KillWait = {kill_wait_s} sec'\n")
    tool.chmod(0o755)
    return bin_dir


@pytest.mark.timeout(60)
def test_a_stop_is_on_record_before_the_launcher_ends(repo_root, tmp_path, env, work):
    """interrupted_by is written when the stop is seen, not only at the end: a scheduler's SIGKILL may take
    the launcher while ft_launcher still shuts down, and the stop must stay on record."""
    run_dir = work / "runs" / "r1"
    driver = start_driver(repo_root, tmp_path, env, "ignore-term", extra_env={"FTQUAL_TEST_MARGIN_S": "120"})
    try:
        wait_for_worker(run_dir)
        driver.send_signal(signal.SIGTERM)
        record = wait_until(
            lambda: (r := json.loads((run_dir / "run.json").read_text()))["interrupted_by"] and r,
            20, what="run.json to record the stop",
        )  # fmt: skip
        assert driver.poll() is None and record["exit_code"] is None and record["finished_at"] is None
        assert record["interrupted_by"] == "SIGTERM" and record["scheduler_kill_wait_s"] is None
        driver.send_signal(signal.SIGTERM)  # a second signal: kill now
        driver.communicate(timeout=30)
        record = json.loads((run_dir / "run.json").read_text())
        assert record["interrupted_by"] == "SIGTERM" and record["exit_code"] == -signal.SIGKILL
    finally:
        if driver.poll() is None:
            driver.kill()


@pytest.mark.timeout(60)
def test_inside_a_slurm_job_the_wait_ends_before_slurms_kill_wait(repo_root, tmp_path, env, work):
    """In a Slurm job the launcher waits for ft_launcher's shutdown only until RESERVE_S before KillWait, so
    it records the run's end before Slurm's SIGKILL: here KillWait 5 s, a 120 s margin that never comes."""
    run_dir = work / "runs" / "r1"
    path = f"{fake_scontrol(tmp_path, 5)}:{os.environ['PATH']}"
    extra = {"FTQUAL_TEST_MARGIN_S": "120", "SLURM_JOB_ID": "77", "PATH": path}
    driver = start_driver(repo_root, tmp_path, env, "ignore-term", extra_env=extra)
    try:
        wait_for_worker(run_dir)
        started = time.monotonic()
        driver.send_signal(signal.SIGTERM)
        driver.communicate(timeout=40)
        took = time.monotonic() - started
    finally:
        if driver.poll() is None:
            driver.kill()
    assert took < 5, f"{took:.1f} s: the wait ignored Slurm's KillWait"
    record = json.loads((run_dir / "run.json").read_text())
    assert record["scheduler_kill_wait_s"] == 5 and record["exit_code"] == -signal.SIGKILL
    assert record["interrupted_by"] == "SIGTERM" and record["finished_at"]
