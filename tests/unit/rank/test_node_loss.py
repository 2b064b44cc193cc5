"""node_loss in the worker wrapper: the whole node goes (its ft_launcher, every process below it, the rank).

Real processes: a stand-in launcher records itself in pids/<host>.launcher.json as our launcher does, starts
a peer worker and the wrapper; the wrapper must kill all three and name them in the marker. And the guard:
a launcher record that is not the worker's live ancestor is never signalled.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from tests.support.wait import stays, wait_until
from tests.unit.rank.test_worker import child_files

LAUNCHER = """
import json, os, subprocess, sys, time
from pathlib import Path
pid_dir, host = Path(sys.argv[1]), sys.argv[2]
start = int(Path(f"/proc/{os.getpid()}/stat").read_text().rpartition(")")[2].split()[19])
(pid_dir / f"{host}.launcher.json").write_text(json.dumps({"pid": os.getpid(), "start_time": start}))
peer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
(pid_dir / "peer.pid").write_text(str(peer.pid))
subprocess.Popen(sys.argv[3:]).wait()
time.sleep(120)
"""


def gone(pid: int) -> bool:
    """Dead: no /proc entry, or a zombie nobody reaped yet."""
    try:
        state = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def wrapper_cmd(repo_root, tmp_path, pid_dir):
    _, script = child_files(tmp_path)
    return [
        sys.executable,
        str(repo_root / "workloads" / "megatron_gpt_worker.py"),
        *("--entrypoint", str(script), "--checkpoint-dir", str(tmp_path / "ckpt")),
        *("--fault-marker", str(tmp_path / "fault_injected.json"), "--fault", "node_loss"),
        *("--fault-rank", "0", "--run-id", "child", "--pid-dir", str(pid_dir)),
        *("--", str(tmp_path / "ckpt"), str(tmp_path / "log.txt")),
    ]


def child_env(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "fake")}
    return env | {"RANK": "0", "LOCAL_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "0"}


@pytest.mark.timeout(60)
def test_node_loss_kills_the_launcher_every_process_below_it_and_the_rank(repo_root, tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    host = socket.gethostname()
    cmd = [sys.executable, "-c", LAUNCHER, str(pid_dir), host, *wrapper_cmd(repo_root, tmp_path, pid_dir)]
    launcher = subprocess.Popen(cmd, env=child_env(tmp_path), start_new_session=True)
    try:
        launcher.wait(timeout=40)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    assert launcher.returncode == -signal.SIGKILL  # the node's ft_launcher went, as on a lost node
    peer = int((pid_dir / "peer.pid").read_text())
    wait_until(lambda: gone(peer), 10, what=f"the node's other worker (pid {peer}) to die")
    marker = json.loads((tmp_path / "fault_injected.json").read_text())
    assert marker["fault"] == "node_loss" and marker["section"] == "step"
    assert marker["node"]["host"] == host and marker["node"]["launcher_pid"] == launcher.pid
    assert peer in marker["node"]["processes"]
    assert marker["pid"] not in marker["node"]["processes"]  # the rank kills itself last
    # the rank kills itself after its launcher: it may still be on its way out when the launcher is gone
    wait_until(lambda: gone(marker["pid"]), 10, what=f"the fault rank (pid {marker['pid']}) to die")
    assert (tmp_path / "log.txt").read_text() == "before-step"  # killed at the step, as a kill is


@pytest.mark.timeout(60)
def test_node_loss_never_signals_a_launcher_that_is_not_its_ancestor(repo_root, tmp_path):
    """A launcher record naming an unrelated live process (a stale or forged record): no injection at all,
    that process untouched, and the rank fails at exit because its fault never came."""
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    host = socket.gethostname()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        start = int(open(f"/proc/{bystander.pid}/stat").read().rpartition(")")[2].split()[19])
        record = {"pid": bystander.pid, "start_time": start}
        (pid_dir / f"{host}.launcher.json").write_text(json.dumps(record))
        proc = subprocess.run(
            wrapper_cmd(repo_root, tmp_path, pid_dir), env=child_env(tmp_path), capture_output=True, text=True
        )
        assert proc.returncode == 3, proc.stderr  # EXIT_FAULT_NEVER_INJECTED
        assert "is not this worker's live ancestor" in proc.stderr
        stays(lambda: bystander.poll() is None, 0.5, "the bystander lives")  # a signal sent lands at once
        state = open(f"/proc/{bystander.pid}/stat").read().rpartition(")")[2].split()[0]
        assert state != "T"  # never stopped either
        assert not (tmp_path / "fault_injected.json").exists()
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("variable", ["NVRX_NODE_RANK", "SLURM_NODEID"])
def test_node_loss_never_takes_the_first_node(repo_root, tmp_path, variable):
    """With a spare node NVRx may place the fault rank on the first node, whose ft_launcher hosts the
    rendezvous store: the wrapper refuses there (the run then fails as never injected), never kills it."""
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    host = socket.gethostname()
    cmd = [sys.executable, "-c", LAUNCHER, str(pid_dir), host, *wrapper_cmd(repo_root, tmp_path, pid_dir)]
    env = {**child_env(tmp_path), "NVRX_NODE_RANK": "", "SLURM_NODEID": "", variable: "0"}
    launcher = subprocess.Popen(cmd, env=env, start_new_session=True, stderr=subprocess.PIPE, text=True)
    try:
        log = tmp_path / "log.txt"

        def survived() -> bool:
            assert launcher.poll() is None, "the node's launcher died"
            return log.exists() and log.read_text() == "survived-step"

        wait_until(survived, 40, what="the rank to survive its step")
        # the wrapper exits with its verdict while the stand-in launcher sleeps on: the node's launcher is
        # neither killed ...
        stays(lambda: launcher.poll() is None, 0.5, "the node's launcher lives")
        state = open(f"/proc/{launcher.pid}/stat").read().rpartition(")")[2].split()[0]
        assert state != "T"  # ... nor left stopped
        assert not (tmp_path / "fault_injected.json").exists()
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)
        _, err = launcher.communicate()
    assert "this rank runs on the first node, which hosts the rendezvous store" in err
