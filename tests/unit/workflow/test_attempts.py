"""The workflow's state rules (ftqual.workflow.attempts): which attempt slot each scenario works on."""

from __future__ import annotations

import json
import os

from ftqual.workflow.attempts import preflight_slot, report_dir, scenario_slot

FP = "0123456789ab"


def report(verdict, **more):
    """A well-formed verify report (ftqual.verification.schema) of a baseline with this verdict."""
    status = verdict if verdict in ("pass", "fail", "inconclusive") else "inconclusive"
    check = {"id": "uninterrupted_completion", "status": status, "detail": "", "evidence": []}
    return {"schema": "ftqual.verify/v1", "verdict": verdict, "fault": "none", "checks": [check], **more}


def attempt(workdir, n, verdict=None, run_dir="runs/r", launched=True, fp=FP, scenario="kill"):
    slot = workdir / "results" / scenario / f"{fp}-{n}"
    slot.mkdir(parents=True)
    (slot / "attempt.json").write_text(json.dumps({"run_dir": run_dir, "launched": launched}))
    if verdict:
        (slot / "verify.json").write_text(json.dumps(report(verdict)))
    if run_dir and launched:
        (workdir / run_dir).mkdir(parents=True, exist_ok=True)
    return slot


def test_new_settings_start_at_slot_one(tmp_path):
    attempt(tmp_path, 4, "pass", fp="ffffffffffff")  # another fingerprint's attempts do not count
    assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-1"


def test_a_passed_attempt_is_kept(tmp_path):
    attempt(tmp_path, 1, "fail")
    attempt(tmp_path, 2, "pass", run_dir="runs/r2")
    slot = scenario_slot(tmp_path, "kill", FP)
    assert slot.name == f"{FP}-2" and slot.reason == "latest attempt passed"


def test_anything_but_pass_moves_to_the_next_slot(tmp_path):
    for n, verdict in enumerate(("fail", "inconclusive", "garbage"), start=1):
        attempt(tmp_path, n, verdict, run_dir=f"runs/r{n}")
        assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-{n + 1}"


def test_failed_attempt_is_kept_when_reruns_are_off(tmp_path):
    attempt(tmp_path, 1, "fail")
    assert scenario_slot(tmp_path, "kill", FP, rerun_failed=False).name == f"{FP}-1"


def test_an_unfinished_attempt_is_finished_in_its_slot(tmp_path):
    attempt(tmp_path, 1, "pass")
    attempt(tmp_path, 2, None, run_dir="runs/r2")
    assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-2"


def test_what_an_interrupt_leaves_unverified_is_finished_or_redone(tmp_path):
    """No verify report yet: a record whose run directory exists is verified in its slot; one whose run
    directory is gone, or a torn record, never crashes the plan."""
    attempt(tmp_path, 1, None, run_dir="runs/gone")
    (tmp_path / "runs" / "gone").rmdir()
    slot = scenario_slot(tmp_path, "kill", FP)
    assert slot.name == f"{FP}-2" and slot.reason == f"run directory of unverified attempt {FP}-1 is gone"
    torn = attempt(tmp_path, 2, None)
    (torn / "attempt.json").write_text('{"run_dir": "runs/')  # half-written
    assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-2"  # unfinished: Snakemake redoes the record
    never = attempt(tmp_path, 3, None, launched=False, run_dir=None)
    assert scenario_slot(tmp_path, "kill", FP).name == never.name  # not launched: no directory to lose


def test_a_passed_attempt_whose_run_directory_is_gone_is_redone(tmp_path):
    attempt(tmp_path, 1, "pass", run_dir="runs/gone")
    (tmp_path / "runs" / "gone").rmdir()
    slot = scenario_slot(tmp_path, "kill", FP)
    assert slot.name == f"{FP}-2" and "gone" in slot.reason


def test_a_corrupt_verdict_file_is_not_a_pass(tmp_path):
    slot = attempt(tmp_path, 1, None)
    (slot / "verify.json").write_text("{not json")
    assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-1"  # no verdict yet: verify it again
    (slot / "verify.json").write_text("[]")
    assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-1"


