"""One-line causes (ftqual.verification.causes): each kind from recorded GPU runs where one exists, from small
logs in the
formats NVRx, torchelastic and Megatron print otherwise. The section timeout firing in every cycle is also
shown on a real smoke run (tests/integration/workflow/test_workflow_state.py, the broken kill)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ftqual.verification.causes import classify

DATA = Path(__file__).resolve().parents[2] / "data"
T = "2026-11-30 10:00:00,000 [INFO] [n1] [workload:?(?) infra:?(?)]"


def recorded(rel: str) -> tuple[Path, dict]:
    run_dir = DATA / rel
    return run_dir, json.loads((run_dir / "run.json").read_text())


def make_run(
    tmp_path, launcher: list[str] | None, cycles: list[list[str]], fault="kill", marker=False, restarts=3
):
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    if launcher is not None:
        (run_dir / "logs" / "launcher.log").write_text(
            "\n".join([f"{T} launcher.py:1 starting", *launcher]) + "\n"
        )
    for n, lines in enumerate(cycles):
        (run_dir / "logs" / f"train_cycle{n}.log").write_text("\n".join(lines) + "\n")
    if marker:
        (run_dir / "fault_injected.json").write_text("{}")
    return run_dir, {"fault": fault, "max_restarts": restarts}


def test_no_progress_names_the_error_every_restart_ended_with():
    cause = classify(*recorded("megatron-h200-1gpu/negative-distopt-kill"), 93)
    assert cause.kind == "no_progress" and cause.path == "logs/launcher.log"
    assert "exit 93" in cause.text and "assert len(steps) == 1" in cause.text


def test_a_crash_after_the_last_iteration_fails_the_baseline_with_its_error():
    """Megatron 0.14.0 on H200 (the compatibility matrix): every cycle ends in pretrain()'s last
    on_checkpointing_start() after train() shut NVRx's rank-monitor client down; NVRx gives up (exit 93)."""
    from ftqual.verification.verify import build_report

    run_dir, run = recorded("megatron-h200-matrix-m014-crash-at-end/baseline")
    report = build_report(run_dir)
    assert report["verdict"] == "fail"
    check = next(c for c in report["checks"] if c["id"] == "uninterrupted_completion")
    assert check["status"] == "fail" and "exit code 93" in check["detail"], check["detail"]
    cause = classify(run_dir, run, run["exit_code"])
    assert run["exit_code"] == 93 and cause.kind == "no_progress" and cause.path == "logs/launcher.log"
    assert "exit 93" in cause.text and "logs/train_cycle3.log:712" in cause.text
    assert "RankMonitorClientError: RankMonitorClient is not initialized" in cause.text


def test_a_crash_in_every_cycle_is_named_once():
    cause = classify(*recorded("megatron-h200-2gpu/negative-tp2-two-launchers"), 1)
    assert cause.kind == "crash" and "CUDA_DEVICE_MAX_CONNECTIONS" in cause.text
    assert cause.path.startswith("logs/train_cycle") and cause.line


def test_a_timeout_in_every_cycle_with_the_measured_pace(tmp_path):
    opened = "Section 'step' has been open for 1.5 seconds. Timeout is 1.00 seconds."
    launcher = [f"{T} rank_monitor_server.py:522 [Cycle {c}] {opened}" for c in range(2)]
    step = (
        "1:  [2026-11-30 10:00:01] iteration 1/20 | elapsed time per iteration (ms): 3000.0 | lm loss: 6.0 |"
    )
    cause = classify(*make_run(tmp_path, launcher, [[step], [step]]), 1)
    assert cause.kind == "section_timeout"
    assert "'step' timeout (1 s) fired in every cycle (2 of 2)" in cause.text and "3.0 s" in cause.text


def test_a_rejected_argument(tmp_path):
    usage = [
        "0: usage: pretrain_gpt.py [-h]",
        "0: pretrain_gpt.py: error: unrecognized arguments: --ft-num-warmup-iters=0",
    ]
    cause = classify(*make_run(tmp_path, [], [usage, usage]), 1)
    assert cause.kind == "argument_error" and "--ft-num-warmup-iters=0" in cause.text


def test_restarts_exhausted(tmp_path):
    exits = [
        f"E1130 torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: -9) local_rank: {r}"
        for r in (0, 1)
    ]
    cause = classify(*make_run(tmp_path, exits, [["0: step"], ["0: step"]], restarts=1), 1)
    assert cause.kind == "restarts_exhausted" and "all 2 cycles failed" in cause.text


def test_rendezvous_timeout(tmp_path):
    line = f"{T} launcher.py:1 RendezvousTimeoutError: the rendezvous did not complete"
    cause = classify(*make_run(tmp_path, [line], [["0: FT: initializing..."]]), 1)
    assert cause.kind == "rendezvous_timeout"


def test_a_fault_that_never_came(tmp_path):
    cause = classify(*make_run(tmp_path, [], [["0: training done"]]), 0)
    assert cause.kind == "not_injected" and "never injected" in cause.text


