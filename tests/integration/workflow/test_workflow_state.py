"""The workflow's state rules, as sequences of real runs (smoke workload, real ft_launcher).

After every step each test asserts the exit code, the verdict line of results/summary.md, the failures in
results/junit.xml and which run IDs the summary cites. The first run of the default config (it passes) is
made once per module (two cores: every launch costs real seconds); each test starts from the workspace it
left, restored before the test, so every test stands alone and in any order:

- the first run passes and its console follows the kill; a broken kill (a step timeout that fires in every
  cycle) fails, fails again in a fresh attempt, and fixing it brings the passed attempt back
- changing one scenario's setting reruns only it; changing a shared setting (train_iters) reruns every one
- a passed scenario's run directory deleted: it reruns, never a PASS citing a missing run
- --forcerun verify re-verifies every scenario and runs nothing; a run it cannot read fails with that cause
- --config nnodes=2 on the local profile, after runs exist: refused with one clear line
- a failed preflight, and a timeout the baseline disproves, launch nothing
SIGINT, SIGHUP and SIGKILL in the middle of a scenario are in test_workflow_interrupt.py.
"""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.workflow import (
    FAST_KILL,
    job_stats,
    project_with,
    read_json,
    run_snakemake,
    scenario_jobs,
    write_yaml,
)

PROFILE = ("--profile", "profiles/local")
# Short runs: the state rules are the subject here, not training.
FAST = FAST_KILL
BROKEN = {"scenarios": {"kill": {"fault": "kill", "rank": 1, "max_restarts": 1,
                                 "smoke": {"step_seconds": 3}, "timeouts": {"step": 1}}}}  # fmt: skip


def verdict_line(project) -> str:
    return (project / "results" / "summary.md").read_text().splitlines()[0]


def junit_failures(project) -> int:
    root = ET.parse(project / "results" / "junit.xml").getroot()
    return int(root.get("failures")) + int(root.get("errors"))


def cited(project) -> dict[str, str]:
    summary = read_json(project / "results" / "summary.json")
    return {sc["name"]: sc["run_id"] for sc in summary["scenarios"]}


def attempt_runs(project, scenario) -> list[str]:
    """Run IDs of every attempt of `scenario`, oldest first."""
    return sorted(p.name for p in (project / "runs").glob(f"{scenario}-*"))


def run(project, *args, timeout=900):
    return run_snakemake(project, *PROFILE, *args, timeout=timeout)


@dataclass(frozen=True)
class FirstRun:
    project: Path  # the workspace the tests use
    snapshot: Path  # a copy of it as the first run left it
    first: subprocess.CompletedProcess  # that run


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> FirstRun:
    """The first run of the default config, made once per module, and a snapshot of the workspace after it."""
    root = tmp_path_factory.mktemp("state")
    project = project_with(root / "project", FAST)
    write_yaml(project / "broken.yaml", BROKEN)
    first = run(project)
    snapshot = root / "after-first-run"
    shutil.copytree(project, snapshot, symlinks=True)
    return FirstRun(project, snapshot, first)


@pytest.fixture
def project(first_run) -> Path:
    """The workspace as the first run left it, restored at the same path (run records hold absolute paths;
    copies keep file times, which are what Snakemake compares)."""
    assert first_run.first.returncode == 0, first_run.first.stdout
    shutil.rmtree(first_run.project)
    shutil.copytree(first_run.snapshot, first_run.project, symlinks=True)
    return first_run.project


def test_first_run_passes_and_its_console_follows_the_kill(first_run, project):
    first = first_run.first
    assert first.returncode == 0, first.stdout
    assert verdict_line(project).startswith("# ftqual: PASS"), verdict_line(project)
    assert junit_failures(project) == 0
    passed = cited(project)
    assert set(passed) == {"baseline", "kill"} and all(passed.values())
    # the console followed the kill run as it happened, in order
    kill_lines = [line for line in first.stdout.splitlines() if line.startswith("ftqual: kill: ")]
    expected = [
        f"run {passed['kill']}",
        "cycle 0 started",
        "checkpoint at iteration 4 completed",
        "fault injected: kill of rank 1",
        "detected: local rank 1 exited with -9",
        "cycle 1 started (restart)",
        "cycle 1 resumed from checkpoint iteration",
        "training finished",
    ]
    positions = [next((i for i, line in enumerate(kill_lines) if want in line), None) for want in expected]
    assert None not in positions and positions == sorted(positions), kill_lines


