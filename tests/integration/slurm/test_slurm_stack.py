"""Switching profiles never reuses another executor's runs, and under Slurm the training node's side of the
stack is read by a Slurm step before planning (the real CI cluster: three nodes on one host, fake GPUs).

Sequence on one workspace: pass with profiles/local; the same command with profiles/slurm requalifies every
scenario through sbatch, naming the executor change, with the node's GPUs and driver read by `srun`; the same
Slurm command again runs only the gate (no job submitted); back on profiles/local its passed attempts stand.
On a submitting host without `sacct`, where the executor plugin would fail every submission, the workflow
refuses in one line before its first job.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.workflow import (
    FAST_KILL,
    ci_slurm_profile,
    job_stats,
    project_with,
    read_json,
    requalified,
    run_snakemake,
)

FAST = FAST_KILL
SUBMITTED = re.compile(r"Job \d+ has been submitted with SLURM jobid (\d+)")


@pytest.fixture(scope="module")
def project(slurm_cluster, tmp_path_factory):
    project = project_with(tmp_path_factory.mktemp("slurm-stack") / "project", FAST)
    ci_slurm_profile(project)
    return project


def cluster_nodes() -> set[str]:
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_profile_switch_requalifies_and_reads_the_node(project):
    local = run_snakemake(project, "--profile", "profiles/local", timeout=900)
    assert local.returncode == 0, local.stdout
    local_runs = {
        sc["name"]: sc["run_id"] for sc in read_json(project / "results" / "summary.json")["scenarios"]
    }

    slurm = run_snakemake(project, "--profile", "profiles/slurm", timeout=1200)
    assert slurm.returncode == 0, slurm.stdout
    assert requalified(slurm.stdout, ("baseline", "kill"), "executor local -> slurm"), slurm.stdout
    assert "ftqual: stack: probing a training node (srun --nodes=1" in slurm.stdout
    assert len(set(SUBMITTED.findall(slurm.stdout))) == 2, slurm.stdout  # both scenarios went through sbatch
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "pass"
    now = {sc["name"]: sc["run_id"] for sc in summary["scenarios"]}
    assert all(now[name] != local_runs[name] for name in now)
    parts = summary["stack_identity"]["parts"]
    assert parts["executor"] == "slurm" and parts["slurm_partition"] == "gpu"
    assert parts["node"] in cluster_nodes() and "gpus" in parts and "driver" in parts
    assert "host" not in parts  # the submitting host does not train
    assert set(summary["stack_identity"]["requalified"]) == {"baseline", "kill"}
    record = read_json(project / "results" / "kill" / summary["attempts"]["kill"] / "attempt.json")
    assert record["machine"]["slurm_job_id"] == record["slurm_job_id"]
    assert record["machine"]["node"] in cluster_nodes()

    again = run_snakemake(project, "--profile", "profiles/slurm", timeout=600)
    assert again.returncode == 0, again.stdout
    assert not SUBMITTED.findall(again.stdout) and job_stats(again.stdout) == {"gate": 1}, again.stdout

    back = run_snakemake(project, "--profile", "profiles/local", "-n", timeout=300)
    assert job_stats(back.stdout) == {"gate": 1}, back.stdout


def path_without(tmp_path: Path, missing: str) -> str:
    """A PATH of one directory that links every command of this PATH (the first of each name) but one."""
    linked = tmp_path / f"bin-without-{missing}"
    linked.mkdir()
    for directory in [str(Path(sys.executable).parent), *os.environ.get("PATH", "").split(os.pathsep)]:
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = linked / entry.name
            if entry.name != missing and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    return str(linked)


def test_refused_before_any_job_without_sacct(slurm_cluster, tmp_path):
    project = project_with(tmp_path / "project", FAST)
    ci_slurm_profile(project)
    env = {"PATH": path_without(tmp_path, "sacct")}
    assert subprocess.run(["which", "sbatch"], env=env, capture_output=True).returncode == 0
    proc = run_snakemake(project, "--profile", "profiles/slurm", env=env, timeout=300)
    assert proc.returncode != 0, proc.stdout
    refusals = [line for line in proc.stdout.splitlines() if "`sacct` is not on PATH" in line]
    assert refusals and "slurm-client" in refusals[0], proc.stdout
    assert not SUBMITTED.findall(proc.stdout) and "No such file or directory: 'sacct'" not in proc.stdout
    runs = project / "runs"
    assert not runs.exists() or not any(runs.iterdir())  # nothing launched
