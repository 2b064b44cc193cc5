"""Ctrl-C, a closed terminal (SIGHUP) or a killed Snakemake (SIGKILL) during a run: no process of the run is
left behind, the evidence stays, no summary of earlier attempts is left standing, and a rerun redoes it."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.workflow import (
    copy_project,
    job_stats,
    processes_mentioning,
    read_json,
    snakemake_cmd,
    snakemake_env,
    start_time,
    write_yaml,
)

pytestmark = pytest.mark.workflow


def wait_until_gone(recorded: dict[int, int], seconds: float) -> set[int]:
    deadline = time.monotonic() + seconds
    while True:
        survivors = {pid for pid, start in recorded.items() if start_time(pid) == start}
        if not survivors or time.monotonic() > deadline:
            return survivors
        time.sleep(0.5)


@pytest.mark.parametrize("how", ["SIGINT", "SIGHUP", "SIGKILL"])
def test_interrupt_leaves_no_process_behind(tmp_path, how):
    project = copy_project(tmp_path / "project")
    # only the baseline, long enough to be interrupted in the middle of training
    write_yaml(
        project / "long.yaml",
        {
            # about 10 s of training: the signal comes 3 s after the ranks recorded their pids (a run that
            # finished first would fail the test, never pass it); the same command is rerun below
            "train_iters": 200,
            "save_interval": 50,
            "smoke": {"step_seconds": 0.05},
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
        # a terminal's default for SIGHUP, also when this suite was started under nohup (which children
        # inherit, and which the workflow rightly honours by running on)
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 180
        records: list[Path] = []
        while time.monotonic() < deadline and proc.poll() is None:
            records = sorted((project / "runs").glob("baseline-*/pids/*.json"))
            ranks = [r for r in records if ".rank" in r.name]
            if len(ranks) == 2 and any(r.name.endswith(".launcher.json") for r in records):
                break
            time.sleep(0.5)
        assert proc.poll() is None, (project / "snakemake.out").read_text()
        assert len(records) == 3, records
        time.sleep(3)  # training is under way
        recorded = {read_json(r)["pid"]: read_json(r)["start_time"] for r in records}
        assert all(start_time(pid) == start for pid, start in recorded.items())
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

        t0 = time.monotonic()
        if how == "SIGKILL":
            os.kill(proc.pid, signal.SIGKILL)  # Snakemake alone: its jobs see their workflow vanish
        else:
            os.killpg(proc.pid, getattr(signal, how))  # what a terminal sends its foreground group
        rc = proc.wait(timeout=120)
        survivors = wait_until_gone(recorded, 60)
        stop_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()
    output = (project / "snakemake.out").read_text()
    assert rc != 0, output
    print(f"\nthe run stopped {stop_s:.1f} s after {how}")

    # every recorded process is gone (a reused pid would have another start time)
    assert not survivors, survivors
    [run_dir] = (project / "runs").glob("baseline-*")
    deadline = time.monotonic() + 60  # the job's own last `ftqual cleanup <run dir>` may still be finishing
    while processes_mentioning(run_dir.name) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not processes_mentioning(run_dir.name), processes_mentioning(run_dir.name)

    # the evidence stays; Snakemake's output does not exist, so the next run redoes the scenario
    run = read_json(run_dir / "run.json")
    assert run["interrupted_by"] in ("SIGTERM", "SIGINT") and run["exit_code"] is not None
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
