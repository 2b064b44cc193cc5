"""End to end on CPU, a fault campaign: the real ft_launcher (NVRx 0.7.0) runs the smoke workload through 8
faults drawn from a seed (segfault, hang, abort, gil_lock, kill, sigint, over both ranks), one run of 9
cycles, verified fault by fault; then negative controls, each an edited copy of that run: a process of an
earlier cycle alive at a cycle's start, a restart that skipped the checkpoint load, a plan the run did not
follow. All must FAIL. The smoke workload leaves nothing in /dev/shm; a copy given a leak of a few KiB per
fault (each dead rank's `sem.loky-<pid>-*`) passes with the leak named, and the same copy with a /dev/shm of a
few MiB FAILs, naming the faults until full.
"""

from __future__ import annotations

import json
import re
import shutil
import socket

import pytest

from ftqual.launch import cleanup
from ftqual.verification.verify import build_report, check_by_id, exit_code_for
from tests.integration.e2e.test_e2e_smoke import Run, run_scenario

FAULTS = 8
# Seed 3 draws segfault, hang, abort, gil_lock, segfault, hang, kill, sigint over ranks 0 and 1; its last
# fault arms at iteration 26, so 30 iterations leave its recovery a checkpoint.
CAMPAIGN = {
    "TRAIN_ITERS": "30",
    "SAVE_INTERVAL": "2",
    "NVRX_CAMPAIGN_FAULTS": str(FAULTS),
    "NVRX_CAMPAIGN_SEED": "3",
    "NVRX_CAMPAIGN_MTTI": "4",
    # a 5 s step timeout (25 healthy 0.2 s steps) catches each of the three live faults 5 s sooner than 10 s
    "NVRX_SECTION_TIMEOUTS": "setup:120,step:5,checkpointing:60",
    "NVRX_OUT_OF_SECTION_TIMEOUT": "30",
}
REQUIRED = (
    "checkpoint_before_failure",
    "failure_detected_and_restarted",
    "resumed_from_checkpoint",
    "progress_after_resume",
    "clean_finish",
)


@pytest.fixture(scope="module")
def campaign_run(repo_root, tmp_path_factory) -> Run:
    return run_scenario(
        repo_root, tmp_path_factory.mktemp("e2e-campaign"), "campaign-1", "campaign", CAMPAIGN
    )


def edited_copy(run: Run, tmp_path, name: str):
    copy = tmp_path / name
    shutil.copytree(run.run_dir, copy, symlinks=True)
    return copy


@pytest.mark.timeout(600)
def test_campaign_of_eight_faults_passes_fault_by_fault(campaign_run):
    run = campaign_run
    assert run.rc == 0, f"{run.out}\n{run.err}\n{run.text('logs/launcher.log')[-3000:]}"
    assert cleanup.survivors(run.run_dir) == []
    plan = run.json("campaign_plan.json")
    assert run.json("run.json")["campaign"] == {
        "plan": "campaign_plan.json",
        "seed": 3,
        "faults": FAULTS,
        "mtti_iterations": 4,
    }
    assert run.json("run.json")["max_restarts"] == FAULTS  # follows from K
    kinds = [entry["fault"] for entry in plan["faults"]]
    assert len(set(kinds)) >= 5 and {e["rank"] for e in plan["faults"]} == {0, 1}
    for entry in plan["faults"]:
        k = entry["index"]
        marker = run.json("fault_injected.json" if k == 1 else f"fault_injected.{k}.json")
        assert (marker["plan_index"], marker["fault"], marker["rank"]) == (k, entry["fault"], entry["rank"])
        assert marker["checkpoint_iteration"] >= entry["arm_iteration"] and marker["cycle"] == k - 1
    report = build_report(run.run_dir)
    assert exit_code_for(report) == 0, json.dumps(report["checks"], indent=1)[:6000]
    for cid in (*REQUIRED, "no_leftovers", "campaign_plan_followed", "cycles_do_not_accumulate"):
        assert check_by_id(report, cid)["status"] == "pass", cid
    per_fault = check_by_id(report, "failure_detected_and_restarted")["values"]["faults"]
    assert [f["fault"] for f in per_fault] == kinds and all(f["status"] == "pass" for f in per_fault)
    rows = report["campaign"]["cycles"]
    assert [r["detected_by"].startswith("section") for r in rows] == [
        k in ("hang", "gil_lock") for k in kinds
    ]
    host = socket.gethostname()
    for cycle in range(1, FAULTS + 1):
        record = run.json(f"leftovers/{host}.cycle{cycle}.json")
        assert record["alive"] == [] and isinstance(record["agent_open_fds"], int)
        assert isinstance(record["shm_segments"], list)
        assert record["shm"]["count"] == len(record["shm_segments"]) and record["shm"]["fs"]["size_bytes"] > 0
    assert plan["horizon_faults"] == 1000
    good = report["campaign"]["goodput"]
    assert 0 < good["goodput_measured"] < 1 and 0 < good["projected"]["goodput"] < 1


