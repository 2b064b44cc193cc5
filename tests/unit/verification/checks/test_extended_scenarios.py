"""The verifier's additions for the extended scenarios, on copies of a recorded 2 x H200 kill run, edited as
the new launcher would have written them: N injections, leftovers records, a kill during a save, a resumed
checkpoint directory, no --load, restarts exhausted. Each new check passes the run that shows its point
and fails the broken one."""

from __future__ import annotations

import json
import re

import pytest

from ftqual.verification.verify import check_by_id as check

C0 = "logs/train_cycle0.log"
C1 = "logs/train_cycle1.log"
PREDATES = "not recorded (run predates leftovers sampling)"
PIDS = {(0, 0): 19527, (0, 1): 19528, (1, 0): 20101, (1, 1): 20102}  # (cycle, rank) -> pid


def status(report: dict, check_id: str) -> str:
    return check(report, check_id)["status"]


def _new_run(run, **keys) -> None:
    """run.json as the launcher writes it (the keys named, on host vm, one node)."""
    run.set_json("run.json", injections=1, fault_timing="checkpoint", checkpoint_load=True,
                 initial_checkpoint_iteration=0, host="vm", nnodes=1)  # fmt: skip
    if keys:
        run.set_json("run.json", **keys)


def _pids(run) -> None:
    (run.root / "pids").mkdir()
    for (cycle, rank), pid in PIDS.items():
        record = {"pid": pid, "pgid": pid, "start_time": 1000 + pid, "rank": rank, "local_rank": rank,
                  "cycle": cycle, "host": "vm"}  # fmt: skip
        run.path(f"pids/vm.cycle{cycle}.rank{rank}.json").write_text(json.dumps(record))


def _leftovers(run, alive=(), held=(), earlier=None, gpu=None, **extra) -> None:
    procs = [
        {"pid": pid, "start_time": 1000 + pid, "cycle": c, "rank": r}
        for (c, r), pid in PIDS.items()
        if c == 0
    ]
    record = {
        "schema": "ftqual.leftovers/v1",
        "host": "vm",
        "cycle": 1,
        "sampled_at": "2026-11-29T14:19:20.000000Z",
        "earlier": procs if earlier is None else earlier,
        "alive": [p for p in procs if p["rank"] in alive],
        "gpu": gpu
        or {
            "sampled": True,
            "error": None,
            "apps": [],
            "held_by_earlier": [{**p, "used_memory_mib": 512} for p in procs if p["rank"] in held],
        },
        **extra,
    }
    (run.root / "leftovers").mkdir(exist_ok=True)
    run.path("leftovers/vm.cycle1.json").write_text(json.dumps(record))


@pytest.fixture
def new_run(kill_run):
    """The recorded kill run as the launcher now records it: run.json's new keys, pids/, leftovers/."""
    _new_run(kill_run)
    _pids(kill_run)
    _leftovers(kill_run)
    return kill_run


# --- no_leftovers ---------------------------------------------------------------------------------------


def test_a_run_before_leftovers_sampling_skips_no_leftovers(kill_run, verify):
    code, report = verify(kill_run)
    assert (code, report["verdict"]) == (0, "pass")
    assert check(report, "no_leftovers")["detail"] == PREDATES and status(report, "no_leftovers") == "skip"
    assert "leftovers" not in report["sources"]


def test_no_leftovers_passes_a_clean_restart(new_run, verify):
    code, report = verify(new_run)
    assert (code, report["verdict"]) == (0, "pass"), report["checks"]
    item = check(report, "no_leftovers")
    assert item["status"] == "pass" and "vm cycle 1" in item["detail"]
    assert status(report, "interrupted_save_discarded") == "skip"
    assert status(report, "started_from_existing_checkpoint") == "skip"


def test_no_leftovers_notes_a_gpu_not_sampled(new_run, verify):
    _leftovers(new_run, gpu={"sampled": False, "error": "nvidia-smi not found", "apps": []})
    code, report = verify(new_run)
    item = check(report, "no_leftovers")
    assert item["status"] == "pass" and "GPU not sampled (nvidia-smi not found)" in item["detail"]


def test_no_leftovers_fails_an_earlier_worker_still_alive(new_run, verify):
    _leftovers(new_run, alive=(1,))
    code, report = verify(new_run)
    assert code == 1
    item = check(report, "no_leftovers")
    assert item["status"] == "fail"
    assert "pid 19528 (cycle 0, rank 1) still running on vm when cycle 1 started" in item["detail"]