def test_a_fault_that_never_came_is_the_cause_even_when_nvrx_stopped_with_93(tmp_path):
    """resume_existing on one H200: the save after the copied checkpoint was finalized only at the end, the
    fault never armed, every cycle failed with the wrapper's line, NVRx stopped with exit 93."""
    never = (
        "0: [ftqual-worker] the requested kill fault (injection 1 of 1) was never injected (tracker stayed "
        "at or below 30 while a step could follow, or no save was in flight at a checkpointing section's end)"
    )
    stop = f"{T} launcher.py:1 Stopping: no progress across restarts (exit 93)"
    cause = classify(*make_run(tmp_path, [stop], [[never]] * 4), 93)
    assert cause.kind == "not_injected" and cause.path == "logs/train_cycle0.log" and cause.line == 1
    assert cause.text.startswith("the kill was never injected")


def test_a_later_injection_that_never_came_is_named(tmp_path):
    never = "0: [ftqual-worker] the requested kill fault (injection 2 of 2) was never injected (tracker ...)"
    stop = f"{T} launcher.py:1 Stopping: no progress across restarts (exit 93)"
    run_dir, run = make_run(tmp_path, [stop], [["0: step"], [never], [never]], marker=True)
    run["injections"] = 2
    cause = classify(run_dir, run, 93)
    assert cause.kind == "not_injected" and cause.text.startswith(
        "injection 2 of 2: the kill was never injected"
    )
    assert cause.path == "logs/train_cycle1.log"


def test_missing_evidence(tmp_path):
    cause = classify(*make_run(tmp_path, None, []), 1)
    assert cause.kind == "evidence_missing"


def test_unknown_points_at_the_last_error_line(tmp_path):
    run_dir, run = make_run(
        tmp_path, [f"{T} launcher.py:9 something failed badly"], [["0: fine"]], marker=True
    )
    cause = classify(run_dir, run, 1)
    assert cause.kind == "unknown" and cause.path == "logs/launcher.log" and cause.line == 2


@pytest.mark.timeout(20)
def test_a_fifo_log_never_blocks(tmp_path):
    run_dir, run = make_run(tmp_path, [], [])
    os.mkfifo(run_dir / "logs" / "train_cycle0.log")
    assert classify(run_dir, run, 1).kind in ("unknown", "not_injected")


def test_timeouts_the_baseline_disproves(tmp_path):
    from ftqual.verification.causes import timeout_problems

    run_dir = tmp_path / "baseline"
    lines = [
        f"1:  [2026-11-30 10:00:{40 + i}.000000] iteration {i}/3 | elapsed time per iteration (ms): {ms} |"
        for i, ms in ((1, 3000.0), (2, 250.0), (3, 260.0))
    ]
    make = make_run(tmp_path, [], [lines])[0]
    make.rename(run_dir)
    run = {"started_at": "2026-11-30T10:00:00Z", "tz_offset_s": 0}
    assert timeout_problems(run_dir, run, 2.0, {"step": 10, "setup": 120, "checkpointing": 60}) == []
    problems = timeout_problems(run_dir, run, 2.0, {"step": 2, "setup": 30, "checkpointing": 1})
    assert len(problems) == 3
    assert (
        "slowest step (3.0 s)" in problems[0]
        and "start-up (41 s" in problems[1]
        and "save (2.0 s)" in problems[2]
    )


def test_more_injections_than_restarts_is_named_before_the_timeouts_they_caused(tmp_path):
    """injections 3 > max_restarts 2: ft_launcher gave up; each cycle's timeout is the injection."""
    opened = "Section 'step' has been open for 1.5 seconds. Timeout is 1.00 seconds."
    launcher = [f"{T} rank_monitor_server.py:522 [Cycle {c}] {opened}" for c in range(3)]
    run_dir, run = make_run(tmp_path, launcher, [["0: step"]] * 3, fault="hang", marker=True, restarts=2)
    cause = classify(run_dir, {**run, "injections": 3}, 1)
    assert cause.kind == "restarts_exhausted"
    assert cause.text.startswith("ft_launcher gave up after 2 restarts (max_restarts 2): 3 injections")
    # within max_restarts the per-cycle cause stands
    assert classify(run_dir, {**run, "injections": 2}, 1).kind == "section_timeout"


# --------------------------------------------------------------------------------------------------------
# A peer's consequence is never the cause: the fault rank's own error, whichever rank's error is logged last

GLOO = (
    "0: [rank0]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection "
    "closed by peer [127.0.0.1]:26349. This is typically caused by a remote worker crashing. Check the logs "
    "of the remote worker before reporting an error. GLHF!"
)
WATCHDOG = (
    "0: [rank0]: torch.distributed.DistBackendError: [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=12, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out."
)
FAULT_TRACEBACK = [
    "1: [rank1]: Traceback (most recent call last):",
    '1: [rank1]:   File "/opt/ftqual/ftqual/rank/faults.py", line 122, in raise_injected',
    '1: [rank1]:     raise InjectedFault(f"ftqual injected an exception on rank {rank}")',
    "1: [rank1]: ftqual.rank.faults.InjectedFault: ftqual injected an exception on rank 1",
]
QUIET = ["0: [2026-11-30 10:00:02] iteration 1/20"]  # a last cycle without an error: no crash in every cycle
SURVIVOR_TRACEBACK = [
    "0: [rank0]: Traceback (most recent call last):",
    '0: [rank0]:   File "/opt/ftqual/workloads/smoke_train.py", line 686, in train_step',
    "0: [rank0]:     dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)",
    GLOO,
]


