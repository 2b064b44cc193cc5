"""Live progress (ftqual.workflow.progress): events from a run directory as it grows, and `ftqual status` for
a
workflow's scenarios in each state: running, waiting for a hang's detection, finished, failed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from ftqual.workflow.progress import Watcher, main, scenario_states

T = "2026-11-30 10:00:00,000 [WARNING] [n1] [workload:?(0) infra:?(?)]"
ITER = "1:  [2026-11-30 10:00:0{i}] iteration        {i}/      20 | elapsed time per iteration (ms): 250.0 |"


def append(path, *lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write("".join(line + "\n" for line in lines))


def test_events_come_once_and_in_the_order_they_happen(tmp_path):
    run = tmp_path / "run"
    w = Watcher(run, timeouts={"step": 120, "setup": 900}, fault="hang")
    assert w.poll(now=0) == []
    append(run / "logs" / "train_cycle0.log", ITER.format(i=1))
    assert w.poll(now=100) == ["cycle 0 started", "iteration 1/20 (0.25 s/it)"]
    append(run / "checkpoints" / "latest_checkpointed_iteration.txt", "5")
    injected = (datetime.now(UTC) - timedelta(seconds=45)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (run / "fault_injected.json").write_text(
        json.dumps(
            {
                "fault": "hang",
                "rank": 1,
                "checkpoint_iteration": 5,
                "section": "step",
                "injected_at": injected,
            }
        )
    )
    assert w.poll(now=101) == [
        "checkpoint at iteration 5 completed",
        "fault injected: hang of rank 1 after checkpoint 5 (in 'step')",
    ]
    assert w.waiting().startswith("waiting for the 'step' timeout: 4") and w.waiting().endswith(" / 120 s")
    append(
        run / "logs" / "launcher.log",
        f"{T} rank_monitor_server.py:522 [Cycle 0] Section 'step' has been open for 121.5 seconds."
        " Timeout is 120.00 seconds.",
    )
    append(
        run / "logs" / "train_cycle1.log",
        "0:   successfully loaded checkpoint from /x [ t 1/1 ] at iteration 5",
    )
    assert w.poll(now=102) == [
        "cycle 1 started (restart)",
        "cycle 1 resumed from checkpoint iteration 5",
        "detected: the 'step' section timeout fired in cycle 0",
    ]
    assert w.waiting() is None and w.poll(now=103) == []
    append(run / "logs" / "launcher.log", "I1130 api.py:1 [default] worker group successfully finished.")
    assert w.poll(now=104) == ["training finished (the worker group completed)"]


def slot(tmp_path, scenario, name, files):
    folder = tmp_path / "results" / scenario / name
    folder.mkdir(parents=True)
    for file, doc in files.items():
        (folder / file).write_text(json.dumps(doc))
    return folder


def test_status_in_each_state(tmp_path, capsys):
    slot(
        tmp_path,
        "baseline",
        "aaaaaaaaaaaa-1",
        {"attempt.json": {}, "verify.json": {"verdict": "pass", "run_id": "b-1"}},
    )
    cause = "the launcher exited 1: the 'step' timeout (1 s) fired in every cycle (2 of 2)"
    failed = {"verdict": "fail", "run_id": "k-2", "cause": cause}
    slot(tmp_path, "kill", "bbbbbbbbbbbb-2", {"attempt.json": {}, "verify.json": failed})
    slot(tmp_path, "hang", "cccccccccccc-1", {})
    run = tmp_path / "runs" / "hang-1"
    append(tmp_path / "results" / "hang" / "attempts" / "hang-1.console.log", "")
    (run / "logs").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"fault": "hang", "timeouts": {"step": 120}}))
    append(run / "logs" / "train_cycle0.log", ITER.format(i=3))
    (run / "fault_injected.json").write_text(
        json.dumps(
            {"fault": "hang", "rank": 1, "section": "step", "injected_at": datetime.now(UTC).isoformat()}
        )
    )
    states = dict(scenario_states(tmp_path))
    assert states["baseline"] == "attempt aaaaaaaaaaaa-1: PASS (run b-1)"
    assert states["kill"].startswith(
        "attempt bbbbbbbbbbbb-2: FAIL — the launcher exited 1: the 'step' timeout"
    )
    assert states["hang"].startswith(
        "attempt cccccccccccc-1: run hang-1 running — fault injected: hang of rank 1"
    )
    assert "at iteration 3/20 (0.25 s/it); waiting for the 'step' timeout: 0 / 120 s" in states["hang"]
    assert main([str(tmp_path)]) == 0
    assert "kill: attempt bbbbbbbbbbbb-2: FAIL" in capsys.readouterr().out
    assert main([str(tmp_path / "nowhere")]) == 2


def test_the_terminal_table_holds_every_scenario(tmp_path):
    from rich.console import Console

    from ftqual.workflow.progress import status_table

    slot(
        tmp_path,
        "baseline",
        "aaaaaaaaaaaa-1",
        {"attempt.json": {}, "verify.json": {"verdict": "pass", "run_id": "b-1"}},
    )
    console = Console(record=True, width=140)
    console.print(status_table(tmp_path))
    text = console.export_text()
    assert "baseline" in text and "attempt aaaaaaaaaaaa-1: PASS (run b-1)" in text


def test_cli_version_and_the_verify_exit_codes_in_its_help(capsys):
    from ftqual.cli import main as cli

    assert cli(["--version"]) == 0
    assert capsys.readouterr().out.startswith("ftqual ")
    assert cli(["verify", "--help"]) == 0
    assert "exit codes: 0 pass, 1 fail, 3 inconclusive" in " ".join(capsys.readouterr().out.split())


def test_a_negative_control_that_failed_as_expected_qualifies(tmp_path):
    """`ftqual status` judges as the summary and the gate do: the control's FAIL is its PASS."""
    checks = [{"id": "clean_finish", "status": "fail", "detail": "exit 1", "evidence": []}]
    expected = {"expect": "fail", "failing": ["clean_finish"]}
    control = {"verdict": "fail", "run_id": "r-1", "fault": "kill", "checks": checks,
               "cause": "ft_launcher gave up", "expectation": expected}  # fmt: skip
    slot(tmp_path, "restarts_exhausted", "dddddddddddd-1", {"attempt.json": {}, "verify.json": control})
    unmet = {**control, "expectation": {"expect": "fail", "failing": ["resumed_from_checkpoint"]}}
    slot(tmp_path, "no_resume", "eeeeeeeeeeee-1", {"attempt.json": {}, "verify.json": unmet})
    states = dict(scenario_states(tmp_path))
    assert states["restarts_exhausted"] == (
        "attempt dddddddddddd-1: PASS (negative control: failed as expected: clean_finish failed) (run r-1)"
    )
    assert states["no_resume"].startswith("attempt eeeeeeeeeeee-1: FAIL — ft_launcher gave up")