def test_no_leftovers_fails_gpu_memory_held_by_an_earlier_worker(new_run, verify):
    _leftovers(new_run, held=(0,))
    code, report = verify(new_run)
    item = check(report, "no_leftovers")
    assert (
        item["status"] == "fail" and "pid 19527 (cycle 0, rank 0, 512 MiB) held GPU memory" in item["detail"]
    )


def test_no_leftovers_is_inconclusive_without_the_record(new_run, verify):
    new_run.path("leftovers/vm.cycle1.json").unlink()
    code, report = verify(new_run)
    assert code == 3
    item = check(report, "no_leftovers")
    assert item["status"] == "inconclusive" and "no leftovers/vm.cycle1.json" in item["detail"]


def test_no_leftovers_is_inconclusive_without_the_folder(new_run, verify):
    new_run.path("leftovers/vm.cycle1.json").unlink()
    new_run.path("leftovers").rmdir()
    code, report = verify(new_run)
    assert (code, status(report, "no_leftovers")) == (3, "inconclusive")
    assert report["sources"]["leftovers"]["ok"] is False


@pytest.mark.parametrize(
    "text",
    ['{"schema": "ftqual.leftovers/v1", "host": "vm", "cycle": 1, "earl', "[]", '{"schema": "other/v1"}'],
    ids=["cut", "not-an-object", "other-schema"],
)
def test_no_leftovers_is_inconclusive_on_a_garbled_record(new_run, verify, text):
    new_run.path("leftovers/vm.cycle1.json").write_text(text)
    code, report = verify(new_run)
    assert (code, status(report, "no_leftovers")) == (3, "inconclusive")


def test_no_leftovers_is_inconclusive_on_a_record_of_another_cycle(new_run, verify):
    record = new_run.json("leftovers/vm.cycle1.json")
    new_run.path("leftovers/vm.cycle1.json").write_text(json.dumps({**record, "cycle": 2}))
    code, report = verify(new_run)
    assert status(report, "no_leftovers") == "inconclusive"


def test_no_leftovers_is_inconclusive_when_the_record_missed_an_earlier_worker(new_run, verify):
    _leftovers(
        new_run, earlier=[{"pid": PIDS[(0, 0)], "start_time": 1000 + PIDS[(0, 0)], "cycle": 0, "rank": 0}]
    )
    code, report = verify(new_run)
    item = check(report, "no_leftovers")
    assert item["status"] == "inconclusive" and "does not list 1 earlier worker" in item["detail"]


def test_no_leftovers_is_inconclusive_when_the_sampler_could_not_read_a_pid_record(new_run, verify):
    _leftovers(new_run, unreadable_pid_records=["vm.cycle0.rank1.json"])
    code, report = verify(new_run)
    assert status(report, "no_leftovers") == "inconclusive"


def test_no_leftovers_is_skipped_for_a_baseline(baseline_run, verify):
    _new_run(baseline_run)
    code, report = verify(baseline_run)
    assert check(report, "no_leftovers")["detail"] == "no fault in this scenario"


# --- interrupted_save_discarded -------------------------------------------------------------------------


@pytest.fixture
def in_save_run(new_run):
    """The recorded kill struck while the saves of 10 and 15 were in flight (neither finalized in cycle 0),
    after checkpoint 5 completed: the newest iter dir was 15."""
    new_run.set_json("run.json", fault_timing="in_save")
    new_run.set_json("fault_injected.json", injection=1, injections=1, timing="in_save", save_iteration=15)
    return new_run


def test_interrupted_save_discarded_passes_a_kill_during_a_save(in_save_run, verify):
    code, report = verify(in_save_run)
    assert (code, report["verdict"]) == (0, "pass"), report["checks"]
    item = check(report, "interrupted_save_discarded")
    assert item["status"] == "pass"
    assert "the replacement restored 5, not the interrupted 15" in item["detail"]
    assert item["values"] == {"checkpoint_iteration": 5, "save_iteration": 15, "restored_iteration": 5}


def test_interrupted_save_discarded_fails_when_the_unfinished_save_was_restored(in_save_run, verify):
    in_save_run.sub(C1, r"at iteration 5$", "at iteration 15")
    code, report = verify(in_save_run)
    assert code == 1
    item = check(report, "interrupted_save_discarded")
    assert item["status"] == "fail" and "restored the interrupted save of iteration 15" in item["detail"]


