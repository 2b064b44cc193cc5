"""The workflow through `--profile profiles/slurm` on a real Slurm (two nodes on one host, fake GPUs).

The profile is the project's own, with the CI adjustments a site would make: squeue as status command
(no accounting database), small memory and CPU requests. The scenario jobs really go through sbatch; the
two-node scenarios (a kill and a hang of the rank on the second node) run one launcher per node with srun
inside their allocation, and are verified too, down to the active world of every cycle. node_loss kills the
second node's whole ft_launcher: with no spare node the first must end the job once its rendezvous has
waited join_timeout, and the verifier judges that from both nodes' records; node_spare does the same on
three nodes with `--nnodes=2:3`, where NVRx must promote the standby and training go on.

The cluster has three nodes: which ones a job gets is Slurm's choice, so the assertions take the hosts from
the job's own NodeList (the first is the rendezvous host, the fault rank's node is the second).
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from tests.support.workflow import (
    ci_slurm_profile,
    copy_project,
    current_attempt,
    read_json,
    run_snakemake,
    write_yaml,
)

SCENARIOS = ("baseline", "kill", "kill2n", "hang2n", "node_loss", "node_spare")
TWO_NODE = ("kill2n", "hang2n", "node_loss")
JOIN_TIMEOUT = 20


def slurm_job(job_id: str) -> dict[str, str]:
    """`scontrol show job` as a dict (finished jobs stay visible for MinJobAge=600 s)."""
    out = subprocess.run(["scontrol", "-o", "show", "job", job_id], capture_output=True, text=True).stdout
    return dict(re.findall(r"(\w+)=(\S*)", out))


def job_hosts(project, scenario: str) -> list[str]:
    """The nodes Slurm gave the scenario's job, in order (the first runs the rendezvous store)."""
    record = read_json(current_attempt(project, scenario) / "attempt.json")
    node_list = slurm_job(record["slurm_job_id"])["NodeList"]
    out = subprocess.run(["scontrol", "show", "hostnames", node_list], capture_output=True, text=True)
    return out.stdout.split()


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("slurm") / "project")
    ci_slurm_profile(project)
    write_yaml(
        project / "ci.yaml",
        {
            "scenarios": {
                "hang": {"fault": "hang", "enabled": False},
                # two nodes, one rank each: one ft_launcher per node, rendezvous on the first node
                "kill2n": {"fault": "kill", "rank": 1, "nnodes": 2, "gpus_per_node": 1},
                # the rank on the second node stops (SIGSTOP inside a step): the default config's short
                # CPU `step` timeout (10 s) fires (on either node: the peer waits inside its step too)
                # and both nodes restart; it runs beside kill and kill2n, adding ~10 s of wall time
                "hang2n": {"fault": "hang", "rank": 1, "nnodes": 2, "gpus_per_node": 1},
                # the second node's ft_launcher and everything below it killed; no spare node
                "node_loss": {
                    "fault": "node_loss",
                    "rank": 1,
                    "nnodes": 2,
                    "gpus_per_node": 1,
                    "join_timeout": JOIN_TIMEOUT,
                },
                # the same on three nodes, one of them a standby (--nnodes=2:3) that NVRx must promote
                "node_spare": {
                    "fault": "node_loss",
                    "rank": 1,
                    "nnodes": 2,
                    "gpus_per_node": 1,
                    "spare_nodes": 1,
                    "join_timeout": JOIN_TIMEOUT,
                },
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
        assert read_json(current_attempt(project, scenario) / "verify.json")["verdict"] == "pass", scenario
    summary = read_json(results / "summary.json")
    assert {sc["name"]: sc["verdict"] for sc in summary["scenarios"]} == dict.fromkeys(SCENARIOS, "pass")


def test_scenario_runs_went_through_sbatch(slurm_run):
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    submitted = set(re.findall(r"Job \d+ has been submitted with SLURM jobid (\d+)", proc.stdout))
    assert len(submitted) == len(SCENARIOS), proc.stdout
    for scenario in SCENARIOS:
        record = read_json(current_attempt(project, scenario) / "attempt.json")
        job_id = record["slurm_job_id"]
        assert job_id in submitted
        assert record["run_id"].startswith(f"{scenario}-") and f"-{job_id}-a1" in record["run_id"]
        job = slurm_job(job_id)
        assert job["JobState"] == "COMPLETED", job
        assert job["Partition"] == "gpu"
        slot = current_attempt(project, scenario).name  # the plugin names the folder by the wildcards
        slurm_log = (
            project
            / ".snakemake"
            / "slurm_logs"
            / "rule_run_scenario"
            / f"{scenario}_{slot}"
            / f"{job_id}.log"
        )
        assert slurm_log.is_file(), sorted((project / ".snakemake" / "slurm_logs").rglob("*.log"))
    # the cheap steps ran in the main process, not as Slurm jobs
    logged_rules = {p.name for p in (project / ".snakemake" / "slurm_logs").iterdir()}
    assert logged_rules == {"rule_run_scenario"}


@pytest.mark.parametrize("scenario", TWO_NODE)
def test_two_node_scenario_ran_one_launcher_per_node(slurm_run, scenario):
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    record = read_json(current_attempt(project, scenario) / "attempt.json")
    job = slurm_job(record["slurm_job_id"])
    hosts = job_hosts(project, scenario)
    assert job["NumNodes"] == "2" and len(hosts) == 2, job
    assert record["nnodes"] == 2 and record["world_size"] == 2
    run_dir = project / record["run_dir"]
    launchers = sorted(p.name for p in (run_dir / "pids").glob("*.launcher.json"))
    assert launchers == [f"{host}.launcher.json" for host in hosts]
    assert "--nnodes=2" in record["command"] and "--nproc-per-node=1" in record["command"]
    assert any(arg.startswith(f"--rdzv-endpoint={hosts[0]}:") for arg in record["command"]), record["command"]
    marker = read_json(current_attempt(project, scenario) / "fault_injected.json")
    assert marker["rank"] == 1 and marker["host"] == hosts[1]  # global rank 1 lives on the second node
    slot = current_attempt(project, scenario).name
    log = (project / "logs" / "run_scenario" / scenario / f"{slot}.log").read_text()
    assert "srun --nodes=2 --ntasks-per-node=1 --gres=gpu:1" in log


def test_two_node_hang_detected_by_section_timeout(slurm_run):
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    report = read_json(current_attempt(project, "hang2n") / "verify.json")
    assert report["verdict"] == "pass"
    assert report["metrics"]["detected_by"] == "section:step", report["metrics"]
    assert report["expected"]["timeouts"]["step"] == 10  # the CPU default config's short timeout
    assert read_json(current_attempt(project, "hang2n") / "fault_injected.json")["section"] == "step"


@pytest.mark.parametrize("scenario", ("kill2n", "hang2n"))
def test_two_node_active_world_unchanged(slurm_run, scenario):
    """Every cycle ran ranks 0-1 on the job's two nodes: the replacement came back on both."""
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    report = read_json(current_attempt(project, scenario) / "verify.json")
    item = next(c for c in report["checks"] if c["id"] == "active_world_unchanged")
    print(f"\n{scenario}: {item['status']} — {item['detail']}")
    assert item["status"] == "pass", item
    values = item["values"]
    first, second = hosts = job_hosts(project, scenario)
    assert (values["world_size"], values["nnodes"], values["nodes"]) == (2, 2, hosts)
    assert values["ranks_per_cycle"] == {"0": 2, "1": 2}
    detail = item["detail"]
    assert "ranks 0-1 (2 of world_size 2) printed in cycle(s) 0-1" in detail
    assert (
        f"{first} (node rank 0), {second} (node rank 1) joined cycle(s) 0-1 in a world of 2 node(s)" in detail
    )
    node_list = slurm_job(read_json(current_attempt(project, scenario) / "attempt.json")["slurm_job_id"])[
        "NodeList"
    ]
    assert f"cycle_infos active_nodes {node_list} in cycle(s) 0-1" in detail
    assert f"restarted on all 2 node(s) ({first}, {second}) in cycle 1" in detail
    assert "every rank resumed" in detail
    # detected on one node first (for a kill the victim's own launcher, or a peer whose collective broke)
    assert values["detected_on"] in hosts and f"detected on {values['detected_on']} first" in detail


def test_node_loss_ends_the_job_within_the_join_timeout_with_evidence_from_both_nodes(slurm_run):
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    attempt = current_attempt(project, "node_loss")
    report = read_json(attempt / "verify.json")
    item = next(c for c in report["checks"] if c["id"] == "node_loss_outcome")
    print(f"\nnode_loss: {item['status']} — {item['detail']}")
    assert report["verdict"] == "pass" and item["status"] == "pass", item
    values = item["values"]
    first, second = job_hosts(project, "node_loss")
    assert (values["lost_host"], values["survivors"], values["detected_on"]) == (second, [first], first)
    assert values["join_timeout"] == JOIN_TIMEOUT
    assert JOIN_TIMEOUT <= values["ended_s"][first] <= JOIN_TIMEOUT + 60
    # both nodes' own word: the lost launcher killed at the injection, the survivor's ended by the rendezvous
    record = read_json(attempt / "attempt.json")
    run_dir = project / record["run_dir"]
    lost = read_json(run_dir / "nodes" / f"{second}.json")
    survivor = read_json(run_dir / "nodes" / f"{first}.json")
    assert lost["signal"] == "SIGKILL" and lost["node_rank"] == 1
    assert survivor["exit_code"] not in (0, None) and survivor["signal"] is None
    marker = read_json(run_dir / "fault_injected.json")
    assert marker["fault"] == "node_loss" and marker["node"]["launcher_pid"] == lost["launcher_pid"]
    assert "--rdzv-conf=join_timeout=20" in record["command"]
    # the report and junit count it as the pass it is: the ending NVRx documents
    summary = read_json(project / "results" / "summary.json")
    assert next(sc for sc in summary["scenarios"] if sc["name"] == "node_loss")["verdict"] == "pass"
    junit = (project / "results" / "junit.xml").read_text()
    suite = re.search(r'<testsuite name="node_loss"[^>]*>', junit)[0]
    assert 'failures="0"' in suite and 'errors="0"' in suite, suite


def test_node_loss_with_a_spare_promotes_the_standby_and_training_goes_on(slurm_run):
    project, proc = slurm_run
    assert proc.returncode == 0, proc.stdout
    attempt = current_attempt(project, "node_spare")
    record = read_json(attempt / "attempt.json")
    hosts = job_hosts(project, "node_spare")
    assert len(hosts) == 3 and "--nnodes=2:3" in record["command"]
    report = read_json(attempt / "verify.json")
    item = next(c for c in report["checks"] if c["id"] == "node_loss_outcome")
    print(f"\nnode_spare: {item['status']} — {item['detail']}")
    assert report["verdict"] == "pass" and item["status"] == "pass", item
    marker = read_json(attempt / "fault_injected.json")
    lost = marker["node"]["host"]
    assert lost != hosts[0] and item["values"]["lost_host"] == lost
    (spare,) = item["values"]["promoted"]
    assert spare in hosts and spare != lost
    run_dir = project / record["run_dir"]
    nodes = {host: read_json(run_dir / "nodes" / f"{host}.json") for host in hosts}
    assert nodes[lost]["signal"] == "SIGKILL"
    assert all(nodes[h]["exit_code"] == 0 for h in hosts if h != lost)  # the survivor and the spare
    for cid in ("resumed_from_checkpoint", "progress_after_resume", "clean_finish", "active_world_unchanged"):
        assert next(c for c in report["checks"] if c["id"] == cid)["status"] == "pass", cid
