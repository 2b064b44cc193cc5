"""The preflight report's schema (`ftqual.preflight/v1`), checked by every reader of preflight.json.

The attempt rules (ftqual.attempts), the scenario runs (nothing is launched unless the preflight passed)
and the report read it. `problems` names each field that is wrong; a reader treats a malformed preflight
report as a preflight that did not pass: nothing is launched on it, and the summary is never a PASS.
"""

from __future__ import annotations

from collections.abc import Mapping

SCHEMA = "ftqual.preflight/v1"
VERDICTS = ("pass", "warn", "fail")
STATUSES = ("pass", "warn", "fail", "skip")


def problems(doc: object) -> list[str]:
    if not isinstance(doc, Mapping):
        return ["the report is not a JSON object"]
    out = []
    if doc.get("schema") != SCHEMA:
        out.append(f"schema {doc.get('schema')!r} is not {SCHEMA!r}")
    if doc.get("verdict") not in VERDICTS:
        out.append(f"verdict {doc.get('verdict')!r} is not one of {', '.join(VERDICTS)}")
    checks = doc.get("checks")
    if not isinstance(checks, list):
        out.append("checks is not a list")
    else:
        for index, check in enumerate(checks):
            if not isinstance(check, Mapping):
                out.append(f"checks[{index}] is not an object")
            elif not isinstance(check.get("id"), str) or check.get("status") not in STATUSES:
                out.append(f"checks[{index}] has no string id or no status among {', '.join(STATUSES)}")
    for field in ("stack", "resolved"):
        if field in doc and not isinstance(doc[field], Mapping):
            out.append(f"{field} is not an object")
    return out


def verdict_of(doc: object) -> str:
    """The preflight's verdict as every reader must take it: 'malformed' unless the report is well-formed."""
    return "malformed" if problems(doc) else str(doc["verdict"])  # type: ignore[index]
