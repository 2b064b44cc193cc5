"""Failing, inconclusive and unusable inputs: the report names what failed on the first screen."""

from __future__ import annotations

import json

import pytest

from tests.support.schemas import validate_summary

FIRST_SCREEN = 25


def _check(doc: dict, cid: str) -> dict:
    return next(c for c in doc["checks"] if c["id"] == cid)


def _report(report_main, results, *extra):
    assert (
        report_main("--results", str(results), *extra) == 0
    )  # the report reports, even a failed qualification
    summary = json.loads((results / "summary.json").read_text())
    validate_summary(summary)
    return summary, (results / "summary.md").read_text().splitlines()


@pytest.fixture
def failed_resume(docs):
    """kill: the replacement started from iteration 0 (a fresh start)."""
    kill = docs["kill"]
    check = _check(kill, "resumed_from_checkpoint")
    check.update(
        status="fail",
        detail="no checkpoint was loaded: cycle 1 started from iteration 0",
        evidence=[
            {
                "path": "logs/train_cycle1.log",
                "line": 975,
                "text": "0: WARNING: could not find the metadata file /lus/nvrx/runs/kill/checkpoints/"
                "latest_checkpointed_iteration.txt",
            },
            {
                "path": "logs/train_cycle1.log",
                "line": 976,
                "text": "0:     will not load any checkpoints and will start from random",
            },
            {"path": "logs/train_cycle1.log", "line": 1021, "text": "1:  iteration        1/      30 | ..."},
        ],
    )
    kill["verdict"] = "fail"
    return docs


def test_one_failed_check_is_named_with_evidence_on_first_screen(report_main, write_docs, failed_resume):
    summary, lines = _report(report_main, write_docs(failed_resume))
    assert summary["verdict"] == "fail"
    assert lines[0] == "# ftqual: FAIL — kill: resumed_from_checkpoint failed"
    head = "\n".join(lines[:FIRST_SCREEN])
    assert "resumed_from_checkpoint" in head and "no checkpoint was loaded" in head
    assert "`logs/train_cycle1.log:975`" in head
    assert "will not load any checkpoints and will start from random" in head
    # all evidence is in the details section further down
    assert any("logs/train_cycle1.log:1021" in line for line in lines[FIRST_SCREEN:])
    table_row = next(line for line in lines if line.startswith("| `resumed_from_checkpoint` |"))
    assert table_row == "| `resumed_from_checkpoint` | ⏭ skip | ❌ FAIL | ✅ pass |"
    assert summary["attention"][0]["check"] == "resumed_from_checkpoint"


def test_junit_counts_failures(report_main, write_docs, failed_resume, junit_counts):
    results = write_docs(failed_resume)
    _report(report_main, results)
    counts = junit_counts(results / "junit.xml")
    # the failed check + the verdict
    assert counts["kill"] == {"tests": 14, "failures": 1, "errors": 0, "skipped": 4}  # each failure once
    assert counts["baseline"]["failures"] == 0 and counts["hang"]["failures"] == 0
    text = (results / "junit.xml").read_text()
    assert 'message="no checkpoint was loaded: cycle 1 started from iteration 0"' in text
    assert "logs/train_cycle1.log:976: 0:     will not load any checkpoints" in text


def test_several_failures_headline_counts_the_rest(report_main, write_docs, failed_resume):
    _check(failed_resume["hang"], "clean_finish").update(status="fail", detail="ft_launcher exit code 93")
    failed_resume["hang"]["verdict"] = "fail"
    summary, lines = _report(report_main, write_docs(failed_resume))
    assert lines[0] == "# ftqual: FAIL — kill: resumed_from_checkpoint failed (+1 more)"
    head = "\n".join(lines[:FIRST_SCREEN])
    assert "hang / `clean_finish`" in head and "exit code 93" in head


def test_missing_and_unreadable_reports_are_inconclusive(
    report_main, write_docs, docs, junit_counts, png_size
):
    results = write_docs({"baseline": docs["baseline"], "kill": "{not json"})
    summary, lines = _report(report_main, results, "--expect", "hang")
    by_name = {s["name"]: s for s in summary["scenarios"]}
    assert by_name["baseline"]["verdict"] == "pass"
    assert by_name["kill"]["verdict"] == "inconclusive" and "unreadable" in by_name["kill"]["reason"]
    assert by_name["hang"]["verdict"] == "inconclusive" and "missing" in by_name["hang"]["reason"]
    assert summary["verdict"] == "inconclusive"
    assert lines[0].startswith("# ftqual: INCONCLUSIVE — kill: verify report unreadable")
    assert "hang" in "\n".join(lines[:FIRST_SCREEN])
    counts = junit_counts(results / "junit.xml")
    assert counts["hang"] == {"tests": 1, "failures": 0, "errors": 1, "skipped": 0}
    # the timeline plot of a scenario without a report says why instead of being absent
    assert png_size(results / "plots" / "timeline_hang.png") == (1200, 600)