def test_preflight_slots(tmp_path):
    assert preflight_slot(tmp_path, FP).name == f"{FP}-1"
    folder = tmp_path / "results" / "preflight" / f"{FP}-1"
    folder.mkdir(parents=True)

    def write(verdict, **more):
        doc = {"schema": "ftqual.preflight/v1", "verdict": verdict, "checks": [], **more}
        (folder / "preflight.json").write_text(json.dumps(doc))

    write("warn")
    assert preflight_slot(tmp_path, FP).name == f"{FP}-1"
    write("fail")
    assert preflight_slot(tmp_path, FP).name == f"{FP}-2"
    write("pass", checks={"python": "ok"})  # malformed: never a preflight that passed
    slot = preflight_slot(tmp_path, FP)
    assert slot.name == f"{FP}-2" and slot.reason == f"preflight {FP}-1 malformed"


def test_the_report_folder_changes_with_any_attempt():
    base = report_dir("p-1", {"baseline": "a-1", "kill": "b-1"}, "baseline")
    assert base == report_dir("p-1", {"kill": "b-1", "baseline": "a-1"}, "baseline")
    assert base != report_dir("p-1", {"baseline": "a-1", "kill": "b-2"}, "baseline")
    assert base != report_dir("p-2", {"baseline": "a-1", "kill": "b-1"}, "baseline")


def control_report(slot, raw: str, failed: str) -> None:
    """A restarts_exhausted report: verdict `raw`, clean_finish `failed`, expecting clean_finish to fail."""
    (slot / "verify.json").write_text(
        json.dumps(
            {
                "schema": "ftqual.verify/v1",
                "verdict": raw,
                "checks": [{"id": "clean_finish", "status": failed}],
                "expectation": {"expect": "fail", "failing": ["clean_finish"]},
            }
        )
    )


def test_a_negative_control_that_failed_as_expected_is_kept(tmp_path):
    control_report(attempt(tmp_path, 1), "fail", "fail")
    slot = scenario_slot(tmp_path, "kill", FP)
    assert slot.name == f"{FP}-1" and slot.reason == "latest attempt passed"


def test_a_negative_control_that_did_not_fail_is_redone(tmp_path):
    control_report(attempt(tmp_path, 1), "pass", "pass")
    slot = scenario_slot(tmp_path, "kill", FP)
    assert slot.name == f"{FP}-2" and "fail" in slot.reason


def test_a_malformed_or_incomplete_passing_report_is_never_kept(tmp_path):
    slot = attempt(tmp_path, 1, "pass")
    (slot / "verify.json").write_text(json.dumps({"verdict": "pass", "checks": []}))  # hand-edited
    assert scenario_slot(tmp_path, "kill", FP).reason == f"latest attempt {FP}-1 was malformed"
    (slot / "verify.json").write_text(json.dumps(report("pass", checks=[])))  # no required check
    assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-2"
    (slot / "verify.json").write_text(json.dumps(report("pass", metrics=[1])))  # not an object
    assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-2"
    (slot / "verify.json").write_text("[" * 100000 + "]" * 100000)  # nested too deeply: unfinished, no crash
    assert scenario_slot(tmp_path, "kill", FP).name == f"{FP}-1"


def test_legacy_records_are_adopted_once_and_never_over_a_current_one(tmp_path):
    from ftqual.workflow.attempts import adopt_legacy_records, record_path

    old = tmp_path / "results" / "kill" / f"{FP}-1"
    old.mkdir(parents=True)
    (old / "run.json").write_text('{"run_dir": "runs/r"}')
    os.utime(old / "run.json", (1_000_000, 1_000_000))
    both = tmp_path / "results" / "kill" / f"{FP}-2"
    both.mkdir()
    (both / "run.json").write_text('{"legacy": true}')
    (both / "attempt.json").write_text('{"current": true}')
    assert record_path(old) == old / "run.json"  # read where it lies before adoption
    assert adopt_legacy_records(tmp_path, ["kill", "hang"]) == [old / "attempt.json"]
    assert (old / "attempt.json").read_text() == '{"run_dir": "runs/r"}'
    assert (old / "attempt.json").stat().st_mtime == 1_000_000
    assert (both / "attempt.json").read_text() == '{"current": true}' and (both / "run.json").exists()
    assert record_path(both) == both / "attempt.json"
    assert adopt_legacy_records(tmp_path, ["kill"]) == []
