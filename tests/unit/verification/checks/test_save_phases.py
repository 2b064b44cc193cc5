"""Kills timed to a phase of a save (contract.SAVE_PHASES): interrupted_save_discarded holds them to what the
marker saw on disk at the kill, and to the replacement restoring the tracker's checkpoint, never the save in
flight (negative controls on a real H200 in-save kill made into each phase)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

RUN = Path(__file__).resolve().parents[3] / "data" / "megatron-h200x2-extended" / "kill_in_save"

ON_DISK = {
    "save_staged": {"shards": 0, "bytes": 0, "metadata": False, "metadata_json": False},
    "save_shards_partial": {"shards": 1, "bytes": 4096, "metadata": False, "metadata_json": False},
    "save_shards_complete": {"shards": 4, "bytes": 190_000_000, "metadata": False, "metadata_json": False},
    "save_finalized": {"shards": 4, "bytes": 190_000_000, "metadata": True, "metadata_json": False},
}


def _phase(tmp_path: Path, phase: str, on_disk: dict | None) -> Path:
    run = tmp_path / "run"
    shutil.copytree(RUN, run, symlinks=True)
    meta = json.loads((run / "run.json").read_text())
    meta["fault_timing"] = phase
    (run / "run.json").write_text(json.dumps(meta))
    marker = json.loads((run / "fault_injected.json").read_text())
    marker.update(timing=phase, placement=phase)
    if on_disk is not None:
        marker["on_disk"] = on_disk
    (run / "fault_injected.json").write_text(json.dumps(marker))
    return run


def _check(run: Path) -> dict:
    report = build_report(run, None)
    return next(c for c in report["checks"] if c["id"] == "interrupted_save_discarded")


def test_the_recorded_in_save_kill_passes_as_it_was():
    assert _check(RUN)["status"] == "pass"


@pytest.mark.parametrize("phase", sorted(ON_DISK))
def test_a_kill_in_its_phase_that_the_replacement_survived_passes(tmp_path, phase):
    check = _check(_phase(tmp_path, phase, ON_DISK[phase]))
    assert check["status"] == "pass", check["detail"]
    assert f"killed in {phase}" in check["detail"] and check["values"]["on_disk"] == ON_DISK[phase]


@pytest.mark.parametrize(("phase", "seen"), [
    ("save_staged", "save_shards_partial"),
    ("save_shards_partial", "save_finalized"),
    ("save_finalized", "save_shards_complete"),
])  # fmt: skip
def test_a_kill_that_landed_in_another_phase_fails(tmp_path, phase, seen):
    check = _check(_phase(tmp_path, phase, ON_DISK[seen]))
    assert check["status"] == "fail" and f"the kill asked for {phase} found" in check["detail"]


def test_a_phase_kill_without_its_record_of_the_disk_fails(tmp_path):
    check = _check(_phase(tmp_path, "save_shards_partial", None))
    assert check["status"] == "fail" and "records nothing of the save on disk" in check["detail"]


def test_a_replacement_that_loaded_the_save_in_flight_fails(tmp_path):
    run = _phase(tmp_path, "save_finalized", ON_DISK["save_finalized"])
    marker = json.loads((run / "fault_injected.json").read_text())
    saved, completed = marker["save_iteration"], marker["checkpoint_iteration"]
    log = run / "logs" / "train_cycle1.log"
    text = log.read_text()
    assert f"at iteration {completed}" in text
    log.write_text(text.replace(f"at iteration {completed}", f"at iteration {saved}"))
    check = _check(run)
    assert check["status"] == "fail"
    assert f"restored the interrupted save of iteration {saved}" in check["detail"]


@pytest.mark.parametrize(("stopped", "said"), [
    (True, "seen with the rank stopped, before its kill"),
    (False, "its threads not all shown stopped"),
])  # fmt: skip
def test_a_kill_made_by_the_helper_says_how_the_disk_was_seen(tmp_path, stopped, said):
    run = _phase(tmp_path, "save_shards_partial", ON_DISK["save_shards_partial"])
    marker = json.loads((run / "fault_injected.json").read_text())
    marker["freeze"] = {"helper_pid": 7, "threads_stopped": stopped, "stop_wait_ms": 0.4, "missed_before": 0}
    (run / "fault_injected.json").write_text(json.dumps(marker))
    check = _check(run)
    assert check["status"] == "pass" and said in check["detail"], check["detail"]
