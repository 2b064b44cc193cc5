"""storage_fault_outcome (ftqual.verification.checks.storage) on real smoke runs of disk_full and
writer_stall (tests/data/smoke-storage-faults): it passes a loud stop and a recovery, and FAILs (negative
controls) a silent exit 0, saves lost under an exit 0, a load of the save the fault broke, a tracker on an
incomplete checkpoint, a loop past the bound, and faults that were not made as asked (no capped filesystem,
room left by the filler, no writer or the rank itself stopped)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.checks.storage import MITIGATIONS, STORAGE_STOPPED
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data"
FIXTURE = DATA / "smoke-storage-faults"


def _copy(tmp_path: Path, run: str) -> Path:
    dest = tmp_path / run
    shutil.copytree(FIXTURE / run, dest, symlinks=True)
    return dest


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def _check(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == "storage_fault_outcome")


def _statuses(report: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


def test_a_full_disk_that_stops_the_job_loudly_within_the_bound_passes():
    report = build_report(FIXTURE / "disk_full", None)
    check = _check(report)
    assert check["status"] == "pass", check
    values = check["values"]
    assert values["outcome"] == "stopped_loudly" and values["exit_code"] == 93
    assert (values["failed_save"], values["final_tracker"], values["cycles_after_fault"]) == (8, 4, 3)
    assert values["free_bytes_after_fill"] < values["checkpoint_bytes"] and values["cap_bytes"] == 256 << 20
    assert values["gpu_s_without_progress"] > 0
    statuses = _statuses(report)
    assert statuses["failure_detected_and_restarted"] == "pass"
    skipped = {c["id"]: c["detail"] for c in report["checks"] if c["detail"] == STORAGE_STOPPED}
    assert {"resumed_from_checkpoint", "clean_finish", "replay_consistency"} <= set(skipped)
    assert report["verdict"] == "pass", statuses


def test_a_stalled_writer_detected_by_the_checkpointing_timeout_and_recovered_passes():
    report = build_report(FIXTURE / "writer_stall", None)
    check = _check(report)
    assert check["status"] == "pass", check
    values = check["values"]
    assert values["outcome"] == "recovered" and values["final_tracker"] == 16 and values["failed_save"] == 8
    assert [w["pid"] for w in values["writers"]] == [8892]
    fdr = next(c for c in report["checks"] if c["id"] == "failure_detected_and_restarted")
    assert fdr["status"] == "pass" and "'checkpointing' section timeout" in fdr["detail"]
    assert report["verdict"] == "pass", _statuses(report)


def test_a_rank_fault_carries_no_storage_check():
    report = build_report(DATA / "megatron-h200-1gpu" / "kill", None)
    assert all(c["id"] != "storage_fault_outcome" for c in report["checks"])


def test_a_silent_exit_0_after_the_disk_filled_fails(tmp_path):
    run = _copy(tmp_path, "disk_full")
    _edit_json(run / "run.json", exit_code=0)
    report = build_report(run, None)
    check = _check(report)
    assert check["status"] == "fail" and check["values"]["outcome"] == "silent_end", check
    assert MITIGATIONS["silent_end"] in check["detail"]
    assert report["verdict"] == "fail"


def test_saves_lost_under_an_exit_0_fail(tmp_path):
    run = _copy(tmp_path, "writer_stall")
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("12")
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and check["values"]["outcome"] == "saves_failed_silently", check
    assert "short of the last save begun (16)" in check["detail"]


def test_a_replacement_that_loads_the_save_the_fault_broke_fails(tmp_path):
    run = _copy(tmp_path, "writer_stall")
    log = run / "logs" / "train_cycle1.log"
    text = log.read_text()
    text = text.replace("checkpoints at iteration 4", "checkpoints at iteration 8")
    text = text.replace("p 1/1 ] at iteration 4", "p 1/1 ] at iteration 8")
    log.write_text(text)
    report = build_report(run, None)
    check = _check(report)
    assert check["status"] == "fail" and check["values"]["outcome"] == "loaded_incomplete", check
    assert report["verdict"] == "fail"


def test_a_tracker_on_an_incomplete_checkpoint_fails(tmp_path):
    run = _copy(tmp_path, "writer_stall")
    (run / "checkpoints" / "iter_0000016" / ".metadata").unlink()
    check = _check(build_report(run, None))
    assert check["status"] == "fail", check
    assert "the tracker names iteration 16, not a completed checkpoint" in check["detail"]


def test_restarts_past_the_bound_fail_as_kept_restarting(tmp_path):
    run = _copy(tmp_path, "disk_full")
    _edit_json(run / "run.json", max_restarts=2)
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and check["values"]["outcome"] == "kept_restarting", check
    assert "more than the 2 allowed" in check["detail"]


@pytest.mark.parametrize("log", ["logs/launcher.log", "logs/train_cycle3.log"])
def test_a_loud_stop_whose_record_is_cut_short_is_never_a_pass(tmp_path, log):
    """The stop's pass rests on the whole record of the ending: the launcher's log or a later cycle's log cut
    mid-line leaves the outcome unknown (never stopped_loudly), and the run is no pass."""
    run = _copy(tmp_path, "disk_full")
    data = (run / log).read_bytes()
    (run / log).write_bytes(data[: len(data) // 2].rstrip(b"\n") + b" cut")
    report = build_report(run, None)
    check = _check(report)
    assert check["status"] == "inconclusive" and check["values"]["outcome"] is None, check
    assert "cut short" in check["detail"] and report["verdict"] != "pass"


def test_a_disk_full_without_the_capped_filesystem_fails(tmp_path):
    run = _copy(tmp_path, "disk_full")
    _edit_json(run / "run.json", storage=None)
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and "no capped filesystem" in check["detail"], check


def test_a_filler_that_left_room_for_a_checkpoint_fails(tmp_path):
    run = _copy(tmp_path, "disk_full")
    marker = json.loads((run / "fault_injected.json").read_text())
    storage = marker["storage"]
    storage["filesystem_after"]["free_bytes"] = storage["checkpoint_bytes"] + 1
    _edit_json(run / "fault_injected.json", storage=storage)
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and "the disk was not full" in check["detail"], check


def test_a_stall_without_a_writer_or_of_the_rank_itself_fails(tmp_path):
    for writers, words in (([], "names no stopped writer"), (None, "is the rank itself")):
        run = _copy(tmp_path / str(len(words)), "writer_stall")
        marker = json.loads((run / "fault_injected.json").read_text())
        storage = marker["storage"]
        if writers is None:
            storage["writers"][0]["pid"] = marker["pid"]
        else:
            storage["writers"] = writers
        _edit_json(run / "fault_injected.json", storage=storage)
        check = _check(build_report(run, None))
        assert check["status"] == "fail" and words in check["detail"], check


def test_a_marker_without_the_storage_record_fails(tmp_path):
    run = _copy(tmp_path, "disk_full")
    _edit_json(run / "fault_injected.json", storage=None)
    check = _check(build_report(run, None))
    assert check["status"] == "fail" and "records storage fault None" in check["detail"], check
