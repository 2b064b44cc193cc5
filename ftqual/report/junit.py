"""Render the summary as JUnit XML (pure): one testsuite per scenario, one testcase per check + its verdict.

Mapping: `fail` -> <failure> (message = detail, body = evidence lines); `skip` -> <skipped>; a scenario the
stack cannot run (verdict `not_applicable`) -> its `verdict` case <skipped message="not applicable on this
stack: <why>">, never a pass nor a failure;
`inconclusive` -> <error type="inconclusive">: the check could not be decided from the evidence, which CI
must show as red, never as green. Each failure is counted once: the scenario's `verdict` case fails only
when no check carries the failure (nothing launched, no usable verify report, a negative control that did
not fail), with the cause as message; a negative control that failed as expected is all green;
a campaign adds one case per fault (`fault_<k>_<kind>_rank<r>`, classname `ftqual.<scenario>.campaign`) with
the fault's verdict, so a failed fault is named (it fails beside the campaign check that judged it);
otherwise it passes and names the cause in its output. A failed preflight is a suite of its own. Times are
the attempt's real duration. Each scenario's properties name the stack its verdict was earned on
(`stack` = the identity's digest, `stack.<part>` its readable parts). junit.xml is never green unless the
verdict is pass: a non-pass verdict no testcase carries (only a baseline ran) is a `qualification` suite's
failing `verdict` case with the headline. Text is made XML-safe (no control
characters, no terminal colour codes).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ftqual.report.campaign import fault_cases
from ftqual.report.recurring import junit_properties as recurring_properties

# ANSI escape sequences, then every character XML 1.0 does not allow.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_NOT_XML = re.compile("[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(value: object) -> str:
    return _NOT_XML.sub("?", _ANSI.sub("", str(value)))


def _lines(check: dict) -> str:
    lines = []
    for ev in check.get("evidence") or []:
        where = f"{ev.get('path')}:{ev.get('line')}" if ev.get("line") else str(ev.get("path"))
        lines.append(f"{where}: {ev['text']}" if ev.get("text") else where)
    return "\n".join(lines)


def _case(
    suite: ET.Element, classname: str, name: str, status: str, detail: str, body: str, time: str = "0"
) -> str:
    detail, body = xml_text(detail), xml_text(body)
    case = ET.SubElement(suite, "testcase", classname=xml_text(classname), name=xml_text(name), time=time)
    if status == "fail":
        ET.SubElement(case, "failure", message=detail, type="fail").text = body or detail
    elif status == "inconclusive":
        ET.SubElement(case, "error", message=detail, type="inconclusive").text = body or detail
    elif status == "skip":
        ET.SubElement(case, "skipped", message=detail)
    elif detail:
        ET.SubElement(case, "system-out").text = detail
    return status


def _with_cause(check: dict, sc: dict, first: bool) -> str:
    cause = sc.get("cause")
    if not first or not cause or cause.startswith(f"{check['id']}: "):
        return check["detail"]
    return f"{cause} — {check['id']}: {check['detail']}"


def _proven_detail(check: dict, sc: dict) -> str:
    if check["id"] in sc.get("expect_failing", []):
        return f"failed, as this negative control expects: {check['detail']}"
    return f"{check['status']} in this negative control, as its induced failure implies: {check['detail']}"


def _duration(sc: dict) -> float:
    value = (sc.get("attempt") or {}).get("duration_s")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def render_junit(summary: dict) -> str:
    root = ET.Element("testsuites", name="ftqual")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    preflight_items = [i for i in summary.get("attention", []) if i["scenario"] == "preflight"]
    suites = [("preflight", None)] if preflight_items else []
    suites += [(sc["name"], sc) for sc in summary["scenarios"]]
    for name, sc in suites:
        suite = ET.SubElement(root, "testsuite", name=xml_text(name))
        classname = f"ftqual.{name}"
        if sc is None:
            statuses = [
                _case(suite, classname, i["check"], "fail", i["detail"], i["detail"]) for i in preflight_items
            ]
            duration = 0.0
        else:
            props = ET.SubElement(suite, "properties")
            for key in ("run_id", "fault", "verdict", "source", "cause"):
                ET.SubElement(props, "property", name=key, value=xml_text(sc.get(key)))
            for key in ("expect", "raw_verdict", "expectation"):
                ET.SubElement(props, "property", name=key, value=xml_text(sc.get(key)))
            # The stack this verdict was earned on, readable (ftqual.stack.identity): stack.<part> per part.
            stack = sc.get("stack") or {}
            ET.SubElement(
                props, "property", name="stack", value=xml_text(stack.get("digest") or "not recorded")
            )
            for part, value in (stack.get("parts") or {}).items():
                ET.SubElement(props, "property", name=f"stack.{part}", value=xml_text(value))
            if stack.get("reason"):
                ET.SubElement(props, "property", name="attempt_reason", value=xml_text(stack["reason"]))
            # The scenario's one-line cause leads the message of the first check that carries its verdict.
            first = next((c for c in sc["checks"] if c["status"] == sc["verdict"] != "pass"), None)
            # A negative control that failed as expected passes: its failed checks are what it proves.
            proven = sc.get("expect") == "fail" and sc["verdict"] == "pass"
            # Its other failed or inconclusive checks follow from the failure it induced (no restart after
            # the last fault, nothing to replay): shown with their status, not counted.
            statuses = [
                _case(suite, classname, c["id"], "pass", _proven_detail(c, sc), _lines(c))
                if proven and c["status"] in ("fail", "inconclusive")
                else _case(suite, classname, c["id"], c["status"], _with_cause(c, sc, c is first), _lines(c))
                for c in sc["checks"]
            ]
            # A stop judged (a fault that comes back, a curable control): who stopped it and what it cost.
            for row in summary.get("recurring") or []:
                if isinstance(row, dict) and row.get("scenario") == name:
                    for key, value in recurring_properties(row):
                        ET.SubElement(props, "property", name=key, value=xml_text(value))
            campaign = (summary.get("campaigns") or {}).get(name)
            if campaign is not None:  # one case per fault, named by its kind and rank
                good = campaign["goodput"]
                for key in ("measured", "projected", "gap"):
                    value = xml_text(good[key])
                    ET.SubElement(props, "property", name=f"campaign.goodput_{key}", value=value)
                statuses += [
                    _case(suite, f"{classname}.campaign", case, status, detail, detail)
                    for case, status, detail in fault_cases(campaign)
                ]
            duration = _duration(sc)
            carried = sc["verdict"] in statuses
            verdict_status = "pass" if carried else sc["verdict"]
            verdict_detail = sc.get("cause") or sc["reason"] or f"scenario verdict: {sc['verdict']}"
            if sc["verdict"] == "not_applicable":
                # neither green nor red: skipped, with why the stack cannot run it
                carried, verdict_status = False, "skip"
                verdict_detail = (
                    f"not applicable on this stack: {sc.get('not_applicable') or sc.get('cause')}"
                )
            if carried:
                verdict_detail = f"scenario verdict: {sc['verdict']} (cause: {verdict_detail})"
            statuses.append(
                _case(suite, classname, "verdict", verdict_status, verdict_detail, "", f"{duration:.3f}")
            )
        counts = {
            "tests": len(statuses),
            "failures": statuses.count("fail"),
            "errors": statuses.count("inconclusive"),
            "skipped": statuses.count("skip"),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{duration:.3f}")
    if summary.get("verdict") != "pass" and totals["failures"] + totals["errors"] == 0:
        # Nothing above carries the non-pass verdict (only a baseline ran; no scenario at all): a CI job
        # reading junit.xml must still see red, with the headline as the cause.
        status = "fail" if summary.get("verdict") == "fail" else "inconclusive"
        suite = ET.SubElement(root, "testsuite", name="qualification")
        headline = str(summary.get("headline") or f"verdict {summary.get('verdict')}")
        _case(suite, "ftqual.qualification", "verdict", status, headline, headline)
        key = "failures" if status == "fail" else "errors"
        for name, value in (("tests", 1), ("failures", 0), ("errors", 0), ("skipped", 0)):
            suite.set(name, str(value + (1 if name == key else 0)))
        suite.set("time", "0.000")
        totals["tests"] += 1
        totals[key] += 1
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
