"""Storage that fails and a corrupted shard on one H100 (tests/data/megatron-h100-storage-corruption-1gpu),
Megatron-LM core_v0.19.0 through the README's command: what that stack did, as the verifier reads it from the
run directories (the outcomes, their evidence and the exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

from ftqual.verification.verify import build_report

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "megatron-h100-storage-corruption-1gpu"


def _run(name: str) -> Path:
    return next((FIXTURE / "runs").glob(f"{name}-2026*"))


def _check(report: dict, cid: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == cid)


def test_a_full_checkpoint_filesystem_fails_every_later_save_until_nvrx_stops_the_job():
    report = build_report(_run("disk_full"), None)
    assert report["verdict"] == "pass"
    values = _check(report, "storage_fault_outcome")["values"]
    assert (values["outcome"], values["exit_code"], values["final_tracker"]) == ("stopped_loudly", 93, 5)
    assert values["free_bytes_after_fill"] < values["checkpoint_bytes"]
    assert values["cycles_after_fault"] == 3 == values["bound_cycles"]
    assert "detected by a worker's exit" in _check(report, "failure_detected_and_restarted")["detail"]


def test_a_stalled_writer_is_caught_by_the_checkpointing_timeout_and_the_job_recovers():
    run = sorted((FIXTURE / "runs").glob("writer_stall-*"))[-1]  # the first attempt was stopped from outside
    report = build_report(run, None)
    assert report["verdict"] == "pass"
    values = _check(report, "storage_fault_outcome")["values"]
    assert (values["outcome"], values["failed_save"], values["final_tracker"]) == ("recovered", 10, 30)
    assert "spawn_main" in values["writers"][0]["command"]  # the persistent checkpoint worker, not the rank
    detected = _check(report, "failure_detected_and_restarted")["detail"]
    assert "detected by the 'checkpointing' section timeout" in detected
    # where the rank waited: scheduling the next save behind the stopped worker
    held = (run / "dumps").glob("*.json")
    assert any("schedule_async_call" in p.read_text() for p in held)


def test_a_corrupted_shard_loads_in_megatron_without_an_error():
    run = _run("shard_corrupted")
    report = build_report(run, None)
    damage = json.loads((run / "fault_injected.json").read_text())["damage"]
    assert damage["size_after"] == damage["size_before"] and damage["length"] == 4096
    assert report["verdict"] == "fail"
    assert report["cause"].startswith("checkpoint_break_outcome: cycle 1 loaded the damaged checkpoint 5")
    assert _check(report, "checkpoint_break_outcome")["values"]["outcome"] == "loaded_damaged"
    assert _check(report, "replay_consistency")["status"] == "fail"  # it trained on from other weights
    assert report["metrics"]["launcher_exit_code"] == 0


def test_verify_integrity_makes_the_same_damage_stop_loudly():
    run = _run("shard_corrupted_verified")
    report = build_report(run, None)
    assert report["verdict"] == "pass"
    values = _check(report, "checkpoint_break_outcome")["values"]
    ending = (values["outcome"], values["exit_code"], values["cycles_after_damage"])
    assert ending == ("stopped_loudly", 93, 3)
    for cycle in (1, 2, 3):
        log = (run / "logs" / f"train_cycle{cycle}.log").read_text()
        assert "Checkpoint integrity verification failed for 1 file(s)" in log
        assert "__0_0.distcp: hash mismatch" in log
