"""Faults that come back, end to end on CPU: the real ft_launcher (NVRx 0.7.0) runs the smoke workload on two
ranks, the fault rank meets the same fault in every cycle (recurring_exception at iteration K+1; nan_loss's
poisoned batch there, which the workload's NaN check raises on; setup_crash in every replacement's setup),
no cycle after the first keeps any progress, and NVRx's progress tracker stops the job with exit 93 after
--ft-max-no-progress-cycles (2 here, set through max_no_progress_cycles) before max_restarts (5) runs out.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.launch import FAST_STEPS, launch_smoke

K = 4  # the first checkpoint: SAVE_INTERVAL
ENV = {
    "TRAIN_ITERS": "12",
    "SAVE_INTERVAL": str(K),
    "NVRX_ASYNC_SAVE": "0",  # the tracker names K before K+1 starts: every cycle's fault lands at K+1
    "NVRX_MAX_RESTARTS": "5",
    "NVRX_MAX_NO_PROGRESS_CYCLES": "2",
    "NVRX_SECTION_TIMEOUTS": "setup:60,step:20,checkpointing:30",
    "NVRX_OUT_OF_SECTION_TIMEOUT": "30",
}
CYCLES = 3  # cycle 0 made progress (0 -> K), cycles 1 and 2 none: the tracker stops the job before cycle 3
ITERATION = re.compile(r"^\d+: .* iteration +(\d+)/ +\d+ \|", re.M)
STOPPED = "EARLY TERMINATION: 2 consecutive training cycles without progress"


def launch(repo_root: Path, work: Path, fault: str) -> Path:
    return launch_smoke(repo_root, work, fault.replace("_", "-"), fault, list(FAST_STEPS), ENV, timeout=400)


@pytest.fixture(scope="module")
def runs(repo_root, tmp_path_factory):
    work = tmp_path_factory.mktemp("recurring")
    made: dict[str, Path] = {}

    def get(fault: str) -> Path:
        if fault not in made:
            made[fault] = launch(repo_root, work, fault)
        return made[fault]

    return get


def markers(run_dir: Path) -> list[dict]:
    first = run_dir / "fault_injected.json"
    found = [first] + sorted(run_dir.glob("fault_injected.*.json"), key=lambda p: int(p.name.split(".")[1]))
    return [json.loads(p.read_text()) for p in found if p.is_file()]


def iterations(run_dir: Path, cycle: int) -> list[int]:
    return [int(m[1]) for m in ITERATION.finditer((run_dir / "logs" / f"train_cycle{cycle}.log").read_text())]


def assert_stopped_by_the_progress_tracker(run_dir: Path) -> None:
    record = json.loads((run_dir / "run.json").read_text())
    assert (record["exit_code"], record["max_no_progress_cycles"]) == (93, 2), record["exit_code"]
    assert STOPPED in (run_dir / "logs" / "launcher.log").read_text()
    assert (run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip() == str(K)
    assert not (run_dir / "logs" / f"train_cycle{CYCLES}.log").exists()  # no cycle after the stop


@pytest.mark.timeout(450)
def test_an_exception_at_k_plus_1_recurs_each_cycle_until_nvrx_stops_the_job(runs):
    run_dir = runs("recurring_exception")
    found = markers(run_dir)
    assert [m["cycle"] for m in found] == list(range(CYCLES)), found
    assert [m["injection"] for m in found] == [1, 2, 3]
    assert all(m["fault"] == "recurring_exception" and m["recurring"] for m in found)
    assert [m["trigger"] for m in found] == ["checkpoint", "first_step", "first_step"]
    assert all(m["checkpoint_iteration"] == K for m in found)
    for cycle in range(CYCLES):
        log = (run_dir / "logs" / f"train_cycle{cycle}.log").read_text()
        assert "InjectedFault: ftqual injected an exception on rank 1" in log, cycle
        done = iterations(run_dir, cycle)
        # iteration K+1 never completes: cycle 0 trains 1..K, every later one resumes K and fails at once
        assert done == (list(range(1, K + 1)) if cycle == 0 else []), (cycle, done)
    assert_stopped_by_the_progress_tracker(run_dir)


@pytest.mark.timeout(450)
def test_a_poisoned_batch_at_k_plus_1_is_raised_on_by_the_nan_check_in_every_cycle(runs):
    run_dir = runs("nan_loss")
    found = markers(run_dir)
    assert [m["cycle"] for m in found] == list(range(CYCLES)), found
    for cycle in range(CYCLES):
        log = (run_dir / "logs" / f"train_cycle{cycle}.log").read_text()
        said = f"iteration {K + 1}: Unexpected result nan (message='found NaN in local forward loss"
        assert said in log, cycle
    assert_stopped_by_the_progress_tracker(run_dir)


@pytest.mark.timeout(450)
def test_a_rank_that_dies_in_setup_on_every_start_is_stopped(runs):
    run_dir = runs("setup_crash")
    found = markers(run_dir)
    assert [(m["cycle"], m["section"]) for m in found] == [(0, "step"), (1, "setup"), (2, "setup")], found
    for cycle in (1, 2):
        log = (run_dir / "logs" / f"train_cycle{cycle}.log").read_text()
        assert "InjectedDeviceFailure: ftqual injected a device failure on rank 1" in log
        assert "loading distributed checkpoint" not in log  # it died before the load
    assert_stopped_by_the_progress_tracker(run_dir)
