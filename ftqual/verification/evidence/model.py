"""Record types shared by every evidence parser: where a fact came from, and how a source fared."""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TEXT = 240
# ANSI colour/cursor sequences and the other C0/C1 controls: log text quoted in a report must print and
# embed in XML as is (a tab stays).
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffe\uffff]")


def clean(text: str) -> str:
    """`text` without ANSI sequences, each other control character shown as `?`."""
    return _CONTROL.sub("?", _ANSI.sub("", text))


@dataclass(frozen=True, slots=True)
class Ref:
    """Where a fact was read: a path relative to the run directory, a 1-based line (0: whole file)."""

    path: str
    line: int = 0
    text: str = ""

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "line": self.line}
        if self.text:
            out["text"] = self.text
        return out


def ref(path: str, line: int, text: str) -> Ref:
    """A Ref whose text is the line without its trailing newline, cut to a readable length."""
    text = clean(text[: MAX_TEXT * 4].rstrip("\r\n"))
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 3] + "..."
    return Ref(path, line, text)


@dataclass(frozen=True)
class SourceStatus:
    """How one evidence source fared: `ok` False means its capability is missing (reason says why).

    `complete` is False when the source was read but looks cut short (a log whose last line has no
    newline); checks that do not find a fact in an incomplete source say "inconclusive", not "fail".
    """

    name: str
    ok: bool
    reason: str = ""
    complete: bool = True
    paths: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "complete": self.complete,
            "reason": self.reason or None,
            "paths": list(self.paths),
        }


def missing(name: str, reason: str, *paths: str) -> SourceStatus:
    return SourceStatus(name=name, ok=False, reason=reason, complete=False, paths=tuple(paths))
