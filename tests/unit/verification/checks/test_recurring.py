"""recurring_fault_outcome (ftqual.verification.checks.recurring) on recorded H200 runs made into faults that
come back: who stopped the job, with which exit and what it means to Slurm, the cycles and GPU-seconds
burned (hand-computed from the recorded times), the verdict against the bound; negative controls: a loop
past the bound, a run to max restarts under a lower no-progress bound, an exit 0 short of train_iters and a
curable job stopped while it made progress all FAIL; an exit 93 without NVRx's line is inconclusive, never a
pass.

The base run: `tracker_missing_iteration` (1 GPU, max_restarts 3): cycle 0 saved iteration 5 and died at
19:10:05.101214 (the marker's injected_at); cycles 1-3 restored nothing and failed in setup (NVRx: "made NO
progress: 5 -> 5"); NVRx's progress tracker stopped the job at the third (exit 93), run.json's finished_at
19:12:10.676028. That is a recurring fault's loop as NVRx 0.7.0 logs it: 4 cycles, 3 without progress.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from ftqual import contract
from ftqual.launch import run_schema
from ftqual.verification.checks import waived_by
from ftqual.verification.checks.recurring import CURABLE_STOPPED, RECURRING_OUTCOME
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data"
LOOP = "megatron-h200-checkpoint-faults-1gpu/runs/tracker_missing_iteration-20261204T190923Z-2756-a1"
CURABLE_STOPPED_RUN = "megatron-h200-extended-1gpu/second/runs/restarts_exhausted-20261202T054950Z-1820-a1"
CURABLE_FINISHED_RUN = "megatron-h200-extended-1gpu/second/runs/double_fault-20261202T055352Z-3673-a1"
RECURRING_KINDS = ("recurring_exception", "nan_loss", "setup_crash")
# finished_at - injected_at of the base run: 19:12:10.676028 - 19:10:05.101214
LOOP_WALL_S = 125.574814
NVRX_STOP_LINES = ("EARLY TERMINATION", "no progress across restarts")


@pytest.fixture(autouse=True)
def recurring_registry(monkeypatch):
    """The family `recurring` in the fault registry, set here so that these tests judge the same kinds
    whether or not the injection side's entries have landed. The first failure of the recorded runs is a
    kill, so each kind is detected here by a worker's exit with a kill's or an exception's code (the
    registry's own detection path is the injection side's; this check judges the stop, not the detection)."""
    if "recurring" not in contract.FAMILIES:
        monkeypatch.setattr(contract, "FAMILIES", (*contract.FAMILIES, "recurring"))
    for name in RECURRING_KINDS:
        kind = dataclasses.replace(
            contract.FAULT_KINDS[name], detection="exit", exit_codes=(1, -9, 137), checks=(RECURRING_OUTCOME,)
        )
        monkeypatch.setitem(contract.FAULT_KINDS, name, kind)
        monkeypatch.setitem(contract.REQUIRED_CHECKS, name, kind.required_checks)
    monkeypatch.setattr(run_schema, "FAULTS", tuple(contract.FAULT_KINDS))


def _copy(tmp_path: Path, run: str) -> Path:
    dest = tmp_path / Path(run).name
    shutil.copytree(DATA / run, dest, symlinks=True)
    return dest


def _edit_json(path: Path, **updates: object) -> None:
    data = json.loads(path.read_text())
    data.update(updates)
    path.write_text(json.dumps(data))


def _loop(tmp_path: Path, fault: str = "recurring_exception", **meta: object) -> Path:
    """The base run as a recurring fault's: run.json asks for `fault` (no checkpoint damage, max_restarts 5
    as config/recurring_faults.yaml has it, NVRx's default no-progress cycles), the marker names it."""
    run = _copy(tmp_path, LOOP)
    settings = {"fault": fault, "scenario": fault, "checkpoint_damage": "none", "max_restarts": 5}
    _edit_json(run / "run.json", **{**settings, "max_no_progress_cycles": None, **meta})
    # the recorded damage moved the checkpoint aside; a recurring fault leaves it whole
    (run / "checkpoints" / "iter_0000005.ftqual-moved").rename(run / "checkpoints" / "iter_0000005")
    marker = json.loads((run / "fault_injected.json").read_text())
    marker.pop("damage")
    marker["fault"] = fault
    (run / "fault_injected.json").write_text(json.dumps(marker))
    return run