def test_a_hang_says_how_long_no_step_has_completed_instead_of_repeating_the_last(tmp_path):
    """During a hang the cadence line said "iteration 10/30" four times; now the iteration is said once and
    then how long no step has completed, until a new iteration line comes."""
    run = tmp_path / "run"
    w = Watcher(run, timeouts={"step": 120}, fault="hang")
    append(run / "logs" / "train_cycle0.log", ITER.format(i=1))
    assert w.poll(now=100) == ["cycle 0 started", "iteration 1/20 (0.25 s/it)"]
    assert w.poll(now=110) == []  # within the cadence: nothing
    assert w.poll(now=130) == ["no step has completed for 30 s (last: iteration 1/20)"]
    assert w.poll(now=160) == ["no step has completed for 60 s (last: iteration 1/20)"]
    append(run / "logs" / "train_cycle0.log", ITER.format(i=2))
    assert w.poll(now=190) == ["iteration 2/20 (0.25 s/it)"]
    assert w.poll(now=220) == ["no step has completed for 30 s (last: iteration 2/20)"]


def test_status_of_a_run_whose_log_stopped_growing_says_for_how_long(tmp_path):
    import os
    import time

    slot(tmp_path, "hang", "cccccccccccc-1", {})
    run = tmp_path / "runs" / "hang-1"
    append(tmp_path / "results" / "hang" / "attempts" / "hang-1.console.log", "")
    (run / "logs").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"fault": "hang", "timeouts": {"step": 120}}))
    log = run / "logs" / "train_cycle0.log"
    append(log, ITER.format(i=3))
    assert "no step has completed" not in dict(scenario_states(tmp_path))["hang"]
    stale = time.time() - 95
    os.utime(log, (stale, stale))
    state = dict(scenario_states(tmp_path))["hang"]
    assert "at iteration 3/20 (0.25 s/it); no step has completed for at least 9" in state, state