def verdict_of(copy) -> tuple[int, dict]:
    report = build_report(copy)
    return exit_code_for(report), {c["id"]: c["status"] for c in report["checks"]}


@pytest.mark.timeout(300)
def test_a_process_left_alive_at_one_cycle_start_fails(campaign_run, tmp_path):
    copy = edited_copy(campaign_run, tmp_path, "leaked")
    path = copy / "leftovers" / f"{socket.gethostname()}.cycle4.json"
    record = json.loads(path.read_text())
    record["alive"] = [record["earlier"][-1]]  # a worker of cycle 3 still running when cycle 4 started
    path.write_text(json.dumps(record))
    code, status = verdict_of(copy)
    assert code == 1 and status["no_leftovers"] == "fail" and status["cycles_do_not_accumulate"] == "fail"


@pytest.mark.timeout(300)
def test_a_restart_that_skipped_the_load_fails(campaign_run, tmp_path):
    copy = edited_copy(campaign_run, tmp_path, "no-load")
    path = copy / "logs" / "train_cycle3.log"
    text = path.read_text()
    edited = re.sub(
        r"^.*(loading distributed checkpoint|successfully loaded checkpoint).*\n", "", text, flags=re.M
    )
    assert edited != text
    path.write_text(edited)
    code, status = verdict_of(copy)
    assert code == 1 and status["resumed_from_checkpoint"] == "fail"


@pytest.mark.timeout(300)
def test_a_plan_the_run_did_not_follow_fails(campaign_run, tmp_path):
    copy = edited_copy(campaign_run, tmp_path, "other-plan")
    path = copy / "campaign_plan.json"
    plan = json.loads(path.read_text())
    entry = plan["faults"][4]
    entry["fault"] = "abort" if entry["fault"] != "abort" else "kill"  # the run injected something else
    path.write_text(json.dumps(plan))
    code, status = verdict_of(copy)
    assert code == 1 and status["campaign_plan_followed"] == "fail" and status["clean_finish"] == "fail"


def leaked_copy(run: Run, tmp_path, name: str, entry_bytes: int, free_bytes: int | None = None):
    """The run as if each dead rank had left one `sem.loky-<its pid>-0` of `entry_bytes` in /dev/shm: the
    record of cycle c lists those of the c earlier workers of rank 0; the room is the one the wrapper
    measured, or `free_bytes`."""
    copy = edited_copy(run, tmp_path, name)
    for path in sorted((copy / "leftovers").glob("*.cycle*.json")):
        record = json.loads(path.read_text())
        dead = [p["pid"] for p in record["earlier"] if p["rank"] == 0]
        planted = [{"name": f"sem.loky-{pid}-0", "size": 32, "allocated": entry_bytes} for pid in dead]
        usage = record["shm"]
        usage["entries"] = sorted(usage["entries"] + planted, key=lambda e: e["name"])
        usage["count"] += len(planted)
        usage["size_bytes"] += 32 * len(planted)
        usage["allocated_bytes"] += entry_bytes * len(planted)
        if free_bytes is not None:
            usage["fs"]["free_bytes"] = free_bytes
        record["shm_segments"] = [e["name"] for e in usage["entries"]]
        path.write_text(json.dumps(record))
    return copy


@pytest.mark.timeout(300)
def test_a_leak_of_a_few_kib_per_fault_passes_with_the_leak_named(campaign_run, tmp_path):
    report = build_report(leaked_copy(campaign_run, tmp_path, "small-leak", 4096))
    check = check_by_id(report, "cycles_do_not_accumulate")
    assert exit_code_for(report) == 0 and check["status"] == "pass", check["detail"]
    assert "a leak, not a failure" in check["detail"] and "sem.loky-* 7 (28.0 KiB)" in check["detail"]
    assert "1 entries and 4.0 KiB allocated per fault" in check["detail"]
    (host,) = check["values"]["shm"]["hosts"]
    assert host["within_horizon"] is False and host["faults_until_full"] > 1000


@pytest.mark.timeout(300)
def test_a_leak_that_fills_a_small_dev_shm_within_the_horizon_fails(campaign_run, tmp_path):
    copy = leaked_copy(campaign_run, tmp_path, "full", 512 << 10, free_bytes=4 << 20)  # 4 MiB left
    code, status = verdict_of(copy)
    check = check_by_id(build_report(copy), "cycles_do_not_accumulate")
    assert code == 1 and status["cycles_do_not_accumulate"] == "fail"
    assert "faults until full 8 (by space)" in check["detail"], check["detail"]
    assert "would be full within the horizon of 1,000 faults" in check["detail"]
