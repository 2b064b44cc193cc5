"""config/extended.yaml on one H200 (tests/data/megatron-h200-extended-1gpu): what the machine decided and
what ftqual decides now from the same evidence, scenario by scenario, and two negative controls of the
verifier's own truth (a run stopped from outside, a fault that never came)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.verification.schema import judged
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-extended-1gpu"
EXPECTED = {  # scenario -> (qualification, the verifier's own verdict)
    ("first", "baseline"): ("pass", "pass"),
    ("first", "kill"): ("pass", "pass"),
    ("first", "hang"): ("pass", "pass"),
    ("first", "kill_in_save"): ("pass", "pass"),
    ("second", "baseline"): ("pass", "pass"),
    ("second", "resume_existing"): ("pass", "pass"),
    ("second", "double_fault"): ("pass", "pass"),
    ("second", "restarts_exhausted"): ("pass", "fail"),
    ("second", "no_resume"): ("pass", "fail"),
}


def recorded(part: str, scenario: str) -> dict:
    (path,) = (DATA / part / "results" / scenario).glob("*/verify.json")
    return json.loads(path.read_text())


def run_dir(part: str, run_id: str) -> Path:
    return DATA / part / "runs" / run_id


@pytest.mark.parametrize(("part", "scenario"), sorted(EXPECTED))
def test_every_scenario_qualified_as_designed(part, scenario):
    report = recorded(part, scenario)
    outcome = judged(report).outcome
    assert (outcome.verdict, outcome.raw_verdict) == EXPECTED[(part, scenario)], outcome.detail


@pytest.mark.parametrize(("part", "scenario"), sorted(k for k in EXPECTED if k[1] != "resume_existing"))
def test_the_same_evidence_gives_the_same_verdict_today(part, scenario):
    report = recorded(part, scenario)
    baseline = recorded(part, "baseline")["run_id"]
    now = build_report(run_dir(part, report["run_id"]), run_dir(part, baseline))
    assert now["verdict"] == report["verdict"]
    assert {
        c["id"]: c["status"] for c in now["checks"] if c["id"] in {x["id"] for x in report["checks"]}
    } == {c["id"]: c["status"] for c in report["checks"] if c["id"] in {x["id"] for x in now["checks"]}}


def test_resume_existing_without_its_outside_checkpoints_is_never_a_pass():
    """Its checkpoint directory lay outside the run directory and was not brought back: what needs it is
    unknown now (inconclusive), nothing fails, and the rest of its evidence still holds."""
    report = recorded("second", "resume_existing")
    now = build_report(run_dir("second", report["run_id"]))
    assert now["verdict"] == "inconclusive"
    assert all(c["status"] != "fail" for c in now["checks"])
    unknown = [c for c in now["checks"] if c["status"] == "inconclusive"]
    assert unknown and all("checkpoint" in c["detail"] for c in unknown), unknown


def test_a_run_the_time_limit_stopped_is_inconclusive_with_that_cause():
    (run,) = (DATA / "first" / "runs").glob("resume_existing-*")
    assert json.loads((run / "run.json").read_text())["interrupted_by"] == "SIGTERM"
    report = build_report(run)
    assert report["verdict"] == "inconclusive"
    assert report["cause_evidence"]["kind"] == "interrupted"
    assert report["cause"].startswith("the launcher was stopped by SIGTERM from outside before the run ended")


def test_a_kill_that_never_came_is_the_cause_named():
    report = build_report(DATA / "never_injected")
    assert report["verdict"] == "fail"
    assert report["cause_evidence"]["kind"] == "not_injected"
    assert "the kill was never injected" in report["cause"]
    assert not (DATA / "never_injected" / "fault_injected.json").exists()