def test_inconclusive_check_never_looks_green(report_main, write_docs, docs, junit_counts):
    check = _check(docs["kill"], "checkpoint_before_failure")
    check.update(status="inconclusive", detail="checkpoint payload missing")
    # the verifier (wrongly) still says pass: the summary takes the worst
    results = write_docs(docs)
    summary, lines = _report(report_main, results)
    kill = summary["scenarios"][1]
    assert kill["verdict"] == "inconclusive" and "its checks say inconclusive" in kill["reason"]
    assert lines[0] == "# ftqual: INCONCLUSIVE — kill: checkpoint_before_failure inconclusive"
    counts = junit_counts(results / "junit.xml")
    assert counts["kill"]["errors"] == 1 and counts["kill"]["failures"] == 0  # each finding once


def test_only_gating_checks_can_lower_the_verdict(report_main, write_docs, docs):
    """A check that says it does not gate never lowers the verdict; one that gates does."""
    informative = _check(docs["hang"], "clean_finish")
    informative.update(status="fail", gates=False, detail="informative only")
    summary, _ = _report(report_main, write_docs(docs))
    assert summary["scenarios"][2]["verdict"] == "pass"
    _check(docs["hang"], "clean_finish")["gates"] = True
    summary, _ = _report(report_main, write_docs(docs))
    assert summary["scenarios"][2]["verdict"] == "fail"


def test_a_report_lacking_a_check_its_fault_requires_is_inconclusive(
    report_main, write_docs, docs, junit_counts
):
    """The contract's checks (ftqual.verification.schema.REQUIRED_CHECKS) must all be in a fault scenario's
    report:
    one that lost progress_after_resume (an old or broken verifier, a hand edit) proves nothing about it."""
    docs["hang"]["checks"] = [c for c in docs["hang"]["checks"] if c["id"] != "progress_after_resume"]
    results = write_docs(docs)
    summary, lines = _report(report_main, results)
    hang = summary["scenarios"][2]
    assert hang["verdict"] == "inconclusive"
    [missing] = [c for c in hang["checks"] if c["id"] == "progress_after_resume"]
    assert missing["status"] == "inconclusive" and "missing from the verify report" in missing["detail"]
    assert lines[0] == "# ftqual: INCONCLUSIVE — hang: progress_after_resume inconclusive"
    assert junit_counts(results / "junit.xml")["hang"]["errors"] == 1
    docs["hang"]["checks"] = []  # no checks at all
    summary, _ = _report(report_main, write_docs(docs))
    assert summary["scenarios"][2]["verdict"] == "inconclusive"


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("checks", {"a": 1}, "checks is not a list"),
        ("checks", [1], "checks[0] is not an object"),
        ("metrics", [1, 2], "metrics is not an object"),
        ("attempt", "x", "attempt is not an object"),
        ("fault", "meteor", "fault 'meteor' is not one of"),
        ("verdict", "great", "verdict 'great' is not one of"),
    ],
)
def test_a_malformed_report_is_inconclusive_naming_the_field(
    report_main, write_docs, docs, field, value, named
):
    docs["kill"][field] = value
    if field == "fault":
        docs["kill"].pop("expected", None)
    summary, lines = _report(report_main, write_docs(docs))
    kill = summary["scenarios"][1]
    assert kill["verdict"] == "inconclusive" and named in kill["reason"], kill["reason"]
    assert summary["verdict"] == "inconclusive"


def test_a_deeply_nested_report_is_inconclusive_not_a_traceback(report_main, write_docs, docs):
    results = write_docs(docs)
    [kill] = [p for p in results.rglob("verify.json") if "kill" in str(p)]
    kill.write_text('{"schema": "ftqual.verify/v1", "checks": ' + "[" * 100000 + "]" * 100000 + "}")
    summary, _ = _report(report_main, results)
    assert summary["scenarios"][1]["verdict"] == "inconclusive"
    assert "nested too deeply" in summary["scenarios"][1]["reason"]


def test_verdict_pass_with_failed_check_is_fail(report_main, write_docs, docs):
    _check(docs["kill"], "clean_finish")["status"] = "fail"
    summary, lines = _report(report_main, write_docs(docs))
    assert summary["scenarios"][1]["verdict"] == "fail"
    assert lines[0] == "# ftqual: FAIL — kill: clean_finish failed"


def test_over_budget_is_shown_first_without_changing_the_verdict(report_main, write_docs, docs):
    docs["hang"]["metrics"]["detection_s"] = 612.0  # the stop landed in `checkpointing`, reported as `step`
    summary, lines = _report(report_main, write_docs(docs))
    assert summary["verdict"] == "pass"
    assert lines[0] == "# ftqual: PASS — recovery qualified (3/3 scenarios); 1 latency over budget"
    head = "\n".join(lines[:FIRST_SCREEN])
    assert "OVER BUDGET" in head and "612 s > budget 125 s" in head
    assert any(
        line.startswith("| detection (fault → detected) | 612.0 s | ≤ 125.0 s | ❌ OVER |") for line in lines
    )