def test_a_save_finalized_before_the_kill_landed_is_inconclusive_not_a_fault_of_the_stack(
    in_save_run, verify
):
    in_save_run.insert_after(
        C0,
        lambda line: "saving checkpoint at iteration      15" in line,
        ["0:   [2026-11-29 14:19:09.700000] successfully saved checkpoint from iteration      15 to "
         "/lus/nvrx/runs/kill/checkpoints [ t 1/1, gtp_remat 1/1, p 1/1 ]"],
    )  # fmt: skip
    code, report = verify(in_save_run)
    item = check(report, "interrupted_save_discarded")
    assert item["status"] == "inconclusive" and "was finalized in cycle 0" in item["detail"], item
    assert (
        "ms before the injection was claimed" in item["detail"] and "run the scenario again" in item["detail"]
    )
    assert report["verdict"] != "pass" and code != 0
    # the replacement restoring that finalized save is right; restoring it without the finalize is not
    in_save_run.sub(C1, r"at iteration 5$", "at iteration 15")
    code, report = verify(in_save_run)
    item = check(report, "interrupted_save_discarded")
    assert item["status"] == "inconclusive" and item["values"]["restored_iteration"] == 15, item


def test_interrupted_save_discarded_fails_without_a_save_in_flight(in_save_run, verify):
    in_save_run.set_json("fault_injected.json", save_iteration=None)
    code, report = verify(in_save_run)
    item = check(report, "interrupted_save_discarded")
    assert item["status"] == "fail" and "names no save_iteration" in item["detail"]


def test_interrupted_save_discarded_fails_when_the_save_began_after_the_injection(in_save_run, verify):
    in_save_run.sub(C0, r"14:19:09\.682229\] saving checkpoint", "14:19:09.900000] saving checkpoint")
    code, report = verify(in_save_run)
    item = check(report, "interrupted_save_discarded")
    assert item["status"] == "fail" and "began 0.156 s after the injection" in item["detail"]


# --- N injections ---------------------------------------------------------------------------------------


def _second_marker(run, cycle: int = 1) -> None:
    marker = run.json("fault_injected.json")
    marker.update(cycle=cycle, injection=2, injections=2, injected_at="2026-11-29T14:19:40.000000Z")
    run.path("fault_injected.2.json").write_text(json.dumps(marker))
    run.set_json("fault_injected.json", injection=1, injections=2)


def test_two_markers_but_one_restart_fail(new_run, verify):
    new_run.set_json("run.json", injections=2)
    _second_marker(new_run)
    code, report = verify(new_run)
    assert code == 1
    detected = check(report, "failure_detected_and_restarted")
    assert detected["status"] == "fail"
    assert "2 injections but launcher.log shows 1 restart decision(s)" in detected["detail"]
    assert "injection 2: no replacement cycle: cycle_infos has no record for cycle 2" in detected["detail"]
    finish = check(report, "clean_finish")
    assert finish["status"] == "fail" and "2 cycles ran, expected 3" in finish["detail"]
    resumed = check(report, "resumed_from_checkpoint")
    assert resumed["status"] == "fail" and "injection 2: no replacement cycle" in resumed["detail"]
    assert report["expected"]["injections"] == 2 and report["expected"]["cycles"] == 3
    faults = report["metrics"]["faults"]
    assert [(f["injection"], f["cycle"]) for f in faults] == [(1, 0), (2, 1)]
    assert faults[0]["restored_iteration"] == report["metrics"]["restored_iteration"] == 5
    assert faults[0]["detection_s"] == report["metrics"]["detection_s"]
    assert faults[1]["restored_iteration"] is None
    assert [e["kind"] for e in report["timeline"]["events"]].count("injection") == 2


def test_one_marker_when_two_were_requested_fails_clean_finish(new_run, verify):
    new_run.set_json("run.json", injections=2)
    code, report = verify(new_run)
    item = check(report, "clean_finish")
    assert item["status"] == "fail" and "1 injection marker(s), 2 requested" in item["detail"]


def test_an_extra_marker_fails_clean_finish(new_run, verify):
    _second_marker(new_run)
    code, report = verify(new_run)
    assert status(report, "clean_finish") == "fail"
    assert "2 injection marker(s), 1 requested" in check(report, "clean_finish")["detail"]


