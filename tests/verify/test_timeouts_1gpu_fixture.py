"""The timeouts qualified on one H200 (Megatron-LM core_v0.19.0), what the machine decided and what ftqual
decides now from the same evidence:

- tests/data/megatron-h200-recommended-1gpu (tools/gpu/recommended.sh): the baseline and a step hang under the
  recommended timeouts (setup 300, step 60, checkpointing 120, out of section 120 s), and the same hang under
  the walkthrough's (step 120 s), in one device call;
- tests/data/megatron-h200-sections-1gpu (tools/gpu/sections.sh): a hang in every FT section, each caught by
  that section's own timeout (setup 75, step 20, checkpointing 45, out of section 30 s), and a baseline under
  the same timeouts with none firing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.verdict import judged
from ftqual.verify import build_report

DATA = Path(__file__).resolve().parents[1] / "data"
# fixture -> scenario -> (detected_by, the sections whose timeout fired, in injection order)
EXPECTED = {
    "megatron-h200-recommended-1gpu": {
        "baseline": (None, []),
        "hang": ("section:step", ["step"]),
        "hang_walkthrough": ("section:step", ["step"]),
    },
    "megatron-h200-sections-1gpu": {
        "baseline": (None, []),
        "hang_in_save": ("section:checkpointing", ["checkpointing"]),
        "hang_out_of_section": ("out_of_section", ["out_of_section"]),
        "hang_in_setup": ("section:step", ["step", "setup"]),
    },
}
CASES = [(fixture, scenario) for fixture, scenarios in EXPECTED.items() for scenario in scenarios]


def _report(fixture: str, scenario: str) -> dict:
    (path,) = sorted((DATA / fixture / "results" / scenario).glob("*-[0-9]/verify.json"))
    return json.loads(path.read_text())


def _check(report: dict, check_id: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == check_id)


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_every_scenario_ran(fixture):
    ran = {p.name for p in (DATA / fixture / "results").iterdir() if p.is_dir()} - {"preflight", "stack"}
    assert ran == set(EXPECTED[fixture])


@pytest.mark.parametrize(("fixture", "scenario"), CASES)
def test_the_machine_and_today_agree(fixture, scenario):
    detected_by, fired = EXPECTED[fixture][scenario]
    report = _report(fixture, scenario)
    assert judged(report).outcome.verdict == "pass"
    baseline = None
    if scenario != "baseline":
        (baseline,) = (DATA / fixture / "runs").glob("baseline-*")
    now = build_report(DATA / fixture / "runs" / report["run_id"], baseline)
    assert now["verdict"] == "pass", now.get("cause")
    assert now["metrics"].get("detected_by") == detected_by
    detail = _check(now, "failure_detected_and_restarted")["detail"]
    said = {s: "out of section open" if s == "out_of_section" else f"section '{s}' open" for s in fired}
    assert [s for s in fired if said[s] in detail] == fired, detail


@pytest.mark.parametrize(("fixture", "scenario"), [c for c in CASES if c[1] != "baseline"])
def test_each_hang_is_detected_within_its_section_timeout(fixture, scenario):
    check = _check(_report(fixture, scenario), "detected_within_timeout")
    assert check["status"] == "pass", check["detail"]


def test_the_summaries_say_pass_and_prove_the_recommendation():
    rec = (DATA / "megatron-h200-recommended-1gpu" / "results" / "summary.md").read_text()
    assert rec.startswith("# ftqual: PASS")
    assert "Recommended timeouts **proven**" in rec
    sections = (DATA / "megatron-h200-sections-1gpu" / "results" / "summary.md").read_text()
    assert sections.startswith("# ftqual: PASS")
