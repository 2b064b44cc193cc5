"""End to end on CPU, the extended fault scenarios: the real ft_launcher (NVRx 0.7.0) runs the smoke workload.

An in-save kill, two injections in one run (with enough restarts, and with too few), a no-resume control
(NVRX_LOAD_CHECKPOINTS=0) and a run resumed from a finished run's checkpoints; every later cycle leaves a
leftovers record. Each run takes 20 iterations (a checkpoint every 5, 0.2 s steps), once per module; the
helpers are test_e2e_smoke's.
"""

from __future__ import annotations

import re
import shutil
import socket

import pytest

from ftqual.launch import cleanup
from tests.integration.e2e.test_e2e_smoke import Run, run_scenario

ITERS = 20
INTERVAL = 5
SHORT = {"TRAIN_ITERS": str(ITERS), "SAVE_INTERVAL": str(INTERVAL)}


@pytest.fixture(scope="module")
def ext_work(tmp_path_factory):
    return tmp_path_factory.mktemp("e2e-ext")


@pytest.fixture(scope="module")
def in_save_run(repo_root, ext_work) -> Run:
    return run_scenario(repo_root, ext_work, "in-save-1", "kill", {**SHORT, "NVRX_FAULT_TIMING": "in_save"})


@pytest.fixture(scope="module")
def twice_run(repo_root, ext_work) -> Run:
    return run_scenario(repo_root, ext_work, "twice-1", "kill", {**SHORT, "NVRX_INJECTIONS": "2"})


@pytest.fixture(scope="module")
def no_resume_run(repo_root, ext_work) -> Run:
    return run_scenario(repo_root, ext_work, "no-resume-1", "kill", {**SHORT, "NVRX_LOAD_CHECKPOINTS": "0"})


def finished(run: Run, train_iters: int = ITERS) -> None:
    assert run.rc == 0, f"{run.out}\n{run.err}\n{run.text('logs/launcher.log')[-3000:]}"
    record = run.json("run.json")
    assert record["exit_code"] == 0 and record["interrupted_by"] is None
    assert re.search(rf"successfully saved checkpoint from iteration +{train_iters} to ", all_logs(run))
    assert cleanup.survivors(run.run_dir) == []


def all_logs(run: Run) -> str:
    """Every cycle's training log, concatenated."""
    return "".join(p.read_text(errors="replace") for p in sorted((run.run_dir / "logs").glob("train_cycle*")))


def loaded(log: str) -> list[int]:
    return [
        int(m)
        for m in re.findall(r"^0:   successfully loaded checkpoint from .* at iteration (\d+)$", log, re.M)
    ]


def markers(run: Run) -> list[str]:
    return sorted(p.name for p in run.run_dir.glob("fault_injected*.json"))


@pytest.mark.timeout(300)
def test_in_save_kill_discards_the_save_in_flight(in_save_run):
    run = in_save_run
    finished(run)
    assert markers(run) == ["fault_injected.json"]
    marker = run.json("fault_injected.json")
    assert (marker["timing"], marker["section"], marker["injection"], marker["injections"]) == (
        "in_save",
        "checkpointing",
        1,
        1,
    )
    c, s = marker["checkpoint_iteration"], marker["save_iteration"]
    # the save at 2 * INTERVAL, or a later one when the first finalize came after its section (busy machine),
    # up to the last iteration's save: whichever it was, that save is discarded and the one before it loaded
    assert c >= INTERVAL and s == c + INTERVAL and s <= ITERS and marker["cycle"] == 0
    cycle0 = run.text("logs/train_cycle0.log")
    assert re.search(rf"scheduled an async checkpoint save at iteration +{s} to ", cycle0)
    assert not re.search(rf"successfully saved checkpoint from iteration +{s} to ", cycle0)
    cycle1 = run.text("logs/train_cycle1.log")
    assert loaded(cycle1) == [c] and min(run.iterations(1)) == c + 1
    assert re.search(r"failed \(exitcode: -9\) local_rank: 1 \(pid: \d+\)", run.text("logs/launcher.log"))
    assert run.json("run.json")["fault_timing"] == "in_save"


