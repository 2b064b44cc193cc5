"""ftqual.verification.verdict: one place composes an attempt's verdict and one-line cause; `ftqual verify`
prints it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ftqual.verification import schema as verify_schema
from ftqual.verification import verdict
from ftqual.verification.verdict import LauncherOutcome

DATA = Path(__file__).resolve().parents[2] / "data"


def check(cid, status, gates=True, detail="d"):
    return {"id": cid, "status": status, "gates": gates, "detail": detail, "evidence": []}


def test_not_launched_is_a_fail_naming_why():
    d = verdict.decide([], verdict.outcome_of({"launched": False, "cause": "the preflight failed (p.json)"}))
    assert d.verdict == "fail" and d.cause == "not launched: the preflight failed (p.json)"
    assert [c["id"] for c in d.added_checks] == ["launched"]


def test_a_failed_launcher_never_passes_and_its_finding_comes_first():
    passing = [check("clean_finish", "pass")]
    d = verdict.decide(passing, LauncherOutcome(exit_code=1, error="the log server could not bind 50051"))
    assert d.verdict == "fail" and d.cause == "the launcher exited 1: the log server could not bind 50051"
    assert [c["id"] for c in d.added_checks] == ["launcher_exit"]
    # once added, applying the attempt's outcome again adds nothing (ftqual verify, then the workflow)
    again = verdict.decide([*passing, *d.added_checks], LauncherOutcome(exit_code=1))
    assert again.added_checks == () and again.cause == "the launcher exited 1"


def test_the_logs_root_cause_with_its_evidence():
    root = {"kind": "not_injected", "text": "the kill was never injected", "path": "logs/x.log", "line": 3}
    d = verdict.decide([check("clean_finish", "fail")], LauncherOutcome(exit_code=93), lambda: root)
    assert d.cause == "the launcher exited 93: the kill was never injected [logs/x.log:3]"
    assert d.cause_evidence == root


def test_node_loss_ends_nonzero_by_design():
    d = verdict.decide([check("node_loss_outcome", "pass")], LauncherOutcome(exit_code=1, fault="node_loss"))
    assert d.verdict == "pass" and d.cause is None


def test_a_check_that_does_not_gate_never_decides():
    checks = [check("informative", "fail", gates=False), check("clean_finish", "inconclusive")]
    d = verdict.decide(checks, LauncherOutcome(exit_code=0))
    assert d.verdict == "inconclusive" and d.cause == "clean_finish: d"


def test_a_scenario_s_outcome_check_is_the_cause_before_the_recovery_checks_it_explains():
    checks = [
        check("replay_consistency", "fail", detail="losses diverge"),
        check("checkpoint_break_outcome", "fail", detail="loaded the damaged checkpoint"),
    ]
    d = verdict.decide(checks, LauncherOutcome(exit_code=0, checkpoint_damage="shard_corrupted"))
    assert d.cause == "checkpoint_break_outcome: loaded the damaged checkpoint"
    # the negative control: without a failing outcome check, the first failing check in order is the cause
    checks[1] = check("checkpoint_break_outcome", "pass")
    d = verdict.decide(checks, LauncherOutcome(exit_code=0, checkpoint_damage="shard_corrupted"))
    assert d.cause == "replay_consistency: losses diverge"


def test_judged_never_better_than_the_checks_and_missing_required_checks():
    report = {"schema": "ftqual.verify/v1", "verdict": "pass", "fault": "kill", "checks": []}
    seen = verify_schema.judged(report)
    assert seen.raw == "inconclusive" and not seen.outcome.met
    assert {c["id"] for c in seen.checks} >= {"checkpoint_before_failure", "clean_finish"}
    report["checks"] = [check("uninterrupted_completion", "fail")]
    report["fault"] = "none"
    assert verify_schema.judged(report).raw == "fail"


def verify_cli(run_dir: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "verify.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ftqual", "verify", str(run_dir), "--json", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc, json.loads(out.read_text())


def test_ftqual_verify_prints_and_writes_the_cause(tmp_path):
    """As the README tells users to run it: the distributed-optimizer negative control on one H200 loops
    until NVRx stops it with exit 93; the verifier names that, with the error every restart ended with."""
    proc, report = verify_cli(DATA / "megatron-h200-1gpu" / "negative-distopt-kill", tmp_path)
    assert proc.returncode == 1
    assert report["cause"].startswith("the launcher exited 93: NVRx stopped restarting: no progress")
    assert "assert len(steps) == 1" in report["cause"]
    assert report["cause_evidence"]["kind"] == "no_progress"
    assert f"  cause: {report['cause']}" in proc.stdout.splitlines()


def test_ftqual_verify_of_a_passing_run_names_no_cause(tmp_path):
    proc, report = verify_cli(DATA / "megatron-h200-1gpu" / "kill", tmp_path)
    assert proc.returncode == 0 and "cause" not in report and "cause:" not in proc.stdout


def test_a_launcher_stopped_from_outside_is_not_failed_by_its_exit():
    """Its exit is the stop's: checks that passed stay the verdict's basis, and the cause is the stop."""
    from ftqual.verification.verdict import LauncherOutcome, decide, outcome_of

    passing = [{"id": "clean_finish", "status": "inconclusive", "gates": True, "detail": "cut short"}]
    stopped = outcome_of({"exit_code": 1, "interrupted_by": "SIGTERM", "fault": "kill"})
    assert stopped.interrupted_by == "SIGTERM" and not stopped.failed
    found = {"kind": "interrupted", "text": "the launcher was stopped by SIGTERM", "path": "run.json"}
    decision = decide(passing, stopped, lambda: found)
    assert decision.verdict == "inconclusive" and decision.cause.startswith("the launcher was stopped")
    assert not decision.added_checks
    # negative control: the same exit with no recorded stop fails the run
    plain = decide([{**passing[0], "status": "pass"}], LauncherOutcome(exit_code=1, fault="kill"))
    assert plain.verdict == "fail" and plain.added_checks[0]["id"] == "launcher_exit"


def test_a_cause_cites_what_its_check_cites():
    """A cause quoted from a check rests on that check's evidence; a cause the logs named, on its line; the
    report's attention line then cites it instead of saying "no evidence cited"."""
    from ftqual.verification.verdict import cause_citations

    check = {
        "id": "failure_detected_and_restarted",
        "status": "fail",
        "detail": "a timeout fired",
        "evidence": [{"path": "logs/launcher.log", "line": 39}],
    }
    passed = {
        "id": "clean_finish",
        "status": "pass",
        "detail": "exit 0",
        "evidence": [{"path": "x", "line": 2}],
    }

    cause = "the launcher exited 1: failure_detected_and_restarted: a timeout fired"
    assert cause_citations(cause, None, [passed, check]) == [{"path": "logs/launcher.log", "line": 39}]
    named = {"kind": "crash", "text": "RuntimeError", "path": "logs/train_cycle0.log", "line": 7}
    assert cause_citations("RuntimeError", named, [check]) == [{"path": "logs/train_cycle0.log", "line": 7}]
    assert cause_citations("not launched: no GPU", None, [check]) == []
    assert cause_citations(None, None, [check]) == []