def test_wrong_schema_is_inconclusive(report_main, write_docs, docs):
    docs["kill"]["schema"] = "something/v9"
    summary, _ = _report(report_main, write_docs(docs))
    assert summary["scenarios"][1]["verdict"] == "inconclusive"
    assert "schema 'something/v9'" in summary["scenarios"][1]["reason"]


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--verify", "kill"],
        ["--verify", "=x.json"],
        ["--verify", "kill=a.json", "--verify", "kill=b.json"],
        ["--verify", "kill=a.json", "--mtbf-hours", "2", "--gpus-for-mtbf", "1", "--gpus-for-mtbf", "2"],
        ["--verify", "kill=a.json", "--mtbf-hours", "-1"],
        ["--verify", "kill=a.json", "--expect", "hang"],
        ["--bogus"],
    ],
)
def test_bad_usage_exits_2(report_main, tmp_path, capsys, args):
    assert report_main(*args, "--out", str(tmp_path / "out")) == 2
    assert capsys.readouterr().err.strip()
    assert not (tmp_path / "out").exists()


def test_many_failures_still_fit_the_first_screen(report_main, write_docs, docs):
    """Every fault check of kill and hang fails: each is named, with a cited location, within 25 lines."""
    for name in ("kill", "hang"):
        for check in docs[name]["checks"]:
            if check["status"] == "pass":
                check["status"] = "fail"
        docs[name]["verdict"] = "fail"
    results = write_docs(docs)
    summary, lines = _report(report_main, results)
    failed = [(i["scenario"], i["check"]) for i in summary["attention"] if i["status"] == "fail"]
    assert len(failed) == 16  # kill 9 (with active_world_unchanged, timeouts_not_exceeded), hang 7
    head = lines[:FIRST_SCREEN]
    for scenario, check in failed:
        line = next(x for x in head if f"**{scenario} / `{check}`**" in x)
        item_at = head.index(line)
        cited = line.count("`logs/") + line.count(".json`") + line.count("`checkpoints/")
        if not cited:  # evidence on the lines right below the item
            assert head[item_at + 1].startswith("  - `"), line
    assert lines.index("## Stack") - 2 < FIRST_SCREEN  # the section's last line is on the first screen


def test_report_without_timeline_still_draws(report_main, write_docs, docs, png_size):
    del docs["kill"]["timeline"]
    results = write_docs(docs)
    summary, lines = _report(report_main, results)
    assert summary["scenarios"][1]["verdict"] == "pass"  # the timeline is the report's, not a check
    assert png_size(results / "plots" / "timeline_kill.png") == (1200, 600)


def test_empty_results_dir_is_a_usage_error(report_main, tmp_path, capsys):
    (tmp_path / "results").mkdir()
    assert report_main("--results", str(tmp_path / "results")) == 2
    assert "no scenario under" in capsys.readouterr().err


def test_workflow_style_call_with_an_unreadable_custom_fault_scenario(
    report_main, tmp_path, real_reports, png_size
):
    """The workflow's call (--preflight, --baseline, --verify per scenario, --out); one report unreadable."""
    broken = tmp_path / "kill-rank0.json"
    broken.write_text("")
    out = tmp_path / "out"
    rc = report_main(
        "--preflight",
        str(tmp_path / "absent.json"),
        "--baseline",
        "baseline",
        "--verify",
        f"baseline={real_reports['baseline']}",
        "--verify",
        f"kill={real_reports['kill']}",
        "--verify",
        f"kill-rank0={broken}",
        "--out",
        str(out),
    )
    assert rc == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [s["verdict"] for s in summary["scenarios"]] == ["pass", "pass", "inconclusive"]
    assert summary["stack"]["gpu_model"] == "unknown"
    for plot in ("timeline_kill", "timeline_kill-rank0", "loss_comparison"):
        assert png_size(out / "plots" / f"{plot}.png") == (1200, 600)
    assert not (out / "plots" / "timeline_baseline.png").exists()


def test_a_malformed_preflight_report_is_never_a_pass(report_main, write_docs, docs, tmp_path):
    results = write_docs(docs)
    bad = {"schema": "ftqual.preflight/v1", "verdict": "pass", "checks": "all fine", "stack": {}}
    (tmp_path / "preflight.json").write_text(json.dumps(bad))
    summary, lines = _report(report_main, results, "--preflight", str(tmp_path / "preflight.json"))
    assert summary["verdict"] == "fail"
    assert "preflight.json is malformed: checks is not a list" in "\n".join(lines)
