"""The log lines a verify report's non-passing checks cite, quoted once (verify.json's `excerpts`).

The log lines a verify report's non-passing checks cite, quoted once by `ftqual verify` (verify.json's
`excerpts`), so that the report reads them from the verify report and never reopens a run's logs.

`excerpts(run_dir, checks)`: for every check neither passed nor skipped, its first EXCERPTS_PER_CHECK
evidence entries that cite a line (1-based) of a relative path and carry no text of their own, the text of
that line (stripped, EXCERPT_MAX characters), keyed `"<path>:<line>"`. Only regular files inside the run
directory are read (safeio: never a FIFO, a device or a link leading out; bounded lines), each once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from ftqual.verification.evidence import safeio

EXCERPT_MAX = 240  # characters of a log line quoted as evidence
EXCERPTS_PER_CHECK = 6
TEXT_KEYS = ("text", "excerpt", "line_text", "snippet")  # an evidence entry's own text, in a report


def key(path: str, line: int) -> str:
    """The `excerpts` key of a cited line."""
    return f"{path}:{line}"


def own_text(ev: Mapping) -> str | None:
    """The text an evidence entry carries itself, if any."""
    for name in TEXT_KEYS:
        value = ev.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def cited(checks: Iterable[object]) -> dict[str, set[int]]:
    """path -> the lines the non-passing checks cite without quoting them (module docstring)."""
    wanted: dict[str, set[int]] = {}
    for check in checks:
        if not isinstance(check, Mapping) or check.get("status") in ("pass", "skip"):
            continue
        for i, ev in enumerate(check.get("evidence") or []):
            if i >= EXCERPTS_PER_CHECK or not isinstance(ev, Mapping) or own_text(ev):
                continue
            path, line = ev.get("path"), ev.get("line")
            if isinstance(path, str) and path and not os.path.isabs(path):
                if isinstance(line, int) and not isinstance(line, bool) and line >= 1:
                    wanted.setdefault(path, set()).add(line)
    return wanted


def _lines_of(path: Path, lines: set[int], run_dir: Path) -> dict[int, str]:
    out: dict[int, str] = {}
    last = max(lines)
    try:
        with safeio.open_regular(path, run_dir) as fh:
            for number, (raw, _cut) in enumerate(safeio.bounded_lines(fh), start=1):
                if number in lines:
                    out[number] = raw.decode("utf-8", "replace").strip()[:EXCERPT_MAX]
                if number >= last:
                    break
    except OSError:
        return out
    return out


def excerpts(run_dir: Path, checks: Iterable[object]) -> dict[str, str]:
    """The cited lines' text, `"<path>:<line>"` -> text (module docstring); a line that cannot be read, or
    is empty, is left out."""
    out: dict[str, str] = {}
    for rel, lines in sorted(cited(checks).items()):
        for line, text in sorted(_lines_of(Path(run_dir) / rel, lines, Path(run_dir)).items()):
            if text:
                out[key(rel, line)] = text
    return out
