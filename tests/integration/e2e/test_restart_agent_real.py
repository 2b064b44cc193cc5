"""NVRx's restart agent end to end on CPU, offline: the real ft_launcher (NVRx 0.7.0) with `restart_agent:
stop` starts its attribution service (deterministic, no LLM, no network), the smoke workload meets an
exception on rank 1 after its first checkpoint, and the agent's verdict on the failed cycle is read from the
run (verify.json `restart_agent`) and scored: a transient fault's RESTART is right. The replacement trains
long enough (about 30 s) for the verdict, which comes about 15 s after the cycle ends. Negative control: the
same run with the verdict edited to STOP is a wrong STOP, never a right one, and costs the cycle it cut."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.report.inputs import ScenarioInput
from ftqual.report.restart_agent import build_restart_agent
from tests.support.launch import FAST_STEPS, launch_smoke, verify_run


@pytest.fixture(scope="module")
def agent_run(repo_root, tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("agent")
    return launch_smoke(
        repo_root,
        work,
        "agent-exception",
        "exception",
        ["--smoke-step-seconds=0.5"],
        {
            "TRAIN_ITERS": "60",
            "SAVE_INTERVAL": "4",
            "NVRX_SECTION_TIMEOUTS": "setup:60,step:5,checkpointing:30",
            "NVRX_OUT_OF_SECTION_TIMEOUT": "20",
            "NVRX_RESTART_AGENT": "stop",
        },
        timeout=400,
    )


@pytest.mark.timeout(480)
def test_the_agent_decides_offline_and_its_restart_is_right(agent_run, repo_root):
    command = (agent_run / "command.txt").read_text()
    assert "--ft-attribution-stop-action=no-restart" in command
    assert (agent_run / "restart_agent" / "no-llm.key").read_bytes() == b""
    rc, report = verify_run(repo_root, agent_run)
    assert rc == 0, report.get("cause")
    agent = report["restart_agent"]
    assert agent["mode"] == "stop" and agent["service_ready"] and agent["world_size"] == 2
    [cycle0] = agent["failed_cycles"]
    assert cycle0["cycle"] == 0 and cycle0["decision"] == "RESTART", agent
    assert cycle0["basis"] == "general_retry_available"
    assert 10 <= cycle0["after_cycle_end_s"] <= 60  # the service waits for the log to stay quiet (15 s)
    service_log = (agent_run / "logs" / "launcher_attribution.log").read_text()
    assert "source=deterministic" in service_log and "route_count=0" in service_log
    [row] = build_restart_agent([ScenarioInput("exception", "x", report)])
    assert (row["right_restart"], row["wrong_stop"], row["wrong_restart"], row["no_verdict"]) == (1, 0, 0, 0)


@pytest.mark.timeout(480)
def test_negative_control_a_stop_on_the_curable_fault_is_wrong(agent_run, repo_root):
    copy = agent_run.parent / "agent-exception-stopped"
    shutil.copytree(agent_run, copy, symlinks=True)
    log = copy / "logs" / "launcher.log"
    log.write_text(
        log.read_text()
        .replace("recommendation=RESTART", "recommendation=STOP")
        .replace("should_stop=False", "should_stop=True")
    )
    _, report = verify_run(repo_root, copy)
    [row] = build_restart_agent([ScenarioInput("exception", "x", report)])
    assert row["wrong_stop"] == 1 and row["right_stop"] == 0 and row["right_restart"] == 0
    walls = {c["cycle"]: c["wall_s"] for c in report["restart_agent"]["cycles"]}
    assert row["wrong_stop_gpu_s"] == pytest.approx(2 * walls[1], abs=0.2)
    json.dumps(row)  # summary.json-ready


@pytest.fixture(scope="module")
def agent_loop(repo_root, tmp_path_factory) -> Path:
    """The same exception at iteration 5 in every cycle, the agent's stop action on, and NVRx's other stops
    set far out of the way (20 cycles without progress, 20 restarts): only the agent can stop it early."""
    work = tmp_path_factory.mktemp("agent-loop")
    return launch_smoke(
        repo_root,
        work,
        "agent-loop",
        "recurring_exception",
        list(FAST_STEPS),
        {
            "TRAIN_ITERS": "12",
            "SAVE_INTERVAL": "4",
            "NVRX_ASYNC_SAVE": "0",
            "NVRX_MAX_RESTARTS": "20",
            "NVRX_MAX_NO_PROGRESS_CYCLES": "20",
            "NVRX_SECTION_TIMEOUTS": "setup:60,step:20,checkpointing:30",
            "NVRX_OUT_OF_SECTION_TIMEOUT": "30",
            "NVRX_RESTART_AGENT": "stop",
        },
        timeout=900,
    )


@pytest.mark.timeout(960)
def test_the_agent_stops_a_loop_with_a_right_stop_and_the_report_names_it(agent_loop, repo_root):
    rc, report = verify_run(repo_root, agent_loop)
    assert rc == 0, report.get("cause")
    stop = next(c for c in report["checks"] if c["id"] == "recurring_fault_outcome")["values"]
    assert stop["stopped_by"] == "restart_agent", stop
    assert stop["cycles"] < 21  # stopped before NVRx's own bounds
    agent = report["restart_agent"]
    assert agent["enforced_stop_line"] is not None
    [row] = build_restart_agent([ScenarioInput("recurring_exception", "x", report)])
    assert row["truth"] == "STOP" and row["right_stop"] >= 1 and row["wrong_stop"] == 0, row
    # every RESTART it gave before its STOP is a wrong one, each paying for the loop's next cycle
    assert row["right_restart"] == 0 and row["wrong_restart_gpu_s"] >= 0
    assert [d["decision"] for d in row["decisions"] if d["decision"]][-1] == "STOP"


@pytest.mark.timeout(960)
def test_negative_control_without_the_launcher_s_stop_line_who_stopped_the_loop_is_unknown(
    agent_loop, repo_root
):
    """The same run with the launcher's lines acting on the STOP removed: the exit 93 is nobody's that the
    evidence shows, so the stop is not credited to the agent, and a last cycle cut before FT started is no
    longer explained (inconclusive, never pass)."""
    copy = agent_loop.parent / "agent-loop-no-stop-line"
    shutil.copytree(agent_loop, copy, symlinks=True)
    log = copy / "logs" / "launcher.log"
    kept = [
        line
        for line in log.read_text().splitlines(keepends=True)
        if "Attribution recommended stopping the job; terminating" not in line
        and "(attribution_stop)" not in line
    ]
    log.write_text("".join(kept))
    rc, report = verify_run(repo_root, copy)
    assert rc != 0 and report["verdict"] != "pass"
    stop = next(c for c in report["checks"] if c["id"] == "recurring_fault_outcome")
    assert stop["status"] != "pass" and stop["values"].get("stopped_by") != "restart_agent", stop
