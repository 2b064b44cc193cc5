"""The verify report's schema (`ftqual.verify/v1`), checked by every reader of verify.json.

The report (`ftqual report`), the attempt rules (ftqual.workflow.attempts) and the workflow read verify
reports that
a broken version, a partial write or a hand edit may have made. `problems` lists what is wrong, each naming
the field; a reader turns a report with problems into an inconclusive scenario (never a PASS, never a
traceback). `missing_checks` names the checks a scenario's fault requires (ftqual.contract's
REQUIRED_CHECKS) that the report lacks: a report without them cannot be a PASS either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ftqual import contract
from ftqual.contract import FAULTS
from ftqual.jsonfile import envelope_problems
from ftqual.verification import verdict
from ftqual.verification.expectation import ExpectedOutcome, Outcome, judge

SCHEMA = "ftqual.verify/v1"
# not_applicable: the workflow's report of an attempt the stack cannot run (ftqual.verification.verdict)
VERDICTS = ("pass", "fail", "inconclusive", verdict.NOT_APPLICABLE)
STATUSES = ("pass", "fail", "inconclusive", "skip")
# The checks each fault's report must carry (a check that does not apply says skip, it is never absent): the
# fault registry's (ftqual.contract.Fault.required_checks).
REQUIRED_CHECKS: dict[str, tuple[str, ...]] = contract.REQUIRED_CHECKS
OBJECT_FIELDS = (
    "metrics", "expected", "attempt", "expectation", "stack", "derived", "timeline", "clock", "sources",
    "baseline", "cause_evidence", "verifier", "sections", "campaign", "excerpts", "checkpoint_account",
)  # fmt: skip
LIST_FIELDS = ("notes",)
TEXT_FIELDS = ("run_id", "scenario", "cause", "not_applicable")


def _check_problems(index: int, check: object) -> list[str]:
    where = f"checks[{index}]"
    if not isinstance(check, Mapping):
        return [f"{where} is not an object"]
    out = []
    if not isinstance(check.get("id"), str) or not check.get("id"):
        out.append(f"{where}.id is not a non-empty string")
    if check.get("status") not in STATUSES:
        out.append(f"{where}.status {check.get('status')!r} is not one of {', '.join(STATUSES)}")
    if "detail" in check and not isinstance(check["detail"], str):
        out.append(f"{where}.detail is not a string")
    if "notes" in check and not isinstance(check["notes"], list):
        out.append(f"{where}.notes is not a list")
    if "values" in check and check["values"] is not None and not isinstance(check["values"], Mapping):
        out.append(f"{where}.values is not an object")
    if "gates" in check and not isinstance(check["gates"], bool):
        out.append(f"{where}.gates is not true or false")
    evidence = check.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(ev, Mapping) for ev in evidence):
        out.append(f"{where}.evidence is not a list of objects")
    return out


def problems(doc: object) -> list[str]:
    """What makes `doc` not a usable verify report, each naming its field; empty when it is one."""
    if not isinstance(doc, Mapping):
        return ["the report is not a JSON object"]
    out = envelope_problems(doc, SCHEMA, VERDICTS, _check_problems)
    for field in OBJECT_FIELDS:
        if field in doc and doc[field] is not None and not isinstance(doc[field], Mapping):
            out.append(f"{field} is not an object")
    for field in LIST_FIELDS:
        if field in doc and doc[field] is not None and not isinstance(doc[field], list):
            out.append(f"{field} is not a list")
    for field in TEXT_FIELDS:
        if field in doc and doc[field] is not None and not isinstance(doc[field], str):
            out.append(f"{field} is not a string")
    fault = fault_of(doc)
    if fault is not None and fault not in FAULTS:
        out.append(f"fault {fault!r} is not one of {', '.join(FAULTS)}")
    campaign = contract.is_fault(fault, lambda f: f.family == "campaign")
    if isinstance(doc.get("metrics"), Mapping):
        out += _fields("metrics", doc["metrics"], METRIC_FIELDS)
    if isinstance(doc.get("campaign"), Mapping):
        out += campaign_problems(doc["campaign"])
    elif campaign and doc.get("verdict") == "pass":
        out.append("campaign is missing from a campaign report that says pass")
    if campaign and isinstance(doc.get("checks"), list):
        out += per_fault_problems(doc["checks"])
    if isinstance(doc.get("checkpoint_account"), Mapping):
        out += account_problems(doc["checkpoint_account"])
    return out


def per_fault_problems(checks: list) -> list[str]:
    """A campaign's per-fault checks carry `values.faults` (ftqual.verification.checks.campaign): the report
    reads each
    fault's status from there, so each entry must name its fault and a status."""
    out = []
    for index, check in enumerate(checks):
        values = check.get("values") if isinstance(check, Mapping) else None
        if not isinstance(values, Mapping) or "faults" not in values:
            continue
        where = f"checks[{index}].values.faults"
        faults = values["faults"]
        if not isinstance(faults, list):
            out.append(f"{where} is not a list")
            continue
        for i, item in enumerate(faults):
            ok = isinstance(item, Mapping) and _kind_ok(item.get("fault_index"), _INT)
            if not ok or item.get("fault_index") is None or item.get("status") not in STATUSES:
                out.append(f"{where}[{i}] has no integer fault_index and status")
    return out


