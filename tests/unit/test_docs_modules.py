"""The docs describe the code as it is: every module of the package opens with a one-line docstring saying its
job (what `python -m pydoc` and the file's first line tell), no doc cites a module that no longer exists,
docs/architecture.md names every sub-package, and no doc or code cites a numbered issue of a tracker outside
the repo."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "ftqual"
SUMMARY_MAX = 107  # `"""` and the line fit the 110 columns ruff allows
CITED = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.py)\b")


def package_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def summary_problem(path: Path) -> str | None:
    """Why `path`'s module docstring does not open with a one-line summary, or None (PEP 257's summary line:
    one line, a blank line after it where more follows)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), str(path)), clean=False)
    if not doc or not doc.strip():
        return "no module docstring"
    lines = doc.strip("\n").splitlines()
    if len(lines) > 1 and lines[1].strip():
        return "the first line runs on into the second (end it there and leave a blank line)"
    if len(lines[0]) > SUMMARY_MAX:
        return f"the first line is {len(lines[0])} characters (at most {SUMMARY_MAX})"
    return None


def test_every_module_opens_with_a_one_line_docstring():
    problems = [f"{p.relative_to(ROOT)}: {why}" for p in package_modules() if (why := summary_problem(p))]
    assert not problems, (
        "modules whose docstring does not open with a one-line summary of its job:\n" + "\n".join(problems)
    )


def test_the_summary_rule_catches_a_run_on_first_line(tmp_path):
    """Negative control: each way a docstring can miss the rule is reported, and a good one passes."""
    cases = {
        "none.py": ("x = 1\n", "no module docstring"),
        "runon.py": ('"""One thing\nrunning on."""\n', "runs on"),
        "long.py": (f'"""{"x" * (SUMMARY_MAX + 1)}"""\n', "characters"),
        "good.py": ('"""One line.\n\nMore here."""\n', None),
    }
    for name, (text, expected) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        found = summary_problem(tmp_path / name)
        assert (found is None) if expected is None else (found is not None and expected in found), (
            name,
            found,
        )


def docs_citing_modules() -> list[Path]:
    """The pages a reader follows to the code: README, config/README, docs/*.md and every DESIGN.md of the
    package (the recorded GPU reports under docs/gpu-qualification/ describe the code of their day)."""
    return [
        ROOT / "README.md",
        ROOT / "config" / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted(PACKAGE.rglob("DESIGN.md")),
    ]


def cited_module_is_gone(doc: Path, cited: str) -> bool:
    """A path starting `ftqual/` is from the repo root; a DESIGN.md's other paths may also be relative to its
    folder or any folder above it inside the package (`scan/canonical.py` beside evidence/DESIGN.md)."""
    if cited.startswith("ftqual/"):
        return not (ROOT / cited).is_file()
    if doc.name != "DESIGN.md":
        return False  # docs/ name scripts, tests and tools too: only the package's modules are held here
    folder = doc.parent
    while folder != ROOT:
        if (folder / cited).is_file():
            return False
        folder = folder.parent
    return not (ROOT / cited).is_file()


def test_no_doc_cites_a_module_that_is_gone():
    gone = [
        f"{doc.relative_to(ROOT)}: {cited}"
        for doc in docs_citing_modules()
        for cited in sorted(set(CITED.findall(doc.read_text(encoding="utf-8"))))
        if cited_module_is_gone(doc, cited)
    ]
    assert not gone, "docs cite modules that do not exist:\n" + "\n".join(gone)


def test_the_citation_rule_catches_a_gone_module(tmp_path):
    """Negative control: a DESIGN.md naming a module that is nowhere is caught; one beside it is not."""
    design = PACKAGE / "report" / "DESIGN.md"
    assert not cited_module_is_gone(design, "summary.py")
    assert not cited_module_is_gone(design, "ftqual/report/summary.py")
    assert cited_module_is_gone(design, "no_such_module.py")
    assert cited_module_is_gone(ROOT / "docs" / "architecture.md", "ftqual/report/no_such_module.py")
    assert CITED.findall("see `ftqual/report/summary.py` and scan/canonical.py.") == [
        "ftqual/report/summary.py",
        "scan/canonical.py",
    ]


def test_architecture_names_every_sub_package():
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.relative_to(ROOT).as_posix() + "/" for p in PACKAGE.rglob("__init__.py"))
    missing = [p for p in packages if f"`{p}`" not in text]
    assert not missing, f"docs/architecture.md's package table lacks: {', '.join(missing)}"


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
