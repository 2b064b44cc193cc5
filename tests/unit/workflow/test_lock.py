"""ftqual.workflow.lock: a lock left by a workflow that is provably gone is released; a live one's is not."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from ftqual.launch import procs
from ftqual.workflow import lock as workflow_lock


def lock(workdir):
    locks = workdir / workflow_lock.LOCKS
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.output.lock").write_text("results/summary.json\n")


def owner_record(workdir, pid, start_ticks, host=None):
    path = workdir / workflow_lock.OWNERS / f"{pid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    host = host or socket.gethostname()
    path.write_text(json.dumps({"pid": pid, "start_ticks": start_ticks, "host": host, "argv": "snakemake"}))
    return path


@pytest.fixture
def gone_pid():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = procs.start_time(child.pid) or 1
    child.wait()
    return child.pid, ticks


def test_a_lock_whose_recorded_holder_is_gone_is_released(tmp_path, gone_pid):
    pid, ticks = gone_pid
    lock(tmp_path)
    record = owner_record(tmp_path, pid, ticks)
    said = []
    assert workflow_lock.release_stale(tmp_path, said.append) == "released"
    assert not (tmp_path / workflow_lock.LOCKS).exists() and not record.exists()
    host = socket.gethostname()
    assert said == [
        f"ftqual: released the lock left by a workflow that is gone (pid {pid} on {host} (snakemake))"
    ]


def test_a_reused_pid_is_not_the_holder(tmp_path):
    lock(tmp_path)
    me = os.getpid()
    owner_record(tmp_path, me, (procs.start_time(me) or 0) + 1)  # this pid, another process's start time
    assert workflow_lock.release_stale(tmp_path, lambda line: None) == "released"


def test_a_live_holder_keeps_its_lock_and_is_named(tmp_path):
    lock(tmp_path)
    me = os.getpid()
    owner_record(tmp_path, me, procs.start_time(me))
    said = []
    assert workflow_lock.release_stale(tmp_path, said.append) == "held"
    assert (tmp_path / workflow_lock.LOCKS / "0.output.lock").is_file()
    assert len(said) == 1 and f"still running: pid {me} on " in said[0]


def test_an_unrecorded_or_remote_lock_is_left_alone(tmp_path, gone_pid):
    lock(tmp_path)
    assert workflow_lock.release_stale(tmp_path, lambda line: None) == "foreign"
    owner_record(tmp_path, gone_pid[0], gone_pid[1], host="another-node")  # shared filesystem
    assert workflow_lock.release_stale(tmp_path, lambda line: None) == "foreign"
    assert (tmp_path / workflow_lock.LOCKS / "0.output.lock").is_file()


def test_no_lock_tidies_spent_records(tmp_path, gone_pid):
    record = owner_record(tmp_path, *gone_pid)
    (tmp_path / workflow_lock.OWNERS / "junk.json").write_text("{")
    assert workflow_lock.release_stale(tmp_path, lambda line: None) == "unlocked"
    assert not record.exists()


def test_record_and_forget_self(tmp_path):
    path = workflow_lock.record_self(tmp_path)
    data = json.loads(path.read_text())
    assert data["pid"] == os.getpid() and data["start_ticks"] == procs.start_time(os.getpid())
    workflow_lock.forget_self(tmp_path)
    assert not path.exists()


def test_hangup_interrupts_unless_ignored():
    code = (
        "import os, signal, sys\n"
        "from ftqual.workflow import lock as workflow_lock\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN if sys.argv[1] == 'nohup' else signal.SIG_DFL)\n"
        "installed = workflow_lock.hangup_as_interrupt()\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGHUP)\n"
        "    print('ran on', installed)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', installed)\n"
    )
    for mode, expected in (("terminal", "interrupted True"), ("nohup", "ran on False")):
        out = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected, out
