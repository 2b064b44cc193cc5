"""A signal to Snakemake's own pid alone (a CI cancel, `kill <pid>`, a supervising script) during a run: it
stops the runs it started within STOP_BOUND_S, as a terminal's signal does (test_workflow_interrupt.py), and
in whichever stage it lands, the same command carries on to the config's own verdict. A module of its own so
that the two workers share the interrupt tests."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.workflow.test_workflow_interrupt import STOP_BOUND_S, interrupted_then_rerun
from tests.support.wait import gone_within, wait_until
from tests.support.workflow import (
    copy_project,
    last_iteration,
    processes_mentioning,
    read_json,
    snakemake_cmd,
    snakemake_env,
    terminal_signals,
    write_yaml,
)


@pytest.mark.parametrize("how", ["SIGINT to pid", "SIGTERM to pid"])
def test_interrupt_leaves_no_process_behind(tmp_path, how):
    interrupted_then_rerun(tmp_path, how)


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
            "train_iters": 30,
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