def test_broken_kill_fails_again_in_a_fresh_attempt_and_its_fix_brings_the_pass_back(project):
    passed = cited(project)
    plan = run(project, "-n", "--configfile", "broken.yaml")
    assert job_stats(plan.stdout) == {"preflight": 1, "run_scenario": 1, "verify": 1, "summary": 1, "gate": 1}
    assert scenario_jobs(plan.stdout, "run_scenario") == ["kill"]
    broken = run(project, "--configfile", "broken.yaml")
    assert broken.returncode == 1, broken.stdout
    assert verdict_line(project).startswith("# ftqual: FAIL — kill"), verdict_line(project)
    assert junit_failures(project) >= 1
    failed_kill = attempt_runs(project, "kill")[-1]
    assert cited(project) == {"baseline": passed["baseline"], "kill": failed_kill}
    summary = read_json(project / "results" / "summary.json")
    [kill] = [sc for sc in summary["scenarios"] if sc["name"] == "kill"]
    assert kill["verdict"] == "fail" and "the launcher exited 1" in kill["cause"], kill["cause"]
    assert "'step' timeout (1 s) fired in every cycle" in kill["cause"], kill["cause"]  # the one-line cause
    junit = (project / "results" / "junit.xml").read_text()
    assert "fired in every cycle" in junit  # the cause reaches CI
    assert "fired in every cycle" in broken.stdout  # and the console

    # the same broken config again: exactly kill, in a fresh attempt; never the old PASS
    plan = run(project, "-n", "--configfile", "broken.yaml")
    assert job_stats(plan.stdout) == {"run_scenario": 1, "verify": 1, "summary": 1, "gate": 1}
    again = run(project, "--configfile", "broken.yaml")
    assert again.returncode == 1, again.stdout
    assert verdict_line(project).startswith("# ftqual: FAIL")
    second_failed = attempt_runs(project, "kill")[-1]
    assert second_failed != failed_kill and cited(project)["kill"] == second_failed

    # fixed (back to the config that passed): the passed attempt under these settings is the latest one
    fixed = run(project)
    assert fixed.returncode == 0, fixed.stdout
    assert job_stats(fixed.stdout) == {"gate": 1}
    assert verdict_line(project).startswith("# ftqual: PASS") and junit_failures(project) == 0
    assert cited(project) == passed
    nothing = run(project, "-n")
    assert job_stats(nothing.stdout) == {"gate": 1}, nothing.stdout


def test_changing_one_scenarios_setting_reruns_only_it(project):
    before = cited(project)
    write_yaml(project / "kill-longer.yaml", {"scenarios": {"kill": {"fault": "kill", "train_iters": 16}}})
    plan = run(project, "-n", "--configfile", "kill-longer.yaml")
    assert scenario_jobs(plan.stdout, "run_scenario") == ["kill"], plan.stdout
    proc = run(project, "--configfile", "kill-longer.yaml")
    assert proc.returncode == 0, proc.stdout
    assert scenario_jobs(proc.stdout, "run_scenario") == ["kill"]
    now = cited(project)
    assert now["baseline"] == before["baseline"] and now["kill"] != before["kill"]
    assert verdict_line(project).startswith("# ftqual: PASS") and junit_failures(project) == 0


def test_changing_a_shared_setting_reruns_every_scenario(project):
    before = cited(project)
    plan = run(project, "-n", "--config", "train_iters=14")
    assert sorted(scenario_jobs(plan.stdout, "run_scenario")) == ["baseline", "kill"], plan.stdout
    proc = run(project, "--config", "train_iters=14")
    assert proc.returncode == 0, proc.stdout
    assert sorted(scenario_jobs(proc.stdout, "run_scenario")) == ["baseline", "kill"]
    now = cited(project)
    assert now["baseline"] != before["baseline"] and now["kill"] != before["kill"]
    record = read_json(project / "runs" / now["kill"] / "run.json")
    assert record["train_iters"] == 14
    assert verdict_line(project).startswith("# ftqual: PASS") and junit_failures(project) == 0


def test_a_deleted_run_directory_is_rerun_never_cited(project):
    assert run(project).returncode == 0  # the default config again: nothing to run
    before = cited(project)
    shutil.rmtree(project / "runs" / before["kill"])
    plan = run(project, "-n")
    assert scenario_jobs(plan.stdout, "run_scenario") == ["kill"], plan.stdout
    proc = run(project)
    assert proc.returncode == 0, proc.stdout
    now = cited(project)
    assert now["kill"] != before["kill"] and (project / "runs" / now["kill"]).is_dir()
    assert verdict_line(project).startswith("# ftqual: PASS")


def test_forcerun_verify_reverifies_every_scenario_and_runs_nothing(project):
    before = cited(project)
    plan = run(project, "-n", "--forcerun", "verify")
    assert sorted(scenario_jobs(plan.stdout, "verify")) == ["baseline", "kill"], plan.stdout
    assert "run_scenario" not in job_stats(plan.stdout)
    proc = run(project, "--forcerun", "verify")
    assert proc.returncode == 0, proc.stdout
    assert cited(project) == before
    for scenario, run_id in before.items():
        archived = sorted((project / "results" / scenario / "attempts").glob(f"{run_id}.verify*.json"))
        assert len(archived) == 2, archived  # the first verification is kept beside the new one


