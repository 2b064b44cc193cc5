"""A scenario the stack cannot run, from its attempt record to the gate: the verify rule's report
(verdict not_applicable), the summary, summary.md, junit.xml and the gate agree that it is neither a pass
nor a failure, name it with its reason, and never let it count as a pass."""

from __future__ import annotations

import copy
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

from ftqual.report.schema import SUMMARY_SCHEMA
from ftqual.verification import schema as verify_schema
from ftqual.workflow import gate, verify_rule

REASON = "Megatron-Core 0.17.0 has no --verify-integrity (its own parser rejects this scenario's arguments)"


def not_applicable_doc(tmp_path: Path, scenario: str, fault: str, expect: str = "pass") -> dict:
    """The verify rule's report of an attempt the stack cannot run, as run_scenario records it."""
    record = tmp_path / "attempts" / scenario / "attempt.json"
    record.parent.mkdir(parents=True)
    record.write_text(
        json.dumps(
            {
                "scenario": scenario,
                "slot": "n-1",
                "settings": {"fault": fault},
                "settings_fingerprint": "f1",
                "stack": {"digest": "d1"},
                "stack_digest": "d1",
                "launched": False,
                "not_applicable": REASON,
                "cause": f"not applicable on this stack: {REASON}",
            }
        )
    )
    expectation = {"expect": expect, "failing": ["clean_finish"] if expect == "fail" else []}
    verify_rule.run(
        scenario=scenario,
        slot="n-1",
        run_json=record,
        output=record.with_name("verify.json"),
        expectation=expectation,
        baseline_run=None,
        log=io.StringIO(),
        console=io.StringIO(),
    )
    return json.loads(record.with_name("verify.json").read_text())


def summarise(report_main, write_docs, docs: dict) -> tuple[dict, str, ET.Element, Path]:
    results = write_docs(docs)
    assert report_main("--results", str(results)) == 0
    summary = json.loads((results / "summary.json").read_text())
    return summary, (results / "summary.md").read_text(), ET.parse(results / "junit.xml").getroot(), results


def gate_of(tmp_path: Path, results: Path, summary: dict) -> tuple[int, list[str]]:
    (results / "plots").mkdir(exist_ok=True)
    published = tmp_path / "published"
    published.mkdir()
    console = io.StringIO()
    rc = gate.run(
        report_dir=results,
        attempts=summary["attempts"],
        log=io.StringIO(),
        console=console,
        results=published,
    )
    return rc, console.getvalue().splitlines()


def test_the_verify_report_is_not_applicable_and_well_formed(tmp_path):
    doc = not_applicable_doc(tmp_path, "verified", "kill")
    assert verify_schema.problems(doc) == []
    assert doc["verdict"] == "not_applicable" and doc["not_applicable"] == REASON
    assert doc["cause"] == f"not applicable on this stack: {REASON}"
    assert [(c["id"], c["status"]) for c in doc["checks"]] == [("applicable", "skip")]
    seen = verify_schema.judged(doc)
    assert seen.raw == "not_applicable" and seen.outcome.verdict == "not_applicable"
    assert seen.outcome.met is False  # never an outcome that keeps or passes as met


def test_a_negative_control_that_cannot_run_is_not_applicable_never_a_pass(tmp_path):
    doc = not_applicable_doc(tmp_path, "restarts_exhausted", "kill", expect="fail")
    seen = verify_schema.judged(doc)
    assert seen.outcome.verdict == "not_applicable" and not seen.outcome.met


def test_a_not_applicable_report_with_a_failed_check_is_not_trusted(tmp_path):
    doc = not_applicable_doc(tmp_path, "verified", "kill")
    doc["checks"].append({"id": "clean_finish", "status": "fail", "detail": "edited", "evidence": []})
    assert verify_schema.judged(doc).raw == "fail"


def test_the_summary_junit_markdown_and_gate_agree(tmp_path, report_main, write_docs, docs):
    docs.pop("hang")
    docs["verified"] = not_applicable_doc(tmp_path, "verified", "kill")
    summary, md, junit, results = summarise(report_main, write_docs, docs)
    assert not list(jsonschema.Draft202012Validator(SUMMARY_SCHEMA).iter_errors(summary))
    assert summary["verdict"] == "pass"
    assert summary["headline"] == (
        "ftqual: PASS — recovery qualified (2/2 applicable scenarios); "
        "1 not applicable on this stack: verified"
    )
    assert summary["not_applicable"] == {"verified": REASON}
    assert summary["scenario_counts"] == {"pass": 2, "fail": 0, "inconclusive": 0, "not_applicable": 1}
    [sc] = [s for s in summary["scenarios"] if s["name"] == "verified"]
    assert sc["verdict"] == "not_applicable" and sc["run_state"] == "not applicable"
    assert not [i for i in summary["attention"] if i["scenario"] == "verified"]
    # summary.md: apart, with the reason
    assert "2/2 applicable scenarios pass, 1 not applicable" in md
    section = md.split("## Not applicable on this stack", 1)[1].split("\n## ", 1)[0]
    assert f"- **verified** (fault `kill`): {REASON}" in section
    # junit.xml: skipped with the reason, never a failure nor a pass
    suite = next(s for s in junit.iter("testsuite") if s.get("name") == "verified")
    verdict = next(c for c in suite.iter("testcase") if c.get("name") == "verdict")
    assert verdict.find("skipped").get("message") == f"not applicable on this stack: {REASON}"
    assert suite.get("failures") == suite.get("errors") == "0"
    assert junit.get("failures") == junit.get("errors") == "0"
    # the gate: passes, and prints it apart with its reason
    rc, lines = gate_of(tmp_path, results, summary)
    assert rc == 0
    assert f"  verified: NOT APPLICABLE on this stack — {REASON}" in lines


def test_without_an_applicable_fault_scenario_nothing_qualifies(tmp_path, report_main, write_docs, docs):
    """Negative control: every fault scenario not applicable leaves the baseline alone: not a PASS."""
    only = {"baseline": docs["baseline"], "verified": not_applicable_doc(tmp_path, "verified", "kill")}
    summary, md, junit, results = summarise(report_main, write_docs, only)
    assert summary["verdict"] == "inconclusive"
    assert summary["headline"].startswith("ftqual: INCONCLUSIVE — no fault scenario ran (1/1 applicable")
    assert summary["headline"].endswith("; 1 not applicable on this stack: verified")
    assert summary["scenario_counts"]["pass"] == 1
    assert int(junit.get("errors")) + int(junit.get("failures")) >= 1  # red in CI
    rc, _ = gate_of(tmp_path, results, summary)
    assert rc == 1


def test_a_failure_beside_it_still_fails_and_names_both(tmp_path, report_main, write_docs, docs):
    docs.pop("hang")
    docs["kill"] = copy.deepcopy(docs["kill"])
    docs["kill"]["verdict"] = "fail"
    next(c for c in docs["kill"]["checks"] if c["id"] == "clean_finish")["status"] = "fail"
    docs["verified"] = not_applicable_doc(tmp_path, "verified", "kill")
    summary, _, _, results = summarise(report_main, write_docs, docs)
    assert summary["verdict"] == "fail"
    assert summary["headline"].startswith("ftqual: FAIL — kill: ")
    assert summary["headline"].endswith("; 1 not applicable on this stack: verified")
    rc, lines = gate_of(tmp_path, results, summary)
    assert rc == 1 and any(line.startswith("  verified: NOT APPLICABLE") for line in lines)


def test_the_summary_itself_never_says_not_applicable():
    assert "not_applicable" not in SUMMARY_SCHEMA["properties"]["verdict"]["enum"]
