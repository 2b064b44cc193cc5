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
import shutil
from pathlib import Path

import pytest

from ftqual.verification.schema import judged
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data"
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


CALCULATED = next((DATA / "megatron-h200-calculated-1gpu" / "runs").glob("hang-*"))


def _check(report: dict, cid: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == cid)


def test_calculated_timeouts_on_one_h200_pass_from_the_setup_section_itself():
    """NVRx calculated setup 14.71 s and cycle 2 started under it; its setup section, from Megatron's
    `after in-job setup` milestone to the first step, took 2.41 s, and NVRx's monitor did not fire."""
    report = build_report(str(CALCULATED))
    assert report["verdict"] == "pass"
    setup = report["sections"]["cycles"][2]["setup"]
    assert setup["s"] == pytest.approx(2.41, abs=0.01) and setup["bound"] == "lower"
    calc = _check(report, "calculated_timeouts")
    assert calc["status"] == "pass"
    started = {c["cycle"]: c["start"] for c in calc["values"]["cycles"]}
    assert started[2]["setup"] == pytest.approx(14.71, abs=0.01)  # loaded from ft_state.json
    assert calc["values"]["final"]["setup"] > setup["s"]
    assert _check(report, "timeouts_not_exceeded")["status"] == "pass"


def test_calculated_timeouts_without_the_milestone_cannot_tell(tmp_path):
    """The figure from the worker start (18.11 s in cycle 2, imports included) is over the calculated 14.71 s:
    neither check may call that a timeout that would have fired."""
    run = tmp_path / CALCULATED.name
    shutil.copytree(CALCULATED, run, symlinks=True)
    for log in (run / "logs").glob("train_cycle*.log"):
        lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
        log.write_text("".join(x for x in lines if "after in-job setup" not in x), encoding="utf-8")
    report = build_report(str(run))
    calc = _check(report, "calculated_timeouts")
    assert calc["status"] == "pass"
    assert any("cannot be told from the logs" in note and note.startswith("setup") for note in calc["notes"])
    check = _check(report, "timeouts_not_exceeded")
    assert check["status"] == "inconclusive"
    assert "cycle 2: setup took 18.11 s >= its timeout 14.71 s" in check["detail"]
    assert report["verdict"] != "fail"