# The campaign section (ftqual.verification.campaign.cycles.campaign_section): each field's kind. The report
# renders every
# one of them; a wrong kind would be a traceback or a number made up, so the report is not used at all.
_INT, _NUMBER, _TEXT, _TIME = "an integer", "a number", "a string", "an ISO 8601 time"
_BOOL = "true or false"
# The metrics a reader renders beyond the contract's (each may be absent or null): an unwinding fault's
# linger (ftqual.verification.checks.linger), what held its rank, and who stopped a job and at what cost.
METRIC_FIELDS = {
    "linger_s": _NUMBER,
    "linger_cut_by_timeout": _BOOL,
    "linger_ended_by": _TEXT,
    "linger_section": _TEXT,
    "linger_bound_s": _NUMBER,
    "held_by": _TEXT,
    # who stopped a job whose fault comes back (or a curable one) and its bill (evidence.endings.stop_metrics)
    "stopped_by": _TEXT,
    "stop_exit_code": _INT,
    "burned_cycles": _INT,
    "burned_wall_s": _NUMBER,
    "burned_gpu_s": _NUMBER,
}
CAMPAIGN_FIELDS = {"seed": _INT, "planned": _INT, "mtti_iterations": _INT}
CYCLE_FIELDS = {
    **dict.fromkeys(("cycle", "rank", "checkpoint_iteration", "fault_iteration", "restored_iteration"), _INT),
    **dict.fromkeys(("lost_iterations", "alive_at_start", "shm_segments", "agent_open_fds"), _INT),
    **dict.fromkeys(("shm_bytes", "shm_free_bytes", "shm_free_inodes"), _INT),
    **dict.fromkeys(("fault", "placement", "detected_by"), _TEXT),
    **dict.fromkeys(("injected_at", "restarted_at"), _TIME),
    **dict.fromkeys(("detection_s", "restart_s", "checkpoint_load_s", "failure_to_first_step_s"), _NUMBER),
    "recovery_s": _NUMBER,
}
PLAN_FIELDS = {"index": _INT, "fault": _TEXT, "rank": _INT, "placement": _TEXT, "arm_iteration": _INT}
GOODPUT_FIELDS = {"wall_s": _NUMBER, "productive_s": _NUMBER, "goodput_measured": _NUMBER, "mtbf_s": _NUMBER}


def _kind_ok(value: object, kind: str) -> bool:
    if value is None:
        return True
    if kind == _BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == _INT:
        return isinstance(value, int)
    if kind == _NUMBER:
        return isinstance(value, int | float) and value == value and abs(value) != float("inf")
    if kind == _TIME:
        try:
            return isinstance(value, str) and datetime.fromisoformat(value).tzinfo is not None
        except ValueError:
            return False
    return isinstance(value, str)


def _fields(where: str, data: Mapping, kinds: dict[str, str]) -> list[str]:
    return [f"{where}.{k} is not {kind}" for k, kind in kinds.items() if not _kind_ok(data.get(k), kind)]


def _rows(where: str, rows: object, kinds: dict[str, str], key: str) -> list[str]:
    if rows is None:
        return []
    if not isinstance(rows, list):
        return [f"{where} is not a list"]
    out = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            out.append(f"{where}[{i}] is not an object")
        elif not isinstance(row.get(key), int) or isinstance(row.get(key), bool):
            out.append(f"{where}[{i}].{key} is not an integer")
        else:
            out += _fields(f"{where}[{i}]", row, kinds)
    return out


# The checkpoint and restart account (ftqual.verification.checkpoint_account): each row's fields, every one
# may be null (evidence missing) but never of another kind; the report renders and plots them.
SAVE_FIELDS = {
    "iteration": _INT,
    "cycle": _INT,
    "bytes": _INT,
    "blocked_s": _NUMBER,
    "durable_s": _NUMBER,
    "gbps": _NUMBER,
}
RESTART_FIELDS = {
    "cycle": _INT,
    "detection_s": _NUMBER,
    "worker_stop_s": _NUMBER,
    "gpu_reclaim_s": _NUMBER,
    "process_start_s": _NUMBER,
    "init_s": _NUMBER,
    "load_s": _NUMBER,
    "load_bytes": _INT,
    "load_gbps": _NUMBER,
    "first_step_s": _NUMBER,
    "restart_s": _NUMBER,
}