def with_marker(run_dir: Path, rank: int = 1, cycle: int = 0) -> Path:
    marker = {"schema": "ftqual.fault/v1", "fault": "exception", "rank": rank, "local_rank": rank,
              "cycle": cycle, "injected_at": "2026-11-30T10:00:01.000000Z"}  # fmt: skip
    (run_dir / "fault_injected.json").write_text(json.dumps(marker))
    return run_dir


@pytest.mark.parametrize(
    "lines",
    [FAULT_TRACEBACK + SURVIVOR_TRACEBACK, SURVIVOR_TRACEBACK + FAULT_TRACEBACK],
    ids=["consequence-last", "consequence-first"],
)
def test_the_fault_rank_s_own_error_is_named_whichever_is_logged_last(tmp_path, lines):
    """The restart agent's loop on CPU: rank 1's injected exception, rank 0's gloo `Connection closed by
    peer` (its consequence), in either order in the log."""
    run_dir, run = make_run(tmp_path, [f"{T} launcher.py:9 worker failed"], [lines, QUIET], fault="exception")
    cause = classify(with_marker(run_dir), run, 1)
    assert cause.kind == "unknown" and "closed by peer" not in cause.text, cause
    assert "rank 1's error (the fault's rank): ftqual.rank.faults.InjectedFault" in cause.text
    assert cause.path == "logs/train_cycle0.log" and lines[cause.line - 1] == FAULT_TRACEBACK[-1]


@pytest.mark.parametrize("consequence_last", [True, False])
def test_without_a_marker_any_error_that_is_no_consequence_is_named(tmp_path, consequence_last):
    own = ["1: [rank1]: ValueError: bad shape (4, 3)"]
    lines = own + [WATCHDOG] if consequence_last else [WATCHDOG] + own
    run_dir, run = make_run(tmp_path, [f"{T} launcher.py:9 worker failed"], [lines, QUIET], fault="none")
    cause = classify(run_dir, run, 1)
    assert cause.text == "unknown cause; the last error line: ValueError: bad shape (4, 3)", cause
    assert cause.line == lines.index(own[0]) + 1


def test_the_fault_rank_s_own_consequence_loses_to_another_rank_s_real_error(tmp_path):
    """Negative control: the marker's rank is preferred for its own error, never for a consequence it logs."""
    lines = ["0: [rank0]: ValueError: bad shape (4, 3)", WATCHDOG.replace("0: [rank0]", "1: [rank1]")]
    run_dir, run = make_run(tmp_path, [f"{T} launcher.py:9 worker failed"], [lines, QUIET], fault="exception")
    cause = classify(with_marker(run_dir), run, 1)
    assert cause.text == "unknown cause; the last error line: ValueError: bad shape (4, 3)", cause


@pytest.mark.parametrize("lines", [[GLOO, WATCHDOG], [WATCHDOG, GLOO]])
def test_only_consequences_are_said_to_be_a_peer_s(tmp_path, lines):
    """The failing rank died without a word (a SIGKILL): what the survivors said is named as theirs."""
    run_dir, run = make_run(tmp_path, [f"{T} launcher.py:9 the job ended"], [lines, QUIET], fault="none")
    cause = classify(run_dir, run, 1)
    assert cause.kind == "unknown" and "only a peer's consequence is logged" in cause.text, cause
    assert "the last error line" not in cause.text and cause.line == 2


def test_a_crash_in_every_cycle_names_the_fault_not_the_survivor(tmp_path):
    cycles = [FAULT_TRACEBACK + SURVIVOR_TRACEBACK, SURVIVOR_TRACEBACK + FAULT_TRACEBACK]
    run_dir, run = make_run(tmp_path, [f"{T} launcher.py:9 worker failed"], cycles, fault="exception")
    cause = classify(with_marker(run_dir), run, 1)
    assert cause.kind == "crash" and "InjectedFault" in cause.text and "peer" not in cause.text, cause
    assert cause.path == "logs/train_cycle1.log" and cause.line == len(SURVIVOR_TRACEBACK) + 4


def test_a_crash_of_consequences_only_is_said_to_be_a_peer_s(tmp_path):
    """Negative control: the same consequence in every cycle is no crash of its own."""
    run_dir, run = make_run(tmp_path, [f"{T} launcher.py:9 worker failed"], [[GLOO], [GLOO]], fault="none")
    cause = classify(run_dir, run, 1)
    assert cause.kind == "crash" and "only a peer's consequence is logged" in cause.text, cause
