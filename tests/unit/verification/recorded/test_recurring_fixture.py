"""Faults that come back on Megatron-LM on one H100 (tests/data/megatron-h100-recurring-1gpu,
tools/gpu/recurring.sh): what the machine decided and what ftqual decides now from the same evidence, the
stops and their bills, and the restart agent's verdicts as NVRx 0.7.0 printed them (RESTART, STOP and the
UNKNOWN it answers on Megatron's NaN exit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.report.restart_agent import score_scenario
from ftqual.verification.schema import judged
from ftqual.verification.verify import build_report

FIXTURE = Path(__file__).resolve().parents[4] / "tests" / "data" / "megatron-h100-recurring-1gpu"
RUNS = FIXTURE / "runs"
BASELINE = RUNS / "baseline-20261206T193023Z-724-a1"
# scenario -> (run, cycles, the agent's decision per failed cycle; None: the job ended before it answered)
LOOPS = {
    "recurring_exception": (
        "recurring_exception-20261206T193859Z-4791-a1",
        ["RESTART", "RESTART", "STOP", None],
    ),
    "nan_loss": ("nan_loss-20261206T194633Z-7201-a1", ["UNKNOWN", "UNKNOWN", "UNKNOWN", None]),
    "setup_crash": ("setup_crash-20261206T193124Z-1084-a1", ["RESTART", "RESTART", "RESTART", None]),
}
CONTROL = "flaky_exception-20261206T193412Z-1849-a1"


def verify(run: str) -> dict:
    return build_report(RUNS / run, BASELINE)


def check(report: dict, cid: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == cid)


@pytest.mark.parametrize("run", sorted([CONTROL, *(r for r, _ in LOOPS.values())]))
def test_every_run_passes_now_as_it_did_on_the_machine(run):
    report = verify(run)
    assert judged(report).raw == "pass", [c for c in report["checks"] if c["status"] == "fail"]
    scenario = run.split("-")[0]
    recorded = [json.loads(p.read_text()) for p in (FIXTURE / "results" / scenario).glob("*/verify.json")]
    assert [(r["run_id"], judged(r).raw) for r in recorded] == [(run, "pass")]


@pytest.mark.parametrize("scenario", sorted(LOOPS))
def test_each_loop_stopped_by_the_progress_tracker_within_the_bound_and_billed(scenario):
    run, decisions = LOOPS[scenario]
    report = verify(run)
    stop = check(report, "recurring_fault_outcome")["values"]
    assert (stop["stopped_by"], stop["stop_exit_code"], stop["cycles"], stop["bound_cycles"]) == (
        "progress_tracker",
        93,
        4,
        4,
    )
    assert stop["cycles_without_progress"] == [1, 2, 3] and stop["burned_gpu_s"] > 60
    row = score_scenario(scenario, report["fault"], report["restart_agent"])
    assert [d["decision"] for d in row["decisions"]] == decisions
    assert row["wrong_stop"] == 0 and row["right_restart"] == 0


def test_megatron_s_nan_exit_is_what_the_last_cycle_ended_with():
    """Megatron's rerun state machine asks to resume on another GPU (exit 16); on one GPU it never can."""
    report = verify(LOOPS["nan_loss"][0])
    assert report["metrics"]["rank_exit_codes"] == [16]


def test_the_curable_control_was_not_stopped_and_the_agent_said_restart():
    report = verify(CONTROL)
    stop = check(report, "recurring_fault_outcome")["values"]
    assert (stop["role"], stop["stopped_by"], stop["stop_exit_code"], stop["cycles"]) == (
        "curable",
        "none",
        0,
        3,
    )
    row = score_scenario("flaky_exception", report["fault"], report["restart_agent"])
    assert (row["right_restart"], row["wrong_stop"], row["no_verdict"]) == (2, 0, 0)
