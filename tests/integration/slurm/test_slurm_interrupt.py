"""A workflow stopped while its scenario trains in a Slurm job. Ctrl-C or a closed terminal: the executor
plugin cancels the job (scancel), every process of the run ends, its evidence stays, no summary says PASS,
and the same command plans the scenario again. Killed outright (SIGKILL): nothing cancels the job, and the
next run in the directory does, in one line, before it submits anything."""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from ftqual.launch import stop_grace
from tests.support.wait import gone_within, stays, wait_until
from tests.support.workflow import (
    ci_slurm_profile,
    copy_project,
    finished_unsignalled,
    job_stats,
    last_iteration,
    process_alive,
    read_json,
    run_snakemake,
    snakemake_cmd,
    snakemake_env,
    start_time,
    terminal_signals,
    utc_now,
    write_yaml,
)

TRAIN_ITERS = 600
LONG_BASELINE = {
    # at least 60 s of training (0.1 s a step): the signal comes once the log shows a few iterations, and the
    # killed workflow's job must still run when the next run's Snakemake has started (a while on a busy
    # machine); the rerun trains it all
    "train_iters": TRAIN_ITERS,
    "save_interval": 150,
    "smoke": {"step_seconds": 0.1},
    "scenarios": {
        "kill": {"fault": "kill", "enabled": False},
        "hang": {"fault": "hang", "enabled": False},
    },
}
ARGS = ("--profile", "profiles/slurm", "--configfile", "long.yaml")
MID_TRAINING = 5  # iterations the log shows before the signal: the ranks train, past their setup


def queued(job_ids: set[str]) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    return set(out.split()) & job_ids


def baseline_jobs() -> set[str]:
    """Queued jobs whose comment (the executor plugin's) names the baseline's run_scenario."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %k"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if "rule_run_scenario_wildcards_baseline" in line}


def kill_wait_s() -> int | None:
    """This cluster's KillWait, as scontrol says it."""
    out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, check=True).stdout
    return stop_grace.parse_kill_wait(out)


