"""The workflow through `--profile profiles/slurm` on a real Slurm (two nodes on one host, fake GPUs).

The profile is the project's own, with the CI adjustments a site would make: squeue as status command
(no accounting database), small memory and CPU requests. The scenario jobs really go through sbatch; a
two-node scenario runs one launcher per node with srun inside its allocation, and is verified too.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest
import yaml
from wfutil import copy_project, read_json, run_snakemake, write_yaml

pytestmark = pytest.mark.slurm

SCENARIOS = ("baseline", "kill", "kill2n")


def ci_profile(project):
    path = project / "profiles" / "slurm" / "config.yaml"
    profile = yaml.safe_load(path.read_text())
    profile["slurm-status-command"] = "squeue"  # no slurmdbd in CI
    profile["latency-wait"] = 5
    profile["jobs"] = 4
    profile["default-resources"] = {**profile["default-resources"], "mem_mb": 1000, "runtime": 20}
    profile["set-resources"] = {"run_scenario": {"cpus_per_gpu": 1, "runtime": 20}}
    write_yaml(path, profile)


def slurm_job(job_id: str) -> dict[str, str]:
    """`scontrol show job` as a dict (finished jobs stay visible for MinJobAge=600 s)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("slurm") / "project")
    ci_profile(project)
    write_yaml(
        project / "ci.yaml",
        {
            "scenarios": {
                "hang": {"fault": "hang", "enabled": False},
                # two nodes, one rank each: one ft_launcher per node, rendezvous on the first node
                "kill2n": {"fault": "kill", "rank": 1, "nnodes": 2, "gpus_per_node": 1},
            }
        },
    )
    t0 = time.monotonic()
    proc = run_snakemake(project, "--profile", "profiles/slurm", "--configfile", "ci.yaml", timeout=1200)
    print(f"\nSlurm workflow: {time.monotonic() - t0:.0f} s")
    return project, proc


def test_workflow_passes_through_slurm(slurm_run):
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    results = project / "results"
    for scenario in SCENARIOS:
        assert read_json(results / scenario / "verify.json")["verdict"] == "pass", scenario
    summary = read_json(results / "summary.json")
    assert {sc["name"]: sc["verdict"] for sc in summary["scenarios"]} == dict.fromkeys(SCENARIOS, "pass")


def test_scenario_runs_went_through_sbatch(slurm_run):
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    submitted = set(re.findall(r"Job \d+ has been submitted with SLURM jobid (\d+)", proc.stdout))
    assert len(submitted) == len(SCENARIOS), proc.stdout
    for scenario in SCENARIOS:
        record = read_json(project / "results" / scenario / "run.json")
        job_id = record["slurm_job_id"]
        assert job_id in submitted
        assert record["run_id"].startswith(f"{scenario}-") and f"-{job_id}-a1" in record["run_id"]
        job = slurm_job(job_id)
        assert job["JobState"] == "COMPLETED", job
        assert job["Partition"] == "gpu"
        slurm_log = project / ".snakemake" / "slurm_logs" / "rule_run_scenario" / scenario / f"{job_id}.log"
        assert slurm_log.is_file()
    # the cheap steps ran in the main process, not as Slurm jobs
    logged_rules = {p.name for p in (project / ".snakemake" / "slurm_logs").iterdir()}
    assert logged_rules == {"rule_run_scenario"}


def test_two_node_scenario_ran_one_launcher_per_node(slurm_run):
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    record = read_json(project / "results" / "kill2n" / "run.json")
    job = slurm_job(record["slurm_job_id"])
    assert job["NumNodes"] == "2" and job["NodeList"] == "n[1-2]", job
    assert record["nnodes"] == 2 and record["world_size"] == 2
    run_dir = project / record["run_dir"]
    launchers = sorted(p.name for p in (run_dir / "pids").glob("*.launcher.json"))
    assert launchers == ["n1.launcher.json", "n2.launcher.json"]
    assert "--nnodes=2" in record["command"] and "--nproc-per-node=1" in record["command"]
    assert any(arg.startswith("--rdzv-endpoint=n1:") for arg in record["command"]), record["command"]
    marker = read_json(project / "results" / "kill2n" / "fault_injected.json")
    assert marker["rank"] == 1 and marker["host"] == "n2"  # global rank 1 lives on the second node
    log = (project / "logs" / "run_scenario" / "kill2n.log").read_text()
    assert "srun --nodes=2 --ntasks-per-node=1 --gres=gpu:1" in log
