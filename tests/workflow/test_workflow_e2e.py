"""The whole workflow on CPU (smoke workload, real ft_launcher), and "rerun only what failed".

One module-scoped workspace serves every test here (two cores: each run costs real minutes):
1. first run, during which the kill scenario's ft_launcher dies (we SIGKILL its process group, as an
   OOM killer or a lost node would): baseline and hang pass, kill fails, the summary is not built;
2. `snakemake -n` then plans exactly kill's run, kill's verification, the summary and `all`;
3. the real rerun does exactly that, with a fresh run ID; everything passes.
A failed *verification* and a changed scenario setting are then exercised on copies of the finished
workspace (dry runs and local rules only).
(A broken config, e.g. max_restarts 0 for a fault, never gets this far: the preflight rejects it.)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

import pytest
from wfutil import (
    copy_project,
    job_stats,
    processes_mentioning,
    read_json,
    run_dirs,
    run_snakemake,
    scenario_jobs,
    snakemake_cmd,
    snakemake_env,
    write_yaml,
)

pytestmark = pytest.mark.workflow

SCENARIOS = ("baseline", "kill", "hang")
PROFILE = ("--profile", "profiles/local")


def run_killing_launcher(project, scenario, timeout=900):
    """Run the workflow; once `scenario`'s ft_launcher has started, SIGKILL its process group."""
    log = project / "first-run.out"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            snakemake_cmd(*PROFILE), cwd=project, env=snakemake_env(), stdout=out, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + timeout
        killed = None
        while proc.poll() is None and time.monotonic() < deadline:
            records = list((project / "runs").glob(f"{scenario}-*/pids/*.launcher.json"))
            if killed is None and records:
                time.sleep(2)  # let it start its workers
                killed = read_json(records[0])["pgid"]
                os.killpg(killed, signal.SIGKILL)
            time.sleep(0.5)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, log.read_text()), killed


@pytest.fixture(scope="module")
def workflow_runs(tmp_path_factory):
    project = copy_project(tmp_path_factory.mktemp("e2e") / "project")
    t0 = time.monotonic()
    first, killed = run_killing_launcher(project, "kill")
    first_s = time.monotonic() - t0
    state = {
        "project": project,
        "first": first,
        "killed_pgid": killed,
        "mtimes_after_first": {
            path.relative_to(project): path.stat().st_mtime_ns
            for s in ("baseline", "hang")
            for path in (project / "results" / s).glob("*.json")
        },
        "kill_runs_after_first": run_dirs(project, "kill"),
        "outputs_after_first": {
            str(path.relative_to(project)) for path in (project / "results").glob("**/*") if path.is_file()
        },
        "plan": run_snakemake(project, "-n", *PROFILE),
    }
    t0 = time.monotonic()
    state["second"] = run_snakemake(project, *PROFILE, timeout=900)
    second_s = time.monotonic() - t0
    print(f"\nfirst run {first_s:.0f} s (kill's ft_launcher killed), rerun of kill {second_s:.0f} s")
    return state


def test_first_run_fails_only_the_broken_scenario(workflow_runs):
    project, out = workflow_runs["project"], workflow_runs["first"].stdout
    assert workflow_runs["killed_pgid"] is not None, out
    assert workflow_runs["first"].returncode != 0, out
    assert "Error in rule run_scenario" in out
    assert "FAILED: the launcher exited" in out  # the failed job's log, shown by --show-failed-logs
    outputs = workflow_runs["outputs_after_first"]
    for scenario in ("baseline", "hang"):
        assert {f"results/{scenario}/run.json", f"results/{scenario}/verify.json"} <= outputs
    assert "results/kill/run.json" not in outputs and "results/kill/verify.json" not in outputs
    assert "results/summary.json" not in outputs
    # the failed attempt left its evidence
    [kill_run] = workflow_runs["kill_runs_after_first"]
    assert read_json(kill_run / "run.json")["exit_code"] != 0
    assert (kill_run / "command.txt").is_file() and (kill_run / "pids").is_dir()
    [console] = (project / "results" / "kill" / "attempts").glob(f"{kill_run.name}.console.log")
    assert "Run artifacts:" in console.read_text()
    assert not processes_mentioning(kill_run.name)  # nothing of the killed attempt survived


def test_dry_run_plans_only_the_failed_scenario(workflow_runs):
    plan = workflow_runs["plan"]
    assert plan.returncode == 0, plan.stdout
    assert job_stats(plan.stdout) == {"run_scenario": 1, "verify": 1, "summary": 1, "all": 1}
    assert scenario_jobs(plan.stdout, "run_scenario") == ["kill"]
    assert scenario_jobs(plan.stdout, "verify") == ["kill"]


def test_rerun_redoes_only_the_failed_scenario(workflow_runs):
    project, second = workflow_runs["project"], workflow_runs["second"]
    assert second.returncode == 0, second.stdout
    assert job_stats(second.stdout) == {"run_scenario": 1, "verify": 1, "summary": 1, "all": 1}
    assert scenario_jobs(second.stdout, "run_scenario") == ["kill"]
    # what passed was not touched
    for rel, mtime in workflow_runs["mtimes_after_first"].items():
        assert (project / rel).stat().st_mtime_ns == mtime, rel
    # a fresh run ID for the new attempt; the failed attempt's directory is still there
    old = workflow_runs["kill_runs_after_first"]
    now = run_dirs(project, "kill")
    assert set(old) < set(now) and len(now) == 2
    [new] = set(now) - set(old)
    assert read_json(project / "results" / "kill" / "run.json")["run_dir"] == f"runs/{new.name}"


