"""What summary.md says after an interrupted or refused workflow: a fresh attempt
that was not launched, or that left no verify report, is never described as a run of an older ftqual; the
headline counts problems, not the scenarios they kept from launching; the header names no GPU once."""

from __future__ import annotations

import io
import json
from pathlib import Path

from ftqual.report import faults_table
from ftqual.report.inputs import PreflightInput, ScenarioInput
from ftqual.report.markdown import NO_JOB_WHY, _stack_line, job_section, render_markdown
from ftqual.report.schema import SUMMARY_SCHEMA
from ftqual.report.summary import RUN_STATES, ReportOptions, build_summary, run_state
from ftqual.scenario import model as scenarios
from ftqual.workflow import run_scenario as rs
from ftqual.workflow.verify_rule import attempt_report
from tests.support.schemas import validate_summary

NOW = "2026-12-05T00:00:00Z"
PREFLIGHT_PATH = "results/preflight.json"
NOT_RUN = ("kill", "hang", "segfault", "abort", "sigterm", "gpu_hang", "gil_lock", "exception", "sigint")
CFG = scenarios.resolve({}, env={})  # the schema's scenarios: baseline, kill, hang


def not_launched(scenario: str, fault: str, cause: str) -> dict:
    """The workflow's verify report of an attempt that was refused before launch (its attempt.json)."""
    run = {"scenario": scenario, "settings": {"fault": fault}, "launched": False, "cause": cause}
    return attempt_report(
        run,
        scenario,
        "a-1",
        Path(f"results/{scenario}/attempt.json"),
        {"expect": "pass"},
        None,
        io.StringIO(),
    )


def failed_preflight() -> PreflightInput:
    doc = {
        "verdict": "fail",
        "checks": [
            {"id": "cuda", "status": "fail", "detail": "torch.cuda.is_available() is False", "fix": "a GPU"},
            {"id": "python", "status": "pass", "detail": "3.12"},
        ],
        "stack": {"gpu_model": None, "gpu_count": 0, "torch": "2.11.0+cpu"},
    }
    return PreflightInput(PREFLIGHT_PATH, doc)


def preflight_refused_everything(tmp_path: Path) -> dict:
    path = tmp_path / "preflight.json"
    path.write_text(json.dumps({"schema": "ftqual.preflight/v1", "verdict": "fail", "checks": []}))
    cause = rs.refusal(CFG, "baseline", path, None)  # the workflow's own line
    assert cause == f"the preflight failed ({path})"
    inputs = [ScenarioInput("baseline", "b.json", not_launched("baseline", "none", cause))]
    inputs += [ScenarioInput(n, f"{n}.json", not_launched(n, n, cause)) for n in NOT_RUN]
    summary = build_summary(inputs, failed_preflight(), ReportOptions(baseline="baseline"), NOW)
    validate_summary(summary)
    return summary


def test_a_failed_preflight_heads_the_report_with_the_scenarios_it_kept_from_launching(tmp_path):
    """Before, `FAIL — preflight: cuda failed (+20 more)`, each unlaunched scenario counted
    twice (its cause and its `launched` check) as a problem of its own."""
    summary = preflight_refused_everything(tmp_path)
    assert summary["verdict"] == "fail"
    assert summary["headline"] == "ftqual: FAIL — preflight: cuda failed (10 scenarios not launched)"
    assert render_markdown(summary).splitlines()[0] == f"# {summary['headline']}"


def test_a_missing_preflight_report_refuses_once_in_the_headline(tmp_path):
    cause = rs.refusal(CFG, "baseline", tmp_path / "absent.json", None)  # the workflow's own line
    assert cause is not None and "preflight" in cause
    inputs = [ScenarioInput(n, f"{n}.json", not_launched(n, n, cause)) for n in ("baseline", *NOT_RUN)]
    summary = build_summary(inputs, PreflightInput(None, None, "absent"), ReportOptions(), NOW)
    assert (
        summary["headline"]
        == f"ftqual: FAIL — baseline: cause: not launched: {cause} (9 scenarios not launched)"
    )


