"""ftqual cleanup: kill a run's survivors by recorded process group, never a process whose pid was reused
and never one whose environment does not carry the run's ID (FTQUAL_RUN_ID), whatever its pid record says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from ftqual.launch import cleanup, procs
from tests.support.wait import gone_within, stays, wait_until

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]
RUN_ID = "cleanup-test-1"


def record(run_dir, name, proc_pid, **extra):
    pid_dir = run_dir / "pids"
    pid_dir.mkdir(exist_ok=True)
    data = procs.pid_record(proc_pid) | extra
    (pid_dir / name).write_text(json.dumps(data))
    return data


def wait_dead(proc: subprocess.Popen, timeout=10) -> int:
    return proc.wait(timeout=timeout)


@pytest.fixture(autouse=True)
def run_json(tmp_path):
    """The test's run directory is tmp_path; its run.json names the run ID cleanup expects."""
    (tmp_path / "run.json").write_text(json.dumps({"schema": "ftqual.run/v1", "run_id": RUN_ID}))


@pytest.fixture
def started():
    """Processes a test starts (carrying RUN_ID, as the launcher's children do, unless `run_id` says
    otherwise; None: no run ID at all); whatever survives the test is killed by pid here."""
    mine: list[subprocess.Popen] = []

    def _start(cmd, run_id: str | None = RUN_ID, **kw):
        env = {k: v for k, v in os.environ.items() if k != procs.RUN_ID_ENV}
        if run_id is not None:
            env[procs.RUN_ID_ENV] = run_id
        proc = subprocess.Popen(cmd, start_new_session=True, env=env, **kw)
        mine.append(proc)
        return proc

    yield _start
    for proc in mine:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def test_stat_with_odd_command_names(tmp_path, started):
    odd = tmp_path / "a) b (c"  # the command name /proc/<pid>/stat shows in parentheses
    odd.symlink_to(sys.executable)
    proc = started([str(odd), *SLEEPER[1:]])  # Popen returns once it exec'd: its stat names it
    stat = procs.read_stat(proc.pid)
    fields = open(f"/proc/{proc.pid}/stat").read().rpartition(")")[2].split()
    # a live process: running, sleeping, or in a disk wait ('D': the fresh interpreter still paging itself
    # in on a busy machine, seen in CI)
    assert (stat.pid, stat.ppid, stat.pgid) == (proc.pid, os.getpid(), proc.pid) and stat.state in "RSD"
    assert stat.start_time == int(fields[19])


def test_own_stat():
    me = procs.read_stat(os.getpid())
    assert me.pid == os.getpid() and me.pgid == os.getpgrp() and me.ppid == os.getppid()
    assert procs.alive(os.getpid(), me.start_time)
    assert not procs.alive(os.getpid(), me.start_time + 1)


def test_kills_recorded_worker_groups_including_stopped_ones(tmp_path, started):
    host = procs.host_name()
    worker = started(["sh", "-c", f"{' '.join(SLEEPER[:2])} 'import time; time.sleep(120)' & exec sleep 120"])
    stopped = started(SLEEPER)
    os.kill(stopped.pid, signal.SIGSTOP)
    record(tmp_path, f"{host}.cycle0.rank0.json", worker.pid)
    record(tmp_path, f"{host}.cycle0.rank1.json", stopped.pid)
    group = lambda: [p.pid for p in procs.all_procs() if p.pgid == worker.pid]  # noqa: E731
    # the worker and its child, one process group (the shell forks the child when it gets to it)
    wait_until(lambda: len(group()) == 2, 10, what="the worker's child to start")

    report = cleanup.kill_run(tmp_path, host)

    assert wait_dead(worker) == -signal.SIGKILL
    assert wait_dead(stopped) == -signal.SIGKILL
    assert {item["pid"] for item in report.killed} >= {worker.pid, stopped.pid}
    gone_within(group, 10, "the worker's process group to end")
    assert cleanup.survivors(tmp_path, host) == []


def test_reused_pid_is_left_alone(tmp_path, started):
    host = procs.host_name()
    innocent = started(SLEEPER)
    data = record(tmp_path, f"{host}.cycle0.rank0.json", innocent.pid)
    data["start_time"] -= 5  # the recorded process started earlier: this pid now names someone else
    (tmp_path / "pids" / f"{host}.cycle0.rank0.json").write_text(json.dumps(data))

    report = cleanup.kill_run(tmp_path, host)

    stays(lambda: innocent.poll() is None, 0.2, "the process whose pid was reused lives")
    assert report.killed == [] and "id reused" in report.skipped[0]


def test_other_hosts_records_are_ignored(tmp_path, started):
    proc = started(SLEEPER)
    record(tmp_path, "some-other-node.cycle0.rank0.json", proc.pid)
    assert cleanup.kill_run(tmp_path, procs.host_name()).killed == []
    stays(lambda: proc.poll() is None, 0.2, "another host's process lives")