def _drop_lines(log: Path, *needles: str) -> None:
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    kept = [line for line in lines if not any(n in line for n in needles)]
    assert len(kept) < len(lines)
    log.write_text("".join(kept), encoding="utf-8")


def _check(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == RECURRING_OUTCOME)


@pytest.mark.parametrize("fault", RECURRING_KINDS)
def test_a_loop_the_progress_tracker_stopped_within_the_bound_passes(tmp_path, fault):
    report = build_report(_loop(tmp_path, fault), None)
    check = _check(report)
    assert check["status"] == "pass", check
    values = check["values"]
    assert values["stopped_by"] == "progress_tracker" and values["stop_exit_code"] == 93
    assert values["cycles"] == 4 and values["bound_cycles"] == 4 and values["max_no_progress_cycles"] == 3
    assert values["cycles_without_progress"] == [1, 2, 3] and values["outcome"] == "stopped"
    # the bill, by hand: 1 GPU x (finished_at - injected_at)
    assert values["burned_wall_s"] == round(LOOP_WALL_S, 3) and values["burned_gpu_s"] == 125.6
    assert "Slurm: FAILED, requeue: no: a loop" in values["scheduler"]
    assert "NVRx's progress tracker stopped the job (exit 93)" in check["detail"]
    assert "4 cycle(s), bound 4 (3 no-progress cycles (NVRx's default) + the first cycle)" in check["detail"]
    assert any(ev["path"] == "logs/launcher.log" and "no progress" in ev["text"] for ev in check["evidence"])
    metrics = report["metrics"]
    assert (metrics["stopped_by"], metrics["stop_exit_code"], metrics["burned_cycles"]) == (
        "progress_tracker",
        93,
        3,
    )
    assert metrics["burned_gpu_s"] == 125.6
    # a stopped loop has no recovery to prove: those checks skip, saying why; the exit 93 is the design's
    # (every waived check this report carries: exact_replay and checkpoint_equal only where replay is exact)
    skipped = {c["id"]: c for c in report["checks"] if c["id"] in waived_by(RECURRING_OUTCOME)}
    carried = {c["id"] for c in report["checks"]}
    assert set(skipped) == set(waived_by(RECURRING_OUTCOME)) & carried
    assert {"resumed_from_checkpoint", "progress_after_resume", "replay_consistency"} <= set(skipped)
    assert all(c["status"] == "skip" and "recurring_fault_outcome" in c["detail"] for c in skipped.values())
    assert not any(c["id"] == "launcher_exit" for c in report["checks"])
    assert report["expected"]["exit_code"] == "non-zero" and report["expected"]["bound_cycles"] == 4


def test_a_loop_with_every_other_check_passing_is_a_pass(tmp_path):
    report = build_report(_loop(tmp_path), None)
    failing = [(c["id"], c["status"]) for c in report["checks"] if c["status"] in ("fail", "inconclusive")]
    assert report["verdict"] == "pass", failing
    assert "cause" not in report


def test_the_bill_is_the_world_size_times_the_wall_time(tmp_path):
    check = _check(build_report(_loop(tmp_path, world_size=8), None))
    assert check["values"]["world_size"] == 8
    assert check["values"]["burned_gpu_s"] == round(LOOP_WALL_S * 8, 1) == 1004.6


