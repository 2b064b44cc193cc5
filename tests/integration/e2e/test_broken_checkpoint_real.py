"""End to end on CPU (real ft_launcher, the smoke workload behaving as Megatron-LM core_v0.19.0 does on a
broken checkpoint): each damage of config/checkpoint_faults.yaml is made by the fault rank before its kill,
the replacement meets it, and `ftqual verify` names the ending: the two silent failures of that Megatron (a
tracker that is not a number ends every rank 0; no tracker trains from random) FAIL with their cause and
mitigation, the two loud ones (a missing iteration directory, a truncated shard) stop non-zero within the
bound and pass; a corrupted shard loads without an error and FAILs, unless --verify-integrity (run.json's
verify_integrity) makes its load raise and the job stop loudly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.launch import FAST_STEPS, SHORT_FAULT_RUN, launch_smoke, verify_run

RUN = {**SHORT_FAULT_RUN, "TRAIN_ITERS": "12", "NVRX_MAX_RESTARTS": "3"}
MOVED = ".ftqual-moved"


def _launch(repo_root: Path, tmp_path: Path, damage: str, **env: str) -> tuple[Path, dict, dict]:
    run_dir = launch_smoke(
        repo_root,
        tmp_path,
        damage,
        "kill",
        [*FAST_STEPS],
        {**RUN, "NVRX_CHECKPOINT_DAMAGE": damage, **env},
        timeout=420,
    )
    marker = json.loads((run_dir / "fault_injected.json").read_text())
    assert marker["damage"]["kind"] == damage, marker
    _, report = verify_run(repo_root, run_dir)
    check = next(c for c in report["checks"] if c["id"] == "checkpoint_break_outcome")
    return run_dir, report, check


def test_a_tracker_that_is_not_a_number_ends_the_job_in_silence(repo_root: Path, tmp_path: Path):
    run_dir, report, check = _launch(repo_root, tmp_path, "tracker_not_a_number")
    tracker = (run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_bytes()
    assert tracker and set(tracker) == {0}  # NUL bytes: what the rank left, read by the replacement
    assert json.loads((run_dir / "run.json").read_text())["exit_code"] == 0
    assert "ERROR: Invalid metadata file" in (run_dir / "logs" / "train_cycle1.log").read_text()
    assert report["verdict"] == "fail" and report["cause"].startswith("silent end: exit 0 at iteration")
    assert check["status"] == "fail" and check["values"]["outcome"] == "silent_end", check
    assert "have the job script fail an exit 0" in check["detail"]


def test_a_missing_tracker_restarts_training_from_scratch(repo_root: Path, tmp_path: Path):
    run_dir, report, check = _launch(repo_root, tmp_path, "tracker_removed")
    ckpt = run_dir / "checkpoints"
    assert (ckpt / f"latest_checkpointed_iteration.txt{MOVED}").is_file()  # moved aside, not deleted
    assert report["verdict"] == "fail" and "restarted from scratch" in report["cause"]
    assert check["status"] == "fail" and check["values"]["outcome"] == "restarted_from_scratch", check
    assert "--exit-on-missing-checkpoint" in check["detail"]


def test_a_corrupted_shard_is_loaded_without_an_error(repo_root: Path, tmp_path: Path):
    run_dir, report, check = _launch(repo_root, tmp_path, "shard_corrupted")
    record = json.loads((run_dir / "fault_injected.json").read_text())["damage"]
    assert record["size_after"] == record["size_before"] and record["length"] > 0
    assert check["status"] == "fail" and check["values"]["outcome"] == "loaded_damaged", check
    said = f"loaded the damaged checkpoint {record['iteration']} (shard_corrupted) without an error"
    assert said in check["detail"]
    assert "--verify-integrity (torch_dist) re-hashes" in check["detail"]
    # the scenario's own finding is the cause, before the losses that differ from the baseline because of it
    assert report["verdict"] == "fail" and report["cause"].startswith("checkpoint_break_outcome: cycle ")


@pytest.mark.parametrize(
    ("damage", "verify_integrity"),
    [("tracker_missing_iteration", "0"), ("shard_truncated", "0"), ("shard_corrupted", "1")],
)
def test_a_checkpoint_that_cannot_load_stops_the_job_loudly(
    repo_root: Path, tmp_path: Path, damage: str, verify_integrity: str
):
    run_dir, report, check = _launch(repo_root, tmp_path, damage, NVRX_VERIFY_INTEGRITY=verify_integrity)
    values = check["values"]
    code = json.loads((run_dir / "run.json").read_text())["exit_code"]
    assert code in (1, 93), code  # restarts exhausted, or NVRx's no-progress stop
    assert check["status"] == "pass" and values["outcome"] == "stopped_loudly", check
    assert 1 <= values["cycles_after_damage"] <= values["bound_cycles"] == 3
    assert report["verdict"] == "pass", report.get("cause")
    skipped = {c["id"]: c["status"] for c in report["checks"] if c["id"] == "clean_finish"}
    assert skipped == {"clean_finish": "skip"}
    record = json.loads((run_dir / "fault_injected.json").read_text())["damage"]
    if damage == "tracker_missing_iteration":
        assert (run_dir / "checkpoints" / f"iter_{record['iteration']:07d}{MOVED}").is_dir()
    elif damage == "shard_truncated":
        assert record["size_after"] == record["size_before"] // 2
    else:  # the load re-hashed the shard and raised: Megatron's integrity check, word for word
        failed = (run_dir / "logs" / "train_cycle1.log").read_text()
        assert "Checkpoint integrity verification failed for 1 file(s) in " in failed
        assert json.loads((run_dir / "run.json").read_text())["verify_integrity"] is True
