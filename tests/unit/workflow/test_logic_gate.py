"""The gate rule's logic (ftqual.workflow.gate): publish the current attempts' report, exit with its
verdict."""

from __future__ import annotations

import io
import json
from pathlib import Path

from ftqual.workflow import gate

ATTEMPTS = {"baseline": "b-1", "kill": "k-1"}


def report_dir(tmp_path: Path, verdict="pass", attempts=ATTEMPTS, scenarios=()) -> Path:
    folder = tmp_path / "results" / "reports" / "h1"
    (folder / "plots").mkdir(parents=True)
    (folder / "plots" / "timeline.png").write_bytes(b"png")
    summary = {"attempts": attempts, "verdict": verdict, "headline": f"ftqual: {verdict.upper()}"}
    summary["scenarios"] = list(scenarios)
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "summary.md").write_text("# md\n")
    (folder / "summary.html").write_text("<!DOCTYPE html>\n")
    (folder / "junit.xml").write_text("<testsuites/>\n")
    return folder


def run_gate(tmp_path, folder, attempts=ATTEMPTS):
    log, console = io.StringIO(), io.StringIO()
    rc = gate.run(
        report_dir=folder, attempts=attempts, log=log, console=console, results=tmp_path / "results"
    )
    assert log.getvalue() == console.getvalue()  # every line to both
    return rc, console.getvalue().splitlines()


def test_a_passing_summary_of_the_current_attempts_is_published_and_exits_0(tmp_path):
    results = tmp_path / "results"
    (results / "plots").mkdir(parents=True)
    (results / "plots" / "stale.png").write_bytes(b"old")
    folder = report_dir(tmp_path, scenarios=[{"name": "kill", "verdict": "pass"}])
    rc, lines = run_gate(tmp_path, folder)
    assert rc == 0
    report = "report: results/summary.md, results/summary.html, results/junit.xml"
    assert lines == ["ftqual: PASS", "  kill: PASS", report]
    for name in ("summary.json", "summary.md", "summary.html", "junit.xml"):
        assert (results / name).read_bytes() == (folder / name).read_bytes()
    assert sorted(p.name for p in (results / "plots").iterdir()) == ["timeline.png"]  # stale one gone
    assert not list(results.glob(".*.tmp"))


def test_a_failing_summary_is_published_with_each_cause_and_exits_1(tmp_path):
    scenarios = [
        {"name": "baseline", "verdict": "pass"},
        {"name": "kill", "verdict": "fail", "cause": "the launcher exited 1"},
        {"name": "hang", "verdict": "inconclusive", "reason": "no baseline"},
        {"name": "spare", "verdict": "fail"},
    ]
    rc, lines = run_gate(tmp_path, report_dir(tmp_path, "fail", scenarios=scenarios))
    assert rc == 1
    assert lines[1:5] == [
        "  baseline: PASS",
        "  kill: FAIL — the launcher exited 1",
        "  hang: INCONCLUSIVE — no baseline",
        "  spare: FAIL — see results/summary.md",
    ]
    assert (tmp_path / "results" / "summary.json").is_file()


def test_a_summary_of_other_attempts_is_not_published(tmp_path):
    folder = report_dir(tmp_path, attempts={"baseline": "b-1", "kill": "k-2"})
    rc, lines = run_gate(tmp_path, folder)
    assert rc == 1
    assert lines == [
        f"ftqual: FAIL — {folder}/summary.json describes other attempts "
        "({'baseline': 'b-1', 'kill': 'k-2'}) "
        f"than the current ones ({ATTEMPTS}); rerun the workflow"
    ]
    assert not (tmp_path / "results" / "summary.json").exists()
