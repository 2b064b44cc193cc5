"""Faults that come back in the report (ftqual.report.recurring): summary.json's `recurring` (who stopped each
job, its exit and what that means to Slurm, the cycles against the bound, the GPU-seconds burned, the
verdict), summary.md's section, junit.xml's properties, and the restart policy `ftqual recommend-timeouts`
writes only where the runs measured it. The verify reports are the verifier's own, of the recorded runs
tests/unit/verification/checks/test_recurring.py makes into faults that come back."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from ftqual.report import write_report
from ftqual.report.inputs import ScenarioInput
from ftqual.report.recommend import recommendation, snippet
from ftqual.report.recurring import agent_line, build_recurring, restart_policy
from ftqual.report.summary import ReportOptions
from ftqual.verification.verify import build_report
from tests.support.schemas import validate_summary
from tests.unit.verification.checks.test_recurring import (  # noqa: F401 (the fixture, used by name)
    CURABLE_FINISHED_RUN,
    CURABLE_STOPPED_RUN,
    _copy,
    _loop,
    recurring_registry,
)

PREFLIGHT = {
    "schema": "ftqual.preflight/v1",
    "verdict": "pass",
    "checks": [{"id": "x", "status": "pass", "detail": "", "fix": ""}],
}


def _inputs(tmp_path: Path, runs: dict[str, Path]) -> list[ScenarioInput]:
    out = []
    for name, run in runs.items():
        path = tmp_path / f"{name}.verify.json"
        path.write_text(json.dumps(build_report(run, None)))
        out.append(ScenarioInput(name, str(path), json.loads(path.read_text())))
    return out


def _write(tmp_path: Path, inputs: list[ScenarioInput]) -> tuple[dict, Path]:
    preflight = tmp_path / "preflight.json"
    preflight.write_text(json.dumps(PREFLIGHT))
    out = tmp_path / "report"
    return write_report(inputs, preflight, out, ReportOptions()), out


def test_each_stop_is_a_row_with_its_bill_and_verdict(tmp_path):
    inputs = _inputs(
        tmp_path,
        {
            "recurring_exception": _loop(tmp_path / "a"),
            "nan_loss_past_bound": _loop(tmp_path / "b", "nan_loss", max_no_progress_cycles=2),
            "flaky_exception": _copy(tmp_path / "c", CURABLE_FINISHED_RUN),
            "restarts_exhausted": _copy(tmp_path / "d", CURABLE_STOPPED_RUN),
        },
    )
    summary, out = _write(tmp_path, inputs)
    validate_summary(summary)
    by = {r["scenario"]: r for r in summary["recurring"]}
    loop = by["recurring_exception"]
    assert (loop["role"], loop["stopped_by"], loop["stop_exit_code"]) == ("loop", "progress_tracker", 93)
    assert (loop["cycles"], loop["bound_cycles"], loop["burned_cycles"]) == (4, 4, 3)
    assert loop["burned_gpu_s"] == 125.6 and loop["verdict"] == "pass"
    assert "Slurm: FAILED, requeue: no: a loop" in loop["scheduler"]
    past = by["nan_loss_past_bound"]
    assert past["bound_cycles"] == 3 and past["verdict"] == "fail" and past["fault"] == "nan_loss"
    curable = by["flaky_exception"]
    assert (curable["role"], curable["stopped_by"], curable["verdict"]) == ("curable", "none", "pass")
    stopped = by["restarts_exhausted"]
    assert (stopped["stopped_by"], stopped["stop_exit_code"], stopped["verdict"]) == (
        "max_restarts",
        1,
        "fail",
    )

    md = (out / "summary.md").read_text()
    section = md[md.index("## Faults that come back") :]
    assert (
        "| recurring_exception | recurring_exception (comes back every cycle) | NVRx's progress tracker | 93 "
        in section
    )
    assert "| 4 (4) | 3 | 125.6 | pass |" in section
    assert "| restarts_exhausted | kill (curable control) | max restarts | 1 |" in section

    suites = {s.get("name"): s for s in ET.parse(out / "junit.xml").getroot().findall("testsuite")}
    props = {p.get("name"): p.get("value") for p in suites["recurring_exception"].iter("property")}
    assert props["recurring.stopped_by"] == "progress_tracker" and props["recurring.stop_exit_code"] == "93"
    assert props["recurring.burned_gpu_s"] == "125.6" and props["recurring.bound_cycles"] == "4"
    cases = {c.get("name"): c for c in suites["nan_loss_past_bound"].findall("testcase")}
    assert cases["recurring_fault_outcome"].find("failure") is not None


def test_scenarios_without_a_stop_to_judge_add_no_section(tmp_path):
    data = Path(__file__).resolve().parents[2] / "data"
    inputs = _inputs(tmp_path, {"kill": data / "megatron-h200-1gpu" / "kill"})
    assert build_recurring(inputs) == []
    summary, out = _write(tmp_path, inputs)
    assert "recurring" not in summary
    assert "## Faults that come back" not in (out / "summary.md").read_text()


def test_the_restart_policy_says_what_the_runs_measured():
    tracker = {"role": "loop", "stopped_by": "progress_tracker", "verdict": "pass"}
    rows = [
        {"scenario": "recurring_exception", **tracker,
         "cycles": 4, "burned_gpu_s": 125.6, "max_no_progress_cycles": 3, "max_restarts": 5},
        {"scenario": "setup_crash", **tracker,
         "cycles": 4, "burned_gpu_s": 98.0, "max_no_progress_cycles": 3, "max_restarts": 5},
        {"scenario": "flaky_exception", "role": "curable", "stopped_by": "none", "verdict": "pass",
         "cycles": 3, "max_restarts": 5},
    ]  # fmt: skip
    lines = restart_policy(rows)
    text = "\n".join(lines)
    assert all(line.startswith("#") for line in lines)
    assert "max_no_progress_cycles: 3 (--ft-max-no-progress-cycles=3)" in text
    assert "recurring_exception 4 cycles, 125.6 GPU-s, setup_crash 4 cycles, 98 GPU-s" in text
    assert "max_restarts: 5 (--max-restarts=5)" in text and "flaky_exception needed 2 restart(s)" in text
    assert "keep its stop action `log`" in text
    # only what was measured: no curable control, no max_restarts line; nothing at all, nothing said
    assert not any("max_restarts" in line for line in restart_policy(rows[:2]))
    assert restart_policy([]) == [] and restart_policy(None) == []
    # a loop that failed its bound, or the workload's own stop, supports no no-progress setting
    failed = [dict(rows[0], verdict="fail"), dict(rows[1], stopped_by="workload")]
    assert restart_policy(failed) == []


def test_the_recommendation_s_snippet_carries_the_restart_policy(tmp_path):
    inputs = _inputs(
        tmp_path,
        {
            "recurring_exception": _loop(tmp_path / "a"),
            "flaky_exception": _copy(tmp_path / "c", CURABLE_FINISHED_RUN),
        },
    )
    summary, out = _write(tmp_path, inputs)
    assert summary["verdict"] == "pass", [sc["cause"] for sc in summary["scenarios"]]
    text = snippet(recommendation(out / "summary.json", summary))
    assert "# Restart policy measured" in text
    assert "max_no_progress_cycles: 3" in text and "recurring_exception 4 cycles, 125.6 GPU-s" in text
    assert "max_restarts: 3" in text and "flaky_exception needed 2 restart(s)" in text
    # the snippet stays a config: the policy is comments only
    assert [line.split(":")[0] for line in text.splitlines() if line and not line.startswith("#")] == [
        "timeouts",
        "timeouts_from",
        "timeouts_for",
    ]


def test_the_restart_agent_line_follows_its_scorecard():
    """`stop` only where the agent said STOP on every loop and never on a curable fault; `log` otherwise,
    naming what it got wrong (as on one H100: STOP on one loop of three, UNKNOWN or RESTART on the rest)."""
    loop = {"truth": "STOP", "right_stop": 1, "wrong_restart": 2, "unknown": 0, "wrong_stop": 0}
    nan = {"scenario": "nan_loss", "truth": "STOP", "right_stop": 0, "wrong_restart": 0, "unknown": 3}
    crash = {"scenario": "setup_crash", "truth": "STOP", "right_stop": 0, "wrong_restart": 3, "unknown": 0}
    curable = {"scenario": "flaky_exception", "truth": "RESTART", "right_restart": 2, "wrong_stop": 0}
    rows = [dict(loop, scenario="recurring_exception"), nan, crash, curable]
    line = agent_line(rows)
    assert "keep its stop action `log`" in line and "STOP on 1 of 3 faults that come back" in line
    assert "nan_loss: 3 x UNKNOWN" in line and "setup_crash: 3 x RESTART" in line
    assert "NVRX_RESTART_AGENT=stop" in agent_line([dict(loop, scenario="recurring_exception"), curable])
    # negative controls: a wrong STOP on a curable fault, or no curable fault scored, never gives `stop`
    killed = [dict(loop, scenario="recurring_exception"), dict(curable, wrong_stop=1)]
    assert "flaky_exception" in agent_line(killed) and "=stop" not in agent_line(killed)
    assert "not scored on curable faults" in agent_line([dict(loop, scenario="r")])
    assert "not scored on faults that come back" in agent_line(None)