def test_without_finished_at_the_bill_ends_at_the_launcher_s_last_line(tmp_path):
    run = _loop(tmp_path, finished_at=None)
    check = _check(build_report(run, None))
    # launcher.log's last timestamped fact: the profiling event at 19:12:06.29x (before finished_at)
    assert check["status"] == "pass"
    assert LOOP_WALL_S - 5 < check["values"]["burned_wall_s"] < LOOP_WALL_S


def test_a_loop_past_the_bound_fails(tmp_path):
    # negative control: two no-progress cycles configured, the job ran four cycles
    report = build_report(_loop(tmp_path, max_no_progress_cycles=2), None)
    check = _check(report)
    assert check["status"] == "fail" and check["values"]["outcome"] == "kept_restarting"
    assert (
        "a loop past the bound: 4 cycle(s), bound 3 (2 no-progress cycles (max_no_progress_cycles)"
        in (check["detail"])
    )
    assert report["verdict"] == "fail"
    assert report["cause"].startswith("a loop past the bound") and "125.6 GPU-s" in report["cause"]


def test_max_restarts_lower_than_the_no_progress_cycles_is_the_bound(tmp_path):
    check = _check(build_report(_loop(tmp_path, max_restarts=2), None))
    assert check["values"]["bound_cycles"] == 3 and check["status"] == "fail"
    assert "bound 3 (max_restarts 2 + the first cycle)" in check["detail"]


def test_a_run_to_max_restarts_under_a_lower_no_progress_bound_fails(tmp_path):
    # negative control: NVRx's tracker never stopped it; ft_launcher spent all 3 restarts (exit 1)
    run = _loop(tmp_path, max_restarts=3, max_no_progress_cycles=2, exit_code=1)
    _drop_lines(run / "logs" / "launcher.log", *NVRX_STOP_LINES)
    report = build_report(run, None)
    check = _check(report)
    assert check["values"]["stopped_by"] == "max_restarts" and check["values"]["stop_exit_code"] == 1
    assert check["status"] == "fail"
    assert "ft_launcher's restarts were exhausted (max_restarts 3, exit 1)" in check["detail"]
    assert "it ran until max restarts (3) while the no-progress bound (2) was lower" in check["detail"]
    cited = [ev["text"] for ev in check["evidence"] if ev["path"] == "logs/launcher.log"]
    assert any("failed (exitcode: 1)" in text for text in cited)
    assert report["verdict"] == "fail"


def test_the_workload_s_own_stop_within_the_bound_passes(tmp_path):
    # exit 1 with restarts left (3 of max_restarts 5 spent) and no NVRx stop line: the job ended it itself
    run = _loop(tmp_path, exit_code=1)
    _drop_lines(run / "logs" / "launcher.log", *NVRX_STOP_LINES)
    check = _check(build_report(run, None))
    assert check["status"] == "pass", check
    assert check["values"]["stopped_by"] == "workload"
    assert "the job ended with exit 1 without NVRx's stop" in check["detail"]


def test_an_exit_93_without_nvrx_s_line_is_inconclusive_never_a_pass(tmp_path):
    run = _loop(tmp_path)
    _drop_lines(run / "logs" / "launcher.log", *NVRX_STOP_LINES)
    report = build_report(run, None)
    check = _check(report)
    assert check["status"] == "inconclusive" and check["values"]["stopped_by"] is None
    assert "exit 93 without NVRx's no-progress line in launcher.log" in check["detail"]
    assert report["verdict"] == "inconclusive"


def test_an_exit_0_short_of_train_iters_fails(tmp_path):
    # negative control: the launcher claims success, training stopped at iteration 5 of 30 (a silent end)
    report = build_report(_loop(tmp_path, exit_code=0), None)
    check = _check(report)
    assert check["status"] == "fail" and check["values"]["outcome"] == "silent_end"
    assert (
        "exit 0 claimed without the training reaching train_iters (silent end: exit 0 at iteration"
        in (check["detail"])
    )
    assert report["verdict"] == "fail"