def test_launcher_descendants_in_their_own_sessions_are_found(tmp_path, started):
    """Workers ft_launcher started in new sessions, before their pid record was written."""
    host = procs.host_name()
    child_pid_file = tmp_path / "child.pid"
    launcher = started(
        [
            sys.executable,
            "-c",
            (
                "import subprocess, sys, time\n"
                f"c = subprocess.Popen({SLEEPER!r}, start_new_session=True)\n"
                f"open({str(child_pid_file)!r}, 'w').write(str(c.pid))\n"
                "time.sleep(120)\n"
            ),
        ]
    )
    wait_until(lambda: child_pid_file.exists() and child_pid_file.read_text(), 10, 0.05, "the child's pid")
    child = int(child_pid_file.read_text())
    child_start = procs.start_time(child)
    record(tmp_path, f"{host}.launcher.json", launcher.pid)

    report = cleanup.kill_run(tmp_path, host)

    assert wait_dead(launcher) == -signal.SIGKILL
    assert child in {item["pid"] for item in report.killed}
    gone_within(lambda: procs.alive(child, child_start), 10, f"the launcher's child (pid {child}) to die")


def test_cli(tmp_path, started, capsys):
    host = procs.host_name()
    proc = started(SLEEPER)
    record(tmp_path, f"{host}.cycle1.rank0.json", proc.pid)
    assert cleanup.main([str(tmp_path), "--dry-run"]) == 0
    assert f"alive: pid {proc.pid}" in capsys.readouterr().out
    assert cleanup.main([str(tmp_path)]) == 0
    assert f"killed pid {proc.pid}" in capsys.readouterr().out
    assert wait_dead(proc) == -signal.SIGKILL
    assert cleanup.main([str(tmp_path)]) == 0
    assert "nothing left to kill" in capsys.readouterr().out


def test_cli_refuses_a_missing_run_dir(tmp_path, capsys):
    assert cleanup.main([str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_half_written_record_is_reported_not_fatal(tmp_path):
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / f"{procs.host_name()}.cycle0.rank0.json").write_text("{")
    report = cleanup.kill_run(tmp_path, procs.host_name(), rounds=2, pause_s=0.01)
    assert report.killed == [] and report.unreadable == [f"{procs.host_name()}.cycle0.rank0.json"]


def test_run_id_comes_from_run_json_else_the_directory_name(tmp_path):
    assert cleanup.expected_run_id(tmp_path) == RUN_ID
    (tmp_path / "run.json").write_text("{not json")
    assert cleanup.expected_run_id(tmp_path) == tmp_path.name
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "../../etc"}))
    assert cleanup.expected_run_id(tmp_path) == tmp_path.name


def test_environment_proof(started):
    ours = started(SLEEPER)
    other = started(SLEEPER, run_id=RUN_ID + "0")
    none = started(SLEEPER, run_id=None)  # exec'd when Popen returns: /proc/<pid>/environ is theirs
    assert procs.carries_run_id(ours.pid, RUN_ID)
    assert not procs.carries_run_id(other.pid, RUN_ID)  # a prefix of another run's ID is not ours
    assert not procs.carries_run_id(none.pid, RUN_ID)
    assert not procs.carries_run_id(2**22 + 7, RUN_ID)  # no such process


@pytest.mark.parametrize("kind", ["cycle0.rank1", "launcher"])
@pytest.mark.parametrize("owner", [None, "another-run"])
def test_forged_record_naming_an_unrelated_process_is_refused(tmp_path, started, kind, owner):
    """A record with the right pid and start time of a process that is not the run's: never signalled."""
    host = procs.host_name()
    innocent = started(SLEEPER, run_id=owner)
    record(tmp_path, f"{host}.{kind}.json", innocent.pid)  # pid, pgid and start time all genuine

    report = cleanup.kill_run(tmp_path, host, rounds=2, pause_s=0.05)

    assert report.killed == []
    assert any(f"pid {innocent.pid}" in line and "not provably this run's" in line for line in report.skipped)
    stays(lambda: innocent.poll() is None, 0.2, "the unrelated process lives")
    assert procs.read_stat(innocent.pid).state != "T"  # not even frozen
    assert cleanup.survivors(tmp_path, host) == []


def test_forged_record_among_genuine_ones(tmp_path, started):
    host = procs.host_name()
    ours = started(SLEEPER)
    innocent = started(SLEEPER, run_id=None)
    record(tmp_path, f"{host}.cycle0.rank0.json", ours.pid)
    record(tmp_path, f"{host}.cycle0.rank1.json", innocent.pid)

    report = cleanup.kill_run(tmp_path, host)

    assert wait_dead(ours) == -signal.SIGKILL
    assert [item["pid"] for item in report.killed] == [ours.pid]
    stays(lambda: innocent.poll() is None, 0.2, "the unrelated process lives")


def test_cli_refuses_a_forged_record(tmp_path, started, capsys):
    host = procs.host_name()
    innocent = started(SLEEPER, run_id=None)
    record(tmp_path, f"{host}.launcher.json", innocent.pid)
    assert cleanup.main([str(tmp_path), "--dry-run"]) == 0
    assert "alive:" not in capsys.readouterr().out
    assert cleanup.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "not provably this run's" in out and "nothing left to kill" in out
    stays(lambda: innocent.poll() is None, 0.2, "the unrelated process lives")


def test_cli_run_id_option(tmp_path, started, capsys):
    host = procs.host_name()
    proc = started(SLEEPER, run_id="renamed-run")
    record(tmp_path, f"{host}.cycle0.rank0.json", proc.pid)
    assert cleanup.main([str(tmp_path)]) == 0
    stays(lambda: proc.poll() is None, 0.2, "another run's process lives")
    assert cleanup.main([str(tmp_path), "--run-id", "renamed-run"]) == 0
    assert wait_dead(proc) == -signal.SIGKILL
    assert cleanup.main([str(tmp_path), "--run-id", "a\nb"]) == 2