def test_every_scenario_verified_and_summarised(workflow_runs):
    project = workflow_runs["project"]
    results = project / "results"
    assert read_json(results / "preflight.json")["verdict"] in ("pass", "warn")
    for scenario in SCENARIOS:
        record = read_json(results / scenario / "run.json")
        run_dir = project / record["run_dir"]
        assert record["exit_code"] == 0 and record["scenario"] == scenario
        assert record["run_id"].startswith(f"{scenario}-") and record["run_id"].endswith("-a1")
        assert run_dir.name == record["run_id"] and (run_dir / "logs" / "launcher.log").is_file()
        report = read_json(results / scenario / "verify.json")
        assert report["schema"] == "ftqual.verify/v1" and report["verdict"] == "pass", report
        assert report["run_id"] == record["run_id"]
        assert (results / scenario / "attempts" / f"{record['run_id']}.verify.json").is_file()
        if scenario == "baseline":
            assert not (results / scenario / "fault_injected.json").exists()
        else:
            marker = read_json(results / scenario / "fault_injected.json")
            assert marker == read_json(run_dir / "fault_injected.json") and marker["rank"] == 1
    summary = read_json(results / "summary.json")
    assert {sc["name"]: sc["verdict"] for sc in summary["scenarios"]} == dict.fromkeys(SCENARIOS, "pass")
    assert (results / "summary.md").read_text().startswith("# ftqual: PASS")
    assert 'failures="0"' in (results / "junit.xml").read_text()
    for plot in ("timeline_kill", "timeline_hang", "loss_comparison"):
        assert (results / "plots" / f"{plot}.png").stat().st_size > 0
    # nothing left to do
    proc = run_snakemake(project, "-n", *PROFILE)
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout, proc.stdout


def test_snakemake_report(workflow_runs):
    project = workflow_runs["project"]
    proc = run_snakemake(project, "--report", "results/report.html")
    assert proc.returncode == 0, proc.stdout
    assert (project / "results" / "report.html").stat().st_size > 100_000


def test_failed_verification_makes_the_next_run_redo_the_scenario(workflow_runs, tmp_path):
    """Evidence of the hang run goes missing; re-verifying it fails, and the plan redoes the run itself."""
    project = tmp_path / "project"
    shutil.copytree(workflow_runs["project"], project, symlinks=True)
    record = read_json(project / "results" / "hang" / "run.json")
    shutil.rmtree(project / record["run_dir"] / "logs")

    target = "results/hang/verify.json"
    proc = run_snakemake(project, *PROFILE, "--forcerun", target, "--", target)
    assert proc.returncode != 0, proc.stdout
    assert "Error in rule verify" in proc.stdout
    assert not (project / "results" / "hang" / "verify.json").exists()
    assert not (project / "results" / "hang" / "run.json").exists()  # discarded: the run must be redone
    assert not (project / "results" / "hang" / "fault_injected.json").exists()
    failed = read_json(project / "results" / "hang" / "attempts" / f"{record['run_id']}.verify.json")
    assert failed["verdict"] in ("fail", "inconclusive")
    assert failed["verdict"] in (project / "logs" / "verify" / "hang.log").read_text()
    assert (project / record["run_dir"]).is_dir()  # the evidence that is left stays

    plan = run_snakemake(project, "-n", *PROFILE)
    assert plan.returncode == 0, plan.stdout
    assert job_stats(plan.stdout) == {"run_scenario": 1, "verify": 1, "summary": 1, "all": 1}
    assert scenario_jobs(plan.stdout, "run_scenario") == ["hang"]


def test_changing_one_scenario_reruns_only_it(workflow_runs, tmp_path):
    project = tmp_path / "project"
    shutil.copytree(workflow_runs["project"], project, symlinks=True)
    write_yaml(project / "slower.yaml", {"scenarios": {"hang": {"fault": "hang", "timeouts": {"step": 12}}}})
    plan = run_snakemake(project, "-n", *PROFILE, "--configfile", "slower.yaml")
    assert plan.returncode == 0, plan.stdout
    assert job_stats(plan.stdout) == {
        "scenario_settings": 1,
        "preflight": 1,
        "run_scenario": 1,
        "verify": 1,
        "summary": 1,
        "all": 1,
    }
    assert scenario_jobs(plan.stdout, "scenario_settings") == ["hang"]
    assert scenario_jobs(plan.stdout, "run_scenario") == ["hang"]
    assert "Params have changed since last execution" in plan.stdout

    # a setting every scenario shares reruns them all
    plan = run_snakemake(project, "-n", *PROFILE, "--config", "train_iters=25")
    assert plan.returncode == 0, plan.stdout
    assert sorted(scenario_jobs(plan.stdout, "run_scenario")) == sorted(SCENARIOS)