def test_the_reports_cause_line_cites_the_checks_evidence():
    """The recorded H200 sigint report of the machine (a FAIL then): its cause line in the summary cites the
    check's evidence (it said "no evidence cited")."""
    import json
    from pathlib import Path

    from ftqual.report.inputs import PreflightInput, ScenarioInput
    from ftqual.report.markdown import attention_section
    from ftqual.report.summary import ReportOptions, build_summary

    data = Path(__file__).resolve().parents[2] / "data" / "megatron-h200-faults-1gpu" / "results" / "sigint"
    path = next(data.glob("*-[0-9]/verify.json"))
    summary = build_summary(
        [ScenarioInput("sigint", str(path), json.loads(path.read_text()))],
        PreflightInput(None, None, "none"),
        ReportOptions(),
        "t",
    )
    (item,) = [i for i in summary["attention"] if i["check"] is None]
    assert item["detail"].startswith("cause: failure_detected_and_restarted: ")
    assert {"path": "logs/launcher.log", "line": 39} in [
        {"path": e["path"], "line": e["line"]} for e in item["evidence"]
    ]
    lines = attention_section(summary)
    cause_line = next(line for line in lines if "cause:" in line)
    assert "no evidence cited" not in cause_line


def test_the_attempt_s_launch_job_fails_a_run_whose_checks_passed():
    """The workflow's record (attempt.json) of a launch job that exited non-zero while the run directory's
    run.json does not say so (a launch killed before it wrote its exit): its exit fails the run, once, and its
    own line is the cause; the run's own record alone passes (negative control)."""
    passing = [check("clean_finish", "pass")]
    run = LauncherOutcome(exit_code=None, fault="kill")
    assert verdict.decide(passing, run).verdict == "pass"
    attempt = {
        "launcher_exit": 137,
        "cause": "the launcher exited 137: Killed",
        "settings": {"fault": "kill"},
    }
    d = verdict.decide(passing, verdict.with_attempt(run, attempt))
    assert d.verdict == "fail" and d.cause == "the launcher exited 137: Killed"
    assert [(c["id"], c["detail"]) for c in d.added_checks] == [("launcher_exit", "the launcher exited 137")]
    bare = verdict.with_attempt(run, {"launcher_exit": 137})
    assert verdict.decide(passing, bare).cause == "the launcher exited 137"
    assert verdict.decide(passing, verdict.with_attempt(run, {"launcher_exit": 0})).verdict == "pass"


