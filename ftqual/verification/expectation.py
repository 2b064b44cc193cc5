"""Whether a scenario's verify report is the outcome the scenario expects (pure).

Most scenarios expect `pass`. A negative control (restarts_exhausted, no_resume) expects `fail`, naming the
checks that must fail: it qualifies only when the verifier failed the run and each named check failed. A
negative control that passed, or failed for another reason, or could not be judged, does not qualify: the
stack (or the verifier) failed to show what the control exists to show. The workflow's slots, the summary
and the gate all judge with this one function.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("pass", "fail", "inconclusive")


@dataclass(frozen=True)
class ExpectedOutcome:
    expect: str = "pass"  # pass | fail
    failing: tuple[str, ...] = ()  # with fail: the check ids that must fail

    @classmethod
    def from_json(cls, data: object) -> ExpectedOutcome:
        """The `expectation` a verify report carries (absent: expect pass)."""
        if not isinstance(data, Mapping):
            return cls()
        expect = data.get("expect") if data.get("expect") in ("pass", "fail") else "pass"
        failing = data.get("failing") if isinstance(data.get("failing"), list) else []
        return cls(expect, tuple(str(c) for c in failing))

    def to_json(self) -> dict[str, Any]:
        return {"expect": self.expect, "failing": list(self.failing)}


@dataclass(frozen=True)
class Outcome:
    verdict: str  # pass when the expectation was met; else fail or inconclusive
    met: bool
    raw_verdict: str  # the verifier's own verdict
    detail: str
    unmet_checks: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "met": self.met,
            "raw_verdict": self.raw_verdict,
            "detail": self.detail,
            "unmet_checks": self.unmet_checks,
        }


def _statuses(checks: Iterable[object]) -> dict[str, str]:
    out = {}
    for check in checks:
        if isinstance(check, Mapping) and isinstance(check.get("id"), str):
            out[check["id"]] = str(check.get("status"))
    return out


def judge(expectation: ExpectedOutcome, raw_verdict: object, checks: Iterable[object]) -> Outcome:
    """The qualification outcome of one scenario from the verifier's verdict and checks."""
    raw = raw_verdict if raw_verdict in VERDICTS else "inconclusive"
    if expectation.expect == "pass":
        return Outcome(raw, raw == "pass", raw, "expected pass" + ("" if raw == "pass" else f"; got {raw}"))
    statuses = _statuses(checks)
    wanted = ", ".join(expectation.failing)
    unmet = [c for c in expectation.failing if statuses.get(c) != "fail"]
    if raw == "fail" and not unmet:
        return Outcome("pass", True, raw, f"failed as expected: {wanted} failed")
    if raw == "pass":
        return Outcome(
            "fail",
            False,
            raw,
            f"expected {wanted} to fail, but the run passed: this negative control did not fail",
            unmet,
        )
    got = "; ".join(f"{c} {statuses.get(c, 'missing')}" for c in unmet)
    if raw == "inconclusive":
        return Outcome(
            "inconclusive", False, raw, f"expected {wanted} to fail; the run was inconclusive ({got})", unmet
        )
    return Outcome("fail", False, raw, f"expected {wanted} to fail; it failed otherwise ({got})", unmet)