def test_a_run_the_verifier_cannot_read_fails_with_its_cause_everywhere(project):
    """A run directory that cannot be verified (here run.json made unreadable after the run; a full
    TMPDIR on a long run ends the same way: ftqual verify exits 2 with one line) is a FAIL naming that line
    in the exit code, summary.md and junit.xml, never a PASS or a missing verdict. Like every failed
    attempt it is kept, and the next run makes a fresh attempt."""
    before = cited(project)
    run_json = project / "runs" / before["kill"] / "run.json"
    good = run_json.read_bytes()
    run_json.write_text('{"schema": "ftqual.run/v1", "run_id": ')  # cut short, as a full disk leaves it
    try:
        plan = run(project, "-n", "--forcerun", "verify")
        assert "run_scenario" not in job_stats(plan.stdout), plan.stdout  # evidence is judged, not redone
        proc = run(project, "--forcerun", "verify")
        assert proc.returncode == 1, proc.stdout
        assert verdict_line(project).startswith("# ftqual: FAIL — kill"), verdict_line(project)
        assert junit_failures(project) >= 1
        summary = read_json(project / "results" / "summary.json")
        [kill] = [sc for sc in summary["scenarios"] if sc["name"] == "kill"]
        assert kill["verdict"] == "fail" and kill["run_id"] == before["kill"]
        assert "the run directory could not be verified: ftqual verify:" in kill["cause"], kill["cause"]
        assert "run.json" in kill["cause"], kill["cause"]
        junit = (project / "results" / "junit.xml").read_text()
        assert "could not be verified" in junit
        assert "could not be verified" in (project / "results" / "summary.md").read_text()
    finally:
        run_json.write_bytes(good)
    proc = run(project)
    assert proc.returncode == 0, proc.stdout
    assert verdict_line(project).startswith("# ftqual: PASS")
    now = cited(project)
    assert now["baseline"] == before["baseline"] and now["kill"] != before["kill"]
    assert run_json.is_file()  # the failed attempt's evidence stays
    archived = (project / "results" / "kill" / "attempts").glob(f"{before['kill']}.verify*.json")
    assert any(read_json(path)["verdict"] == "fail" for path in archived)


def test_multinode_refused_on_the_local_profile_after_runs_exist(project):
    summary = project / "results" / "summary.md"
    before = summary.read_text() if summary.exists() else None
    for args in (("-n",), ()):
        proc = run(project, *args, "--config", "nnodes=2")
        assert proc.returncode != 0, proc.stdout
        assert "the local executor cannot run multi-node scenarios" in proc.stdout
    assert (summary.read_text() if summary.exists() else None) == before  # nothing was touched


def test_failed_preflight_launches_nothing_and_is_reported(project):
    """A fault scenario without a restart fails the preflight: its attempt is not launched, and the
    summary, junit.xml and the exit code say why."""
    write_yaml(project / "no-restart.yaml", {"scenarios": {"kill": {"fault": "kill", "max_restarts": 0}}})
    runs_before = set(attempt_runs(project, "kill"))
    proc = run(project, "--configfile", "no-restart.yaml")
    assert proc.returncode == 1, proc.stdout
    assert set(attempt_runs(project, "kill")) == runs_before  # nothing launched
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "fail" and summary["preflight"]["verdict"] == "fail"
    [kill] = [sc for sc in summary["scenarios"] if sc["name"] == "kill"]
    assert kill["verdict"] == "fail" and "preflight failed" in kill["cause"]
    assert verdict_line(project).startswith("# ftqual: FAIL")
    junit = ET.parse(project / "results" / "junit.xml").getroot()
    assert any(s.get("name") == "preflight" for s in junit.iter("testsuite"))
    assert "max_restarts" in (project / "results" / "summary.md").read_text()


def test_timeouts_the_baseline_disproves_are_refused_before_launch(project):
    """Fail fast: a step timeout below the baseline's slowest step would fire in every cycle."""
    write_yaml(project / "tight.yaml", {"scenarios": {"kill": {"fault": "kill", "timeouts": {"step": 0.01}}}})
    runs_before = set(attempt_runs(project, "kill"))
    proc = run(project, "--configfile", "tight.yaml")
    assert proc.returncode == 1, proc.stdout
    assert set(attempt_runs(project, "kill")) == runs_before  # nothing launched
    [kill] = [
        sc for sc in read_json(project / "results" / "summary.json")["scenarios"] if sc["name"] == "kill"
    ]
    assert (
        "refused before launch: the 'step' timeout (0.01 s) is not above the baseline's slowest step"
        in (kill["cause"])
    )


def test_a_workspace_of_an_earlier_version_keeps_its_attempts(project):
    """Attempt records were once named run.json: after an upgrade of ftqual the same command adopts them
    (renamed to attempt.json, content and times kept) and reruns nothing."""
    legacy = []
    for record in (project / "results").glob("*/*/attempt.json"):
        record.rename(record.with_name("run.json"))
        legacy.append(record)
    assert legacy
    before = {path: path.with_name("run.json").stat().st_mtime for path in legacy}
    plan = run(project, "-n")
    assert plan.returncode == 0, plan.stdout
    assert "run_scenario" not in job_stats(plan.stdout) and "verify" not in job_stats(plan.stdout), (
        plan.stdout
    )
    for path, mtime in before.items():
        assert path.is_file() and not path.with_name("run.json").exists() and path.stat().st_mtime == mtime
    again = run(project)
    assert again.returncode == 0 and verdict_line(project).startswith("# ftqual: PASS"), again.stdout
