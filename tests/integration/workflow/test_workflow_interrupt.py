"""Ctrl-C, a closed terminal (SIGHUP) or a killed Snakemake (SIGKILL) during a run: no process of the run is
left behind, the evidence stays, no summary of earlier attempts is left standing, and a rerun redoes it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.wait import gone_within, wait_until
from tests.support.workflow import (
    copy_project,
    finished_unsignalled,
    job_stats,
    last_iteration,
    processes_mentioning,
    read_json,
    snakemake_cmd,
    snakemake_env,
    start_time,
    terminal_signals,
    utc_now,
    write_yaml,
)

TRAIN_ITERS = 300
MID_TRAINING = 5  # iterations the log shows before the signal: the ranks train, past their setup


def survivors(recorded: dict[int, int]) -> set[int]:
    """The recorded processes still alive (a reused pid would have another start time)."""
    return {pid for pid, start in recorded.items() if start_time(pid) == start}


STOP_BOUND_S = (
    60  # a signal to the workflow stops its runs within this (the launcher's term timeout and more)
)


@pytest.mark.parametrize("how", ["SIGINT", "SIGHUP", "SIGKILL", "SIGINT to pid", "SIGTERM to pid"])
def test_interrupt_leaves_no_process_behind(tmp_path, how):
    """`SIGINT`/`SIGHUP`: what a terminal sends its foreground process group; `... to pid`: a signal to
    Snakemake's own pid alone (a CI cancel, `kill <pid>`, a supervising script), which must stop the runs
    it started within STOP_BOUND_S as well; `SIGKILL`: Snakemake killed outright."""
    project = copy_project(tmp_path / "project")
    # only the baseline, long enough to be interrupted in the middle of training
    write_yaml(
        project / "long.yaml",
        {
            # at least 30 s of training (0.1 s a step): the signal comes once the log shows a few iterations
            # (a run that finished first fails the test as its setup's failure, never passes it); the same
            # command is rerun below and trains it all
            "train_iters": TRAIN_ITERS,
            "save_interval": 75,
            "smoke": {"step_seconds": 0.1},
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
        # every recorded process goes (a reused pid would have another start time)
        gone_within(
            lambda: survivors(recorded), STOP_BOUND_S, f"every recorded process of the run to end after {how}"
        )
        rc = proc.wait(timeout=120)
        stop_s = time.monotonic() - t0
    finally:
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


def _started_since(path: Path, since: float) -> bool:
    try:
        return path.stat().st_mtime >= since
    except FileNotFoundError:
        return False


# Each stage, as the files its job writes first show it running: (stage, what to wait for, signal).
STAGES = (
    ("preflight", lambda p, t: any(_started_since(f, t) for f in p.glob("logs/preflight/*.log")), "SIGTERM"),
    ("a run", lambda p, t: any(last_iteration(r) >= 1 for r in p.glob("runs/baseline-*")), "SIGINT"),
    ("verify", lambda p, t: any(_started_since(f, t) for f in p.glob("logs/verify/*/*.log")), "SIGTERM"),
    ("summary", lambda p, t: _started_since(p / "logs" / "summary.log", t), "SIGINT"),
    ("gate", lambda p, t: _started_since(p / "logs" / "gate.log", t), "SIGTERM"),
)


def interrupted_when(
    project: Path, args: tuple[str, ...], out_path: Path, stage: str, running, sig: str
) -> int:
    """The command, signalled (Snakemake's pid alone) once `running` shows `stage` under way; its exit code.
    A command that ends first is not signalled."""
    started = time.time()
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            snakemake_cmd(*args), cwd=project, env=snakemake_env(), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=terminal_signals,
        )  # fmt: skip
        try:
            wait_until(
                lambda: running(project, started) or proc.poll() is not None, 300, 0.05,
                f"{stage} to run (or the command to end)", detail=lambda: out_path.read_text()[-3000:],
            )  # fmt: skip
            if proc.poll() is None:
                os.kill(proc.pid, getattr(signal, sig))
            return proc.wait(timeout=STOP_BOUND_S + 120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)


def test_an_interrupt_in_any_stage_then_the_same_command_ends_in_the_verdict_the_config_earns(tmp_path):
    """The same command, again and again, each interrupted (a signal to Snakemake's pid alone) once the next
    stage shows it is running: preflight, a scenario run, verify, summary, gate. Whatever each interrupt left
    behind, the next identical command shows no traceback and carries on; the last one, left alone, ends in
    the config's own verdict. A stage that ended before its signal landed moves the signal to a later one:
    the outcome is asserted, never which stage the signal met."""
    project = copy_project(tmp_path / "project")
    write_yaml(
        project / "short.yaml",
        {
            "train_iters": 60,
            "smoke": {"step_seconds": 0.1},
            "scenarios": {"hang": {"fault": "hang", "enabled": False}},
        },
    )
    args = ("--profile", "profiles/local", "--configfile", "short.yaml")
    for n, (stage, running, sig) in enumerate(STAGES):
        out_path = project / f"snakemake-{n}.out"
        rc = interrupted_when(project, args, out_path, stage, running, sig)
        output = out_path.read_text()
        assert "Traceback" not in output and "TypeError" not in output, f"{stage}: {output}"
        if rc == 0:  # the workflow ended before the signal: nothing left to interrupt
            break
    # every run any of them started has stopped, and its evidence is kept
    for name in [run_dir.name for run_dir in project.glob("runs/*")]:
        gone_within(lambda name=name: processes_mentioning(name), STOP_BOUND_S, f"every process of {name}")
    last = subprocess.run(
        snakemake_cmd(*args), cwd=project, env=snakemake_env(), capture_output=True, text=True
    )
    output = last.stdout + last.stderr
    assert "Traceback" not in output, output
    assert last.returncode == 0, output
    summary = (project / "results" / "summary.md").read_text()
    assert summary.startswith("# ftqual: PASS"), summary[:2000]
    for run_dir in project.glob("runs/*"):
        run = read_json(run_dir / "run.json")
        assert run.get("interrupted_by") or run.get("exit_code") == 0, (run_dir.name, run)
