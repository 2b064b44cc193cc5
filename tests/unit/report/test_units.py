"""Budgets, replay comparison, timeline helpers and JUnit mapping as pure functions."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from ftqual.report.budgets import budgets_for, detection_budget
from ftqual.report.inputs import PreflightInput, ScenarioInput
from ftqual.report.junit import render_junit
from ftqual.report.markdown import render_markdown
from ftqual.report.summary import ReportOptions, build_summary
from ftqual.report.timeline import build_timeline, iteration_time_s, recovery_marks, save_blocking_s

TIMEOUTS = {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180}


@pytest.mark.parametrize(
    ("fault", "detected_by", "budget"),
    [
        ("kill", "exit", 1.0),
        ("kill", None, 1.0),
        ("hang", "section:step", 125.0),
        ("hang", "section:checkpointing", 605.0),
        ("hang", "out_of_section", 185.0),
        ("hang", None, 905.0),  # unknown section: the largest timeout
        ("segfault", "exit", 1.0),
        # an unwinding fault costs its linger, bounded by the open section's timeout (unknown: the largest)
        ("exception", "exit", 905.0),
        ("sigint", "exit", 905.0),
        ("exception", "section:step", 125.0),
        ("sigint", "out_of_section", 185.0),
        ("gil_lock", "section:step", 125.0),
    ],
)
def test_detection_budget(fault, detected_by, budget):
    value, formula = detection_budget(fault, detected_by, TIMEOUTS, {})
    assert value == pytest.approx(budget)
    assert formula


@pytest.mark.parametrize(
    ("metrics", "budget", "within", "said"),
    [
        # exited by itself 37.4 s after its traceback under a 60 s step timeout (one H200, Megatron-LM)
        (
            {"detected_by": "exit", "detection_s": 37.4, "linger_s": 37.4, "linger_ended_by": "exit"},
            65.0,
            True,
            "(linger 37.4 s; what held the rank: unknown (no stack dump of the rank))",
        ),
        # cut by a 10 s step timeout: the linger is a lower bound
        (
            {
                "detected_by": "section:step",
                "detection_s": 11.4,
                "linger_s": 11.4,
                "linger_cut_by_timeout": True,
                "linger_ended_by": "timeout",
                "held_by": "main thread in torch DataLoader _clean_up_worker",
            },
            15.0,
            True,
            "(linger at least 11.4 s, cut by the timeout; what held the rank: main thread in torch",
        ),
    ],
)
def test_an_unwinding_faults_linger_is_judged_by_the_open_sections_timeout(metrics, budget, within, said):
    expected = {"timeouts": {**TIMEOUTS, "step": 10 if "section:step" in metrics.values() else 60}}
    by = {r.measure: r for r in budgets_for("exception", {**metrics, "linger_section": "step"}, expected)}
    assert by["detection_s"].budget == pytest.approx(budget)
    assert by["detection_s"].within is within
    assert "bounded by the open section's timeout: 'step' section timeout" in by["detection_s"].formula
    assert said in by["detection_s"].formula


def test_budget_table_marks():
    rows = budgets_for(
        "hang",
        {"detected_by": "section:step", "detection_s": 130.0, "restart_s": 16.0, "lost_iterations": 3},
        {"timeouts": TIMEOUTS, "save_interval": 5, "workers_stop_timeout_s": 30},
    )
    by = {r.measure: r for r in rows}
    assert by["detection_s"].within is False
    assert by["restart_s"].budget == pytest.approx(30 + 0.25 + 1.3 + 1.0) and by["restart_s"].within is True
    assert "workers-stop timeout 30 s" in by["restart_s"].formula
    assert by["checkpoint_load_s"].within is None  # not measured: no mark
    assert by["lost_iterations"].budget == 10 and by["lost_iterations"].within is True
    assert by["failure_to_first_step_s"].budget == pytest.approx(125 + 32.55 + 900)


def _doc(cycles: dict[int, list[tuple[int, float, float]]], events=()) -> dict:
    """cycles: {cycle: [(iteration, seconds, loss)]} from a fixed start."""

    def t(s: float) -> str:
        return f"2026-01-01T00:{int(s // 60):02d}:{s % 60:09.6f}Z"

    iterations = [
        {"cycle": c, "iteration": i, "t": t(s), "loss": loss}
        for c, pts in cycles.items()
        for i, s, loss in pts
    ]
    evs = [{"kind": "cycle_start", "t": t(0), "cycle": 0}]
    evs += [{"kind": k, "t": t(s), "cycle": c, "iteration": it} for k, s, c, it in events]
    return {"schema": "ftqual.verify/v1", "timeline": {"iterations": iterations, "events": evs}}


def test_replay_is_presented_from_the_verify_report_not_recomputed():
    replay = {
        "id": "replay_consistency",
        "status": "pass",
        "gates": True,
        "detail": "25 covered iteration(s) after the restore at 5",
        "notes": ["difference confined to iteration(s) 7 after the restore at 5"],
        "values": {
            "classification": "transient",
            "covered": "6-30",
            "uncovered": "none",
            "sources": ["first attempt"],
            "tolerance": 0.001,
            "transient_iterations": [7],
            "differences": [
                {"iteration": 7, "loss": 6.3, "reference": 6.5, "source": "first attempt", "rel": 0.03}
            ],
        },
        "evidence": [],
    }
    doc = {
        "schema": "ftqual.verify/v1",
        "run_id": "r",
        "verdict": "pass",
        "checks": [replay],
        "fault": "kill",
    }
    summary = build_summary(
        [ScenarioInput("kill", "k.json", doc)], PreflightInput(None, None, "none"), ReportOptions(), "t"
    )
    [sc] = summary["scenarios"]
    assert sc["replay"]["classification"] == "transient" and sc["replay"]["transient_iterations"] == [7]
    text = "\n".join(render_markdown(summary).splitlines())
    assert "iteration 7: 6.3 vs 6.5 in the first attempt" in text and "transient at iteration(s) 7" in text


def test_timeline_pace_blocking_and_marks():
    # 0.1 s per step, the step after each save (5, 10) takes 0.5 s more
    pts, s = [], 30.0
    for i in range(1, 13):
        pts.append((i, s, 1.0))
        s += 0.1 + (0.5 if i % 5 == 0 else 0.0)
    doc = _doc(
        {0: pts[:8], 1: [(i, s + 40, 1.0) for i, s, _ in pts[5:]]},
        events=[
            ("injection", 31.0, 0, 5),
            ("detection", 31.1, 0, None),
            ("cycle_start", 35.0, 1, None),
            ("first_step", 70.0, 1, 6),
            ("first_step", 29.0, 0, 1),
        ],
    )
    tl = build_timeline(doc)
    assert iteration_time_s(tl) == pytest.approx(0.1)
    assert save_blocking_s(tl, 5) == pytest.approx(0.5)
    marks = recovery_marks(tl)
    assert [marks[k].s for k in ("injection", "detection", "restart", "first_step")] == pytest.approx(
        [31.0, 31.1, 35.0, 70.0]
    )  # the cycle-0 first step before the fault is not the recovery's


def test_junit_maps_statuses():
    checks = [
        {"id": "a", "status": "pass", "detail": "ok", "evidence": []},
        {
            "id": "b",
            "status": "fail",
            "detail": "bad",
            "evidence": [{"path": "x.log", "line": 3, "text": "boom"}],
        },
        {"id": "c", "status": "inconclusive", "detail": "no log", "evidence": []},
        {"id": "d", "status": "skip", "detail": "n/a", "evidence": []},
    ]
    doc = {
        "schema": "ftqual.verify/v1",
        "run_id": "r",
        "verdict": "fail",
        "checks": checks,
        "expected": {"fault": "none"},
    }
    summary = build_summary(
        [
            ScenarioInput("s", "s.json", doc),
            ScenarioInput("gone", "g.json", None, "verify report missing (g.json)"),
        ],
        PreflightInput(None, None, "none"),
        ReportOptions(),
        "2026-01-01T00:00:00Z",
    )
    root = ET.fromstring(render_junit(summary))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    s = suites["s"]
    assert (s.get("tests"), s.get("failures"), s.get("errors"), s.get("skipped")) == (
        "5",
        "1",
        "1",
        "1",
    )  # the failed check; the verdict case does not repeat it
    cases = {c.get("name"): c for c in s.findall("testcase")}
    assert cases["b"].find("failure").get("message") == "bad"
    assert cases["b"].find("failure").text == "x.log:3: boom"
    assert cases["c"].find("error").get("type") == "inconclusive"
    assert cases["d"].find("skipped") is not None
    assert "uninterrupted_completion" not in cases  # the verifier, not the report, requires checks
    assert all(c.get("classname") == "ftqual.s" for c in cases.values())
    gone = suites["gone"]
    assert (gone.get("tests"), gone.get("errors")) == ("1", "1")
    assert root.get("failures") == "1" and root.get("errors") == "2"
    md = render_markdown(summary).splitlines()
    assert md[0] == "# ftqual: FAIL — s: b failed"


def test_recovery_spans_split_the_restart_as_far_as_measured():
    from ftqual.report.plots import recovery_spans
    from ftqual.report.timeline import Mark

    times = (("injection", 10.0), ("detection", 30.0), ("restart", 33.0), ("first_step", 55.0))
    marks = {k: Mark(k, s, None, None, "") for k, s in times}
    spans = recovery_spans(marks, {"teardown_s": 1.9, "checkpoint_load_s": 0.16})
    assert [(round(a, 2), round(b, 2), label) for a, b, label, _ in spans] == [
        (10.0, 30.0, "detection"),
        (30.0, 31.9, "teardown: workers exit"),
        (31.9, 33.0, "GPU-memory check + rendezvous"),
        (33.0, 55.0, "worker start-up, of which checkpoint load 0.16 s,"),
    ]
    assert [label for _, _, label, _ in recovery_spans(marks, {})][1] == "teardown + rendezvous"


def test_resolved_section_lists_version_adaptations_with_their_reason():
    from ftqual.report.markdown import resolved_section

    summary = {
        "resolved": {
            "workload": "megatron",
            "transformer_impl": "local",
            "adaptations": [
                {
                    "component": "megatron",
                    "flag": "--ft-num-warmup-iters",
                    "action": "omitted",
                    "reason": "Megatron-Core 0.14.0 has no --ft-num-warmup-iters; fixed warm-up of 1",
                }
            ],
        }
    }
    lines = resolved_section(summary)
    assert not any("adaptations" in ln for ln in lines)  # not dumped into the settings table
    (line,) = [ln for ln in lines if ln.startswith("- adapted")]
    assert "`--ft-num-warmup-iters` (omitted)" in line and "0.14.0" in line


def _summary_of(docs: dict[str, dict | None]) -> dict:
    inputs = [
        ScenarioInput(name, f"{name}.json", doc, None if doc else f"verify report missing ({name}.json)")
        for name, doc in docs.items()
    ]
    return build_summary(inputs, PreflightInput(None, None, "none"), ReportOptions(), "2026-01-01T00:00:00Z")


@pytest.mark.parametrize("scenarios", ["baseline only", "none"])
def test_junit_is_never_green_unless_the_verdict_is_pass(scenarios):
    passed = {
        "schema": "ftqual.verify/v1",
        "run_id": "b",
        "verdict": "pass",
        "fault": "none",
        "checks": [{"id": "uninterrupted_completion", "status": "pass", "detail": "ok", "evidence": []}],
    }
    summary = _summary_of({"baseline": passed} if scenarios == "baseline only" else {})
    assert summary["verdict"] == "inconclusive"
    root = ET.fromstring(render_junit(summary))
    assert int(root.get("failures")) + int(root.get("errors")) == 1
    [case] = [c for c in root.iter("testcase") if c.find("error") is not None]
    assert case.get("classname") == "ftqual.qualification"
    assert case.find("error").get("message") == summary["headline"]
    assert "INCONCLUSIVE" in summary["headline"]
