"""Ctrl-C during a run: Snakemake stops, no process of the run is left behind, the evidence stays."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from wfutil import (
    copy_project,
    processes_mentioning,
    read_json,
    snakemake_cmd,
    snakemake_env,
    start_time,
    write_yaml,
)

pytestmark = pytest.mark.workflow


def test_ctrl_c_leaves_no_process_behind(tmp_path):
    project = copy_project(tmp_path / "project")
    # only the baseline, long enough to be interrupted in the middle of training
    write_yaml(
        project / "long.yaml",
        {
            "train_iters": 500,
            "save_interval": 50,
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

        t0 = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=120)
        stop_s = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out.close()
    output = (project / "snakemake.out").read_text()
    assert rc != 0, output
    print(f"\nsnakemake stopped {stop_s:.1f} s after SIGINT")

    # every recorded process is gone (a reused pid would have another start time)
    survivors = {pid for pid, start in recorded.items() if start_time(pid) == start}
    assert not survivors, survivors
    [run_dir] = (project / "runs").glob("baseline-*")
    assert not processes_mentioning(run_dir.name), processes_mentioning(run_dir.name)

    # the evidence stays; Snakemake's output does not exist, so the next run redoes the scenario
    run = read_json(run_dir / "run.json")
    assert run["interrupted_by"] in ("SIGTERM", "SIGINT") and run["exit_code"] is not None
    assert (run_dir / "logs" / "train_cycle0.log").is_file()
    assert not (project / "results" / "baseline" / "run.json").exists()
    log = (project / "logs" / "run_scenario" / "baseline.log").read_text()
    assert "sending SIGTERM to the launcher" in log and "interrupted by SIGINT" in log
