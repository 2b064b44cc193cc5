"""Ctrl-C, a closed terminal (SIGHUP) or a killed Snakemake (SIGKILL) during a run: no process of the run is
left behind, the evidence stays, no summary of earlier attempts is left standing, and a rerun redoes it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.wait import gone_within, stays, wait_until
from tests.support.workflow import (
    copy_project,
    finished_unsignalled,
    job_stats,
    last_iteration,
    process_alive,
    processes_mentioning,
    read_json,
    snakemake_cmd,
    snakemake_env,
    start_time,
    terminal_signals,
    utc_now,
    write_yaml,
)

# Long enough that the ranks are still training when they are held (SIGSTOP, once the log shows iteration
# MID_TRAINING): over 5 s of steps left then, for a look every 0.2 s; the rerun below trains it all, so no
# longer (a run that ends first is the test's setup failing, said so, never a pass).
TRAIN_ITERS = 60
MID_TRAINING = 5  # iterations the log shows before the signal: the ranks train, past their setup


def survivors(recorded: dict[int, int]) -> set[int]:
    """The recorded processes still alive (a reused pid would have another start time)."""
    return {pid for pid, start in recorded.items() if start_time(pid) == start}


STOP_BOUND_S = (
    60  # a signal to the workflow stops its runs within this (the launcher's term timeout and more)
)


@pytest.mark.parametrize("how", ["SIGINT", "SIGHUP", "SIGKILL"])
def test_interrupt_leaves_no_process_behind(tmp_path, how):
    """`SIGINT`/`SIGHUP`: what a terminal sends its foreground process group; `SIGKILL`: Snakemake killed
    outright. (A signal to Snakemake's pid alone: test_workflow_interrupt_pid.py.)"""
    interrupted_then_rerun(tmp_path, how)


def interrupted_then_rerun(tmp_path: Path, how: str) -> None:
    """A baseline interrupted by `how` in the middle of training, then the same command again: no process
    left, the evidence kept, no stale PASS, and the rerun redoes it (one test per way to interrupt; the
    modules of the suite run them on two workers)."""
    project = copy_project(tmp_path / "project")
    # only the baseline, long enough to be interrupted in the middle of training
    write_yaml(
        project / "long.yaml",
        {
            # 6 s of training (0.1 s a step): the ranks are held once the log shows a few iterations
            # (a run that finished first fails the test as its setup's failure, never passes it); the same
            # command is rerun below and trains it all
            "train_iters": TRAIN_ITERS,
            "save_interval": TRAIN_ITERS // 4,
            "smoke": {"step_seconds": 0.1},
            # the ranks are held (SIGSTOP) from mid-training until the signal has landed: inside this
            "timeouts": {"setup": 120, "step": 120},
            "scenarios": {
                "kill": {"fault": "kill", "enabled": False},
                "hang": {"fault": "hang", "enabled": False},
            },
        },
    )
    out = open(project / "snakemake.out", "w")
    # A terminal's Ctrl-C sends SIGINT to the whole foreground process group: start snakemake as the
    # leader of its own group and signal that group.
    proc = subprocess.Popen(
        snakemake_cmd("--profile", "profiles/local", "--configfile", "long.yaml"),
        cwd=project,
        env=snakemake_env(),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # a terminal's defaults for SIGINT and SIGHUP, also when this suite was started in the background or
        # under nohup (which children inherit, and which the workflow rightly honours by running on)
        preexec_fn=terminal_signals,
    )
    held: list[int] = []
    try:

        def training() -> tuple[Path, list[Path]] | None:
            assert proc.poll() is None, (project / "snakemake.out").read_text()
            for run_dir in (project / "runs").glob("baseline-*"):
                records = sorted((run_dir / "pids").glob("*.json"))
                ranks = [r for r in records if ".rank" in r.name]
                launcher = any(r.name.endswith(".launcher.json") for r in records)
                if len(ranks) == 2 and launcher and last_iteration(run_dir) >= MID_TRAINING:
                    return run_dir, records
            return None

        run_dir, records = wait_until(
            training, 240, 0.2, f"the baseline's log to show iteration {MID_TRAINING}",
            detail=lambda: (project / "snakemake.out").read_text()[-3000:],
        )  # fmt: skip
        assert len(records) == 3, records
        recorded = {read_json(r)["pid"]: read_json(r)["start_time"] for r in records}
        # Held mid-run until the signal has landed: the run cannot reach its end first, whatever the pace
        # of a busy machine (seen: the baseline at 300 of 300 when the signal was due, after the refused run
        # below took its time).
        held = [read_json(r)["pid"] for r in records if ".rank" in r.name]
        for pid in held:
            os.kill(pid, signal.SIGSTOP)
        assert not set(recorded) - survivors(recorded), recorded
        if how == "SIGINT":
            # the same command beside a live workflow: refused, with one line naming the holder
            beside = subprocess.run(
                snakemake_cmd("--profile", "profiles/local", "--configfile", "long.yaml"),
                cwd=project, env=snakemake_env(), capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert beside.returncode != 0
            assert f"locked by a workflow that is still running: pid {proc.pid} " in beside.stderr, (
                beside.stderr
            )

        # what the signal interrupts must be running when it lands (the refused run above takes a while)
        iteration = last_iteration(run_dir)
        assert not set(recorded) - survivors(recorded) and iteration < TRAIN_ITERS, (recorded, iteration)
        signalled_at = utc_now()
        t0 = time.monotonic()
        if how == "SIGKILL":
            os.kill(proc.pid, signal.SIGKILL)  # Snakemake alone: its jobs see their workflow vanish
        elif how.endswith(" to pid"):
            os.kill(proc.pid, getattr(signal, how.split()[0]))  # Snakemake's pid alone
        else:
            os.killpg(proc.pid, getattr(signal, how))  # what a terminal sends its foreground group
        for pid in held:  # the stop now reaches ranks that run
            os.kill(pid, signal.SIGCONT)
        held = []
        # every recorded process goes (a reused pid would have another start time)
        gone_within(
            lambda: survivors(recorded), STOP_BOUND_S, f"every recorded process of the run to end after {how}"
        )
        rc = proc.wait(timeout=120)
        stop_s = time.monotonic() - t0
    finally:
        for pid in held:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()
    output = (project / "snakemake.out").read_text()
    assert rc != 0, output
    print(f"\nthe run stopped {stop_s:.1f} s after {how}")

    assert [run_dir] == list((project / "runs").glob("baseline-*"))
    # the job's own last `ftqual cleanup <run dir>` may still be finishing
    gone_within(lambda: processes_mentioning(run_dir.name), 60, f"every process naming {run_dir.name} to end")

    # the evidence stays; Snakemake's output does not exist, so the next run redoes the scenario
    finished_unsignalled(run_dir, signalled_at, f"iteration {iteration}/{TRAIN_ITERS} then")
    run = read_json(run_dir / "run.json")
    assert run["interrupted_by"] in ("SIGTERM", "SIGINT") and run["exit_code"] is not None
    if how.endswith(" to pid"):
        assert "stopping the scenario runs (jobs " in output, output
    assert (run_dir / "logs" / "train_cycle0.log").is_file()
    assert not list((project / "results" / "baseline").glob("*/attempt.json"))
    summary = project / "results" / "summary.md"  # rebuilt from what exists, or gone: never a stale PASS
    assert not summary.exists() or not summary.read_text().startswith("# ftqual: PASS")
    [log] = (project / "logs" / "run_scenario" / "baseline").glob("*.log")
    assert "sending SIGTERM to the launcher" in log.read_text()
    if how == "SIGKILL":
        assert "the workflow process" in log.read_text()

    # the same config plans the interrupted attempt again (no --unlock needed, also after SIGKILL) ...
    plan = subprocess.run(
        snakemake_cmd("-n", "--profile", "profiles/local", "--configfile", "long.yaml"),
        cwd=project,
        env=snakemake_env(),
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0 and job_stats(plan.stdout)["run_scenario"] == 1, plan.stdout + plan.stderr
    # ... and the same command runs it again with a fresh run ID: no LockException, no --unlock
    args = ("--profile", "profiles/local", "--configfile", "long.yaml")
    again = subprocess.run(
        snakemake_cmd(*args), cwd=project, env=snakemake_env(), capture_output=True, text=True
    )
    output = again.stdout + again.stderr
    assert "LockException" not in output and "Directory cannot be locked" not in output, output
    if how == "SIGKILL":  # Snakemake had no chance to release its lock: the next run did, saying whose
        assert f"released the lock left by a workflow that is gone (pid {proc.pid} " in output, output
    # baseline only: no fault scenario ran, so the qualification is inconclusive (exit 1) but complete
    assert (project / "results" / "summary.md").read_text().startswith("# ftqual: INCONCLUSIVE — no fault"), (
        output
    )
    assert len(list((project / "runs").glob("baseline-*"))) == 2


def _pid_records(run_dir: Path) -> tuple[list[dict], bool]:
    records = sorted((run_dir / "pids").glob("*.json"))
    ranks = [read_json(r) for r in records if ".rank" in r.name]
    return ranks, any(r.name.endswith(".launcher.json") for r in records)


def test_nohup_outlives_its_shell_and_a_signal_as_a_scenario_starts_stops_it(tmp_path):
    """One project, two workflow runs.

    1. `nohup snakemake ... &` from a shell that then exits (the docs' advice): before, the job watched every
       process above it, took the shell's exit for a vanished workflow and stopped the scenario (INCONCLUSIVE,
       exit 1). The ranks are held (SIGSTOP) while the shell exits and for a while after, so the scenario is
       mid-run then by construction, whatever the machine's pace; then it goes on to its verdict.
    2. The same project with the kill scenario enabled, signalled (Snakemake's pid alone) the moment the kill
       job shows it has started (its slot folder appears, before the job is on record): before, the workflow's
       handler found no job to signal and the scenario trained to its end. No process is left, it did not
       train on, and the summary and `ftqual status` say interrupted and what to run.
    """
    project = copy_project(tmp_path / "project")
    base = {
        "train_iters": 40,
        "save_interval": 10,
        "smoke": {"step_seconds": 0.1},
        "timeouts": {"setup": 120, "step": 60},  # the held ranks stay well inside the step timeout
        "scenarios": {
            "kill": {"fault": "kill", "enabled": False},
            "hang": {"fault": "hang", "enabled": False},
        },
    }
    write_yaml(project / "base.yaml", base)
    args = ("--profile", "profiles/local", "--configfile", "base.yaml")
    script = 'nohup "$@" > snakemake.out 2>&1 & echo $! > snakemake.pid; read -r _; exit 0'
    shell = subprocess.Popen(
        ["bash", "-c", script, "bash", *snakemake_cmd(*args)],
        cwd=project, env=snakemake_env(), stdin=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    out = project / "snakemake.out"
    held: list[int] = []
    pid, started = 0, None
    try:
        pid_file = project / "snakemake.pid"
        pid = int(
            wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 60, what="snakemake's pid")
        )
        started = start_time(pid)

        def ranks_up():
            for run_dir in (project / "runs").glob("baseline-*"):
                ranks, launcher = _pid_records(run_dir)
                if len(ranks) == 2 and launcher:
                    return run_dir, ranks
            return None

        run_dir, ranks = wait_until(
            ranks_up, 240, 0.1, "the baseline's ranks to start", detail=lambda: out.read_text()[-3000:]
        )
        for rank in ranks:
            os.kill(rank["pid"], signal.SIGSTOP)
            held.append(rank["pid"])
        assert all(process_alive(r) for r in ranks), ranks  # held mid-run: it cannot finish meanwhile
        shell.stdin.close()  # the starting shell, its session's leader, exits
        assert shell.wait(timeout=30) == 0
        [log] = wait_until(lambda: list((project / "logs" / "run_scenario" / "baseline").glob("*.log")), 30)
        stays(
            lambda: start_time(pid) == started and "is gone" not in log.read_text(),
            4,
            "the workflow and its scenario to run on after the shell that started them exited",
        )
        for rank in held:
            os.kill(rank, signal.SIGCONT)
        held.clear()
        gone_within(lambda: start_time(pid) == started, 300, "the nohup'd workflow to end")
    except BaseException:
        if started is not None and start_time(pid) == started:  # not this test's child: stop it here
            os.kill(pid, signal.SIGINT)
        raise
    finally:
        for rank in held:
            with contextlib.suppress(ProcessLookupError):
                os.kill(rank, signal.SIGCONT)
        if shell.poll() is None:
            shell.kill()
    output = out.read_text()
    run = read_json(run_dir / "run.json")
    assert run.get("interrupted_by") is None and run["exit_code"] == 0, (run, output)
    [verify] = (project / "results" / "baseline").glob("*/verify.json")
    assert read_json(verify)["verdict"] == "pass", output
    assert (project / "results" / "summary.md").read_text().startswith("# ftqual: INCONCLUSIVE — no fault"), (
        output
    )

    # 2. a signal as the kill job starts
    write_yaml(project / "kill.yaml", {**base, "scenarios": {**base["scenarios"], "kill": {"fault": "kill"}}})
    args = ("--profile", "profiles/local", "--configfile", "kill.yaml")
    out = project / "snakemake-kill.out"
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            snakemake_cmd(*args), cwd=project, env=snakemake_env(), stdout=sink, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=terminal_signals,
        )  # fmt: skip
    try:
        # the job's first act is its slot folder: it is not on record yet (ftqual.workflow.run_scenario.run)
        wait_until(
            lambda: list((project / "results" / "kill").glob("*-*/")) or proc.poll() is not None, 240, 0.01,
            "the kill job to start", detail=lambda: out.read_text()[-3000:],
        )  # fmt: skip
        assert proc.poll() is None, out.read_text()
        os.kill(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=STOP_BOUND_S + 60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    output = out.read_text()
    assert rc != 0, output
    for kill_run in project.glob("runs/kill-*"):
        gone_within(
            lambda k=kill_run: processes_mentioning(k.name), STOP_BOUND_S, f"every process of {kill_run}"
        )
        record = read_json(kill_run / "run.json") if (kill_run / "run.json").exists() else {}
        assert record.get("interrupted_by") or record.get("exit_code") is None, record  # it did not train on
    assert not list((project / "results" / "kill").glob("*/attempt.json")), output
    # The slot folder is made by Snakemake as it prepares the job: a signal then may land before the job's
    # script started (no log: nothing ran) or after (its log says it was interrupted); either way it never
    # trained on, which the lines above hold.
    for log in (project / "logs" / "run_scenario" / "kill").glob("*.log"):
        assert "interrupted (SIGINT)" in log.read_text(), log.read_text()
    summary = (project / "results" / "summary.md").read_text()
    assert summary.startswith(
        "# ftqual: INCONCLUSIVE — interrupted (SIGINT) before kill had a verdict: run the same command again"
    ), summary[:600]
    status = subprocess.run(
        [sys.executable, "-m", "ftqual", "status", str(project)], capture_output=True, text=True, timeout=120
    )
    assert "was interrupted (SIGINT): run the same command again to resume it" in status.stdout, status
    lines = {line.split(" ", 2)[1]: line for line in status.stdout.splitlines() if " attempt " in line}
    assert set(lines) == {"baseline:", "kill:"} and ": PASS" in lines["baseline:"], status.stdout
    assert "PASS" not in lines["kill:"], status.stdout
