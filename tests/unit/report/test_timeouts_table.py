"""The report's timeouts table and recommended timeouts (ftqual.report.timeouts), from verify reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftqual.report import timeouts as tm
from ftqual.report.inputs import PreflightInput, ScenarioInput
from ftqual.report.markdown import render_markdown
from ftqual.report.summary import ReportOptions, build_summary
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[2] / "data" / "megatron-h200-1gpu"


def _doc(timeouts: dict, **observed: float | None) -> dict:
    overall = {
        name: {"s": value, "evidence": [{"path": "logs/x.log", "line": 3}]}
        for name, value in observed.items()
    }
    return {"expected": {"timeouts": timeouts}, "sections": {"overall": overall}}


TIMEOUTS = {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180}


def _row(table: dict, section: str) -> dict:
    return next(r for r in table["rows"] if r["section"] == section)


def test_verdicts_headroom_detection():
    doc = _doc(TIMEOUTS, setup=400.0, step=50.0, checkpointing=0.5, out_of_section=20.0)
    table = tm.build_timeouts([("kill", doc)])
    setup = _row(table, "setup")
    assert setup["headroom"] == 2.25 and setup["verdict"] == "too tight"
    assert setup["detection_s"] == 900 + tm.RANK_MONITOR_INTERVAL_S
    assert _row(table, "step")["verdict"] == "too tight"  # 120 / 50 = 2.4
    assert _row(table, "checkpointing")["verdict"] == "loose"  # 605 s to catch a 0.5 s section
    assert _row(table, "out_of_section")["verdict"] == "ok"  # 9x headroom, 185 / 20 = 9.25
    assert _row(table, "out_of_section")["observed_in"] == "kill"


def test_loose_only_where_the_recommendation_is_tighter():
    """Setup 120 s over a 0.5 s section is 245x what it needs, but the floor recommends 300 s: a
    table that called it `loose` and then recommended a larger value contradicted itself. `loose` is only
    where the recommendation is below the timeout in force; elsewhere the verdict is `ok`."""
    doc = _doc({"setup": 120, "step": 30, "checkpointing": 600, "out_of_section": 120}, setup=0.5, step=0.2,
               checkpointing=0.5, out_of_section=0.4)  # fmt: skip
    table = tm.build_timeouts([("baseline", doc)])
    by = {r["section"]: (r["verdict"], r["timeout_s"], r["recommended_s"]) for r in table["rows"]}
    assert by == {
        "setup": ("ok", 120, 300),  # the floor raises it: never `loose`
        "step": ("ok", 30, 60),
        "checkpointing": ("loose", 600, 120),  # the recommendation cuts it
        "out_of_section": ("ok", 120, 120),  # the same value: nothing to tighten
    }
    for row in table["rows"]:
        assert row["verdict"] != "loose" or row["recommended_s"] < row["timeout_s"], row
    assert tm.verdict(120, 0.5, 125, 300) == "ok"
    assert tm.verdict(600, 0.5, 605, 120) == "loose"


def test_largest_over_scenarios_and_unmeasured():
    a = _doc(TIMEOUTS, setup=20.0, step=1.0, checkpointing=12.0, out_of_section=None)
    b = _doc(TIMEOUTS, setup=31.0, step=3.0, checkpointing=9.0, out_of_section=None)
    table = tm.build_timeouts([("kill", a), ("baseline", b)])
    assert _row(table, "setup")["observed_s"] == 31.0 and _row(table, "setup")["observed_in"] == "baseline"
    assert _row(table, "checkpointing")["observed_in"] == "kill"
    oos = _row(table, "out_of_section")
    assert oos["verdict"] == "not measured" and oos["recommended_s"] == 180  # keeps the configured one


def test_recommendation_rule():
    assert tm.recommend(30.6, 900, "setup") == 300  # 5 x 30.6 = 153 < floor 300
    assert tm.recommend(100.0, 900, "setup") == 500
    assert tm.recommend(12.55, 600, "checkpointing") == 120  # floor
    assert tm.recommend(33.0, 600, "checkpointing") == 170  # 165 rounded up to 10 s
    assert tm.recommend(None, 120, "step") == 120
    assert tm.SAFETY_FACTOR == 5.0  # NVRx 0.7.0 FaultToleranceConfig.safety_factor
    rec = {"setup": 300.0, "step": 60.0, "checkpointing": 170.0, "out_of_section": 120.0}
    assert tm.flags(rec) == (
        "--ft-rank-section-timeouts=setup:300,step:60,checkpointing:170 --ft-rank-out-of-section-timeout=120"
    )
    assert (
        tm.config_snippet(rec) == "timeouts: {setup: 300, step: 60, checkpointing: 170, out_of_section: 120}"
    )


def test_garbage_reports_do_not_raise():
    table = tm.build_timeouts(
        [("x", {"sections": "no"}), ("y", {"expected": [], "sections": {"overall": 3}})]
    )
    assert all(r["verdict"] == "not measured" for r in table["rows"])


def test_recorded_runs_in_the_summary():
    inputs = [
        ScenarioInput(name, f"{name}.json", build_report(DATA / name), None)
        for name in ("baseline", "kill", "hang")
    ]
    summary = build_summary(
        inputs, PreflightInput(None, None, "absent"), ReportOptions(), "2026-12-01T00:00:00Z"
    )
    table = summary["timeouts"]
    setup = _row(table, "setup")
    assert setup["observed_s"] == pytest.approx(6.584, abs=1e-3) and setup["observed_in"] == "baseline"
    assert _row(table, "checkpointing")["observed_s"] == pytest.approx(12.548, abs=1e-3)
    assert _row(table, "checkpointing")["observed_in"] == "kill"
    assert [r["verdict"] for r in table["rows"]] == ["loose"] * 4  # a tiny model under 900/120/600/180 s
    assert table["flags"].startswith("--ft-rank-section-timeouts=setup:300,step:60,checkpointing:120")
    text = render_markdown(summary)
    assert "## Timeouts" in text and table["flags"] in text and table["config"] in text
