"""A scenario the stack cannot run, in the workflow's rules: run_scenario launches nothing and records why
(attempt.json `not_applicable`), only from a preflight that passed; verify gives it the verdict
not_applicable; its slot is kept, as the preflight that judged it is."""

from __future__ import annotations

import io
import json
from pathlib import Path

from ftqual.verification import schema as verify_schema
from ftqual.workflow import run_scenario as rs
from ftqual.workflow import verify_rule
from ftqual.workflow.attempts import scenario_slot

REASON = "fault disk_full makes a size-capped ext4 filesystem; mkfs.ext4 not on PATH"
PREFLIGHT = {
    "schema": "ftqual.preflight/v1",
    "verdict": "pass",
    "checks": [],
    "not_applicable": {"disk_full": REASON},
}


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_only_a_preflight_that_passed_or_warned_makes_a_scenario_not_applicable(tmp_path):
    passed = write_json(tmp_path / "pass.json", PREFLIGHT)
    assert rs.not_applicable_here("disk_full", passed) == REASON
    assert rs.not_applicable_here("kill", passed) is None
    warned = write_json(tmp_path / "warn.json", {**PREFLIGHT, "verdict": "warn"})
    assert rs.not_applicable_here("disk_full", warned) == REASON
    # a failed preflight refuses every scenario alike (refusal: "the preflight failed"), whatever it judged
    failed = write_json(tmp_path / "fail.json", {**PREFLIGHT, "verdict": "fail"})
    assert rs.not_applicable_here("disk_full", failed) is None
    assert rs.not_applicable_here("disk_full", tmp_path / "absent.json") is None
    malformed = write_json(tmp_path / "bad.json", {**PREFLIGHT, "not_applicable": {"disk_full": ""}})
    assert rs.not_applicable_here("disk_full", malformed) is None
    # a report written before the key: nothing is not applicable
    older = write_json(tmp_path / "old.json", {k: v for k, v in PREFLIGHT.items() if k != "not_applicable"})
    assert rs.not_applicable_here("disk_full", older) is None


def test_not_applicable_records_why_and_launches_nothing(tmp_path):
    log, console = io.StringIO(), io.StringIO()
    out = tmp_path / "attempt.json"
    assert rs.not_applicable(rs.Say("disk_full", log, console), out, {"scenario": "disk_full"}, REASON) == 0
    record = json.loads(out.read_text())
    assert record == {
        "scenario": "disk_full",
        "launched": False,
        "not_applicable": REASON,
        "cause": f"not applicable on this stack: {REASON}",
    }
    assert (
        console.getvalue() == f"ftqual: disk_full: not applicable on this stack: {REASON}; nothing launched\n"
    )


def verified(tmp_path: Path, record: dict, expect="pass") -> tuple[dict, str]:
    run_json = write_json(tmp_path / "results" / "disk_full" / "n-1" / "attempt.json", record)
    console = io.StringIO()
    verify_rule.run(
        scenario="disk_full",
        slot="n-1",
        run_json=run_json,
        output=run_json.with_name("verify.json"),
        expectation={"expect": expect, "failing": []},
        baseline_run=None,
        log=io.StringIO(),
        console=console,
    )
    return json.loads(run_json.with_name("verify.json").read_text()), console.getvalue()


RECORD = {
    "scenario": "disk_full",
    "settings": {"fault": "disk_full"},
    "launched": False,
    "not_applicable": REASON,
    "cause": f"not applicable on this stack: {REASON}",
}


def test_verify_gives_it_its_own_verdict_not_a_pass_nor_a_fail(tmp_path):
    report, console = verified(tmp_path, RECORD)
    assert verify_schema.problems(report) == []
    assert report["verdict"] == "not_applicable"
    assert report["cause"] == f"not applicable on this stack: {REASON}"
    assert report["checks"] == [
        {"id": "applicable", "status": "skip", "gates": True, "detail": report["cause"], "evidence": []}
    ]
    assert report["attempt"]["launched"] is False
    assert "disk_full n-1: NOT_APPLICABLE (not applicable on this stack: " in console


def test_a_record_not_launched_for_another_reason_still_fails(tmp_path):
    record = {**RECORD, "cause": "the preflight failed (p)"}
    del record["not_applicable"]
    report, _ = verified(tmp_path, record)
    assert report["verdict"] == "fail"


def test_the_not_applicable_slot_is_kept_like_the_preflight_that_judged_it(tmp_path):
    report, _ = verified(tmp_path, RECORD)
    fingerprint = "0123456789ab"
    slot = tmp_path / "results" / "disk_full" / f"{fingerprint}-1"
    write_json(slot / "attempt.json", RECORD)
    write_json(slot / "verify.json", report)
    kept = scenario_slot(tmp_path, "disk_full", fingerprint)
    assert kept.name == f"{fingerprint}-1" and kept.reason == "latest attempt not applicable on this stack"
    # an edited report with a failed check is not trusted: the next slot
    report["checks"].append({"id": "clean_finish", "status": "fail", "detail": "", "evidence": []})
    write_json(slot / "verify.json", report)
    assert scenario_slot(tmp_path, "disk_full", fingerprint).name == f"{fingerprint}-2"
