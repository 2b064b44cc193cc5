"""checkpoint_break_outcome (ftqual.verification.checks.broken_checkpoint) on real H200 runs made into
damaged ones: it passes a recovery and a loud stop within the bound, and FAILs (negative controls) a silent
end, a restart from scratch, a loop past the bound, a load of the damaged files and a kill that left no
damage, each with its mitigation; a loud stop keeps the recovery checks out of the verdict."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ftqual.verification.checks import waived_by
from ftqual.verification.checks.broken_checkpoint import MITIGATIONS
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data"


def _copy(tmp_path: Path, run: str) -> Path:
    dest = tmp_path / run.replace("/", "_")
    shutil.copytree(DATA / run, dest, symlinks=True)
    return dest


def _damaged(run: Path, kind: str, iteration: int, *, marker: dict | None = None, **meta) -> Path:
    """run.json asks for `kind`; the marker records it at `iteration` (a fault-free run gets a kill's
    marker at cycle 0 on rank 0)."""
    record = json.loads((run / "run.json").read_text())
    record.update(checkpoint_damage=kind, **meta)
    if record["fault"] == "none":
        record.update(fault="kill", fault_rank=0)
    (run / "run.json").write_text(json.dumps(record))
    path = run / "fault_injected.json"
    data = json.loads(path.read_text()) if path.exists() else {
        "schema": "ftqual.fault/v1", "run_id": record["run_id"], "fault": "kill", "rank": 0, "local_rank": 0,
        "host": "vm", "pid": 1, "cycle": 0, "baseline_iteration": 0, "checkpoint_iteration": iteration,
        "injected_at": record["started_at"], "placement": "step", "section": "step",
    }  # fmt: skip
    damage = {
        "kind": kind,
        "iteration": iteration,
        "path": f"iter_{iteration:07d}",
        "at": data["injected_at"],
    }
    if marker is not None:
        damage = marker
    if damage:
        data["damage"] = damage
    path.write_text(json.dumps(data))
    return run


def _check(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == "checkpoint_break_outcome")


def _cut_after(log: Path, last: int) -> None:
    kept = []
    for line in log.read_text(encoding="utf-8").splitlines(keepends=True):
        m = re.search(r" iteration +(\d+)/", line) or re.search(r"checkpoint from iteration +(\d+)", line)
        if m and int(m.group(1)) > last:
            continue
        kept.append(line)
    log.write_text("".join(kept), encoding="utf-8")


def test_a_run_without_damage_carries_no_such_check():
    report = build_report(DATA / "megatron-h200-1gpu" / "kill", None)
    assert all(c["id"] != "checkpoint_break_outcome" for c in report["checks"])


def test_a_recovery_from_a_whole_checkpoint_passes(tmp_path):
    run = _damaged(_copy(tmp_path, "megatron-h200-1gpu/kill"), "tracker_not_a_number", 5)
    report = build_report(run, None)
    check = _check(report)
    assert check["status"] == "pass", check
    assert check["values"]["outcome"] == "recovered" and check["values"]["damaged_iteration"] == 5
    assert report["verdict"] == "pass"


def test_a_silent_end_fails_with_its_mitigation(tmp_path):
    run = _damaged(_copy(tmp_path, "megatron-h200-1gpu/kill"), "tracker_not_a_number", 5)
    _cut_after(run / "logs" / "train_cycle1.log", 5)
    report = build_report(run, None)
    check = _check(report)
    assert check["status"] == "fail" and check["values"]["outcome"] == "silent_end"
    assert "silent end: exit 0 at iteration 10 of 30 after the tracker_not_a_number damage" in check["detail"]
    assert MITIGATIONS["silent_end"] in check["detail"]
    assert report["verdict"] == "fail" and report["cause"].startswith("silent end")


def test_a_restart_from_scratch_fails_with_its_mitigation(tmp_path):
    run = _damaged(_copy(tmp_path, "megatron-h200x2-extended/no_resume"), "tracker_removed", 5)
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and check["values"]["outcome"] == "restarted_from_scratch"
    assert "--exit-on-missing-checkpoint" in check["detail"]


@pytest.mark.parametrize("kind", ["shard_truncated", "shard_corrupted"])
def test_a_load_of_the_damaged_files_fails(tmp_path, kind):
    run = _damaged(_copy(tmp_path, "megatron-h200-1gpu/kill"), kind, 5)
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and check["values"]["outcome"] == "loaded_damaged"
    assert f"cycle 1 loaded the damaged checkpoint 5 ({kind}) without an error" in check["detail"]
    assert check["values"]["mitigation"] == MITIGATIONS["loaded_damaged"]
    assert "--verify-integrity (torch_dist) re-hashes" in check["detail"]


def test_a_damaged_load_under_verify_integrity_is_the_stack_s_to_answer(tmp_path):
    run = _damaged(_copy(tmp_path, "megatron-h200-1gpu/kill"), "shard_corrupted", 5, verify_integrity=True)
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and check["values"]["outcome"] == "loaded_damaged"
    assert "--verify-integrity was on and did not stop the load" in check["detail"]


@pytest.mark.parametrize("marker", [{}, {"kind": "tracker_removed", "iteration": 5}])
def test_a_kill_that_left_no_damage_or_another_fails(tmp_path, marker):
    run = _damaged(_copy(tmp_path, "megatron-h200-1gpu/kill"), "shard_truncated", 5, marker=marker)
    check = _check(build_report(run, None))
    assert check["status"] == "fail"
    words = "records no damage" if not marker else "records damage 'tracker_removed', run.json asked for"
    assert words in check["detail"]


def test_a_loud_stop_within_the_bound_passes_and_skips_the_recovery_checks(tmp_path):
    # exit 93 after three replacement cycles that each crashed after loading iteration 30 (a damage that
    # leaves iteration 30's files whole: loading them is no fault)
    run = _damaged(
        _copy(tmp_path, "megatron-h200-matrix-m014-crash-at-end/baseline"), "tracker_not_a_number", 30
    )
    report = build_report(run, None)
    check = _check(report)
    assert check["status"] == "pass", check
    values = check["values"]
    assert values["outcome"] == "stopped_loudly" and values["exit_code"] == 93
    assert values["cycles_after_damage"] == 3 and values["bound_cycles"] == 3
    assert values["gpu_s_without_progress"] > 0
    assert "stopped loudly: exit 93 after 3 replacement cycle(s)" in check["detail"]
    skipped = {c["id"]: c for c in report["checks"] if c["id"] in waived_by("checkpoint_break_outcome")}
    assert skipped and all(c["status"] == "skip" for c in skipped.values())
    assert not any(c["id"] == "launcher_exit" for c in report["checks"])


def test_a_loop_past_the_bound_fails_with_its_cycles(tmp_path):
    run = _damaged(
        _copy(tmp_path, "megatron-h200-matrix-m014-crash-at-end/baseline"),
        "tracker_not_a_number",
        30,
        max_restarts=2,
    )
    report = build_report(run, None)
    check = _check(report)
    assert check["status"] == "fail" and check["values"]["outcome"] == "kept_restarting"
    assert "3 replacement cycles, more than the 2 allowed" in check["detail"]
    assert "--ft-max-no-progress-cycles" in check["detail"]
    assert report["verdict"] == "fail"
