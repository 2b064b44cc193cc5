"""The verify rule's logic (ftqual.workflow.verify_rule) without Snakemake: the report of a run that never
launched, of a run directory the verifier cannot read, and the archive of every verification."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ftqual.verification import schema as verify_schema
from ftqual.workflow import verify_rule

NOT_LAUNCHED = {
    "scenario": "kill",
    "slot": "k-1",
    "settings": {"fault": "kill"},
    "settings_fingerprint": "f1",
    "stack": {"digest": "d1"},
    "stack_digest": "d1",
    "slot_reason": "first attempt",
    "machine": {"node": "n1"},
    "launched": False,
    "cause": "the preflight failed (results/preflight/p-1/preflight.json)",
}
EXPECT_PASS = {"expect": "pass", "failing": []}


@pytest.fixture
def slot(tmp_path):
    run_json = tmp_path / "results" / "kill" / "k-1" / "attempt.json"
    run_json.parent.mkdir(parents=True)
    return run_json


def verify(run_json: Path, record: dict, expectation=EXPECT_PASS):
    run_json.write_text(json.dumps(record))
    log, console = io.StringIO(), io.StringIO()
    rc = verify_rule.run(
        scenario="kill",
        slot="k-1",
        run_json=run_json,
        output=run_json.with_name("verify.json"),
        expectation=expectation,
        baseline_run=None,
        log=log,
        console=console,
    )
    return rc, json.loads(run_json.with_name("verify.json").read_text()), log.getvalue(), console.getvalue()


def test_a_run_that_never_launched_fails_with_its_cause(slot):
    rc, report, log, console = verify(slot, NOT_LAUNCHED)
    assert rc == 0  # a verdict, not a failed job
    cause = "not launched: the preflight failed (results/preflight/p-1/preflight.json)"
    assert report["verdict"] == "fail" and report["cause"] == cause
    assert report["schema"] == "ftqual.verify/v1" and report["run_id"] is None
    assert report["scenario"] == "kill" and report["fault"] == "kill"
    assert report["checks"] == [
        {"id": "launched", "status": "fail", "gates": True, "detail": cause, "evidence": []}
    ]
    assert report["attempt"] == {
        "slot": "k-1",
        "settings_fingerprint": "f1",
        "run_json": str(slot),
        "launched": False,
        "launcher_exit": None,
        "duration_s": None,
        "launcher_tail": [],
        "stack_digest": "d1",
        "slot_reason": "first attempt",
        "machine": {"node": "n1"},
    }
    assert report["stack"] == {"digest": "d1"} and report["expectation"] == EXPECT_PASS
    assert verify_schema.problems(report) == []  # every reader accepts it
    archived = slot.parent.parent / "attempts" / "k-1-not-launched.verify.json"
    assert json.loads(archived.read_text()) == report
    line = f"kill k-1: FAIL ({cause})"
    assert console == f"ftqual: verify {line}\n"
    assert log == f"{line}; report {slot.with_name('verify.json')}, archived as {archived}\n"


def test_every_verification_is_archived_and_none_overwritten(slot):
    for _ in range(3):
        verify(slot, NOT_LAUNCHED)
    names = sorted(p.name for p in (slot.parent.parent / "attempts").iterdir())
    assert names == [
        "k-1-not-launched.verify.2.json",
        "k-1-not-launched.verify.3.json",
        "k-1-not-launched.verify.json",
    ]


def test_a_negative_control_says_how_its_outcome_reads(slot):
    expectation = {"expect": "fail", "failing": ["launched"]}
    _, report, _, console = verify(slot, NOT_LAUNCHED, expectation)
    assert report["expectation"] == expectation
    assert console.startswith("ftqual: verify kill k-1: FAIL [negative control: ")


def test_a_run_directory_the_verifier_cannot_read_fails_as_unreadable_evidence(slot, tmp_path):
    record = {**NOT_LAUNCHED, "launched": True, "run_id": "kill-1", "run_dir": str(tmp_path / "gone")}
    record.pop("cause")
    rc, report, log, _ = verify(slot, {**record, "launcher_exit": 0})
    assert rc == 0 and report["verdict"] == "fail"
    assert report["checks"][0]["id"] == "evidence_readable"
    assert (
        report["cause"]
        == f"the run directory could not be verified: ftqual verify: {tmp_path / 'gone'}: not a directory"
    )
    assert report["run_id"] == "kill-1"
    first = log.splitlines()[0]
    assert first == f"verified in process, with the attempt's record: ftqual verify {tmp_path / 'gone'}"
    assert (slot.parent.parent / "attempts" / "kill-1.verify.json").is_file()


def test_the_baseline_is_passed_only_when_it_launched(slot, tmp_path, monkeypatch):
    calls = []

    def fake_verify(run_dir, baseline_dir=None, **options):
        calls.append((run_dir, baseline_dir, options))
        return None, "ftqual verify: runs/kill-1/run.json: not JSON"

    monkeypatch.setattr(verify_rule.verify, "verify_or_why", fake_verify)
    base = tmp_path / "base.json"
    record = {"run_dir": "runs/kill-1", "run_id": "kill-1"}
    base.write_text(json.dumps({"launched": True, "run_dir": "runs/baseline-1"}))
    report = verify_rule.verify_launched(record, "kill", base, io.StringIO())
    assert calls[-1] == ("runs/kill-1", "runs/baseline-1", {"attempt": record})
    assert (
        report["cause"]
        == "the run directory could not be verified: ftqual verify: runs/kill-1/run.json: not JSON"
    )
    base.write_text(json.dumps({"launched": False}))
    verify_rule.verify_launched(record, "kill", base, io.StringIO())
    assert calls[-1][1] is None


DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.mark.parametrize(("launcher_exit", "verdict"), [(0, "pass"), (1, "fail")])
def test_a_launched_attempt_is_verified_in_process_with_its_record(slot, launcher_exit, verdict):
    """The recorded H200 kill run: verify.json is the verification's own report with the attempt's record
    composed in (one launcher_exit check where the launch job failed), the attempt beside it; an attempt
    whose job exited 0 keeps the run's pass (negative control)."""
    run_dir = DATA / "megatron-h200-1gpu" / "kill"
    record = {**json.loads((run_dir / "run.json").read_text()), "settings": {"fault": "kill"}}
    record.update(launched=True, run_dir=str(run_dir), launcher_exit=launcher_exit)
    rc, report, log, console = verify(slot, record)
    assert rc == 0 and report["verdict"] == verdict
    assert [c["id"] for c in report["checks"]].count("launcher_exit") == (launcher_exit != 0)
    assert report["attempt"]["launcher_exit"] == launcher_exit and report["excerpts"] is not None
    assert f"ftqual verify {record['run_id']}" in log  # the verification's summary, in the rule's log
    assert console.startswith(f"ftqual: verify kill {record['run_id']}: {verdict.upper()}")
    assert verify_schema.problems(report) == []
