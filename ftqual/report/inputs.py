"""Readers: verify reports and preflight.json, each read once; a missing or unreadable file becomes a reason.

Nothing here judges: `summary.py` turns a reason into an inconclusive scenario or "unknown" stack fields.
The report reads only these reports, never a run's logs: the log lines a failed check cites are quoted from
the verify report's `excerpts` (written by `ftqual verify`); a verify report written before that key quotes
none, and the report says so (`excerpts_recorded`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ftqual.preflight import report_schema as preflight_schema
from ftqual.verification import schema as verify_schema
from ftqual.verification.evidence import excerpts as quoted

VERIFY_SCHEMA = verify_schema.SCHEMA
PREFLIGHT_SCHEMA = preflight_schema.SCHEMA
SCENARIO_ORDER = ("baseline", "kill", "hang")
# A scenario folder's attempt record (ftqual.workflow.attempts.ATTEMPT_RECORD, and LEGACY_RECORD of earlier
# workspaces), named here so that the report does not import the workflow (a test ties the two).
ATTEMPT_RECORDS = ("attempt.json", "run.json")


@dataclass(frozen=True)
class ScenarioInput:
    name: str
    path: str  # the verify report's path as given
    doc: dict | None
    error: str | None = None  # why doc is None


@dataclass(frozen=True)
class PreflightInput:
    path: str | None
    doc: dict | None
    error: str | None = None


def _read_json(path: Path) -> tuple[dict | None, str | None]:
    if not path.is_file():
        return None, f"missing ({path})"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"unreadable ({path}: {exc})"
    except RecursionError:
        return None, f"unreadable ({path}: nested too deeply)"
    if not isinstance(data, dict):
        return None, f"unreadable ({path}: not a JSON object)"
    return data, None


def load_summary(path: str | Path, missing: str) -> tuple[dict | None, str | None]:
    """A results directory's summary.json (or the file given): the document, or one line why not. `missing`
    is the line where there is none, `{target}` standing for its path."""
    target = Path(path)
    if target.is_dir():
        target = target / "summary.json"
    try:
        doc = json.loads(target.read_text())
    except FileNotFoundError:
        return None, missing.format(target=target)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{target} cannot be read ({exc})"
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("ftqual.summary"):
        return None, f"{target} is not an ftqual summary.json"
    return doc, None


def load_verify(name: str, path: str | Path) -> ScenarioInput:
    doc, error = _read_json(Path(path))
    if doc is not None and doc.get("schema") != VERIFY_SCHEMA:
        doc, error = None, f"not an {VERIFY_SCHEMA} report ({path}: schema {doc.get('schema')!r})"
    if doc is None:
        return ScenarioInput(name, str(path), None, f"verify report {error}")
    found = verify_schema.problems(doc)
    if found:
        more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
        return ScenarioInput(name, str(path), None, f"verify report {path} is malformed: {found[0]}{more}")
    return ScenarioInput(name, str(path), attach_excerpts(doc))


def load_preflight(path: str | Path | None) -> PreflightInput:
    if path is None:
        return PreflightInput(None, None, "no preflight report given")
    doc, error = _read_json(Path(path))
    if doc is not None and doc.get("schema") != PREFLIGHT_SCHEMA:
        doc, error = None, f"not an {PREFLIGHT_SCHEMA} report (schema {doc.get('schema')!r})"
    elif doc is not None and (found := preflight_schema.problems(doc)):
        # present but malformed: judged as a preflight that did not pass (never a PASS on it)
        return PreflightInput(str(path), {"verdict": "fail", "checks": [{"id": "preflight_report",
                              "status": "fail", "detail": f"{path} is malformed: {found[0]}"}]})  # fmt: skip
    return PreflightInput(str(path), doc, None if doc is not None else f"preflight report {error}")


def discover_results(results: Path, expect: list[str]) -> list[tuple[str, Path]]:
    """Scenario directories under `results` (those with a verify.json or an attempt record) plus the expected
    names."""
    found = set(expect)
    if results.is_dir():
        found |= {
            d.name
            for d in results.iterdir()
            if d.is_dir() and any((d / record).is_file() for record in ("verify.json", *ATTEMPT_RECORDS))
        }
    order = {name: i for i, name in enumerate(SCENARIO_ORDER)}
    names = sorted(found, key=lambda n: (order.get(n, len(order)), n))
    return [(name, results / name / "verify.json") for name in names]


def attach_excerpts(doc: dict) -> dict:
    """A copy of `doc` whose non-passing checks' evidence carries the cited log line's text, when missing,
    from the report's own `excerpts` (ftqual.verification.evidence.excerpts); a report without that key
    (written before it) is returned as it is: nothing is quoted, no log is read."""
    found = doc.get("excerpts")
    if not isinstance(found, dict):
        return doc
    checks = []
    for check in doc.get("checks") or []:
        if not isinstance(check, dict) or check.get("status") in ("pass", "skip"):
            checks.append(check)
            continue
        evidence = []
        for i, ev in enumerate(check.get("evidence") or []):
            if (
                isinstance(ev, dict)
                and i < quoted.EXCERPTS_PER_CHECK
                and not evidence_text(ev)
                and isinstance(ev.get("path"), str)
                and isinstance(ev.get("line"), int)
            ):
                text = found.get(quoted.key(ev["path"], ev["line"]))
                ev = {**ev, "text": text} if isinstance(text, str) and text else ev
            evidence.append(ev)
        checks.append({**check, "evidence": evidence})
    return {**doc, "checks": checks}


def evidence_text(ev: dict) -> str | None:
    return quoted.own_text(ev)
