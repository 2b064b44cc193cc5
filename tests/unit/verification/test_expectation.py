"""A scenario's outcome against its expectation (ftqual.verification.expectation): negative controls qualify
only by
failing the way they exist to fail."""

from __future__ import annotations

import pytest

from ftqual.verification.expectation import ExpectedOutcome, judge
from ftqual.verification.schema import judged

CONTROL = ExpectedOutcome("fail", ("clean_finish",))


def checks(**statuses: str) -> list[dict]:
    return [{"id": cid, "status": status} for cid, status in statuses.items()]


def test_expect_pass_is_the_verdict_itself():
    for raw in ("pass", "fail", "inconclusive"):
        outcome = judge(ExpectedOutcome(), raw, [])
        assert (outcome.verdict, outcome.met) == (raw, raw == "pass")
    assert judge(ExpectedOutcome(), "bogus", []).verdict == "inconclusive"


def test_a_negative_control_that_failed_as_expected_passes():
    outcome = judge(CONTROL, "fail", checks(clean_finish="fail", resumed_from_checkpoint="pass"))
    assert outcome.met and outcome.verdict == "pass" and outcome.raw_verdict == "fail"
    assert "failed as expected" in outcome.detail


def test_a_negative_control_that_passed_fails_the_qualification():
    outcome = judge(CONTROL, "pass", checks(clean_finish="pass"))
    assert not outcome.met and outcome.verdict == "fail"
    assert "did not fail" in outcome.detail and outcome.unmet_checks == ["clean_finish"]


@pytest.mark.parametrize(
    ("raw", "statuses", "verdict", "words"),
    [
        ("fail", {"launched": "fail"}, "fail", "clean_finish missing"),
        ("fail", {"clean_finish": "pass", "progress_after_resume": "fail"}, "fail", "clean_finish pass"),
        ("inconclusive", {"clean_finish": "inconclusive"}, "inconclusive", "clean_finish inconclusive"),
    ],
)
def test_a_negative_control_that_failed_otherwise_does_not_qualify(raw, statuses, verdict, words):
    outcome = judge(CONTROL, raw, checks(**statuses))
    assert not outcome.met and outcome.verdict == verdict and words in outcome.detail


def test_every_named_check_must_fail():
    both = ExpectedOutcome("fail", ("clean_finish", "progress_after_resume"))
    assert not judge(both, "fail", checks(clean_finish="fail", progress_after_resume="pass")).met
    assert judge(both, "fail", checks(clean_finish="fail", progress_after_resume="fail")).met


def test_a_report_without_an_expectation_expects_pass():
    assert judged({"verdict": "fail", "checks": []}).outcome.met is False
    assert judged({"verdict": "pass", "checks": []}).outcome.met is True
    report = {"verdict": "fail", "checks": checks(clean_finish="fail"), "expectation": CONTROL.to_json()}
    assert judged(report).outcome.met is True
    assert ExpectedOutcome.from_json({"expect": "weird", "failing": "x"}) == ExpectedOutcome()
