"""2 x H200 with PP=2 (tests/data/megatron-h200x2-pp2): a verdict must not depend on where the fault landed.

After the restore from iteration 5 both fault runs report another loss at iteration 7 and equal the baseline
from 8 on. The kill's first attempt ran past 7, the hang's did not: with the baseline both pass with a note
naming iteration 7; without it the hang is inconclusive (nothing covers the iterations after 7).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report, check_by_id, exit_code_for, main

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200x2-pp2"
BASELINE = DATA / "baseline"


def replay(report: dict) -> dict:
    return check_by_id(report, "replay_consistency")


def test_baseline_passes():
    report = build_report(BASELINE)
    assert report["verdict"] == "pass", report["checks"]
    assert all(c["gates"] is True for c in report["checks"])


def test_hang_with_baseline_passes_naming_iteration_7():
    report = build_report(DATA / "hang", BASELINE)
    assert report["verdict"] == "pass", [c for c in report["checks"] if c["status"] != "pass"]
    item = replay(report)
    assert item["status"] == "pass"
    assert item["values"]["classification"] == "transient"
    assert item["values"]["transient_iterations"] == [7]
    assert item["values"]["baseline_used"] is True
    assert any("iteration(s) 7 " in note for note in item["notes"]), item["notes"]
    assert report["metrics"]["detected_by"] == "section:step"


def test_hang_without_baseline_is_inconclusive_as_the_rule_says():
    report = build_report(DATA / "hang")
    item = replay(report)
    assert item["status"] == "inconclusive"
    assert item["values"]["classification"] == "uncovered_after"
    assert "no reference covers a later iteration" in item["detail"]
    assert report["verdict"] == "inconclusive" and exit_code_for(report) == 3
    others = [c for c in report["checks"] if c["id"] != "replay_consistency"]
    assert all(c["status"] in ("pass", "skip") for c in others), others


@pytest.mark.parametrize("baseline", [None, BASELINE])
def test_kill_passes_with_and_without_baseline(baseline):
    report = build_report(DATA / "kill", baseline)
    assert report["verdict"] == "pass", [c for c in report["checks"] if c["status"] != "pass"]
    item = replay(report)
    assert item["values"]["transient_iterations"] == [7]
    assert item["values"]["covered"] == ("6-30" if baseline else "6-10")


def test_hang_through_the_cli(tmp_path, capsys):
    out = tmp_path / "verify.json"
    assert main([str(DATA / "hang"), "--baseline", str(BASELINE), "--json", str(out)]) == 0
    assert ": PASS" in capsys.readouterr().out


def test_a_lasting_divergence_after_the_overlap_fails_against_the_baseline(tmp_path):
    """The hang's first attempt covers only 6-7: iterations 12-30 are judged by the baseline alone."""
    run = tmp_path / "hang"
    shutil.copytree(DATA / "hang", run)
    log = run / "logs" / "train_cycle1.log"
    text = log.read_text(encoding="utf-8")
    assert "lm loss: 5.833979E+00" in text
    log.write_text(text.replace("lm loss: 5.833979E+00", "lm loss: 5.933979E+00"), encoding="utf-8")
    report = build_report(run, BASELINE)
    assert replay(report)["status"] == "fail"
    assert [d["iteration"] for d in replay(report)["values"]["differences"]] == [7, 7, 12]