def test_a_failed_baseline_heads_the_report_and_its_consequences_are_not_more_problems(tmp_path):
    preflight = tmp_path / "preflight.json"
    preflight.write_text(json.dumps({"schema": "ftqual.preflight/v1", "verdict": "pass", "checks": []}))
    verify = tmp_path / "baseline" / "verify.json"
    verify.parent.mkdir()
    verify.write_text(json.dumps({"verdict": "fail"}))
    cause = rs.refusal(CFG, "kill", preflight, verify)  # the workflow's own line
    assert cause is not None and cause.startswith("the baseline's attempt")
    failed = [{"id": c, "status": "fail", "gates": True, "detail": "x", "evidence": []} for c in ("a", "b")]
    base = {**not_launched("baseline", "none", "x"), "checks": failed}  # a launched run that failed twice
    base["attempt"]["launched"] = True
    base.pop("cause")
    inputs = [ScenarioInput("baseline", "b.json", base)]
    inputs += [ScenarioInput(n, f"{n}.json", not_launched(n, n, cause)) for n in ("kill", "hang")]
    # a scenario refused for a reason of its own (a refusal that names the baseline's run, not its verdict)
    own = "refused before launch: the step timeout 1 s is below the baseline's step 2 s (baseline run b)"
    inputs.append(ScenarioInput("segfault", "s.json", not_launched("segfault", "segfault", own)))
    ok = PreflightInput(str(preflight), {"verdict": "pass", "checks": []})
    summary = build_summary(inputs[:3], ok, ReportOptions(baseline="baseline"), NOW)
    assert summary["headline"] == "ftqual: FAIL — baseline: a failed (+1 more; 2 scenarios not launched)"
    summary = build_summary(inputs, ok, ReportOptions(baseline="baseline"), NOW)  # a cause comes first
    assert (
        summary["headline"]
        == f"ftqual: FAIL — segfault: cause: not launched: {own} (+2 more; 2 scenarios not launched)"
    )


def test_a_cause_and_the_check_it_quotes_are_one_problem():
    from ftqual.report.summary import headline

    check = {"scenario": "kill", "check": "clean_finish", "status": "fail", "detail": "exit 93"}
    cause = {"scenario": "kill", "check": None, "status": "fail", "detail": "cause: clean_finish: exit 93"}
    other = {"scenario": "hang", "check": "clean_finish", "status": "fail", "detail": "exit 1"}
    scenarios = [{"name": n, "verdict": "fail", "fault": n} for n in ("kill", "hang")]
    assert headline("fail", scenarios, [cause, check]) == "ftqual: FAIL — kill: cause: clean_finish: exit 93"
    assert headline("fail", scenarios, [cause, check, other]).endswith("(+1 more)")


def test_unlaunched_and_unreported_runs_are_never_said_to_predate_the_records(tmp_path):
    """The fault table's dump cell and the Job section said "the run predates them" and "runs
    of an ftqual before run.json's `job`" of attempts that were refused or left no verify report."""
    summary = preflight_refused_everything(tmp_path)
    text = render_markdown(summary)
    assert "predates" not in text and "an ftqual before" not in text
    assert {sc["run_state"] for sc in summary["scenarios"]} == {"not launched"}
    assert {faults_table._held_by_cell(r) for r in summary["faults"]} == {"— (not launched)"}
    assert job_section(summary) == [
        "No job record in the verify reports: baseline, " + ", ".join(NOT_RUN) + ": not launched."
    ]

    missing = ScenarioInput(
        "kill", "results/kill/verify.json", None, "verify report missing (results/kill/verify.json)"
    )
    summary = build_summary([missing], PreflightInput(None, None, "absent"), ReportOptions(), NOW)
    assert summary["scenarios"][0]["run_state"] == "no verify report"
    assert faults_table._held_by_cell(summary["faults"][0]) == "— (no verify report)"
    assert job_section(summary) == ["No job record in the verify reports: kill: no verify report."]
    assert job_section({}) == ["No job record in the verify reports."]


def test_a_verified_report_without_dumps_or_job_says_none_recorded_not_its_age():
    evidence = {
        "id": "evidence_readable",
        "status": "fail",
        "detail": "the run directory could not be verified",
    }
    stopped = {
        "kind": "interrupted",
        "text": "the launcher was stopped by SIGTERM",
        "path": "run.json",
        "line": None,
    }
    docs = {
        "old": {"fault": "kill", "verdict": "pass", "checks": [], "metrics": {"detection_s": 0.1}},
        "cut": {"fault": "kill", "verdict": "inconclusive", "checks": [], "cause_evidence": stopped},
        "lost": {"fault": "kill", "verdict": "fail", "checks": [evidence], "attempt": {"launched": True}},
    }
    assert [run_state(d) for d in docs.values()] == ["verified", "interrupted", "not verified"]
    scenarios = [{"name": n, "fault": "kill", "verdict": d["verdict"], "metrics": d.get("metrics") or {},
                  "run_state": run_state(d)} for n, d in docs.items()]  # fmt: skip
    cells = [faults_table._held_by_cell(r) for r in faults_table.build_fault_table(scenarios)]
    assert cells == ["no dump recorded", "no dump recorded", "— (run not verified)"]
    assert job_section({"scenarios": scenarios}) == [
        "No job record in the verify reports: old: none recorded; cut: interrupted run, none recorded; "
        "lost: run not verified."
    ]


def test_every_run_state_is_said_and_valid_in_the_schema():
    enum = SUMMARY_SCHEMA["properties"]["scenarios"]["items"]["properties"]["run_state"]["enum"]
    assert sorted(enum) == sorted(RUN_STATES) == sorted(NO_JOB_WHY)
    assert set(faults_table.NO_DUMP_CELL) <= set(RUN_STATES)