def py_stacks(pid: int) -> str:
    """Where a live Python process waits (py-spy, where installed and allowed), for a failure's message."""
    try:
        dump = ["py-spy", "dump", "--pid", str(pid)]
        proc = subprocess.run(dump, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"(no py-spy dump: {exc})"
    return (proc.stdout + proc.stderr)[-6000:]


def alive(recorded: dict[int, int]) -> list[int]:
    return [pid for pid, start in recorded.items() if start_time(pid) == start]


@dataclass
class Stopped:
    rc: int  # the workflow's exit code
    job_id: str  # the baseline's Slurm job
    run_dir: Path
    recorded: dict[int, int]  # the run's recorded pids and their start times
    signalled_at: str  # UTC, as run.json's finished_at
    iteration: int  # the last iteration the log showed at the signal


def stop_while_training(project: Path, how: str) -> Stopped:
    """Start the workflow, signal it once the baseline's log shows it training and while its launcher
    lives."""
    out = open(project / "snakemake.out", "w")
    proc = subprocess.Popen(
        snakemake_cmd(*ARGS),
        cwd=project,
        env=snakemake_env(slurm=True),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group, signalled as a terminal signals its foreground group
        preexec_fn=terminal_signals,  # a terminal's SIGINT and SIGHUP, also in a suite run in the background
    )
    try:

        def training() -> Path | None:
            if proc.poll() is not None:
                raise AssertionError(f"the workflow ended first:\n{(project / 'snakemake.out').read_text()}")
            for run_dir in (project / "runs").glob("baseline-*"):
                names = [r.name for r in (run_dir / "pids").glob("*.json")]
                ranks = any(".rank" in n for n in names) and any(n.endswith(".launcher.json") for n in names)
                if ranks and last_iteration(run_dir) >= MID_TRAINING:
                    return run_dir
            return None

        run_dir = wait_until(
            training, 300, 0.2, f"the baseline's log to show iteration {MID_TRAINING}",
            detail=lambda: (project / "snakemake.out").read_text()[-3000:],
        )  # fmt: skip
        records = sorted((run_dir / "pids").glob("*.json"))
        recorded = {read_json(r)["pid"]: read_json(r)["start_time"] for r in records}
        [job_id] = baseline_jobs()
        [launcher] = [read_json(r) for r in records if r.name.endswith(".launcher.json")]
        iteration = last_iteration(run_dir)
        # what the signal interrupts must be running when it lands (a run that finished first would
        # leave nothing to cancel: a test that cannot tell cancelling from finishing)
        assert process_alive(launcher) and iteration < TRAIN_ITERS, (launcher, iteration)
        signalled_at = utc_now()
        if how == "SIGKILL":
            os.kill(proc.pid, signal.SIGKILL)  # Snakemake alone, as the OOM killer would
        else:
            os.killpg(proc.pid, getattr(signal, how))
        try:
            rc = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            run = read_json(run_dir / "run.json")
            raise AssertionError(
                f"Snakemake still runs 120 s after {how} at {signalled_at} (iteration {iteration} then, "
                f"{last_iteration(run_dir)} now; job {job_id} queued: {bool(queued({job_id}))}; run.json "
                f"exit_code {run.get('exit_code')}, interrupted_by {run.get('interrupted_by')}, finished_at "
                f"{run.get('finished_at')}; Snakemake's threads:\n{py_stacks(proc.pid)})\n"
                + (project / "snakemake.out").read_text()[-4000:]
            ) from None
        return Stopped(rc, job_id, run_dir, recorded, signalled_at, iteration)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()


@pytest.fixture
def project(slurm_cluster, tmp_path):
    project = copy_project(tmp_path / "project")
    ci_slurm_profile(project)
    write_yaml(project / "long.yaml", LONG_BASELINE)
    return project


def assert_stopped_with_evidence(project: Path, stopped: Stopped) -> None:
    then = f"iteration {stopped.iteration}/{TRAIN_ITERS} then"
    finished_unsignalled(stopped.run_dir, stopped.signalled_at, then)
    run = read_json(stopped.run_dir / "run.json")
    # the launcher read Slurm's KillWait and ended its wait before Slurm's SIGKILL could take it
    assert run["scheduler_kill_wait_s"] == kill_wait_s(), run
    assert run["exit_code"] is not None and run.get("interrupted_by"), run
    assert (stopped.run_dir / "logs" / "train_cycle0.log").is_file()
    summary = project / "results" / "summary.md"
    assert not summary.exists() or not summary.read_text().startswith("# ftqual: PASS")


@pytest.mark.parametrize("how", ["SIGINT", "SIGHUP"])
def test_ctrl_c_or_a_closed_terminal_cancels_the_scenario_job(project, how):
    stopped = stop_while_training(project, how)
    assert stopped.rc != 0, (project / "snakemake.out").read_text()
    job_id, recorded = stopped.job_id, stopped.recorded
    left = lambda: {k: v for k, v in {"queued": queued({job_id}), "alive": alive(recorded)}.items() if v}  # noqa: E731
    gone_within(left, 60, f"job {job_id} and every process of its run to end after {how}")
    assert_stopped_with_evidence(project, stopped)
    plan = subprocess.run(
        snakemake_cmd("-n", *ARGS), cwd=project, env=snakemake_env(slurm=True), capture_output=True, text=True
    )
    assert plan.returncode == 0 and job_stats(plan.stdout)["run_scenario"] == 1, plan.stdout + plan.stderr


def test_the_next_run_cancels_the_job_of_a_killed_workflow(project):
    stopped = stop_while_training(project, "SIGKILL")
    assert stopped.rc == -signal.SIGKILL
    job_id, recorded = stopped.job_id, stopped.recorded
    # nothing else stops it
    stays(lambda: queued({job_id}) == {job_id} and alive(recorded), 2, f"job {job_id} runs on, unstopped")

    again = run_snakemake(project, *ARGS, timeout=600)
    lines = [line for line in again.stdout.splitlines() if "ftqual: cancelled Slurm job(s)" in line]
    assert lines and f"{job_id} (run_scenario baseline_" in lines[0], again.stdout
    assert "running" in lines[0] and "released the lock left by a workflow that is gone" in again.stdout
    # before the stack probe, which would otherwise wait behind the job for its GPU (seen on one H200), and
    # before the plan, which would otherwise take the job's attempt for this run's
    assert again.stdout.index(lines[0]) < again.stdout.index("ftqual: baseline: attempt"), again.stdout
    probe = again.stdout.find("ftqual: stack: probing a training node")
    assert probe == -1 or again.stdout.index(lines[0]) < probe, again.stdout
    assert not queued({job_id}) and not alive(recorded)
    assert_stopped_with_evidence(project, stopped)
    # the rerun trained the baseline itself, in a run directory of its own
    assert len(list((project / "runs").glob("baseline-*"))) == 2
    assert (project / "results" / "summary.md").read_text().startswith("# ftqual: INCONCLUSIVE — no fault"), (
        again.stdout
    )
