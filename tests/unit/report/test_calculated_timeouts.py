"""The report's calculated timeouts (`timeouts.calculated`, summary.md's "Calculated timeouts"), from a real
verify report: data/calc.verify.json is `ftqual verify` of a kill run under `calc_ft_timeouts` with the real
ft_launcher (NVRx 0.7.0) and the smoke workload, as tests/integration/e2e/test_calculated_timeouts_real.py
launches it
(40 iterations, a save every 10, 0.05 s steps; initial timeouts setup 120, step 10, checkpointing 60, out of
section 30), its run directory's absolute paths made relative. Edited copies give the failing variants."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ftqual.report import calculated as calc
from ftqual.report.inputs import PreflightInput, load_verify
from ftqual.report.markdown import render_markdown
from ftqual.report.summary import ReportOptions, build_summary
from tests.support.schemas import validate_summary

DATA = Path(__file__).parent / "data"


@pytest.fixture
def calc_doc() -> dict:
    return json.loads((DATA / "calc.verify.json").read_text())


def summarize(tmp_path: Path, docs: dict[str, dict | str]) -> tuple[dict, str]:
    inputs = []
    for name, doc in docs.items():
        path = tmp_path / name / "verify.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        inputs.append(load_verify(name, path))
    created = "2026-01-01T00:00:00Z"
    summary = build_summary(inputs, PreflightInput(None, None, "none"), ReportOptions(), created)
    validate_summary(summary)
    return summary, render_markdown(summary)


def part(summary: dict) -> list[dict]:
    return summary["timeouts"]["calculated"]["scenarios"]


def row(scenario: dict, section: str) -> dict:
    return next(r for r in scenario["sections"] if r["section"] == section)


def check_values(doc: dict) -> dict:
    return next(c for c in doc["checks"] if c["id"] == "calculated_timeouts")["values"]


def test_the_real_run_each_cycle_and_calculation(tmp_path, calc_doc):
    summary, md = summarize(tmp_path, {"kill-calc": calc_doc})
    assert summary["scenarios"][0]["verdict"] == "pass"
    (sc,) = part(summary)
    assert sc["scenario"] == "kill-calc" and sc["status"] == "pass" and sc["reason"] is None
    assert [c["cycle"] for c in sc["cycles"]] == [0, 1]
    assert sc["cycles"][0]["calculated"] == []  # killed before NVRx had anything to calculate from
    first, last = sc["cycles"][1]["start"], sc["cycles"][1]["calculated"][-1]
    assert first == {"setup": 120.0, "step": 10.0, "checkpointing": 60.0, "out_of_section": 30.0}
    assert last["setup"] < 120 and last["step"] < 10 and last["out_of_section"] < 30


def test_the_real_run_per_section(tmp_path, calc_doc):
    summary, md = summarize(tmp_path, {"kill-calc": calc_doc})
    (sc,) = part(summary)
    step, ckpt, oos = row(sc, "step"), row(sc, "checkpointing"), row(sc, "out_of_section")
    final = check_values(calc_doc)["final"]
    assert step["final_s"] == final["step"] and step["set_by"] == "cycle 1's calculation 2"
    assert step["hang_caught_within_s"] == pytest.approx(final["step"] + 5.0)
    assert step["catches_hang"] is True and step["fires_on_healthy"] is False and step["verdict"] == "ok"
    assert step["healthy_max_s"] == calc_doc["sections"]["overall"]["step"]["s"]
    # NVRx never calculated checkpointing (asynchronous saves): the initial value stays, credited to it
    assert ckpt["final_s"] == 60.0 and ckpt["set_by"] == "cycle 1's start"
    # out of section: the logs bound the healthy stretch only from above, and it is above the value
    assert oos["fires_on_healthy"] is None and oos["verdict"] == "cannot tell"
    assert "### Calculated timeouts" in md
    assert "| 1 | start (initial) | 120 s | 10 s | 60 s | 30 s |" in md
    assert f"| step | {final['step']:g} s | cycle 1's calculation 2 | {final['step'] + 5:g} s |" in md


def test_a_final_step_below_the_healthy_step_would_fire(tmp_path, calc_doc):
    healthy = calc_doc["sections"]["overall"]["step"]["s"]
    for update in check_values(calc_doc)["cycles"][1]["updates"][1:]:
        update["step"] = round(healthy / 2, 4)
    summary, md = summarize(tmp_path, {"kill-calc": calc_doc})
    step = row(part(summary)[0], "step")
    assert step["final_s"] == round(healthy / 2, 4) and step["fires_on_healthy"] is True
    assert step["verdict"] == "would fire"
    line = next(x for x in md.splitlines() if x.startswith("| step | ") and "calculation" in x)
    assert "| **yes** | **would fire** |" in line


def test_a_step_equal_to_the_healthy_step_would_fire():
    assert calc.fires_on_healthy("step", 0.5, 0.5, "upper") is True
    assert calc.fires_on_healthy("out_of_section", 0.5, 0.5, "upper") is None
    assert calc.fires_on_healthy("out_of_section", 0.5, 0.5, "lower") is True
    assert calc.fires_on_healthy("step", 0.5, None, None) is None


def test_a_hang_detected_after_its_bound_is_said(calc_doc):
    values = {"section": "step", "detection_s": 30.0}
    calc_doc["checks"].append({"id": "detected_within_timeout", "status": "fail", "values": values})
    (sc,) = calc.build_calculated([("hang-calc", calc_doc)])["scenarios"]
    step = row(sc, "step")
    assert step["hang_detected_s"] == 30.0 and step["catches_hang"] is False
    assert step["verdict"] == "missed its bound"


def test_fixed_timeouts_have_no_calculated_part(tmp_path, calc_doc):
    fixed = copy.deepcopy(calc_doc)
    del fixed["expected"]["calc_ft_timeouts"]
    check = next(c for c in fixed["checks"] if c["id"] == "calculated_timeouts")
    check.update(status="skip", values={})
    summary, md = summarize(tmp_path, {"kill": fixed})
    assert part(summary) == [] and "### Calculated timeouts" not in md


def _paths(node: object, prefix: tuple = ()) -> list[tuple]:
    """Every key and index under `node`, depth first."""
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return []
    out = []
    for key, value in items:
        out.append((*prefix, key))
        out += _paths(value, (*prefix, key))
    return out


WRONG = {"deleted": ..., "null": None, "string": "x", "boolean": True, "list": [1, "a"], "object": {"a": 1}}


def _mutated(doc: dict, path: tuple, value: object) -> dict:
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


@pytest.mark.parametrize("kind", sorted(WRONG))
def test_a_malformed_calculated_part_never_crashes_nor_passes(tmp_path, calc_doc, kind):
    """Every field the calculated part reads, deleted or of a wrong type: the summary still validates and
    renders; with the check failed, none of them makes the scenario PASS."""
    index = next(i for i, c in enumerate(calc_doc["checks"]) if c["id"] == "calculated_timeouts")
    failed = copy.deepcopy(calc_doc)
    failed["checks"][index]["status"] = "fail"
    values = [("checks", index, "values", *p) for p in _paths(calc_doc["checks"][index]["values"])]
    overall = [("sections", "overall", *p) for p in _paths(calc_doc["sections"]["overall"])][:40]
    for path in [("checks", index, "values"), *values, ("expected", "calc_ft_timeouts"), *overall]:
        summary, _ = summarize(tmp_path, {"kill-calc": _mutated(failed, path, WRONG[kind])})
        assert summary["scenarios"][0]["verdict"] != "pass", (path, kind)


def test_malformed_cycles_are_said(calc_doc):
    check_values(calc_doc)["cycles"][1]["updates"] = "x"
    (sc,) = calc.build_calculated([("kill-calc", calc_doc)])["scenarios"]
    assert sc["reason"] == calc.MALFORMED and [c["cycle"] for c in sc["cycles"]] == [0]