def test_the_header_says_no_gpu_once(tmp_path):
    """`0 × no GPU` read as a count of missing GPUs."""
    assert (
        _stack_line({"gpu_count": 0, "gpu_model": None, "torch": "2.11.0+cpu"}) == "no GPU, torch 2.11.0+cpu"
    )
    assert _stack_line({"gpu_count": None, "gpu_model": None}) == "no GPU"
    assert (
        _stack_line({"gpu_count": 2, "gpu_model": "NVIDIA H200", "nvrx": "0.7.0"})
        == "2 × NVIDIA H200, NVRx 0.7.0"
    )
    summary = preflight_refused_everything(tmp_path)
    header = render_markdown(summary).splitlines()[2]
    assert header.endswith("· no GPU, torch 2.11.0+cpu") and "×" not in header


def test_a_scenario_without_a_job_beside_others_says_why():
    job = {"digest": None, "model": "gpt", "by_scenario": {"baseline": "0123456789ab", "kill": None}}
    scenarios = [{"name": "baseline", "run_state": "verified"}, {"name": "kill", "run_state": "not launched"}]
    lines = job_section({"job": job, "scenarios": scenarios})
    assert "Job shape by scenario: baseline `0123456789ab`, kill none (not launched)" in lines


def test_an_interrupted_workflow_says_so_and_what_to_run_not_a_missing_report():
    """After any interrupt, summary.md said `INCONCLUSIVE — kill: verify report missing (...)`."""
    from ftqual.report.summary import RESUME

    passed = {"fault": "none", "verdict": "pass", "checks": [], "metrics": {}}
    missing = ScenarioInput(
        "kill", "results/kill/verify.json", None, "verify report missing (results/kill/verify.json)"
    )
    inputs = [ScenarioInput("baseline", "b.json", passed), missing]
    ok = PreflightInput(PREFLIGHT_PATH, {"verdict": "pass", "checks": []})
    summary = build_summary(inputs, ok, ReportOptions(baseline="baseline", interrupted="SIGINT"), NOW)
    assert summary["verdict"] == "inconclusive"
    assert (
        summary["headline"]
        == f"ftqual: INCONCLUSIVE — interrupted (SIGINT) before kill had a verdict: {RESUME}"
    )
    assert RESUME.startswith("run the same command again to resume")
    kill = summary["scenarios"][1]
    assert kill["reason"] == f"interrupted (SIGINT) before its verdict: {RESUME}"
    text = render_markdown(summary)
    assert text.startswith(f"# {summary['headline']}\n") and "verify report missing" not in text
    # negative control: the same inputs, not interrupted, are a missing report
    plain = build_summary(inputs, ok, ReportOptions(baseline="baseline"), NOW)
    assert (
        "interrupted (" not in plain["headline"]
        and "verify report missing" in plain["scenarios"][1]["reason"]
    )
    # a FAIL found before the interrupt stays the news
    failed = {**passed, "fault": "kill", "verdict": "fail"}
    summary = build_summary(
        [inputs[0], ScenarioInput("kill", "k.json", failed), ScenarioInput("hang", "h.json", None, "x")],
        ok,
        ReportOptions(baseline="baseline", interrupted="SIGTERM"),
        NOW,
    )
    assert summary["headline"].startswith("ftqual: FAIL — ") and summary["headline"].endswith(
        f"; interrupted (SIGTERM): {RESUME}"
    )
    validate_summary(summary)


def test_the_workflows_rebuild_passes_on_the_interrupt(tmp_path, monkeypatch):
    """onerror's rebuild (ftqual.workflow.plan.salvage_summary) names the signal of this workflow's own
    interrupt marker, and only its own."""
    import signal as signals

    from ftqual.workflow import interrupts, plan

    me = "host-a 4242 777"
    monkeypatch.setattr(interrupts.socket, "gethostname", lambda: "host-a")
    interrupts.interrupted_by(tmp_path, signals.SIGINT, me)

    class FakePlan:
        workdir = tmp_path
        invocation = type("I", (), {"is_main_process": True})()

        def preflight_report(self):
            return "results/preflight.json"

        def current_verify_reports(self):
            return {"kill": "results/kill/x/verify.json"}

        def summary_argv(self, preflight, reports, out):
            return ["report", "--out", out]

    monkeypatch.setattr(plan, "summary_is_current", lambda p: False)
    for env, expected in (
        ({interrupts.WORKFLOW_ENV: me}, True),
        ({interrupts.WORKFLOW_ENV: "host-a 1 2"}, False),
    ):
        ran = []
        plan.salvage_summary(
            FakePlan(), project=tmp_path, python="python", env=env, say=lambda s: None,
            run=lambda argv, ran=ran, **kw: ran.append(argv),
        )  # fmt: skip
        assert ("--interrupted" in ran[0] and ran[0][-1] == "SIGINT") is expected, ran
