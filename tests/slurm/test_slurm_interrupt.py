"""A workflow stopped while its scenario trains in a Slurm job. Ctrl-C or a closed terminal: the executor
plugin cancels the job (scancel), every process of the run ends, its evidence stays, no summary says PASS,
and the same command plans the scenario again. Killed outright (SIGKILL): nothing cancels the job, and the
next run in the directory does, in one line, before it submits anything."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.workflow import (
    ci_slurm_profile,
    copy_project,
    job_stats,
    read_json,
    run_snakemake,
    snakemake_cmd,
    snakemake_env,
    start_time,
    write_yaml,
)

pytestmark = pytest.mark.slurm

LONG_BASELINE = {
    # about 20 s of training; the signal comes 3 s after the ranks recorded their pids
    "train_iters": 400,
    "save_interval": 100,
    "smoke": {"step_seconds": 0.05},
    "scenarios": {
        "kill": {"fault": "kill", "enabled": False},
        "hang": {"fault": "hang", "enabled": False},
    },
}
ARGS = ("--profile", "profiles/slurm", "--configfile", "long.yaml")


def queued(job_ids: set[str]) -> set[str]:
    out = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    return set(out.split()) & job_ids


def baseline_jobs() -> set[str]:
    """Queued jobs whose comment (the executor plugin's) names the baseline's run_scenario."""
    out = subprocess.run(["squeue", "-h", "-o", "%i %k"], capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if "rule_run_scenario_wildcards_baseline" in line}


def alive(recorded: dict[int, int]) -> list[int]:
    return [pid for pid, start in recorded.items() if start_time(pid) == start]


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def stop_while_training(project: Path, how: str) -> tuple[int, str, Path, dict[int, int]]:
    """Start the workflow, signal it 3 s into the baseline's training; (its exit code, the baseline's Slurm
    job, its run directory, the run's recorded pids and start times)."""
    out = open(project / "snakemake.out", "w")
    proc = subprocess.Popen(
        snakemake_cmd(*ARGS),
        cwd=project,
        env=snakemake_env(slurm=True),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group, signalled as a terminal signals its foreground group
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL),  # a terminal's, also under nohup
    )
    try:

        def training() -> bool:
            names = [r.name for r in (project / "runs").glob("baseline-*/pids/*.json")]
            return any(".rank" in n for n in names) and any(n.endswith(".launcher.json") for n in names)

        assert wait_until(lambda: training() or proc.poll() is not None, 240) and proc.poll() is None, (
            project / "snakemake.out"
        ).read_text()
        time.sleep(3)
        records = sorted((project / "runs").glob("baseline-*/pids/*.json"))
        recorded = {read_json(r)["pid"]: read_json(r)["start_time"] for r in records}
        [run_dir] = (project / "runs").glob("baseline-*")
        [job_id] = baseline_jobs()
        if how == "SIGKILL":
            os.kill(proc.pid, signal.SIGKILL)  # Snakemake alone, as the OOM killer would
        else:
            os.killpg(proc.pid, getattr(signal, how))
        return proc.wait(timeout=120), job_id, run_dir, recorded
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


def assert_stopped_with_evidence(project: Path, run_dir: Path) -> None:
    run = read_json(run_dir / "run.json")
    assert run["exit_code"] is not None and run.get("interrupted_by"), run
    assert (run_dir / "logs" / "train_cycle0.log").is_file()
    summary = project / "results" / "summary.md"
    assert not summary.exists() or not summary.read_text().startswith("# ftqual: PASS")


@pytest.mark.parametrize("how", ["SIGINT", "SIGHUP"])
def test_ctrl_c_or_a_closed_terminal_cancels_the_scenario_job(project, how):
    rc, job_id, run_dir, recorded = stop_while_training(project, how)
    assert rc != 0, (project / "snakemake.out").read_text()
    assert wait_until(lambda: not queued({job_id}) and not alive(recorded), 60), (
        f"job {job_id} or a process of its run outlived the stopped workflow"
    )
    assert_stopped_with_evidence(project, run_dir)
    plan = subprocess.run(
        snakemake_cmd("-n", *ARGS), cwd=project, env=snakemake_env(slurm=True), capture_output=True, text=True
    )
    assert plan.returncode == 0 and job_stats(plan.stdout)["run_scenario"] == 1, plan.stdout + plan.stderr


def test_the_next_run_cancels_the_job_of_a_killed_workflow(project):
    rc, job_id, run_dir, recorded = stop_while_training(project, "SIGKILL")
    assert rc == -signal.SIGKILL
    time.sleep(2)
    assert queued({job_id}) == {job_id} and alive(recorded)  # nothing else stops it

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
    assert_stopped_with_evidence(project, run_dir)
    # the rerun trained the baseline itself, in a run directory of its own
    assert len(list((project / "runs").glob("baseline-*"))) == 2
    assert (project / "results" / "summary.md").read_text().startswith("# ftqual: INCONCLUSIVE — no fault"), (
        again.stdout
    )