def account_problems(section: Mapping) -> list[str]:
    """What makes verify.json's optional `checkpoint_account` unusable by a reader, each naming its field."""
    out = []
    for key, kinds in (("saves", SAVE_FIELDS), ("restarts", RESTART_FIELDS)):
        rows = section.get(key)
        if not isinstance(rows, list):
            out.append(f"checkpoint_account.{key} is not a list")
            continue
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                out.append(f"checkpoint_account.{key}[{i}] is not an object")
            else:
                out += _fields(f"checkpoint_account.{key}[{i}]", row, kinds)
    return out


def campaign_problems(section: Mapping) -> list[str]:
    """What makes verify.json's `campaign` section unusable by a reader, each naming its field."""
    out = _fields("campaign", section, CAMPAIGN_FIELDS)
    if not isinstance(section.get("cycles"), list):
        out.append("campaign.cycles is not a list")
    out += _rows("campaign.cycles", section.get("cycles"), CYCLE_FIELDS, "fault_index")
    out += _rows("campaign.plan", section.get("plan"), PLAN_FIELDS, "index")
    good = section.get("goodput")
    if good is None:
        return out
    if not isinstance(good, Mapping):
        return [*out, "campaign.goodput is not an object"]
    out += _fields("campaign.goodput", good, GOODPUT_FIELDS)
    measured = good.get("goodput_measured")
    if isinstance(measured, int | float) and not isinstance(measured, bool) and not 0 <= measured <= 1:
        out.append("campaign.goodput.goodput_measured is not between 0 and 1")
    parts = good.get("gap_parts_s")
    if parts is not None and (
        not isinstance(parts, Mapping) or not all(_kind_ok(v, _NUMBER) for v in parts.values())
    ):
        out.append("campaign.goodput.gap_parts_s is not an object of numbers")
    projected = good.get("projected")
    if projected is not None and (
        not isinstance(projected, Mapping) or not _kind_ok(projected.get("goodput"), _NUMBER)
    ):
        out.append("campaign.goodput.projected is not an object with a numeric goodput")
    return out


def fault_of(doc: Mapping[str, Any]) -> object:
    expected = doc.get("expected")
    if isinstance(expected, Mapping) and "fault" in expected:
        return expected["fault"]
    return doc.get("fault")


def missing_checks(doc: Mapping[str, Any]) -> list[str]:
    """The required checks of the report's fault that it does not carry (none for an unknown fault)."""
    required = REQUIRED_CHECKS.get(str(fault_of(doc)), ())
    checks = doc.get("checks") if isinstance(doc.get("checks"), list) else []
    present = {c.get("id") for c in checks if isinstance(c, Mapping)}
    return [cid for cid in required if cid not in present]


@dataclass(frozen=True)
class Judged:
    raw: str  # the report's verdict, never better than its gating checks (missing required ones included)
    cause: str | None
    outcome: Outcome  # against the scenario's expectation
    checks: list[dict]  # the report's checks, plus each missing required check as inconclusive


def missing_check(check_id: str, fault: object) -> dict:
    return {
        "id": check_id,
        "status": "inconclusive",
        "detail": f"missing from the verify report: a {fault} scenario's report must carry it",
        "evidence": [],
        "gates": True,
    }


def judged(report: Mapping[str, Any]) -> Judged:
    """A verify report as every reader must see it (the attempt rules, the report): its verdict never
    better than its gating checks, a check its fault requires and it lacks counted as inconclusive, its
    cause, and the outcome against its expectation. The verdict was composed once when the report was
    written (ftqual.verification.verdict); this is the reader's check of a report it did not write."""
    checks = [dict(c) for c in report.get("checks") or [] if isinstance(c, Mapping)]
    if report.get("verdict") == verdict.NOT_APPLICABLE and verdict.of_checks(checks) == "pass":
        return not_applicable_judged(report, checks)
    stated = report.get("verdict") if report.get("verdict") in VERDICTS else "inconclusive"
    if stated == verdict.NOT_APPLICABLE:
        stated = "inconclusive"  # a check of its failed or was undecided: that report is not trusted
    if stated != "fail":
        fault = fault_of(report)
        checks += [missing_check(cid, fault) for cid in missing_checks(report)]
    raw = verdict.worst([stated, verdict.of_checks(checks)])
    cause = report.get("cause") if isinstance(report.get("cause"), str) and report.get("cause") else None
    if cause is None and raw != "pass":
        cause = verdict.first_with(checks, raw)
    return Judged(
        raw, cause, judge(ExpectedOutcome.from_json(report.get("expectation")), raw, checks), checks
    )


def not_applicable_judged(report: Mapping[str, Any], checks: list[dict]) -> Judged:
    """A report of an attempt the stack cannot run: its verdict stays not_applicable, whatever the scenario
    expects (a negative control that could not run proved nothing either), and its outcome is never met:
    neither a pass nor a fail. Its cause is the reason."""
    cause = report.get("cause") if isinstance(report.get("cause"), str) and report.get("cause") else None
    why = cause or "not applicable on this stack"
    na = verdict.NOT_APPLICABLE
    return Judged(na, why, Outcome(na, False, na, why), checks)