def test_a_run_stopped_from_outside_is_inconclusive(tmp_path):
    check = _check(build_report(_loop(tmp_path, interrupted_by="SIGTERM"), None))
    assert check["status"] == "inconclusive" and "stopped from outside (SIGTERM)" in check["detail"]


def test_a_recurring_fault_that_never_came_fails(tmp_path):
    run = _loop(tmp_path)
    (run / "fault_injected.json").unlink()
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and check["values"]["outcome"] == "not_injected"


def test_a_curable_job_stopped_while_making_progress_fails(tmp_path):
    # negative control, recorded: two kills, each after a new checkpoint (5, then 10), max_restarts 1:
    # ft_launcher ran out of restarts although every cycle made progress
    report = build_report(_copy(tmp_path, CURABLE_STOPPED_RUN), None)
    check = _check(report)
    assert check["status"] == "fail" and check["values"]["outcome"] == "curable_stopped"
    assert check["detail"].startswith(f"{CURABLE_STOPPED}: ft_launcher's restarts were exhausted")
    assert (
        check["values"]["cycles_with_progress"] == [0, 1] and check["values"]["stopped_by"] == "max_restarts"
    )
    assert report["verdict"] == "fail"


def test_a_curable_job_stopped_by_the_progress_tracker_while_making_progress_fails(tmp_path):
    # the tracker said no progress (its iteration file lagging, say) while the logs show new checkpoints
    run = _copy(tmp_path, CURABLE_STOPPED_RUN)
    _edit_json(run / "run.json", exit_code=93, max_restarts=3)
    with (run / "logs" / "launcher.log").open("a", encoding="utf-8") as log:
        log.write(
            "2026-12-02 05:51:13,884 [ERROR] [vm] [workload:?(?) infra:?(?)] launcher.py:619 [default] "
            "Progress tracker detected no progress across restarts. No more restarts will be attempted.\n"
        )
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and check["values"]["stopped_by"] == "progress_tracker"
    assert CURABLE_STOPPED in check["detail"]


def test_a_curable_job_that_finished_passes(tmp_path):
    check = _check(build_report(_copy(tmp_path, CURABLE_FINISHED_RUN), None))
    assert check["status"] == "pass" and check["values"]["outcome"] == "not_stopped"
    assert check["values"]["stopped_by"] == "none" and check["values"]["stop_exit_code"] == 0


def test_a_curable_job_stopped_after_a_cycle_without_progress_is_the_recovery_checks_to_judge(tmp_path):
    # the base run as a kill injected twice: cycles 1-3 made no progress, so the stop is no curable job's
    run = _copy(tmp_path, LOOP)
    _edit_json(run / "run.json", checkpoint_damage="none", injections=2)
    check = _check(build_report(run, None))
    assert check["status"] == "skip" and "after cycle(s) [1, 2, 3] made no progress" in check["detail"]


def test_a_single_fault_carries_no_such_check():
    report = build_report(DATA / "megatron-h200-1gpu" / "kill", None)
    assert all(c["id"] != RECURRING_OUTCOME for c in report["checks"])
    assert "stopped_by" not in report["metrics"]


def test_a_marker_per_recurrence_judges_only_the_first_failure_as_a_fault_s(tmp_path):
    # the fault marks every cycle it strikes (fault_injected.<k>.json): the recurrences have no new
    # checkpoint before them and the last no replacement, by design; the stop is this check's
    run = _loop(tmp_path)
    first = json.loads((run / "fault_injected.json").read_text())
    for k, cycle in ((2, 1), (3, 2), (4, 3)):
        marker = dict(first, cycle=cycle, injection=k, baseline_iteration=5)
        (run / f"fault_injected.{k}.json").write_text(json.dumps(marker))
    report = build_report(run, None)
    failing = [(c["id"], c["detail"]) for c in report["checks"] if c["status"] in ("fail", "inconclusive")]
    assert report["verdict"] == "pass", failing
    assert _check(report)["status"] == "pass"
