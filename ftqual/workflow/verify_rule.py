"""Rule `verify`: the verdict of one attempt, always written, pass or not.

A launched attempt is verified in process as `ftqual verify <run_dir> [--baseline <baseline run_dir>]`
would, with the attempt's record (its launch job's exit and cause) composed into the one verdict
(ftqual.verification.verdict). An attempt that was not launched (preflight failed, baseline did not pass),
or whose run directory the verifier cannot read, gets a FAIL report naming the cause; one the stack cannot
run (the preflight's `not_applicable`) gets the verdict `not_applicable` with the reason. A launcher that
exited non-zero never yields a pass, and the report carries the launcher's exit and last lines as the cause.
Every verification is also archived as results/<scenario>/attempts/<run-id>.verify[.N].json, so a forced
re-verification keeps the earlier one.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from ftqual.jsonfile import write_json_atomic
from ftqual.verification import schema as verify_schema
from ftqual.verification import verdict, verify
from ftqual.verification.verify import SCHEMA


def failed_report(
    run: Mapping[str, Any], scenario: str, check_id: str, cause: str, evidence: Iterable[str] = ()
) -> dict:
    """A FAIL report of one failed check, for an attempt the verifier could not judge from its evidence."""
    return {
        "schema": SCHEMA,
        "run_id": run.get("run_id"),
        "scenario": scenario,
        "fault": (run.get("settings") or {}).get("fault"),
        "verdict": "fail",
        "cause": cause,
        "checks": [
            {"id": check_id, "status": "fail", "gates": True, "detail": cause, "evidence": list(evidence)}
        ],
        "metrics": {},
    }


def not_applicable_report(run: Mapping[str, Any], scenario: str, decision: verdict.Decision) -> dict:
    """The report of an attempt the stack cannot run (attempt.json's `not_applicable`): the verdict
    `not_applicable` with its one check skipped, the reason as the cause; nothing else was judged."""
    return verdict.apply(
        {
            "schema": SCHEMA,
            "run_id": run.get("run_id"),
            "scenario": scenario,
            "fault": (run.get("settings") or {}).get("fault"),
            "not_applicable": run.get("not_applicable"),
            "checks": [],
            "metrics": {},
        },
        decision,
    )


def archive(report: dict, run: Mapping[str, Any], out: Path, slot: str) -> Path:
    """Keep a copy in results/<scenario>/attempts/, numbered after the first, so none is overwritten."""
    attempts = out.parent.parent / "attempts"
    attempts.mkdir(parents=True, exist_ok=True)
    stem = run.get("run_id") or f"{slot}-not-launched"
    path, n = attempts / f"{stem}.verify.json", 1
    while path.exists():
        n += 1
        path = attempts / f"{stem}.verify.{n}.json"
    write_json_atomic(path, report)
    return path


def verify_launched(
    run: Mapping[str, Any], scenario: str, baseline_run: str | Path | None, log: TextIO
) -> dict:
    """The attempt's run directory verified (against the baseline's, when it was launched), its verdict
    composed with the attempt's record; a FAIL report naming why when the run directory cannot be read."""
    baseline_dir = None
    if baseline_run:
        base = json.loads(Path(baseline_run).read_text())
        if base.get("launched", True) and base.get("run_dir"):
            baseline_dir = base["run_dir"]
    same = ["ftqual", "verify", run["run_dir"], *(["--baseline", baseline_dir] if baseline_dir else [])]
    print(f"verified in process, with the attempt's record: {shlex.join(same)}", file=log)
    report, why = verify.verify_or_why(run["run_dir"], baseline_dir, attempt=run)
    if report is None:
        print(why, file=log)
        return failed_report(
            run, scenario, "evidence_readable", f"the run directory could not be verified: {why}"
        )
    print("\n".join(verify.summary_lines(report)), file=log)
    return report


def attempt_report(
    run: Mapping[str, Any],
    scenario: str,
    slot: str,
    run_json: Path,
    expectation: Mapping[str, Any],
    baseline_run: str | Path | None,
    log: TextIO,
) -> dict:
    """The attempt's verify report: the verifier's, its verdict and cause composed with the attempt's own
    record (or a FAIL for a run that never launched), plus the attempt, its stack and its expectation."""
    outcome = verdict.outcome_of(run)
    if outcome.not_applicable is not None:
        report = not_applicable_report(run, scenario, verdict.decide([], outcome))
    elif not outcome.launched:
        report = failed_report(run, scenario, "launched", verdict.decide([], outcome).cause)
    else:
        report = verify_launched(run, scenario, baseline_run, log)
    report["attempt"] = {
        "slot": slot,
        "settings_fingerprint": run.get("settings_fingerprint"),
        "run_json": str(run_json),
        "launched": run.get("launched", True),
        "launcher_exit": run.get("launcher_exit"),
        "duration_s": run.get("duration_s"),
        "launcher_tail": run.get("launcher_tail", []),
        "stack_digest": run.get("stack_digest"),
        "slot_reason": run.get("slot_reason"),
        "machine": run.get("machine"),
    }
    # The stack this verdict was earned on (ftqual.stack.identity), for the summary and junit.xml.
    if run.get("stack") is not None:
        report["stack"] = run["stack"]
    # What this scenario expects (pass, or fail for a negative control) travels with its verdict, so the
    # slots, the summary and the gate judge the outcome with ftqual.verification.expectation.
    report["expectation"] = dict(expectation)
    return report


def run(
    *,
    scenario: str,
    slot: str,
    run_json: str | Path,
    output: str | Path,
    expectation: Mapping[str, Any],
    baseline_run: str | Path | None,
    log: TextIO,
    console: TextIO | None = None,
) -> int:
    """The rule's job: write the attempt's verify.json to `output` and archive a copy. Always 0: every
    outcome is a verdict (the summary and the gate report it). `console`: the original stderr when None."""
    run_json = Path(run_json)
    out = Path(output)
    record = json.loads(run_json.read_text())
    report = attempt_report(record, scenario, slot, run_json, expectation, baseline_run, log)
    archived = archive(report, record, out, slot)
    write_json_atomic(out, report)
    line = f"{scenario} {report.get('run_id') or slot}: {report['verdict'].upper()}"
    if report["expectation"]["expect"] == "fail" and report["verdict"] != verdict.NOT_APPLICABLE:
        line += f" [negative control: {verify_schema.judged(report).outcome.detail}]"
    if report.get("cause"):
        line += f" ({report['cause']})"
    print(line + f"; report {out}, archived as {archived}", file=log)
    print(f"ftqual: verify {line}", file=console or sys.__stderr__, flush=True)
    return 0
