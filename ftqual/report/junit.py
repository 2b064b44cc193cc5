"""Render the summary as JUnit XML (pure): one testsuite per scenario, one testcase per check + its verdict.

Mapping: `fail` -> <failure> (message = detail, body = evidence lines); `skip` -> <skipped>;
`inconclusive` -> <error type="inconclusive">: the check could not be decided from the evidence, which CI
must show as red, never as green. A scenario without a usable verify report has only its `verdict` case,
as an error naming the reason.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET


def _lines(check: dict) -> str:
    lines = []
    for ev in check.get("evidence") or []:
        where = f"{ev.get('path')}:{ev.get('line')}" if ev.get("line") else str(ev.get("path"))
        lines.append(f"{where}: {ev['text']}" if ev.get("text") else where)
    return "\n".join(lines)


def _case(suite: ET.Element, classname: str, name: str, status: str, detail: str, body: str) -> str:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")
    if status == "fail":
        ET.SubElement(case, "failure", message=detail, type="fail").text = body or detail
    elif status == "inconclusive":
        ET.SubElement(case, "error", message=detail, type="inconclusive").text = body or detail
    elif status == "skip":
        ET.SubElement(case, "skipped", message=detail)
    elif detail:
        ET.SubElement(case, "system-out").text = detail
    return status


def render_junit(summary: dict) -> str:
    root = ET.Element("testsuites", name="ftqual")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for sc in summary["scenarios"]:
        suite = ET.SubElement(root, "testsuite", name=sc["name"])
        props = ET.SubElement(suite, "properties")
        for key in ("run_id", "fault", "verdict", "source"):
            ET.SubElement(props, "property", name=key, value=str(sc.get(key)))
        classname = f"ftqual.{sc['name']}"
        statuses = [
            _case(suite, classname, c["id"], c["status"], c["detail"], _lines(c)) for c in sc["checks"]
        ]
        verdict_detail = sc["reason"] or f"scenario verdict: {sc['verdict']}"
        statuses.append(_case(suite, classname, "verdict", sc["verdict"], verdict_detail, ""))
        counts = {
            "tests": len(statuses),
            "failures": statuses.count("fail"),
            "errors": statuses.count("inconclusive"),
            "skipped": statuses.count("skip"),
        }
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", "0")
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
