"""Helpers for the verifier's tests: editable copies of the recorded runs, and a one-call verify."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ftqual.verification.verify import main as verify_main


class RunEditor:
    """Edits one copied run directory in place (test corpora of broken runs are built with it)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, rel: str) -> Path:
        return self.root / rel

    def lines(self, rel: str) -> list[str]:
        return self.path(rel).read_text(encoding="utf-8").splitlines(keepends=True)

    def write_lines(self, rel: str, lines: list[str]) -> None:
        self.path(rel).write_text("".join(lines), encoding="utf-8")

    def replace(self, rel: str, old: str, new: str, count: int = -1) -> None:
        text = self.path(rel).read_text(encoding="utf-8")
        assert old in text, f"{old!r} not in {rel}"
        self.path(rel).write_text(text.replace(old, new, count), encoding="utf-8")

    def sub(self, rel: str, pattern: str, repl: str | Callable[[re.Match], str]) -> int:
        text = self.path(rel).read_text(encoding="utf-8")
        new, n = re.subn(pattern, repl, text, flags=re.MULTILINE)
        assert n, f"{pattern!r} matched nothing in {rel}"
        self.path(rel).write_text(new, encoding="utf-8")
        return n

    def delete_lines(self, rel: str, keep_out: Callable[[str], bool]) -> int:
        lines = self.lines(rel)
        kept = [line for line in lines if not keep_out(line)]
        assert len(kept) < len(lines), f"nothing deleted from {rel}"
        self.write_lines(rel, kept)
        return len(lines) - len(kept)

    def insert_after(self, rel: str, anchor: Callable[[str], bool], new: list[str]) -> None:
        lines = self.lines(rel)
        for index, line in enumerate(lines):
            if anchor(line):
                lines[index + 1 : index + 1] = [item if item.endswith("\n") else item + "\n" for item in new]
                self.write_lines(rel, lines)
                return
        raise AssertionError(f"anchor not found in {rel}")

    def append(self, rel: str, new: list[str]) -> None:
        with self.path(rel).open("a", encoding="utf-8") as handle:
            handle.writelines(item if item.endswith("\n") else item + "\n" for item in new)

    def json(self, rel: str) -> dict:
        return json.loads(self.path(rel).read_text(encoding="utf-8"))

    def set_json(self, rel: str, **updates: object) -> None:
        data = self.json(rel)
        data.update(updates)
        self.path(rel).write_text(json.dumps(data, indent=2), encoding="utf-8")


@pytest.fixture
def kill_run(fixture_copy) -> RunEditor:
    return RunEditor(fixture_copy("kill-2gpu"))


@pytest.fixture
def baseline_run(fixture_copy) -> RunEditor:
    return RunEditor(fixture_copy("baseline-2gpu"))


@pytest.fixture
def verify(tmp_path) -> Callable[..., tuple[int, dict]]:
    """verify(run_dir, *args) -> (exit code, report dict), through `ftqual.verification.verify.main`."""
    counter = iter(range(1000))

    def _verify(run_dir: Path | RunEditor, *args: str) -> tuple[int, dict]:
        root = run_dir.root if isinstance(run_dir, RunEditor) else Path(run_dir)
        out = tmp_path / f"verify-{next(counter)}.json"
        code = verify_main([str(root), "--json", str(out), *args])
        report = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
        return code, report

    return _verify
