"""The restart agent's scorecard (ftqual.report.restart_agent), hand-computed: a recurring fault wants STOP,
a transient one RESTART; a wrong STOP is never counted right (negative control), and each wrong verdict's
GPU-seconds are world size x the wall time of the cycles it cut short or caused."""

from __future__ import annotations

from ftqual.report.inputs import ScenarioInput
from ftqual.report.markdown import restart_agent_section
from ftqual.report.restart_agent import build_restart_agent, score_scenario, truth_of


def agent(decisions: dict[int, str | None], walls: dict[int, float], world: int = 2, mode: str = "stop"):
    return {
        "mode": mode,
        "world_size": world,
        "cycles": [{"cycle": c, "wall_s": w} for c, w in walls.items()],
        "failed_cycles": [{"cycle": c, "decision": d, "basis": None} for c, d in decisions.items()],
        "enforced_stop_line": None,
    }


def test_truth_by_family():
    assert truth_of("exception") == "RESTART" and truth_of("kill") == "RESTART"
    assert truth_of("recurring_exception") == "STOP" and truth_of("nan_loss") == "STOP"
    assert truth_of("none") is None


def test_a_recurring_fault_two_wrong_restarts_then_a_right_stop():
    # cycles 0-3 of 20, 22, 22, 5 s on 2 ranks: RESTART on 0 and 1 paid for cycles 1 and 2 (2 x 22 each)
    row = score_scenario(
        "recurring_exception",
        "recurring_exception",
        agent({0: "RESTART", 1: "RESTART", 2: "STOP", 3: None}, {0: 20.0, 1: 22.0, 2: 22.0, 3: 5.0}),
    )
    assert (row["right_stop"], row["right_restart"], row["wrong_stop"], row["wrong_restart"]) == (1, 0, 0, 2)
    assert row["no_verdict"] == 1
    assert row["wrong_restart_gpu_s"] == 88.0 and row["wrong_stop_gpu_s"] == 0.0
    assert [d["gpu_s"] for d in row["decisions"]] == [44.0, 44.0, None, None]


def test_negative_control_a_stop_on_a_curable_fault_is_wrong_and_costs_what_it_cut():
    # exception (transient): STOP on cycle 0; the run's cycle 1 (41 s on 2 ranks) is what the stop cuts
    row = score_scenario("exception", "exception", agent({0: "STOP"}, {0: 10.0, 1: 41.0}, mode="log"))
    assert row["wrong_stop"] == 1 and row["right_stop"] == 0 and row["right_restart"] == 0
    assert row["wrong_stop_gpu_s"] == 82.0
    right = score_scenario("exception", "exception", agent({0: "RESTART"}, {0: 10.0, 1: 41.0}))
    assert right["right_restart"] == 1 and right["wrong_stop_gpu_s"] + right["wrong_restart_gpu_s"] == 0


def test_a_last_wrong_restart_with_no_next_cycle_costs_nothing_and_an_unknown_wall_says_so():
    row = score_scenario("nan_loss", "nan_loss", agent({0: "RESTART"}, {0: 9.0}))
    assert row["wrong_restart"] == 1 and row["wrong_restart_gpu_s"] == 0.0 and not row["cost_incomplete"]
    unknown = score_scenario("kill", "kill", agent({0: "STOP"}, {0: 9.0, 1: None}))  # type: ignore[dict-item]
    assert unknown["wrong_stop"] == 1 and unknown["cost_incomplete"]


def test_only_scenarios_with_the_agent_on_get_a_row_and_the_section_renders():
    docs = [
        ScenarioInput("kill", "k.json", {"fault": "kill", "restart_agent": agent({0: "RESTART"}, {0: 1.0})}),
        ScenarioInput("hang", "h.json", {"fault": "hang"}),
        ScenarioInput("base", "b.json", None, "missing"),
    ]
    rows = build_restart_agent(docs)
    assert [r["scenario"] for r in rows] == ["kill"]
    text = "\n".join(restart_agent_section(rows))
    assert (
        "## The restart agent's verdicts" in text
        and "| kill | kill | stop | RESTART | 0 | 1 | 0 | 0 | 0 |" in text
    )
    assert restart_agent_section([]) == []


def test_an_unknown_on_a_loop_pays_for_the_next_cycle_and_on_a_transient_fault_costs_nothing():
    # nan_loss on 1 rank, cycles of 30, 25, 25, 20 s: UNKNOWN on 0-2 let cycles 1-3 run; cycle 3 unanswered
    walls = {0: 30.0, 1: 25.0, 2: 25.0, 3: 20.0}
    row = score_scenario(
        "nan_loss", "nan_loss", agent({0: "UNKNOWN", 1: "UNKNOWN", 2: "UNKNOWN", 3: None}, walls, 1)
    )
    assert row["unknown"] == 3 and row["no_verdict"] == 1
    assert row["unknown_gpu_s"] == 70.0
    assert row["wrong_restart"] == row["right_stop"] == 0 and row["wrong_restart_gpu_s"] == 0.0
    assert [d["outcome"] for d in row["decisions"]] == ["unknown", "unknown", "unknown", "no verdict"]
    curable = score_scenario("exception", "exception", agent({0: "UNKNOWN"}, {0: 10.0, 1: 41.0}))
    assert curable["unknown"] == 1 and curable["unknown_gpu_s"] == 0.0 and curable["right_restart"] == 0
    lines = restart_agent_section([row])
    assert "| nan_loss | nan_loss | stop | STOP | 0 | 0 | 0 | 0 | 3 | 1 | 0.0 | 70.0 |" in lines
