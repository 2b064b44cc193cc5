"""The run_scenario rule's supervision of its launcher (ftqual.workflow.run_scenario.run_launcher and
wait_turn), with a tiny Python child in place of the launcher."""

from __future__ import annotations

import io
import signal
import sys

import pytest

from ftqual.launch import gpu_turn, procs
from ftqual.workflow import run_scenario as rs


@pytest.fixture(autouse=True)
def keep_signal_handlers():
    """run_launcher installs this process's handlers and leaves them (as the rule does); pytest's return."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def voice():
    log, console = io.StringIO(), io.StringIO()
    return rs.Say("kill", log, console), log, console


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


class FakeTurn:
    """A GPU turn that is taken on the n-th try (never when None); its holder changes on `moves_on`."""

    gpus = gpu_turn.GpuSet(("0", "1"))

    def __init__(self, taken_on: int | None, moves_on: int | None = None):
        self.tries, self.taken_on, self.moves_on = 0, taken_on, moves_on

    def take(self) -> bool:
        self.tries += 1
        return self.taken_on is not None and self.tries >= self.taken_on

    def waiting_for(self) -> str:
        if self.moves_on is not None and self.tries >= self.moves_on:
            return "GPU 1 of GPUs 0,1: held by scenario hang (run hang-2) of /b (pid 8)"
        return "GPU 0 of GPUs 0,1: held by scenario base (run base-1) of /a (pid 7)"


def test_the_launcher_runs_in_its_own_session_with_its_output_in_the_console_log(tmp_path):
    console = tmp_path / "console.log"
    say, log, _ = voice()
    code = "import os, sys; print('sid', os.getsid(0) == os.getpid(), os.environ['MARK']); sys.exit(3)"
    result = rs.run_launcher(say, child(code), {"MARK": "m1"}, console)
    assert result.rc == 3 and result.stopped_by is None and isinstance(result.started, float)
    assert console.read_text() == "sid True m1\n"
    assert log.getvalue() == ""


def test_a_signal_to_the_job_stops_the_launcher_with_one_sigterm(tmp_path):
    # The child signals its parent (this process) once it runs; the handler forwards SIGTERM to it.
    code = "import os, signal, time; time.sleep(0.5); os.kill(os.getppid(), signal.SIGTERM); time.sleep(30)"
    say, log, _ = voice()
    result = rs.run_launcher(say, child(code), {}, tmp_path / "console.log")
    assert result.stopped_by == "SIGTERM"
    assert result.rc == -signal.SIGTERM
    assert result.started is not None
    assert log.getvalue().startswith("[run_scenario kill] SIGTERM: sending SIGTERM to the launcher (pid ")


def test_a_vanished_workflow_stops_the_launcher(tmp_path, monkeypatch):
    monkeypatch.setattr(procs, "first_gone", lambda chain: 4242)
    say, log, _ = voice()
    result = rs.run_launcher(say, child("import time; time.sleep(30)"), {}, tmp_path / "console.log")
    assert result.stopped_by == "the workflow process 4242 is gone"
    assert result.rc == -signal.SIGTERM
    assert "the workflow process 4242 is gone: sending SIGTERM to the launcher" in log.getvalue()


def test_the_launcher_waits_for_the_gpu_turn_and_says_so(tmp_path):
    say, _, console = voice()
    turn = FakeTurn(taken_on=2)
    result = rs.run_launcher(say, child("pass"), {}, tmp_path / "console.log", turn=turn)
    assert result.rc == 0 and turn.tries == 2
    assert console.getvalue().splitlines() == [
        "ftqual: kill: waiting for GPU 0 of GPUs 0,1: held by scenario base (run base-1) of /a (pid 7)",
        "ftqual: kill: got GPUs 0,1: launching",
    ]


def test_waiting_for_the_gpus_says_so_again_when_another_run_holds_them():
    say, _, console = voice()
    assert rs.wait_turn(say, FakeTurn(taken_on=5, moves_on=3), [], []) is True
    assert console.getvalue().splitlines() == [
        "ftqual: kill: waiting for GPU 0 of GPUs 0,1: held by scenario base (run base-1) of /a (pid 7)",
        "ftqual: kill: waiting for GPU 1 of GPUs 0,1: held by scenario hang (run hang-2) of /b (pid 8)",
        "ftqual: kill: got GPUs 0,1: launching",
    ]


def test_a_vanished_workflow_while_waiting_for_the_gpus_launches_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(procs, "first_gone", lambda chain: 99)
    say, _, _ = voice()
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').close()"
    result = rs.run_launcher(say, child(code), {}, tmp_path / "console.log", turn=FakeTurn(None))
    assert result == rs.LauncherRun(1, "the workflow process 99 is gone", None)
    assert not marker.exists()


def test_wait_turn_gives_up_at_once_when_already_stopped():
    say, _, console = voice()
    stopped = ["SIGINT"]
    assert rs.wait_turn(say, FakeTurn(None), stopped, []) is False
    assert stopped == ["SIGINT"]
    assert "waiting for GPU 0 of GPUs 0,1: held by scenario base (run" in console.getvalue()
    say, _, console = voice()
    assert rs.wait_turn(say, FakeTurn(1), [], []) is True
    assert console.getvalue() == ""  # taken at once: nothing to say


def interrupted_workflow(tmp_path, monkeypatch, sig: str = "SIGINT") -> None:
    """This job's workflow (FTQUAL_WORKFLOW) was interrupted before the job was on record: its marker."""
    from ftqual.workflow import interrupts

    monkeypatch.chdir(tmp_path)
    me = "host-a 4242 777"
    monkeypatch.setenv(interrupts.WORKFLOW_ENV, me)
    monkeypatch.setattr(interrupts.socket, "gethostname", lambda: "host-a")
    interrupts.interrupted_by(tmp_path, getattr(signal, sig), me)


