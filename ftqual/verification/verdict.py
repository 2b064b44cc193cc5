"""One attempt's verdict and its one-line cause, composed once, in one place.

Inputs: the verifier's checks (each with `status` and `gates`), the launcher's outcome (was it launched, or
why not; its exit code; the launcher's own finding; a fault whose launchers end non-zero by design; in the
workflow, the attempt's record of its launch job: that job's exit and cause line), and the scenario's
expectation (pass, or fail for a negative control, ftqual.verification.expectation). `ftqual verify`
composes the verdict and cause of a run directory from its own run.json; the workflow's verify rule has the
same verification compose it with the attempt's record as well (`build_report(..., attempt=...)`), so that
`decide` runs once per verify report. The attempt rules (ftqual.workflow.attempts) and the report
(ftqual.report.summary) read a written verify report through ftqual.verification.schema.judged, a reader's
check that never trusts a verdict better than its checks, so that what the summary says is what decided
whether an attempt is kept.

The cause of a run that did not pass is, in order: the launcher's own finding; the root cause its logs name
(ftqual.verification.causes: a fault that never came outranks whatever NVRx did next, exit 93 included); the
run's own launcher exit; the first check with the verdict (a scenario's outcome check, which judges a broken
checkpoint or failed storage, before the others); the attempt's record (why nothing was launched,
or the launch job's line where only its exit failed the run). A launcher that exited non-zero never yields a
pass, except where the scenario's design makes every launcher end so (node loss) or allows a loud stop (a
broken checkpoint, failed storage, a fault that comes back after every restart), which their own checks
judge.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ftqual.contract import family_of, faults_where

SEVERITY = {"pass": 0, "skip": 0, "inconclusive": 1, "fail": 2}
VERDICTS = ("pass", "fail", "inconclusive")
# An attempt the stack cannot run (the preflight said why: ftqual.preflight.applicability): nothing launched,
# nothing judged. Its own verdict, outside the order above: never a pass, never a failure of the others.
NOT_APPLICABLE = "not_applicable"
NOT_APPLICABLE_CHECK = "applicable"
# A lost node without a spare ends the job; failed storage may stop it loudly (its check judges the ending);
# a fault that comes back after every restart must be stopped (recurring_fault_outcome judges the stop).
ENDS_NONZERO_FAMILIES = ("node", "storage", "recurring")
ENDS_NONZERO_BY_DESIGN = faults_where(lambda f: f.family in ENDS_NONZERO_FAMILIES)


@dataclass(frozen=True)
class JobRecord:
    """The attempt's record of the job that ran the launcher (the workflow's attempt.json): its exit, which
    is ft_launcher's as `ftqual launch` returns it (128+N for a signal, or its own code for lost logs), and
    its one-line cause for a non-zero exit (the console's telling line)."""

    exit_code: int | None = None
    cause: str | None = None


@dataclass(frozen=True)
class LauncherOutcome:
    """What the launch of a run says about it: from a run.json (the run directory's or the attempt's), and
    in the workflow the attempt's record of the launch job (`job`)."""

    launched: bool = True
    exit_code: int | None = None
    error: str | None = None  # the launcher's own finding (e.g. its log server could not bind)
    not_launched_because: str | None = None
    not_applicable: str | None = None  # why this stack cannot run the scenario (nothing was launched)
    fault: str | None = None
    interrupted_by: str | None = None  # a signal that stopped our launcher from outside (run.json)
    job: JobRecord | None = None  # the attempt's record of its launch job (workflow); None: a run dir
    # a checkpoint_damage scenario: a loud stop (non-zero) is one of its passing endings, which its own
    # check (checkpoint_break_outcome) judges
    checkpoint_damage: str | None = None

    @property
    def ends_nonzero_by_design(self) -> bool:
        damaged = self.checkpoint_damage not in (None, "none")
        return family_of(self.fault) in ENDS_NONZERO_FAMILIES or damaged

    def _fails(self, exit_code: int | None) -> bool:
        return exit_code not in (0, None) and not self.ends_nonzero_by_design and not self.interrupted_by

    @property
    def failed(self) -> bool:
        """The launcher's exit says the run failed: not where the design ends it non-zero, nor where it was
        stopped from outside (its exit is the stop's; the checks say what the run showed before it)."""
        return self._fails(self.exit_code)

    @property
    def job_failed(self) -> bool:
        """The attempt's launch job exited non-zero, under the same exceptions as `failed`."""
        return self.job is not None and self._fails(self.job.exit_code)

    @property
    def reported(self) -> tuple[int | None, bool]:
        """The exit a cause names, and whether it failed the run: the launch job's where the attempt recorded
        it (what the user's workflow ran), else ft_launcher's from the run's own run.json."""
        if self.job is not None:
            return self.job.exit_code, self.job_failed
        return self.exit_code, self.failed


def outcome_of(run: Mapping[str, Any]) -> LauncherOutcome:
    """The outcome a run.json records: the attempt's (`launcher_exit`, `launched`, `cause`) or the run
    directory's own (`exit_code`)."""
    settings = run.get("settings") if isinstance(run.get("settings"), Mapping) else {}
    exit_code = run.get("launcher_exit", run.get("exit_code"))
    launched = run.get("launched", True) is not False
    error = run.get("launcher_error")
    stopped = run.get("interrupted_by")
    inapplicable = run.get("not_applicable")
    return LauncherOutcome(
        not_applicable=inapplicable
        if not launched and isinstance(inapplicable, str) and inapplicable
        else None,
        interrupted_by=stopped if isinstance(stopped, str) and stopped else None,
        launched=launched,
        exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        error=error if isinstance(error, str) and error else None,
        not_launched_because=None if launched else str(run.get("cause") or "no reason recorded"),
        fault=settings.get("fault") or run.get("fault"),
        checkpoint_damage=settings.get("checkpoint_damage") or run.get("checkpoint_damage"),
    )


def with_attempt(outcome: LauncherOutcome, attempt: Mapping[str, Any]) -> LauncherOutcome:
    """`outcome` (the run directory's) with the attempt's record of its launch job (attempt.json): the job's
    exit and cause line, and the launcher's finding where the run's run.json has none."""
    recorded = outcome_of(attempt)
    cause = attempt.get("cause")
    return dataclasses.replace(
        outcome,
        error=recorded.error or outcome.error,
        job=JobRecord(recorded.exit_code, cause if isinstance(cause, str) and cause else None),
    )


def worst(statuses: Iterable[object]) -> str:
    """fail > inconclusive > pass; an unknown status counts as inconclusive, skip as pass."""
    verdict = "pass"
    for status in statuses:
        rank = SEVERITY.get(status, 1) if isinstance(status, str) else 1
        if rank > SEVERITY[verdict]:
            verdict = "fail" if rank == 2 else "inconclusive"
    return verdict


def of_checks(checks: Iterable[Mapping[str, Any]]) -> str:
    """The verdict of the gating checks (a check that does not say `gates: false` gates)."""
    return worst(c.get("status") for c in checks if c.get("gates") is not False)


@dataclass(frozen=True)
class Decision:
    verdict: str  # the run's own verdict: pass, fail or inconclusive; not_applicable when nothing could run
    cause: str | None
    cause_evidence: dict | None = None
    added_checks: tuple[dict, ...] = ()  # checks the launcher's outcome adds (launched, launcher_exit)


# The checks that answer a scenario's own question (what a broken checkpoint, failed storage or a fault that
# comes back led to): where one of them has the verdict, it is the cause before any recovery check its
# finding explains (a damaged checkpoint loaded without an error also makes the losses after it differ from
# the baseline's).
SCENARIO_OUTCOME_CHECKS = ("checkpoint_break_outcome", "storage_fault_outcome", "recurring_fault_outcome")


def first_with(checks: Iterable[Mapping[str, Any]], verdict: str) -> str | None:
    """`<id>: <detail>` of the first gating check with `verdict`, a scenario's outcome check before others."""
    for check in sorted(checks, key=lambda c: c.get("id") not in SCENARIO_OUTCOME_CHECKS):
        if check.get("status") == verdict and check.get("gates") is not False:
            return f"{check.get('id')}: {check.get('detail')}"
    return None


def decide(
    checks: list[Mapping[str, Any]],
    outcome: LauncherOutcome,
    classify: Callable[[], dict | None] = lambda: None,
) -> Decision:
    """The verdict and cause of one run from its checks and the launcher's outcome (module docstring).
    `classify` gives the logs' root cause ({'text', 'path', 'line', 'kind'}) for a run that did not pass."""
    if outcome.not_applicable is not None:
        cause = f"not applicable on this stack: {outcome.not_applicable}"
        check = {"id": NOT_APPLICABLE_CHECK, "status": "skip", "gates": True, "detail": cause, "evidence": []}
        return Decision(NOT_APPLICABLE, cause, None, (check,))
    if not outcome.launched:
        cause = f"not launched: {outcome.not_launched_because}"
        check = {"id": "launched", "status": "fail", "gates": True, "detail": cause, "evidence": []}
        return Decision("fail", cause, None, (check,))
    of_checks_alone = of_checks(checks)
    verdict = of_checks_alone
    added: tuple[dict, ...] = ()
    exit_failed = outcome.failed or outcome.job_failed
    if exit_failed and verdict == "pass" and not any(c.get("id") == "launcher_exit" for c in checks):
        verdict = "fail"
        code = outcome.exit_code if outcome.failed else outcome.job.exit_code  # type: ignore[union-attr]
        detail = f"the launcher exited {code}"
        added = ({"id": "launcher_exit", "status": "fail", "gates": True, "detail": detail, "evidence": []},)
    if verdict == "pass":
        return Decision("pass", None, None, added)
    shown_exit, shown_failed = outcome.reported
    prefix = f"the launcher exited {shown_exit}: " if shown_failed else ""
    if outcome.error:
        found = {"kind": "launcher_error", "text": outcome.error, "path": None, "line": None}
    else:
        found = classify()
    if found is not None and found.get("text"):
        where = f" [{found['path']}:{found['line']}]" if found.get("path") and found.get("line") else ""
        if found.get("kind") == "interrupted":
            prefix = ""  # the exit is the stop's (a record that does not say so, e.g. the attempt's)
        return Decision(verdict, f"{prefix}{found['text']}{where}", dict(found), added)
    if outcome.failed:
        return Decision(verdict, f"the launcher exited {outcome.exit_code}", None, added)
    # Where the checks passed, only the launch job's exit failed the run: its own line says it best.
    first = None if of_checks_alone == "pass" else first_with([*checks, *added], verdict)
    job = outcome.job
    if first is None and job is not None:
        first = job.cause or (f"the launcher exited {job.exit_code}" if outcome.job_failed else None)
    return Decision(verdict, first, None, added)


def with_holder(decision: Decision, held_by: str | None) -> Decision:
    """A run that did not pass names what held its rank (its stack dump, ftqual.verification.checks.held)
    after its
    cause: where a hung or lingering rank waited is the next question a platform team asks."""
    if decision.verdict == "pass" or not held_by or not decision.cause:
        return decision
    return dataclasses.replace(decision, cause=f"{decision.cause}; held by: {held_by}")


def apply(report: dict, decision: Decision) -> dict:
    """`report` (a verify report) with the decision's verdict, cause and added checks."""
    report["checks"] = [*(report.get("checks") or []), *decision.added_checks]
    report["verdict"] = decision.verdict
    if decision.cause:
        report["cause"] = decision.cause
    else:
        report.pop("cause", None)
    if decision.cause_evidence:
        report["cause_evidence"] = decision.cause_evidence
    else:
        report.pop("cause_evidence", None)
    return report


def cause_citations(
    cause: object, cause_evidence: object, checks: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The evidence a one-line cause rests on, for a reader that shows it next to the cause: the line of the
    logs it names (a verify report's `cause_evidence`), else the evidence of the check it quotes (a cause
    composed from a check reads `<id>: <detail>`, after the launcher's prefix); empty when it rests on none
    (nothing launched, a report that is not usable)."""
    if isinstance(cause_evidence, Mapping) and cause_evidence.get("path") and cause_evidence.get("line"):
        return [{"path": cause_evidence["path"], "line": cause_evidence["line"]}]
    if not isinstance(cause, str) or not cause:
        return []
    for check in checks:
        quoted = f"{check.get('id')}: {check.get('detail')}"
        if check.get("status") not in ("pass", "skip") and quoted in cause:
            return [dict(ev) for ev in check.get("evidence") or [] if isinstance(ev, Mapping)]
    return []
