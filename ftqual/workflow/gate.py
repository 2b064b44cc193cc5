"""Rule `gate`: publish the current attempts' report, and make its verdict the workflow's exit code.

Copies results/reports/<attempts>/ to results/summary.{json,md,html}, junit.xml and plots/ (replacing
what an earlier run left there), then exits 0 only when that summary covers exactly the current attempts
(the same slot for every scenario) and its verdict is pass; otherwise it prints the headline and every
scenario's cause, and exits 1. The summary's verdict counts only the scenarios the stack can run; each one it
cannot is printed apart with why (NOT APPLICABLE), and where no fault scenario is left the verdict is not a
pass (ftqual.report.summary).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

RESULTS = Path("results")
PUBLISHED = ("summary.json", "summary.md", "summary.html", "junit.xml")


def publish(report_dir: Path, results: Path = RESULTS) -> None:
    """Copy the report's files over the published ones, each replaced whole (a reader never sees half)."""
    for name in PUBLISHED:
        tmp = results / f".{name}.tmp"
        shutil.copyfile(report_dir / name, tmp)
        tmp.replace(results / name)
    plots = results / "plots"
    if plots.is_dir():
        shutil.rmtree(plots)  # copies of an earlier report's plots, never evidence
    shutil.copytree(report_dir / "plots", plots)


def run(
    *,
    report_dir: str | Path,
    attempts: Mapping[str, str],
    log: TextIO,
    console: TextIO | None = None,
    results: Path = RESULTS,
) -> int:
    """The rule's job: publish `report_dir` when its summary covers exactly `attempts` (scenario -> slot),
    and return the workflow's exit code: 0 for a pass, 1 otherwise. Every line goes to the log and to
    `console` (the original stderr when None)."""

    def say(line: str) -> None:
        print(line, file=log)
        print(line, file=console or sys.__stderr__, flush=True)

    report_dir = Path(report_dir)
    summary = json.loads((report_dir / "summary.json").read_text())
    expected = dict(attempts)
    if summary.get("attempts") != expected:
        say(
            f"ftqual: FAIL — {report_dir}/summary.json describes other attempts ({summary.get('attempts')}) "
            f"than the current ones ({expected}); rerun the workflow"
        )
        return 1
    publish(report_dir, results)
    say(summary.get("headline", "ftqual: no headline"))
    for sc in summary.get("scenarios", []):
        if sc["verdict"] == "not_applicable":  # neither a pass nor a failure: said apart, with why
            why = sc.get("not_applicable") or sc.get("cause")
            say(f"  {sc['name']}: NOT APPLICABLE on this stack — {why}")
            continue
        line = f"  {sc['name']}: {sc['verdict'].upper()}"
        if sc["verdict"] != "pass":
            line += f" — {sc.get('cause') or sc.get('reason') or 'see results/summary.md'}"
        say(line)
    say("report: results/summary.md, results/summary.html, results/junit.xml")
    return 0 if summary.get("verdict") == "pass" else 1