def test_a_job_whose_workflow_was_interrupted_before_it_was_on_record_launches_nothing(tmp_path, monkeypatch):
    """A Ctrl-C right after `localrule run_scenario`: the workflow's handler found no job on record, and
    Snakemake still started the job (and waited for it): the baseline trained to its end."""
    interrupted_workflow(tmp_path, monkeypatch)
    say, _, _ = voice()
    marker = tmp_path / "ran"
    result = rs.run_launcher(say, child(f"open({str(marker)!r}, 'w').close()"), {}, tmp_path / "console.log")
    assert result == rs.LauncherRun(1, "SIGINT", None)
    assert not marker.exists()
    # nor while it waits for its GPU turn
    result = rs.run_launcher(say, child("pass"), {}, tmp_path / "c.log", turn=FakeTurn(None))
    assert result == rs.LauncherRun(1, "SIGINT", None)


def test_an_interrupt_the_job_never_got_stops_its_running_launcher(tmp_path, monkeypatch):
    """The marker appears while the launcher runs (the workflow's handler ran between this job's record and
    its first look): the launcher gets its one SIGTERM."""
    from ftqual.workflow import interrupts

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(interrupts.WORKFLOW_ENV, "host-a 4242 777")
    monkeypatch.setattr(interrupts.socket, "gethostname", lambda: "host-a")
    # the child writes the marker as the workflow's handler would, once it runs
    code = (
        "import json, os, time\n"
        f"p = {str(tmp_path / interrupts.MARKER)!r}\n"
        "os.makedirs(os.path.dirname(p), exist_ok=True)\n"
        "json.dump({'workflow': 'host-a 4242 777', 'signal': 'SIGTERM'}, open(p, 'w'))\n"
        "time.sleep(30)\n"
    )
    say, log, _ = voice()
    result = rs.run_launcher(say, child(code), {}, tmp_path / "console.log")
    assert result.stopped_by == "SIGTERM" and result.rc == -signal.SIGTERM and result.started is not None
    assert "SIGTERM: sending SIGTERM to the launcher" in log.getvalue()
    # negative control: the same marker of another workflow (an earlier one) stops nothing
    monkeypatch.setenv(interrupts.WORKFLOW_ENV, "host-a 4242 778")
    result = rs.run_launcher(say, child("import time; time.sleep(2.5)"), {}, tmp_path / "c2.log")
    assert result.stopped_by is None and result.rc == 0