def test_status_shows_the_current_plans_attempts_only(tmp_path, capsys):
    """A run with new settings under way: the attempts of the earlier settings were shown as PASS."""
    from ftqual.workflow.progress import record_plan

    slot(tmp_path, "baseline", "aaaaaaaaaaaa-1", {"attempt.json": {}, "verify.json": {"verdict": "pass"}})
    slot(tmp_path, "kill", "bbbbbbbbbbbb-1", {"attempt.json": {}, "verify.json": {"verdict": "pass"}})
    slot(tmp_path, "hang", "cccccccccccc-1", {"attempt.json": {}, "verify.json": {"verdict": "pass"}})
    assert dict(scenario_states(tmp_path))["kill"].startswith("attempt bbbbbbbbbbbb-1: PASS")  # no plan
    # new settings: the baseline's attempt is under way, kill's not started; hang is no longer enabled
    slot(tmp_path, "baseline", "dddddddddddd-1", {})
    record_plan(tmp_path, {"baseline": "dddddddddddd-1", "kill": "eeeeeeeeeeee-1"})
    states = scenario_states(tmp_path)
    assert [name for name, _ in states] == ["baseline", "kill"]
    assert dict(states)["baseline"] == "attempt dddddddddddd-1: waiting"
    assert dict(states)["kill"] == "attempt eeeeeeeeeeee-1: pending (not started yet)"
    assert main([str(tmp_path)]) == 0
    assert "PASS" not in capsys.readouterr().out


def test_status_after_an_interrupt_says_so_and_what_to_run(tmp_path, capsys):
    from ftqual.workflow import interrupts
    from ftqual.workflow.progress import record_plan

    slot(tmp_path, "baseline", "aaaaaaaaaaaa-1", {})
    record_plan(tmp_path, {"baseline": "aaaaaaaaaaaa-1"})
    append(tmp_path / "results" / "baseline" / "attempts" / "baseline-1.console.log", "")
    run = tmp_path / "runs" / "baseline-1"
    (run / "logs").mkdir(parents=True)
    (run / "run.json").write_text(
        json.dumps({"fault": "none", "interrupted_by": "SIGTERM", "exit_code": -15})
    )
    append(run / "logs" / "train_cycle0.log", ITER.format(i=3))
    append(run / "logs" / "launcher.log", f"{T} api.py:9 failed (exitcode: -15) local_rank: 0 (pid: 77) of x")
    # the workflow that was interrupted is gone (a pid that names no process)
    interrupts.interrupted_by(tmp_path, 2, "host 4194399 1")
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert (
        "the workflow (pid 4194399) was interrupted (SIGINT): run the same command again to resume it" in out
    )
    assert (
        "baseline: attempt aaaaaaaaaaaa-1: run baseline-1 interrupted (SIGTERM) at iteration 3/20; the same "
        "workflow command redoes this attempt" in out
    )
    assert "running" not in out and "detected" not in out


def test_a_rank_ended_by_ftquals_stop_is_never_a_detection(tmp_path):
    """A terminated rank read `detected: local rank 0 exited with -15`, like a fault's detection."""
    run = tmp_path / "run"
    line = f"{T} api.py:9 failed (exitcode: -15) local_rank: 0 (pid: 77) of binary: python"
    append(run / "logs" / "launcher.log", line)
    stopped = Watcher(run, fault="sigterm", stopped_by="SIGINT")
    assert stopped.poll(now=0) == [
        "stopping: local rank 0 exited with -15 after ftqual stopped the run (SIGINT), not a fault's "
        "detection"
    ]
    assert stopped.injected_and_detected == (False, False)
    # negative control: the same exit of a sigterm fault's rank, no stop asked, is its detection
    assert Watcher(run, fault="sigterm").poll(now=0) == ["detected: local rank 0 exited with -15"]
