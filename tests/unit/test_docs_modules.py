"""docs/architecture.md describes the code as it is: its module table names every module of the package and
nothing that no longer exists, and no doc or code cites a numbered issue of a tracker outside the repo."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `(ftqual/[^`]+\.py)` \|", re.MULTILINE)


def table_modules() -> set[str]:
    return set(ROW.findall((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")))


def package_modules() -> set[str]:
    return {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "ftqual").rglob("*.py")
        if "__pycache__" not in p.parts
    }


def test_every_module_has_a_row():
    missing = sorted(package_modules() - table_modules())
    assert not missing, f"docs/architecture.md's module table lacks: {', '.join(missing)}"


def test_no_row_for_a_module_that_is_gone():
    gone = sorted(table_modules() - package_modules())
    assert not gone, f"docs/architecture.md's module table names modules that do not exist: {', '.join(gone)}"


def test_no_numbered_issue_is_cited():
    proc = subprocess.run(
        ["git", "grep", "-nE", r"[Ii]ssue [0-9]", "--", ".", ":!tests/unit/test_docs_modules.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1) or not (ROOT / ".git").exists():
        return  # not a git checkout (an unpacked release): nothing to grep
    assert proc.stdout == "", proc.stdout
