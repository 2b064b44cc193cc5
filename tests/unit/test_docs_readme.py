"""The README starts where a user starts: its first screen says what ftqual is for, the two commands (the test
command being the one CI runs) and where to go next; every link of the README and docs/ resolves; the fault
values the docs list are the contract's."""

from __future__ import annotations

import re
from pathlib import Path

from ftqual.contract import FAULTS

ROOT = Path(__file__).resolve().parents[2]
FIRST_SCREEN = 40
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def first_screen() -> str:
    """The README up to its first second-level heading."""
    return (ROOT / "README.md").read_text(encoding="utf-8").split("\n## ", 1)[0]


def test_the_first_screen_fits_one_screen():
    lines = first_screen().splitlines()
    assert len(lines) <= FIRST_SCREEN, f"README's first screen is {len(lines)} lines (at most {FIRST_SCREEN})"


def test_the_first_screen_has_the_two_commands_and_ci_runs_the_test_command():
    screen = first_screen()
    commands = re.findall(r"^(make \w+)", screen.split("```bash", 1)[1].split("```", 1)[0], re.MULTILINE)
    assert commands == ["make run", "make test"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test$", ci, re.MULTILINE), ".ci/run no longer runs the README's `make test`"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^run: env\n\tsnakemake --profile profiles/local$", makefile, re.MULTILINE)


def test_the_first_screen_says_where_next_without_jargon():
    screen = first_screen()
    for page in ("docs/your-job.md", "docs/gpu.md", "docs/slurm.md", "docs/report.md", "config/README.md"):
        assert f"]({page})" in screen, page
    assert "walkthrough" not in screen.lower()
    assert "**walkthrough" in (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")


def test_every_link_of_the_readme_and_docs_resolves():
    # docs/ whole, the recorded GPU reports under docs/gpu-qualification/ too: an image link to a plot
    # that was not brought back is a dead link for the reader.
    broken = []
    for doc in [ROOT / "README.md", ROOT / "config" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" not in target and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, "\n".join(broken)


def test_the_fault_values_listed_are_the_contracts():
    text = (ROOT / "docs" / "faults.md").read_text(encoding="utf-8")
    section = text.split("## The fault variable of the launcher", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"`([a-z_]+)`", section.split("one of", 1)[1].split("(", 1)[0])
    assert tuple(listed) == FAULTS


def test_the_pages_a_newcomer_reads_first_stay_short():
    """architecture.md and benchmarks.md are read in one sitting (with the README, under an hour): at most
    15 KB each. Their detail has a home elsewhere: the formats in docs/interfaces.md, each module's job in its
    docstring, each GPU run in docs/gpu-qualification/, the history in git and the CHANGELOG."""
    limit = 15 * 1024
    sizes = {page: len((ROOT / "docs" / page).read_bytes()) for page in ("architecture.md", "benchmarks.md")}
    too_long = [f"docs/{page}: {size:,} bytes" for page, size in sizes.items() if size > limit]
    assert not too_long, f"over {limit:,} bytes (move detail out, don't trim words): " + "; ".join(too_long)