@pytest.mark.timeout(300)
def test_two_injections_each_after_a_new_checkpoint(twice_run):
    run = twice_run
    finished(run)
    assert markers(run) == ["fault_injected.2.json", "fault_injected.json"]
    first, second = run.json("fault_injected.json"), run.json("fault_injected.2.json")
    assert [(m["injection"], m["injections"], m["cycle"]) for m in (first, second)] == [(1, 2, 0), (2, 2, 1)]
    assert first["baseline_iteration"] == 0 and second["baseline_iteration"] == first["checkpoint_iteration"]
    assert second["checkpoint_iteration"] > first["checkpoint_iteration"]
    assert len(run.cycle_files()) >= 3
    assert loaded(run.text("logs/train_cycle1.log")) == [first["checkpoint_iteration"]]
    assert loaded(run.text("logs/train_cycle2.log")) == [second["checkpoint_iteration"]]
    assert all_logs(run).count("[ftqual-inject] ") == 2
    assert "2 of 2 injection marker(s) exist" in run.text("logs/train_cycle2.log")
    assert run.json("run.json")["injections"] == 2


@pytest.mark.timeout(300)
def test_two_injections_with_one_restart_exhaust_the_launcher(repo_root, ext_work):
    extra = {**SHORT, "NVRX_INJECTIONS": "2", "NVRX_MAX_RESTARTS": "1"}
    run = run_scenario(repo_root, ext_work, "twice-short-1", "kill", extra)
    assert run.rc != 0 and run.json("run.json")["exit_code"] != 0
    assert markers(run) == ["fault_injected.2.json", "fault_injected.json"]
    assert cleanup.survivors(run.run_dir) == []


@pytest.mark.timeout(300)
def test_no_resume_restarts_from_iteration_zero(no_resume_run):
    run = no_resume_run
    finished(run)
    assert run.json("run.json")["checkpoint_load"] is False
    assert "--load" not in " ".join(run.json("run.json")["command"])
    cycle1 = run.text("logs/train_cycle1.log")
    assert loaded(cycle1) == [] and "loading distributed checkpoint" not in cycle1
    assert sorted(run.iterations(1)) == list(range(1, ITERS + 1))
    assert run.json("fault_injected.json")["checkpoint_iteration"] == INTERVAL


@pytest.mark.timeout(300)
def test_resume_from_a_finished_runs_checkpoints(repo_root, ext_work, no_resume_run):
    finished(no_resume_run)
    copy = ext_work / "resume-source"
    shutil.copytree(no_resume_run.run_dir / "checkpoints", copy)
    k = int((copy / "latest_checkpointed_iteration.txt").read_text())
    assert k == ITERS
    extra = {**SHORT, "TRAIN_ITERS": str(ITERS + 2 * INTERVAL), "NVRX_CHECKPOINT_DIR": str(copy)}
    run = run_scenario(repo_root, ext_work, "resume-1", "kill", extra)
    finished(run, ITERS + 2 * INTERVAL)
    assert run.json("run.json")["initial_checkpoint_iteration"] == k
    assert loaded(run.text("logs/train_cycle0.log")) == [k]
    marker = run.json("fault_injected.json")
    assert marker["baseline_iteration"] == k and marker["checkpoint_iteration"] > k
    assert loaded(run.text("logs/train_cycle1.log")) == [marker["checkpoint_iteration"]]


@pytest.mark.timeout(300)
def test_every_later_cycle_records_no_leftovers(twice_run, in_save_run):
    host = socket.gethostname()
    for run, cycles in [(twice_run, (1, 2)), (in_save_run, (1,))]:
        finished(run)
        names = sorted(p.name for p in (run.run_dir / "leftovers").iterdir())
        assert names == [f"{host}.cycle{c}.json" for c in cycles], run.run_id
        for cycle in cycles:
            record = run.json(f"leftovers/{host}.cycle{cycle}.json")
            assert record["schema"] == "ftqual.leftovers/v1" and (record["host"], record["cycle"]) == (
                host,
                cycle,
            )
            earlier = sorted((item["cycle"], item["rank"]) for item in record["earlier"])
            assert earlier == [(c, r) for c in range(cycle) for r in (0, 1)]
            assert record["alive"] == [] and record["gpu"]["held_by_earlier"] == []
            assert record["gpu"]["sampled"] is (record["gpu"]["error"] is None)
