"""The preflight report's schema (`ftqual.preflight/v1`), checked by every reader of preflight.json.

The attempt rules (ftqual.workflow.attempts), the scenario runs (nothing is launched unless the preflight
passed, nor a scenario its `not_applicable` names) and the report read it. `problems` names each field that
is wrong; a reader treats a malformed preflight report as a preflight that did not pass: nothing is launched
on it, and the summary is never a PASS.
"""

from __future__ import annotations

from collections.abc import Mapping

from ftqual.jsonfile import envelope_problems

SCHEMA = "ftqual.preflight/v1"
VERDICTS = ("pass", "warn", "fail")
STATUSES = ("pass", "warn", "fail", "skip")


def _check_problems(index: int, check: object) -> list[str]:
    if not isinstance(check, Mapping):
        return [f"checks[{index}] is not an object"]
    if not isinstance(check.get("id"), str) or check.get("status") not in STATUSES:
        return [f"checks[{index}] has no string id or no status among {', '.join(STATUSES)}"]
    return []


def problems(doc: object) -> list[str]:
    if not isinstance(doc, Mapping):
        return ["the report is not a JSON object"]
    out = envelope_problems(doc, SCHEMA, VERDICTS, _check_problems)
    for field in ("stack", "resolved"):
        if field in doc and not isinstance(doc[field], Mapping):
            out.append(f"{field} is not an object")
    if "storage" in doc:
        out.extend(storage_problems(doc["storage"]))
    if "not_applicable" in doc:
        out.extend(not_applicable_problems(doc["not_applicable"]))
    return out


def not_applicable_problems(value: object) -> list[str]:
    """The optional `not_applicable` (ftqual.preflight.applicability): {scenario: why this stack cannot run
    it}, a non-empty line each; absent in reports written before it (no scenario judged so)."""
    if not isinstance(value, Mapping):
        return ["not_applicable is not an object"]
    if not all(isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in value.items()):
        return ["not_applicable is not an object of scenario names to non-empty reasons"]
    return []


def not_applicable_of(doc: object) -> dict[str, str]:
    """The scenarios a well-formed preflight report says this stack cannot run, with why; none otherwise
    (a malformed report launches nothing anyway: verdict_of)."""
    if problems(doc):
        return {}
    return dict(doc.get("not_applicable") or {})  # type: ignore[union-attr]


STORAGE_NUMBERS = ("write_gbps", "read_gbps", "write_s", "read_s")
STORAGE_PLACE_TEXTS = ("filesystem", "mount_point", "device")


def storage_problems(storage: object) -> list[str]:
    """The optional `storage` (ftqual/preflight/storage.py): the checkpoint directory's measured floor."""
    if not isinstance(storage, Mapping):
        return ["storage is not an object"]
    out = []
    if not isinstance(storage.get("path"), str) or not isinstance(storage.get("method"), str):
        out.append("storage has no string path or method")
    if not isinstance(storage.get("bytes"), int) or isinstance(storage.get("bytes"), bool):
        out.append("storage.bytes is not an integer")
    for key in STORAGE_NUMBERS:
        value = storage.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            out.append(f"storage.{key} is neither a number nor null")
    # the filesystem measured (absent in reports written before it was recorded)
    for key in STORAGE_PLACE_TEXTS:
        value = storage.get(key)
        if value is not None and not isinstance(value, str):
            out.append(f"storage.{key} is neither a string nor null")
    free = storage.get("free_bytes")
    if free is not None and (isinstance(free, bool) or not isinstance(free, int)):
        out.append("storage.free_bytes is neither an integer nor null")
    return out


def verdict_of(doc: object) -> str:
    """The preflight's verdict as every reader must take it: 'malformed' unless the report is well-formed."""
    return "malformed" if problems(doc) else str(doc["verdict"])  # type: ignore[index]