def test_markers_in_the_same_cycle_fail(new_run, verify):
    new_run.set_json("run.json", injections=2)
    _second_marker(new_run, cycle=0)
    code, report = verify(new_run)
    assert "not after fault_injected.json's cycle 0" in check(report, "clean_finish")["detail"]


def test_a_garbled_second_marker_leaves_the_fault_checks_inconclusive(new_run, verify):
    new_run.set_json("run.json", injections=2)
    new_run.path("fault_injected.2.json").write_text('{"schema": "ftqual.fault/v1", "cyc')
    code, report = verify(new_run)
    assert code in (1, 3) and report["verdict"] != "pass"
    assert status(report, "checkpoint_before_failure") == "inconclusive"
    assert status(report, "failure_detected_and_restarted") == "inconclusive"
    assert "fault_injected.2.json unreadable" in report["sources"]["marker"]["reason"]


def test_restarts_exhausted_fails_clean_finish_naming_it(new_run, verify):
    """Two injections with max_restarts 1: ft_launcher restarted once, then gave up (exit 1)."""
    new_run.set_json("run.json", injections=2, max_restarts=1, exit_code=1)
    _second_marker(new_run)
    code, report = verify(new_run)
    item = check(report, "clean_finish")
    assert item["status"] == "fail"
    assert item["detail"].startswith(
        "ft_launcher gave up after 1 restarts (max_restarts 1): 2 injections requested"
    )


def test_a_launcher_error_within_max_restarts_is_not_called_exhausted(new_run, verify):
    new_run.set_json("run.json", exit_code=1)
    code, report = verify(new_run)
    assert "gave up" not in check(report, "clean_finish")["detail"]


# --- no_resume, resume_existing -------------------------------------------------------------------------


def _renumber(match: re.Match) -> str:
    iteration, consumed = int(match[2]) - 5, int(match[4]) - 10
    return f"{match[1]}{iteration:>9}{match[3]}{consumed:>12}"


def test_no_resume_fails_resumed_from_checkpoint(new_run, verify):
    """checkpoint_load false: the replacement was launched without --load and trained again from 1."""
    new_run.set_json("run.json", checkpoint_load=False)
    new_run.delete_lines(
        C1, lambda line: "loading distributed checkpoint" in line or "successfully loaded" in line
    )
    new_run.sub(C1, r"^(1:  \[[^\]]+\] iteration)\s+(\d+)(/\s+30 \| consumed samples:)\s+(\d+)", _renumber)
    code, report = verify(new_run)
    assert code == 1
    item = check(report, "resumed_from_checkpoint")
    assert item["status"] == "fail"
    assert "checkpoint_load false: the workload was launched without --load" in item["detail"]


def test_started_from_existing_checkpoint_fails_when_cycle0_loaded_nothing(new_run, verify):
    new_run.set_json("run.json", initial_checkpoint_iteration=5)
    code, report = verify(new_run)
    item = check(report, "started_from_existing_checkpoint")
    assert item["status"] == "fail"
    assert "train_cycle0.log has no 'successfully loaded checkpoint' line" in item["detail"]
    assert "the injection armed with baseline 0, not the existing checkpoint 5" in item["detail"]
    assert "the injection followed checkpoint 5, not one after the existing 5" in item["detail"]


def test_started_from_existing_checkpoint_fails_when_cycle0_loaded_another(new_run, verify):
    new_run.set_json("run.json", initial_checkpoint_iteration=5)
    new_run.insert_after(
        C0,
        lambda line: "FT: initialized" in line,
        ["0:  loading distributed checkpoint from /lus/nvrx/runs/kill/checkpoints at iteration 3",
         "0:   successfully loaded checkpoint from /lus/nvrx/runs/kill/checkpoints [ t 1/1 ] at iteration 3"],
    )  # fmt: skip
    code, report = verify(new_run)
    item = check(report, "started_from_existing_checkpoint")
    assert (
        item["status"] == "fail"
        and "cycle 0 loaded iteration 3, the existing checkpoint is 5" in item["detail"]
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("injections", 0),
        ("injections", "two"),
        ("fault_timing", "later"),
        ("checkpoint_load", "yes"),
        ("initial_checkpoint_iteration", -1),
    ],  # fmt: skip
)
def test_new_run_json_keys_outside_their_domain_are_unusable(new_run, verify, key, value):
    new_run.set_json("run.json", **{key: value})
    code, report = verify(new_run)
    assert code == 2 and report == {}
