"""A campaign in the workflow's report: summary.json's `campaigns`, summary.md's campaign part, junit.xml's
case per fault and the campaign plot; a malformed campaign section is inconclusive in one line.

data/campaign.verify.json is the real verifier's report of a CPU campaign (config/campaign.yaml: seed 0,
10 faults) with `sections` left out and each check's evidence cut to two lines.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET

import pytest

from ftqual.report import campaign as campaign_report
from ftqual.report import write_report
from ftqual.report.inputs import PreflightInput, load_verify
from ftqual.report.junit import render_junit
from ftqual.report.markdown import render_markdown
from ftqual.report.summary import ReportOptions, build_summary
from ftqual.verification.checks import campaign as campaign_checks
from tests.support.schemas import validate_summary
from tests.unit.report.conftest import DATA

KINDS = "sigint gil_lock sigterm hang hang sigterm abort exception sigint sigterm".split()


@pytest.fixture
def doc() -> dict:
    return json.loads((DATA / "campaign.verify.json").read_text())


def summary_of(tmp_path, doc) -> dict:
    path = tmp_path / "campaign" / "verify.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    inputs = [load_verify("campaign", path)]
    summary = build_summary(
        inputs, PreflightInput(None, None, "none"), ReportOptions(), "2026-12-02T00:00:00Z"
    )
    validate_summary(summary)
    return summary


def test_the_report_names_the_checks_the_verifier_runs_per_fault():
    ids = [check.__name__ for check in campaign_checks.PER_FAULT] + ["replay_consistency"]
    assert list(campaign_report.PER_FAULT_IDS) == ids
    assert campaign_report.PLAN_FOLLOWED == campaign_checks.PLAN_FOLLOWED


def test_summary_json_carries_the_plan_each_fault_the_cycles_goodput_and_accumulation(tmp_path, doc):
    summary = summary_of(tmp_path, doc)
    assert summary["verdict"] == "pass"
    entry = summary["campaigns"]["campaign"]
    assert (entry["seed"], entry["planned"], entry["injected"], entry["mtti_iterations"]) == (0, 10, 10, 4)
    assert [e["fault"] for e in entry["plan"]] == KINDS
    assert [f["fault"] for f in entry["faults"]] == KINDS
    assert all(f["verdict"] == "pass" and len(f["checks"]) == 5 for f in entry["faults"])
    assert entry["faults"][1]["arm_iteration"] == 22 and len(entry["cycles"]) == 10
    times = entry["timeline"]
    assert times[0]["injected_s"] == 0
    for t in times:  # one time axis: each fault's events in order, each fault after the one before
        assert t["injected_s"] < t["detected_s"] < t["restarted_s"] < t["resumed_s"]
    assert all(a["resumed_s"] < b["injected_s"] for a, b in zip(times, times[1:], strict=False))
    good = entry["goodput"]
    assert 0 < good["measured"] < good["projected"] < 1
    assert good["gap"] == round(good["projected"] - good["measured"], 4)
    assert set(good["gap_parts_s"]) >= {"detection_s", "restart_and_startup_s", "lost_work_s"}
    assert entry["accumulation"]["status"] == "pass" and "restart_s" in entry["accumulation"]["trends"]
    assert entry["plan_followed"]["status"] == "pass"
    assert "campaign_plan_followed" in summary["legend"] and summary["legend"]["cycles_do_not_accumulate"]


def test_a_summary_without_a_campaign_has_an_empty_campaigns_and_no_campaign_part(tmp_path, docs):
    summary = summary_of(tmp_path, docs["kill"])
    assert summary["campaigns"] == {}
    assert "## Campaign" not in render_markdown(summary)


def test_summary_md_shows_one_timeline_the_per_cycle_table_and_goodput(tmp_path, doc):
    md = render_markdown(summary_of(tmp_path, doc))
    part = md[md.index("## Campaign") :]
    assert "seed 0, 10 of 10 faults injected, MTTI 4 iterations" in part
    assert "| 1 | sigint | 0 | 8 | 8 | 0.00 | 3.53 (exit) |" in part
    assert part.count("| ✅ |") == 10  # every fault's verdict in the timeline
    assert "| 4 | hang |" in part and "(section:step)" in part
    assert "Per cycle" in part and "| 10 | sigterm |" in part
    assert "Goodput measured **11.1%**" in part
    # the report's one goodput model checked on the campaign's own means, not a second projection
    assert "Check of the goodput model" in part and "modelled 9.6% against measured 11.1%, within" in part
    assert "Young/Daly projected" not in part
    assert "`cycles_do_not_accumulate`): ✅" in part and "`campaign_plan_followed`): ✅" in part


def failed_fault(doc: dict, index: int) -> dict:
    """The report as if fault `index` had not resumed from a checkpoint."""
    out = copy.deepcopy(doc)
    check = next(c for c in out["checks"] if c["id"] == "resumed_from_checkpoint")
    check["status"] = "fail"
    entry = next(f for f in check["values"]["faults"] if f["fault_index"] == index)
    entry.update(status="fail", detail="the replacement started from iteration 0")
    out["verdict"] = "fail"
    return out


def test_junit_has_a_case_per_fault_and_names_the_one_that_failed(tmp_path, doc):
    root = ET.fromstring(render_junit(summary_of(tmp_path, doc)))
    cases = root.findall(".//testcase[@classname='ftqual.campaign.campaign']")
    assert [c.get("name") for c in cases][:2] == ["fault_1_sigint_rank0", "fault_2_gil_lock_rank1"]
    assert len(cases) == 10 and root.get("failures") == "0" and root.get("errors") == "0"
    names = {c.get("name") for c in root.iter("testcase")}
    assert {"campaign_plan_followed", "cycles_do_not_accumulate"} <= names
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["campaign.goodput_measured"] == "0.1111"

    summary = summary_of(tmp_path, failed_fault(doc, 4))
    assert summary["campaigns"]["campaign"]["faults"][3]["verdict"] == "fail"
    root = ET.fromstring(render_junit(summary))
    failed = [c.get("name") for c in root.iter("testcase") if c.find("failure") is not None]
    assert "fault_4_hang_rank1" in failed and "resumed_from_checkpoint" in failed
    message = next(c for c in root.iter("testcase") if c.get("name") == "fault_4_hang_rank1").find("failure")
    assert "resumed_from_checkpoint: the replacement started from iteration 0" in message.get("message")
    md = render_markdown(summary)
    assert "| 4 | hang | 1 |" in md and "❌ FAIL resumed_from_checkpoint" in md


def test_a_planned_fault_never_injected_is_a_failed_fault(tmp_path, doc):
    doc["campaign"]["cycles"] = doc["campaign"]["cycles"][:9]
    entry = summary_of(tmp_path, doc)["campaigns"]["campaign"]
    last = entry["faults"][9]
    assert (last["verdict"], last["detail"]) == ("fail", "planned, never injected")


def test_ftqual_report_draws_the_campaign_on_one_time_axis(tmp_path, doc, png_size):
    path = tmp_path / "in" / "verify.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    summary = write_report([load_verify("campaign", path)], None, tmp_path / "out", ReportOptions())
    assert summary["plots"]["campaign_campaign"] == "plots/campaign_campaign.png"
    assert png_size(tmp_path / "out" / "plots" / "campaign_campaign.png") == (1200, 600)
    assert (
        "![campaign timeline of campaign](plots/campaign_campaign.png)"
        in (tmp_path / "out" / "summary.md").read_text()
    )


MALFORMED = [
    ("campaign",),
    ("campaign", "cycles"),
    ("campaign", "cycles", 0),
    ("campaign", "cycles", 0, "fault_index"),
    ("campaign", "cycles", 2, "detection_s"),
    ("campaign", "cycles", 2, "injected_at"),
    ("campaign", "cycles", 2, "fault"),
    ("campaign", "plan", 1),
    ("campaign", "plan", 1, "arm_iteration"),
    ("campaign", "seed"),
    ("campaign", "goodput"),
    ("campaign", "goodput", "goodput_measured"),
    ("campaign", "goodput", "gap_parts_s"),
    ("campaign", "goodput", "projected"),
]
WRONG = {"string": "x", "list": [1, "a"], "boolean": True, "huge": 1e999, "nan": float("nan")}


def set_at(doc: dict, path: tuple, value) -> dict:
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


@pytest.mark.parametrize("path", MALFORMED, ids=[".".join(map(str, p)) for p in MALFORMED])
def test_a_malformed_campaign_section_is_inconclusive_in_one_line(tmp_path, doc, path):
    for kind, value in WRONG.items():
        if path[-1] in ("fault", "injected_at") and kind == "string":
            value = 7 if path[-1] == "fault" else "yesterday"
        text = json.dumps(set_at(doc, path, value)).replace("Infinity", "1e999")
        summary = summary_of(tmp_path, text)
        scenario = summary["scenarios"][0]
        assert scenario["verdict"] == "inconclusive", (path, kind)
        assert "campaign" in scenario["reason"] and "\n" not in scenario["reason"], scenario["reason"]
        assert summary["campaigns"] == {}
        ET.fromstring(render_junit(summary))
        render_markdown(summary)


def test_a_campaign_report_that_says_pass_without_its_section_is_inconclusive(tmp_path, doc):
    del doc["campaign"]
    scenario = summary_of(tmp_path, doc)["scenarios"][0]
    assert scenario["verdict"] == "inconclusive" and "campaign is missing" in scenario["reason"]


@pytest.mark.parametrize("cid", ["campaign_plan_followed", "cycles_do_not_accumulate"])
def test_a_campaign_report_without_a_campaign_check_never_passes(tmp_path, doc, cid):
    doc["checks"] = [c for c in doc["checks"] if c["id"] != cid]
    summary = summary_of(tmp_path, doc)
    assert summary["verdict"] == "inconclusive"
    assert summary["campaigns"]["campaign"]["faults"][0]["verdict"] == "pass"


@pytest.mark.parametrize("value", ["x", [1], [{"fault_index": "1", "status": "pass"}], [{"fault_index": 1}]])
def test_a_malformed_per_fault_entry_is_inconclusive_in_one_line(tmp_path, doc, value):
    check = next(c for c in doc["checks"] if c["id"] == "progress_after_resume")
    check["values"]["faults"] = value
    scenario = summary_of(tmp_path, doc)["scenarios"][0]
    assert scenario["verdict"] == "inconclusive" and "values.faults" in scenario["reason"]


def test_the_fault_table_has_a_row_per_campaign_fault_with_its_own_path_and_verdict(tmp_path, doc):
    summary = summary_of(tmp_path, doc)
    rows = [r for r in summary["faults"] if r["scenario"].startswith("campaign")]
    assert [r["scenario"] for r in rows] == [f"campaign #{k}" for k in range(1, 11)]
    assert [r["fault"] for r in rows] == KINDS and all(r["verdict"] == "pass" for r in rows)
    assert [r["detected_by"] for r in rows][:2] == ["exit", "section:step"]
    assert all(r["path_as_expected"] for r in rows) and rows[0]["detection_s"] == 3.53
    assert "| campaign #2 | `gil_lock` |" in render_markdown(summary)


def test_a_fault_its_checks_do_not_judge_leaves_the_campaign_inconclusive(tmp_path, doc):
    """Every combined check passes, but no per-fault entry of progress_after_resume names fault 6."""
    check = next(c for c in doc["checks"] if c["id"] == "progress_after_resume")
    check["values"]["faults"] = [f for f in check["values"]["faults"] if f["fault_index"] != 6]
    summary = summary_of(tmp_path, doc)
    scenario = summary["scenarios"][0]
    assert summary["verdict"] == scenario["verdict"] == "inconclusive"
    assert scenario["reason"].startswith("campaign fault 6 (sigterm of rank 1) is inconclusive")
    root = ET.fromstring(render_junit(summary))
    errors = [c.get("name") for c in root.iter("testcase") if c.find("error") is not None]
    assert errors == ["fault_6_sigterm_rank1"]
