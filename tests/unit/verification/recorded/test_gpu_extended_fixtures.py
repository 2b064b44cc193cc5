"""The extended scenarios recorded with Megatron on 2 x H200 (tests/data/megatron-h200x2-extended and
megatron-h200x2-resume-existing): verdicts, the new checks, and the negative controls judged as the workflow
judges them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.verification.expectation import ExpectedOutcome, judge
from ftqual.verification.verify import build_report, check_by_id

DATA = Path(__file__).resolve().parents[3] / "data"
EXTENDED = DATA / "megatron-h200x2-extended"
RESUMED = DATA / "megatron-h200x2-resume-existing"


def report(folder: Path, name: str) -> dict:
    return build_report(folder / name, folder / "baseline")


def test_kill_in_save_discarded_the_save_in_flight():
    r = report(EXTENDED, "kill_in_save")
    assert r["verdict"] == "pass", r["checks"]
    assert check_by_id(r, "interrupted_save_discarded")["status"] == "pass"
    marker = json.loads((EXTENDED / "kill_in_save" / "fault_injected.json").read_text())
    assert (marker["checkpoint_iteration"], marker["save_iteration"]) == (5, 10)
    assert r["metrics"]["restored_iteration"] == 5


def test_double_fault_restored_each_from_its_own_checkpoint():
    r = report(EXTENDED, "double_fault")
    assert r["verdict"] == "pass", r["checks"]
    faults = r["metrics"]["faults"]
    assert [(f["cycle"], f["checkpoint_iteration"], f["restored_iteration"]) for f in faults] == [
        (0, 5, 5),
        (1, 10, 10),
    ]


@pytest.mark.parametrize(
    ("name", "failing"),
    [("restarts_exhausted", "clean_finish"), ("no_resume", "resumed_from_checkpoint")],
)
def test_the_negative_controls_failed_on_the_gpu_stack_as_expected(name, failing):
    r = report(EXTENDED, name)
    assert r["verdict"] == "fail"
    assert check_by_id(r, failing)["status"] == "fail"
    outcome = judge(ExpectedOutcome("fail", (failing,)), r["verdict"], r["checks"])
    assert outcome.met and outcome.verdict == "pass"


def test_restarts_exhausted_names_the_cause():
    detail = check_by_id(report(EXTENDED, "restarts_exhausted"), "clean_finish")["detail"]
    assert detail.startswith("ft_launcher gave up after 1 restarts (max_restarts 1)")


def test_resume_existing_started_from_the_copied_checkpoint():
    r = report(RESUMED, "resume_existing")
    assert r["verdict"] == "pass", r["checks"]
    assert check_by_id(r, "started_from_existing_checkpoint")["status"] == "pass"
    run = json.loads((RESUMED / "resume_existing" / "run.json").read_text())
    assert run["initial_checkpoint_iteration"] == 30
    assert [a["flag"] for a in run["adaptations"]] == ["--override-opt_param-scheduler"]


@pytest.mark.parametrize("name", ["kill_in_save", "double_fault", "restarts_exhausted", "no_resume"])
def test_no_leftovers_with_gpu_memory_sampled(name):
    r = report(EXTENDED, name)
    assert check_by_id(r, "no_leftovers")["status"] == "pass"
    for record in (EXTENDED / name / "leftovers").glob("*.json"):
        data = json.loads(record.read_text())
        assert data["gpu"]["sampled"] is True and data["alive"] == [] and data["gpu"]["held_by_earlier"] == []
