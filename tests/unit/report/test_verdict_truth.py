"""The summary's verdict is true: a failed preflight, a cause without a failed check, a baseline alone,
hostile evidence paths and hostile text all come out as what they are, in summary.json, summary.md and
junit.xml."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET

from ftqual.report.inputs import attach_excerpts


def _summary(report_main, results, *extra):
    assert report_main("--results", str(results), *extra) == 0
    summary = json.loads((results / "summary.json").read_text())
    return summary, (results / "summary.md").read_text(), ET.parse(results / "junit.xml").getroot()


def test_failed_preflight_fails_the_summary_with_its_checks(report_main, write_docs, docs, preflight_doc):
    results = write_docs(docs)
    failed = copy.deepcopy(preflight_doc)
    failed["verdict"] = "fail"
    failed["checks"].append(
        {"id": "scenario:kill", "status": "fail", "detail": "max_restarts 0", "fix": "set max_restarts >= 1"}
    )
    (results / "preflight.json").write_text(json.dumps(failed))
    summary, md, junit = _summary(report_main, results)
    assert summary["verdict"] == "fail"
    assert summary["attention"][0]["scenario"] == "preflight"
    assert md.startswith("# ftqual: FAIL") and "max_restarts 0" in md
    [suite] = [s for s in junit.iter("testsuite") if s.get("name") == "preflight"]
    assert suite.get("failures") == "1"


def test_a_cause_without_a_failed_check_reaches_junit_once(report_main, write_docs, docs):
    docs["kill"] = {
        "schema": "ftqual.verify/v1",
        "run_id": None,
        "scenario": "kill",
        "fault": "kill",
        "verdict": "fail",
        "cause": "not launched: the preflight failed",
        "checks": [
            {"id": "launched", "status": "fail", "gates": True, "detail": "not launched", "evidence": []}
        ],
        "metrics": {},
    }
    summary, md, junit = _summary(report_main, write_docs(docs))
    [kill] = [sc for sc in summary["scenarios"] if sc["name"] == "kill"]
    assert kill["verdict"] == "fail" and kill["cause"] == "not launched: the preflight failed"
    assert "cause: not launched: the preflight failed" in md
    [suite] = [s for s in junit.iter("testsuite") if s.get("name") == "kill"]
    assert suite.get("failures") == "1"  # the failed check carries it; the verdict case does not repeat it
    failure = next(c.find("failure") for c in suite.iter("testcase") if c.get("name") == "launched")
    assert failure.get("message").startswith("not launched: the preflight failed — launched:")
    verdict_case = [c for c in suite.iter("testcase") if c.get("name") == "verdict"][0]
    assert verdict_case.find("failure") is None and "not launched" in verdict_case.find("system-out").text


def test_a_baseline_alone_qualifies_no_recovery(report_main, write_docs, docs):
    summary, md, _ = _summary(report_main, write_docs({"baseline": docs["baseline"]}))
    assert summary["verdict"] == "inconclusive"
    assert md.startswith("# ftqual: INCONCLUSIVE — no fault scenario ran") and "recovery qualified" not in md


def test_attempts_are_recorded(report_main, write_docs, docs):
    results = write_docs(docs)
    summary, _, _ = _summary(report_main, results, "--attempt", "kill=abcdef012345-2")
    assert summary["attempts"] == {"kill": "abcdef012345-2"}


def test_junit_stays_valid_xml_with_terminal_colours_and_control_characters(report_main, write_docs, docs):
    check = next(c for c in docs["kill"]["checks"] if c["id"] == "resumed_from_checkpoint")
    check.update(
        status="fail",
        detail="\x1b[31mred\x1b[0m and \x00\x07 bell",
        evidence=[{"path": "logs/x.log", "line": 1, "text": "\x1b[1mbold\x1b[0m \x1f"}],
    )
    docs["kill"]["verdict"] = "fail"
    _, _, junit = _summary(report_main, write_docs(docs))
    failure = next(
        c.find("failure")
        for c in junit.iter("testcase")
        if c.get("name") == "resumed_from_checkpoint" and c.get("classname") == "ftqual.kill"
    )
    assert failure.get("message") == "red and ?? bell" and "bold" in failure.text


def test_evidence_is_quoted_from_the_verify_report_never_from_the_logs(tmp_path):
    """The cited lines come from verify.json's `excerpts` (ftqual verify quotes them, reading only regular
    files inside the run: tests/unit/verification/evidence/test_excerpts.py); the report opens no log, even
    one that lies beside it; a verify report written before `excerpts` quotes nothing."""
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "ok.log").write_text("first\nsecond\n")  # never read by the report
    doc = {
        "run_dir": str(run),
        "checks": [
            {"id": "a", "status": "fail", "evidence": [{"path": "logs/ok.log", "line": 2}]},
            {"id": "b", "status": "fail", "evidence": [{"path": "logs/ok.log", "line": 1, "text": "own"}]},
            {"id": "c", "status": "pass", "evidence": [{"path": "logs/ok.log", "line": 1}]},
        ],
        "excerpts": {"logs/ok.log:2": "quoted by verify", "logs/ok.log:1": "first"},
    }
    out = attach_excerpts(doc)
    texts = {c["id"]: c["evidence"][0].get("text") for c in out["checks"]}
    assert texts == {"a": "quoted by verify", "b": "own", "c": None}
    old = {k: v for k, v in doc.items() if k != "excerpts"}
    assert attach_excerpts(old) == old  # nothing quoted, no log read


def _negative_control(docs, raw: str, clean_finish: str) -> dict:
    """The kill report turned into the restarts_exhausted control: its verdict and clean_finish as given."""
    doc = copy.deepcopy(docs["kill"])
    doc["scenario"] = "restarts_exhausted"
    doc["verdict"] = raw
    for check in doc["checks"]:
        if check["id"] == "clean_finish":
            check["status"] = clean_finish
            check["detail"] = "ft_launcher gave up after 1 restart (max_restarts 1): exit 1"
    doc["expectation"] = {"expect": "fail", "failing": ["clean_finish"]}
    return doc


def test_a_negative_control_that_failed_as_expected_is_green_everywhere(report_main, write_docs, docs):
    docs["restarts_exhausted"] = _negative_control(docs, "fail", "fail")
    summary, md, junit = _summary(report_main, write_docs(docs))
    [control] = [sc for sc in summary["scenarios"] if sc["name"] == "restarts_exhausted"]
    assert (control["verdict"], control["raw_verdict"], control["expect"]) == ("pass", "fail", "fail")
    assert summary["verdict"] == "pass" and md.startswith("# ftqual: PASS")
    assert not [i for i in summary["attention"] if i["scenario"] == "restarts_exhausted"]
    assert "| expected outcome |" in md and "negative control (expects `clean_finish` to fail)" in md
    [suite] = [s for s in junit.iter("testsuite") if s.get("name") == "restarts_exhausted"]
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    case = next(c for c in suite.iter("testcase") if c.get("name") == "clean_finish")
    assert case.find("failure") is None


def test_a_negative_control_that_did_not_fail_fails_everywhere(report_main, write_docs, docs):
    docs["restarts_exhausted"] = _negative_control(docs, "pass", "pass")
    summary, md, junit = _summary(report_main, write_docs(docs))
    [control] = [sc for sc in summary["scenarios"] if sc["name"] == "restarts_exhausted"]
    assert (control["verdict"], control["raw_verdict"]) == ("fail", "pass")
    assert "did not fail" in control["cause"]
    assert summary["verdict"] == "fail"
    assert md.startswith("# ftqual: FAIL") and "did not fail" in md.splitlines()[0] + md
    [suite] = [s for s in junit.iter("testsuite") if s.get("name") == "restarts_exhausted"]
    assert suite.get("failures") == "1"
    verdict_case = next(c for c in suite.iter("testcase") if c.get("name") == "verdict")
    assert "did not fail" in verdict_case.find("failure").get("message")


def test_the_attempt_records_the_report_discovers_are_the_workflows():
    """The report names the attempt records without importing the workflow (tests/unit/test_layers.py)."""
    from ftqual.report import inputs
    from ftqual.workflow import attempts

    assert inputs.ATTEMPT_RECORDS == (attempts.ATTEMPT_RECORD, attempts.LEGACY_RECORD)
