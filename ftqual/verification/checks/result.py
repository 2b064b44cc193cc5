"""CheckResult: what one check concluded, why, and the lines that show it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ftqual.verification.evidence.model import Ref, clean

if TYPE_CHECKING:
    from ftqual.verification.checks.run_plan import RunPlan
    from ftqual.verification.evidence.snapshot import RunSnapshot

STATUSES = ("pass", "fail", "inconclusive", "skip")


@dataclass(frozen=True)
class CheckResult:
    """One check's conclusion. `gates`: whether its status enters the verdict (an informative check says
    False); the report presents this flag and never keeps a list of its own. The preflight's result is
    another type on purpose (ftqual.preflight.check_base.CheckResult says why)."""

    id: str
    status: str  # pass | fail | inconclusive | skip
    detail: str
    evidence: tuple[Ref, ...] = ()
    notes: tuple[str, ...] = ()
    values: dict[str, object] = field(default_factory=dict)
    gates: bool = True

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "id": self.id,
            "status": self.status,
            "gates": self.gates,
            "detail": self.detail,
            "evidence": [item.as_dict() for item in self.evidence],
        }
        if self.notes:
            out["notes"] = list(self.notes)
        if self.values:
            out["values"] = dict(self.values)
        return out


class Findings:
    """Accumulates problems, open questions, notes and evidence while one check runs; `result()` decides.

    Any problem makes the check fail; otherwise any unknown makes it inconclusive; otherwise it passes.
    """

    def __init__(self, check_id: str) -> None:
        self.check_id = check_id
        self.problems: list[str] = []
        self.unknowns: list[str] = []
        self.notes: list[str] = []
        self.facts: list[str] = []
        self.evidence: list[Ref] = []
        self.values: dict[str, object] = {}

    def cite(self, *refs: Ref | None) -> None:
        for item in refs:
            if item is not None and item not in self.evidence:
                self.evidence.append(item)

    def fact(self, text: str, *refs: Ref | None) -> None:
        self.facts.append(text)
        self.cite(*refs)

    def problem(self, text: str, *refs: Ref | None) -> None:
        self.problems.append(text)
        self.cite(*refs)

    def unknown(self, text: str, *refs: Ref | None) -> None:
        self.unknowns.append(text)
        self.cite(*refs)

    def note(self, text: str, *refs: Ref | None) -> None:
        self.notes.append(text)
        self.cite(*refs)

    def missing_fact(self, text: str, source_complete: bool, *refs: Ref | None) -> None:
        """A fact that should be there is not: a problem if its source is complete, else an unknown."""
        if source_complete:
            self.problem(text, *refs)
        else:
            self.unknown(f"{text} (the log looks cut short)", *refs)

    def result(self) -> CheckResult:
        if self.problems:
            status, parts = "fail", self.problems
        elif self.unknowns:
            status, parts = "inconclusive", self.unknowns
        else:
            status, parts = "pass", self.facts
        return CheckResult(
            self.check_id,
            status,
            clean("; ".join(parts) or status),
            tuple(self.evidence),
            tuple(clean(note) for note in self.notes),
            dict(self.values),
        )


def skip(check_id: str, why: str) -> CheckResult:
    return CheckResult(check_id, "skip", why)


def inconclusive(check_id: str, why: str) -> CheckResult:
    return CheckResult(check_id, "inconclusive", why)


def unready(
    check_id: str,
    snap: RunSnapshot,
    exp: RunPlan,
    *evidence: str,
    no_fault: str = "no fault in this scenario",
) -> CheckResult | None:
    """The early result of a check that judges a fault from the named evidence: skip when the scenario
    injects none, inconclusive (the reason the snapshot gives) when a piece of that evidence could not be
    read; None when the check can go on."""
    if not exp.faulty:
        return skip(check_id, no_fault)
    for name in evidence:
        if not snap.ok(name):
            return inconclusive(check_id, snap.reason(name))
    return None


def absent_after_stop(snap: RunSnapshot, f: Findings | Scoped, text: str, *refs: Ref | None) -> None:
    """Something the run lacks at its end (a replacement cycle, its log, a cycle's record): a problem, unless
    our launcher was stopped from outside (run.json `interrupted_by`), which cut the run short: then what it
    lacks after the stop is unknown, never a failure of the stack."""
    stopped = snap.meta.interrupted_by
    if stopped:
        f.unknown(f"{text} (the launcher was stopped by {stopped} from outside before the run ended)", *refs)
    else:
        f.problem(text, *refs)


def verdict(results: Iterable[CheckResult]) -> str:
    """Any gating check failed: fail; else any gating check inconclusive: inconclusive; else pass."""
    statuses = {r.status for r in results if r.gates}
    if "fail" in statuses:
        return "fail"
    if "inconclusive" in statuses:
        return "inconclusive"
    return "pass"


class Scoped:
    """A Findings seen through one injection of several: every text prefixed (`injection 2: ...`), values
    kept apart (the first injection's keep their keys in the check's own values)."""

    def __init__(self, findings: Findings, prefix: str) -> None:
        self.findings = findings
        self.prefix = prefix
        self.values: dict[str, object] = {}

    @property
    def problems(self) -> list[str]:
        return self.findings.problems

    @property
    def unknowns(self) -> list[str]:
        return self.findings.unknowns

    def cite(self, *refs: Ref | None) -> None:
        self.findings.cite(*refs)

    def fact(self, text: str, *refs: Ref | None) -> None:
        self.findings.fact(self.prefix + text, *refs)

    def problem(self, text: str, *refs: Ref | None) -> None:
        self.findings.problem(self.prefix + text, *refs)

    def unknown(self, text: str, *refs: Ref | None) -> None:
        self.findings.unknown(self.prefix + text, *refs)

    def note(self, text: str, *refs: Ref | None) -> None:
        self.findings.note(self.prefix + text, *refs)

    def missing_fact(self, text: str, source_complete: bool, *refs: Ref | None) -> None:
        self.findings.missing_fact(self.prefix + text, source_complete, *refs)


def per_injection(f: Findings, markers) -> list[tuple[object, Findings | Scoped]]:
    """(marker, findings to write its facts into) for each injection: the check's own Findings for a run of
    one injection (today's texts), a Scoped one prefixed `injection k: ` for each of several."""
    if len(markers) <= 1:
        return [(marker, f) for marker in markers]
    return [(marker, Scoped(f, f"injection {marker.number}: ")) for marker in markers]
