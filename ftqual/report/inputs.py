"""Readers: verify reports and preflight.json, each read once; a missing or unreadable file becomes a reason.

Nothing here judges: `summary.py` turns a reason into an inconclusive scenario or "unknown" stack fields.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ftqual.preflight import report_schema as preflight_schema
from ftqual.verification import schema as verify_schema
from ftqual.verification.evidence import safeio
from ftqual.workflow import attempts

VERIFY_SCHEMA = verify_schema.SCHEMA
PREFLIGHT_SCHEMA = preflight_schema.SCHEMA
SCENARIO_ORDER = ("baseline", "kill", "hang")
EXCERPT_MAX = 240  # characters of a log line quoted as evidence
EXCERPTS_PER_CHECK = 6


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
    run_dir = _run_dir(doc, Path(path))
    if run_dir is not None:
        doc = attach_excerpts(doc, run_dir)
    return ScenarioInput(name, str(path), doc)


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
            if d.is_dir() and ((d / "verify.json").exists() or attempts.record_path(d).exists())
        }
    order = {name: i for i, name in enumerate(SCENARIO_ORDER)}
    names = sorted(found, key=lambda n: (order.get(n, len(order)), n))
    return [(name, results / name / "verify.json") for name in names]


def _run_dir(doc: dict, verify_path: Path) -> Path | None:
    """Where the run directory lies now, if the report or the attempt record beside it says so."""
    candidates = [doc.get("run_dir")]
    copy, _ = _read_json(attempts.record_path(verify_path.parent))
    if copy:
        candidates.append(copy.get("run_dir"))
    for candidate in candidates:
        if isinstance(candidate, str) and candidate:
            path = Path(candidate)
            if not path.is_absolute():
                path = verify_path.parent / path
            if path.is_dir():
                return path
    return None


def _line_of(path: Path, line: int, run_dir: Path) -> str | None:
    """Line `line` of a regular file inside the run directory (safeio: no links out, no FIFOs, bounded
    lines); None for anything else."""
    try:
        with safeio.open_regular(path, run_dir) as fh:
            for number, (raw, _cut) in enumerate(safeio.bounded_lines(fh), start=1):
                if number == line:
                    return raw.decode("utf-8", "replace").strip()[:EXCERPT_MAX]
    except OSError:
        return None
    return None


def attach_excerpts(doc: dict, run_dir: Path) -> dict:
    """A copy of `doc` whose non-passing checks' evidence carries the cited log line's text, when missing.

    Only regular files inside the run directory are read (never a FIFO, a device or a link leading out)."""
    cache: dict[tuple[str, int], str | None] = {}

    def line_text(rel: str, line: int) -> str | None:
        if (rel, line) not in cache:
            relative = bool(rel) and not os.path.isabs(rel)
            cache[(rel, line)] = _line_of(run_dir / rel, line, run_dir) if relative and line >= 1 else None
        return cache[(rel, line)]

    checks = []
    for check in doc.get("checks") or []:
        if not isinstance(check, dict) or check.get("status") in ("pass", "skip"):
            checks.append(check)
            continue
        evidence = []
        for i, ev in enumerate(check.get("evidence") or []):
            if (
                isinstance(ev, dict)
                and i < EXCERPTS_PER_CHECK
                and not evidence_text(ev)
                and isinstance(ev.get("path"), str)
                and isinstance(ev.get("line"), int)
            ):
                text = line_text(ev["path"], ev["line"])
                ev = {**ev, "text": text} if text else ev
            evidence.append(ev)
        checks.append({**check, "evidence": evidence})
    return {**doc, "checks": checks}


def evidence_text(ev: dict) -> str | None:
    for key in ("text", "excerpt", "line_text", "snippet"):
        value = ev.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None
