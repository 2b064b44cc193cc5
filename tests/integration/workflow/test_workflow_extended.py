"""config/extended.yaml end to end on the smoke workload (real ft_launcher): every added scenario reaches its
expected outcome, with its own evidence, and the negative controls fail on the live stack as they must.

One module-scoped workspace: the first test runs the workflow, the others read what it left.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from tests.support.workflow import project_with, read_json, run_snakemake, scenario_jobs

PROFILE = ("--profile", "profiles/local")
FAST = {"smoke": {"step_seconds": 0.1, "save_seconds": 0.0}}
ADDED = ("kill_in_save", "double_fault", "restarts_exhausted", "no_resume", "resume_existing")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    project = project_with(tmp_path_factory.mktemp("extended") / "project", FAST)
    return project


@pytest.fixture(scope="module")
def first_run(project):
    return run_snakemake(project, *PROFILE, "--configfile", "config/extended.yaml", timeout=1500)


def slot_file(project, scenario, name: str) -> dict:
    """`name` (verify.json, attempt.json) of the scenario's one attempt."""
    [path] = sorted((project / "results" / scenario).glob(f"*-*/{name}"))
    return read_json(path)


def verify(project, scenario) -> dict:
    return slot_file(project, scenario, "verify.json")


def status(report, check_id) -> str:
    return next(c["status"] for c in report["checks"] if c["id"] == check_id)


@pytest.mark.timeout(1800)
def test_the_extended_set_qualifies_with_its_negative_controls_failing(project, first_run):
    assert first_run.returncode == 0, first_run.stdout[-6000:]
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "pass", summary["headline"]
    by = {sc["name"]: sc for sc in summary["scenarios"]}
    assert set(ADDED) <= set(by)
    for name in ("restarts_exhausted", "no_resume"):
        assert (by[name]["raw_verdict"], by[name]["verdict"], by[name]["expect"]) == ("fail", "pass", "fail")
    md = (project / "results" / "summary.md").read_text()
    assert md.startswith("# ftqual: PASS") and "| expected outcome |" in md
    root = ET.parse(project / "results" / "junit.xml").getroot()
    assert (root.get("failures"), root.get("errors")) == ("0", "0")


@pytest.mark.timeout(60)
def test_kill_in_save_discarded_the_unfinished_save(project, first_run):
    report = verify(project, "kill_in_save")
    assert report["verdict"] == "pass"
    assert status(report, "interrupted_save_discarded") == "pass"
    record = slot_file(project, "kill_in_save", "attempt.json")
    marker = read_json(project / record["run_dir"] / "fault_injected.json")
    assert marker["timing"] == "in_save" and marker["save_iteration"] > marker["checkpoint_iteration"]
    assert report["metrics"]["restored_iteration"] == marker["checkpoint_iteration"]


@pytest.mark.timeout(60)
def test_double_fault_recovered_twice_from_two_checkpoints(project, first_run):
    report = verify(project, "double_fault")
    assert report["verdict"] == "pass"
    faults = report["metrics"]["faults"]
    assert len(faults) == 2
    assert faults[0]["checkpoint_iteration"] < faults[1]["checkpoint_iteration"]


@pytest.mark.timeout(60)
def test_the_negative_controls_failed_for_their_own_reasons(project, first_run):
    exhausted = verify(project, "restarts_exhausted")
    assert exhausted["verdict"] == "fail" and status(exhausted, "clean_finish") == "fail"
    assert exhausted["attempt"]["launcher_exit"] not in (0, None)
    no_resume = verify(project, "no_resume")
    assert no_resume["verdict"] == "fail" and status(no_resume, "resumed_from_checkpoint") == "fail"


@pytest.mark.timeout(60)
def test_resume_existing_started_from_the_baselines_checkpoint(project, first_run):
    report = verify(project, "resume_existing")
    assert report["verdict"] == "pass"
    assert status(report, "started_from_existing_checkpoint") == "pass"
    record = slot_file(project, "resume_existing", "attempt.json")
    assert record["resume_from"]["iteration"] == 20 and record["resume_from"]["scenario"] == "baseline"


@pytest.mark.timeout(60)
def test_every_fault_scenario_left_nothing_behind(project, first_run):
    for name in ("kill", "hang", *ADDED):
        assert status(verify(project, name), "no_leftovers") == "pass", name


@pytest.mark.timeout(600)
def test_a_plain_rerun_keeps_the_controls_that_failed_as_expected(project, first_run):
    again = run_snakemake(project, *PROFILE, "--configfile", "config/extended.yaml", timeout=600)
    assert again.returncode == 0, again.stdout[-4000:]
    assert scenario_jobs(again.stdout, "run_scenario") == [], again.stdout[-4000:]
    assert scenario_jobs(again.stdout, "verify") == [], again.stdout[-4000:]
    assert "restarts_exhausted: attempt" in again.stdout and "latest attempt passed" in again.stdout
