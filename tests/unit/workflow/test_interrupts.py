"""ftqual.workflow.interrupts: the jobs on record, the signal forwarded to the live ones only, the main
process's handlers, and Snakemake's incomplete marker read where Snakemake writes it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from base64 import urlsafe_b64encode

import pytest

from ftqual.launch import procs
from ftqual.workflow import interrupts


def test_a_job_is_on_record_while_it_runs_and_gone_after(tmp_path):
    with interrupts.registered(tmp_path) as path:
        record = json.loads(path.read_text())
        assert record == {
            "pid": os.getpid(),
            "start_ticks": procs.start_time(os.getpid()),
            "host": socket.gethostname(),
        }
        assert interrupts.live_jobs(tmp_path) == [os.getpid()]
    assert not path.exists() and interrupts.live_jobs(tmp_path) == []


def test_the_record_goes_also_when_the_job_fails(tmp_path):
    with pytest.raises(RuntimeError), interrupts.registered(tmp_path):
        raise RuntimeError("the launcher failed")
    assert not list((tmp_path / interrupts.JOBS).glob("*.json"))


def write_record(tmp_path, name, **record):
    folder = tmp_path / interrupts.JOBS
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(record))


def test_only_live_jobs_of_this_host_are_signalled(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        here = socket.gethostname()
        start = procs.start_time(child.pid)
        write_record(tmp_path, "live", pid=child.pid, start_ticks=start, host=here)
        write_record(
            tmp_path, "reused", pid=child.pid, start_ticks=start + 1, host=here
        )  # another process now
        write_record(tmp_path, "elsewhere", pid=child.pid, start_ticks=start, host=here + "-other")
        write_record(tmp_path, "gone", pid=2**22 + 7, start_ticks=1, host=here)
        (tmp_path / interrupts.JOBS / "torn.json").write_text("{")
        sent = []
        reached = interrupts.forward(tmp_path, signal.SIGTERM, kill=lambda pid, sig: sent.append((pid, sig)))
        assert reached == [child.pid] and sent == [(child.pid, signal.SIGTERM)]
        # and for real: the job gets the very signal the workflow got
        assert interrupts.forward(tmp_path, signal.SIGTERM) == [child.pid]
        assert child.wait(timeout=30) == -signal.SIGTERM
    finally:
        child.kill()
        child.wait()


def test_the_main_process_forwards_then_stops_as_ctrl_c_does(tmp_path):
    """In a child interpreter (signal handlers are per process): a SIGTERM to it reaches the recorded job
    and ends it with KeyboardInterrupt, as a Ctrl-C would."""
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    write_record(
        tmp_path, "job", pid=job.pid, start_ticks=procs.start_time(job.pid), host=socket.gethostname()
    )
    code = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"  # as from a terminal, whatever started this test
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"  # as a shell's background command
        "from pathlib import Path\n"
        "from ftqual.workflow import interrupts\n"
        f"handled = interrupts.forward_to_jobs(Path({str(tmp_path)!r}), print)\n"
        "print('handled', sorted(s.name for s in handled), flush=True)\n"
        "me = os.environ[interrupts.WORKFLOW_ENV]\n"
        "print('env', me == interrupts.identity(), flush=True)\n"
        "print('asked before', interrupts.stop_asked(Path(" + repr(str(tmp_path)) + ")), flush=True)\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(30)\n"
        "except KeyboardInterrupt as exc:\n"
        "    print('interrupted', exc, flush=True)\n"
        # a job this workflow starts only now finds the marker (it inherits FTQUAL_WORKFLOW)
        "print('asked after', interrupts.stop_asked(Path(" + repr(str(tmp_path)) + ")), flush=True)\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == "handled ['SIGHUP', 'SIGINT', 'SIGTERM']"
        assert lines[1:3] == ["env True", "asked before None"]
        assert lines[3] == f"ftqual: SIGTERM: stopping the scenario runs (jobs {job.pid})"
        assert lines[4:] == ["interrupted SIGTERM", "asked after SIGTERM"]
        assert job.wait(timeout=30) == -signal.SIGTERM
    finally:
        job.kill()
        job.wait()


def test_an_ignored_hangup_stays_ignored_an_ignored_interrupt_does_not(tmp_path):
    """nohup ignores SIGHUP on purpose; a shell ignores SIGINT in a command it starts in the background, where
    a SIGINT sent to it is still a request to stop."""
    code = (
        "import signal\n"
        "from pathlib import Path\n"
        "from ftqual.workflow import interrupts\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        f"print(sorted(s.name for s in interrupts.forward_to_jobs(Path({str(tmp_path)!r}), print)))\n"
        "print(signal.getsignal(signal.SIGHUP) == signal.SIG_IGN)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["['SIGINT', 'SIGTERM']", "True"], out.stderr


def test_an_incomplete_marker_is_read_where_snakemake_writes_it(tmp_path):
    output = "results/kill/0123456789ab-1/attempt.json"
    assert not interrupts.left_incomplete(tmp_path, output)
    marker = tmp_path / ".snakemake" / "incomplete" / urlsafe_b64encode(output.encode()).decode()
    marker.parent.mkdir(parents=True)
    marker.write_text("")
    assert interrupts.left_incomplete(tmp_path, output)
    assert not interrupts.left_incomplete(tmp_path, "results/hang/0123456789ab-1/attempt.json")


def test_the_marker_path_is_snakemakes_own():
    """Pinned against the installed Snakemake's persistence: the folder and the encoding it records an
    incomplete output under (a Snakemake that moved them fails this test, not a user's rerun)."""
    import inspect

    from snakemake.persistence import file as persistence

    source = inspect.getsource(persistence.FilePersistence)
    assert 'self._incomplete_path = os.path.join(self.path, "incomplete")' in source
    assert "b64id = urlsafe_b64encode(id.encode()).decode()" in inspect.getsource(
        persistence.FilePersistence._record_path
    )


def marker(tmp_path, workflow: str | None, sig: str = "SIGINT") -> None:
    interrupts.interrupted_by(tmp_path, getattr(signal, sig), workflow)


def test_a_job_finds_the_marker_of_its_own_workflow_only(tmp_path):
    """The handshake for a signal that lands as a job starts (module docstring): the marker names the
    workflow process; one an earlier workflow left, or one read by a job of no workflow, asks nothing."""
    here = socket.gethostname()
    mine = {interrupts.WORKFLOW_ENV: f"{here} 4242 777"}
    assert interrupts.stop_asked(tmp_path, mine) is None  # no marker
    marker(tmp_path, f"{here} 4242 777", "SIGTERM")
    assert interrupts.stop_asked(tmp_path, mine) == "SIGTERM"
    assert interrupts.stop_asked(tmp_path, {interrupts.WORKFLOW_ENV: f"{here} 4242 778"}) is None  # earlier
    assert interrupts.stop_asked(tmp_path, {}) is None
    (tmp_path / interrupts.MARKER).write_text("{")  # torn
    assert interrupts.stop_asked(tmp_path, mine) is None
    # never read as a job on record
    assert interrupts.live_jobs(tmp_path) == []


def test_the_workflow_process_is_named_by_host_pid_and_start():
    here = socket.gethostname()
    assert interrupts.workflow_process({interrupts.WORKFLOW_ENV: f"{here} 12 345"}) == (12, 345)
    assert interrupts.workflow_process({interrupts.WORKFLOW_ENV: f"{here}-node7 12 345"}) is None  # Slurm
    assert interrupts.workflow_process({interrupts.WORKFLOW_ENV: "garbage"}) is None
    assert interrupts.workflow_process({}) is None
    assert interrupts.identity() == f"{here} {os.getpid()} {procs.start_time(os.getpid())}"


def test_a_job_watches_the_workflow_process_and_below_never_the_shell_above_it():
    """`nohup make run &` from a shell that then exits: the shell (and make's parent) above Snakemake may
    go; the job stopped its scenario because the whole chain up to init was watched."""
    chain = [(30, 3), (20, 2), (10, 1), (5, 0)]  # job's parent (a bash -c), snakemake, make, the login shell
    assert interrupts.watched_chain(chain, (20, 2)) == [(30, 3), (20, 2)]
    assert interrupts.watched_chain(chain, (30, 3)) == [(30, 3)]
    # a reused pid is not the workflow; no workflow among the ancestors (a Slurm job on its node): all of it
    assert interrupts.watched_chain(chain, (20, 9)) == chain
    assert interrupts.watched_chain(chain, None) == chain