def test_with_the_attempt_a_root_cause_names_the_job_s_exit_and_a_check_still_wins_over_its_line():
    root = {"kind": "crash", "text": "RuntimeError: boom", "path": "logs/train_cycle0.log", "line": 7}
    run = LauncherOutcome(exit_code=-9, fault="kill")
    outcome = verdict.with_attempt(run, {"launcher_exit": 137, "cause": "the launcher exited 137: x"})
    d = verdict.decide([check("clean_finish", "fail")], outcome, lambda: root)
    assert d.cause == "the launcher exited 137: RuntimeError: boom [logs/train_cycle0.log:7]"
    # no root cause: the run's own exit, as `ftqual verify` says it
    assert verdict.decide([check("clean_finish", "fail")], outcome).cause == "the launcher exited -9"
    # a clean launcher whose checks failed: the check, not the attempt's line
    clean = verdict.with_attempt(LauncherOutcome(exit_code=0), {"launcher_exit": 0, "cause": "unused"})
    assert verdict.decide([check("clean_finish", "fail")], clean).cause == "clean_finish: d"
    # the launcher's finding in the attempt's record comes first
    found = verdict.with_attempt(run, {"launcher_exit": 137, "launcher_error": "the log server died"})
    assert verdict.decide([check("clean_finish", "pass")], found).cause == (
        "the launcher exited 137: the log server died"
    )


def test_the_workflow_s_verification_composes_the_attempt_s_record_once():
    """build_report with the attempt's record (the verify rule's call): the same report as `ftqual verify`
    where the attempt agrees; where only its launch job failed, one launcher_exit check and a cause naming
    that exit (the logs' root cause read with it)."""
    from ftqual.verification.verify import build_report

    run_dir = DATA / "megatron-h200-1gpu" / "kill"
    plain = build_report(run_dir)
    record = json.loads((run_dir / "run.json").read_text())
    agreed = build_report(run_dir, attempt={**record, "launcher_exit": 0})
    assert plain["verdict"] == agreed["verdict"] == "pass"
    assert [c["id"] for c in agreed["checks"]] == [c["id"] for c in plain["checks"]]
    cause = "the launcher exited 1: Traceback (most recent call last):"
    failed = build_report(run_dir, attempt={**record, "launcher_exit": 1, "cause": cause})
    assert failed["verdict"] == "fail" and failed["cause"].startswith("the launcher exited 1: ")
    assert failed["cause_evidence"]["path"].startswith("logs/")
    assert [c["id"] for c in failed["checks"]].count("launcher_exit") == 1


def test_the_workflow_s_cause_names_what_held_the_rank_as_ftqual_verify_s_does():
    """Composed once: a run whose launch job failed names what held its rank after the cause, as the run's
    own verification does (the second pass that once rewrote the cause dropped it); a passing run names
    nothing (negative control)."""
    from ftqual.verification.verify import build_report

    run_dir = next((DATA / "megatron-h200-dumps-1gpu" / "runs").glob("gil_lock-*"))
    record = json.loads((run_dir / "run.json").read_text())
    passed = build_report(run_dir, attempt={**record, "launcher_exit": 0})
    assert passed["verdict"] == "pass" and "cause" not in passed
    failed = build_report(run_dir, attempt={**record, "launcher_exit": 1, "cause": "the launcher exited 1"})
    assert failed["verdict"] == "fail"
    assert failed["cause"].startswith("the launcher exited 1: ")
    assert failed["cause"].endswith(f"; held by: {passed['metrics']['held_by']}")
