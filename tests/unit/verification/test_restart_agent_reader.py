"""The restart agent's reader (ftqual.verification.evidence.restart_agent) on launcher-log lines exactly as
NVRx 0.7.0 printed them in a CPU run (docs/faults.md, "The restart agent"): per failed cycle STOP or
RESTART, when, the policy basis, the launcher's stop, a deferred cycle; a path elsewhere still matches."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from ftqual.verification.evidence.restart_agent import read_agent_log

P = "2026-12-06 16:3{m}:{s},{ms} [{lvl}] [vm] [workload:?(?) infra:?(?)] "
LINES = [
    P.format(m=3, s="01", ms="197", lvl="INFO")
    + "attribution_manager.py:240 Managed attribution service is ready: PID=17243 endpoint=http://127.0.0.1:50050",
    P.format(m=4, s="00", ms="690", lvl="INFO")
    + "health_check.py:2155 AttrSvcResult for /tmp/ra/runs/rec3/logs/train_cycle0.log: status=completed "
    "recommendation=RESTART reason=Line 6 matched failure class observed_exception; policy basis is "
    "general_retry_available. should_stop=False result preview: ",
    P.format(m=4, s="00", ms="690", lvl="INFO")
    + "health_check.py:1975 Attribution recommends continuing (analyzed log: /x/logs/train_cycle0.log)",
    P.format(m=4, s="23", ms="168", lvl="INFO")
    + "health_check.py:2155 AttrSvcResult for /moved/elsewhere/logs/train_cycle1.log: status=completed "
    "recommendation=RESTART reason=Line 6 matched failure class observed_exception; policy basis is "
    "general_retry_available. should_stop=False result preview: ",
    P.format(m=4, s="47", ms="703", lvl="INFO")
    + "health_check.py:2155 AttrSvcResult for /tmp/ra/runs/rec3/logs/train_cycle2.log: status=completed "
    "recommendation=STOP reason=Line 6 matched failure class observed_exception; policy basis is "
    "retry_budget_exhausted. should_stop=True result preview: ",
    P.format(m=4, s="47", ms="866", lvl="ERROR")
    + "launcher.py:692 [default] Attribution recommended stopping the job; terminating workers and "
    "signalling the rest of the job.",
    P.format(m=4, s="50", ms="209", lvl="INFO")
    + "health_check.py:2039 AttributionService terminal analysis for /tmp/ra/runs/rec3/logs/train_cycle3.log "
    "deferred: still awaiting a verdict for /tmp/ra/runs/rec3/logs/train_cycle2.log",
    # still running: not a verdict
    P.format(m=4, s="51", ms="000", lvl="DEBUG")
    + "health_check.py:2152 AttrSvcResult for /r/logs/train_cycle3.log: status=running "
    "recommendation=UNKNOWN reason=none should_stop=False result preview: ",
]


def write(tmp_path, lines):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "launcher.log").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_each_verdict_its_cycle_decision_basis_and_time(tmp_path):
    log = read_agent_log(write(tmp_path, LINES))
    assert [(v.cycle, v.decision, v.basis) for v in log.verdicts] == [
        (0, "RESTART", "general_retry_available"),
        (1, "RESTART", "general_retry_available"),
        (2, "STOP", "retry_budget_exhausted"),
    ]
    assert log.verdicts[2].at == datetime(2026, 12, 6, 16, 34, 47, 703000, tzinfo=UTC)
    assert [v.line for v in log.verdicts] == [2, 4, 5]
    assert log.enforced_stop_line == 6
    assert log.deferred == ((3, 2, 7),)
    assert log.service_ready and log.service_error is None


def test_a_failed_start_and_a_missing_log(tmp_path):
    failed = P.format(m=9, s="16", ms="000", lvl="ERROR") + (
        "Agent run ended with exception, e=ValueError('managed attribution service requires "
        "--ft-attribution-llm-api-key-file or LLM_API_KEY_FILE'). Agent's exit code = 1"
    )
    log = read_agent_log(write(tmp_path, [failed]))
    assert not log.service_ready and log.verdicts == ()
    assert log.service_error.startswith("managed attribution service requires")
    missing = read_agent_log(tmp_path / "nowhere")
    assert not missing.readable and missing.problems


def test_a_completed_unknown_is_a_verdict_and_a_running_one_is_not(tmp_path):
    """NVRx 0.7.0 answers UNKNOWN where a cycle's log matches no failure signature (Megatron's NaN exit on one
    H100: tests/data/megatron-h100-recurring-1gpu), and the launcher goes on as on a RESTART."""
    lines = [
        P.format(m=4, s="10", ms="000", lvl="INFO")
        + "health_check.py:2155 AttrSvcResult for /r/logs/train_cycle0.log: status=completed "
        "recommendation=UNKNOWN reason=No actionable failure signature was found in the available log. "
        "should_stop=False result preview: ",
        LINES[-1],
    ]
    log = read_agent_log(write(tmp_path, lines))
    assert [(v.cycle, v.decision, v.basis) for v in log.verdicts] == [(0, "UNKNOWN", None)]


def test_a_stop_latched_while_the_next_cycle_forms_closes_the_rendezvous_and_is_read_as_acted_on(tmp_path):
    """NVRx 0.7.0 acts on a STOP that comes between cycles by closing the rendezvous (seen on CPU: the
    smoke workload's loop, tests/integration/e2e/test_restart_agent_real.py), not by its line for running
    workers."""
    lines = [
        LINES[4],  # the STOP verdict on cycle 2
        P.format(m=4, s="48", ms="000", lvl="ERROR")
        + "health_check.py:1945 Attribution recommends stopping the job (analyzed log: "
        "/r/logs/train_cycle2.log); the job will be terminated",
        P.format(m=4, s="49", ms="000", lvl="ERROR")
        + "launcher.py:533 Rendezvous closed because NVRx decided the job must not be restarted "
        "(attribution_stop). Original rendezvous message: The node 'localhost_1_0' detected that "
        "rendezvous was closed",
    ]
    log = read_agent_log(write(tmp_path, lines))
    assert [v.decision for v in log.verdicts] == ["STOP"] and log.enforced_stop_line == 3
    # log mode's own line on a STOP it does not enforce is no stop
    unenforced = P.format(m=4, s="48", ms="000", lvl="ERROR") + (
        "health_check.py:1945 Attribution recommends stopping the job (analyzed log: "
        "/r/logs/train_cycle2.log), but the recommendation is NOT being enforced "
        "(--ft-attribution-stop-action=log). The job continues."
    )
    (tmp_path / "logs" / "launcher.log").write_text("\n".join([LINES[4], unenforced]) + "\n")
    assert read_agent_log(tmp_path).enforced_stop_line is None


def test_a_fifo_in_place_of_the_log_is_refused_not_waited_on(tmp_path):
    (tmp_path / "logs").mkdir()
    os.mkfifo(tmp_path / "logs" / "launcher.log")
    log = read_agent_log(tmp_path)
    assert not log.readable and "not a regular file" in log.problems[0]
