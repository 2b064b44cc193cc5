"""Our JSON records: written whole and atomically, and the envelope every report shares.

Our JSON records, below every stage: `write_json_atomic` writes one whole (a temporary file beside it,
fsync, rename), so that a reader never sees half a record (the stack record, run.json, the attempt and
verify records, the lock); `envelope_problems` checks the envelope every report of ours shares (schema
string, verdict, checks), for the verify and the preflight schemas."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write via a temporary file and rename, so a reader never sees half a record."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def envelope_problems(doc: Mapping, schema: str, verdicts: tuple[str, ...], check_problems) -> list[str]:
    """The parts every report of ours shares: its schema string, its verdict, its list of checks (each
    judged by `check_problems(index, check)`): the verify and the preflight reports."""
    out = []
    if doc.get("schema") != schema:
        out.append(f"schema {doc.get('schema')!r} is not {schema!r}")
    if doc.get("verdict") not in verdicts:
        out.append(f"verdict {doc.get('verdict')!r} is not one of {', '.join(verdicts)}")
    checks = doc.get("checks")
    if not isinstance(checks, list):
        out.append("checks is not a list")
    else:
        for index, check in enumerate(checks):
            out += check_problems(index, check)
    return out
