"""End to end on CPU: the real ft_launcher (NVRx 0.7.0) runs the smoke workload (scripts/run_megatron_gpt.sh).

Each scenario runs once per module (2 ranks, gloo) and several tests read its run directory. Timings are
generous because CI machines may have two cores shared with other jobs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ftqual.launch import cleanup, procs
from tests.support.wait import wait_until

TRAIN_ITERS = 16
SAVE_INTERVAL = 4
RUN_TIMEOUT_S = 240
ITERATION = re.compile(
    r"^(\d+): +\[[^]]+\] iteration +(\d+)/ +(\d+) \| consumed samples: +(\d+) \|.*"
    r"\| lm loss: ([-+.\dE]+) \|"
)
# A 5 s step timeout: 25 times a 0.2 s step, and the hang is caught 5 s sooner than with 10 s.
HANG_ENV = {"NVRX_SECTION_TIMEOUTS": "setup:60,step:5,checkpointing:30", "NVRX_OUT_OF_SECTION_TIMEOUT": "20"}


@dataclass
class Run:
    run_id: str
    run_dir: Path
    env: dict[str, str]
    rc: int
    out: str
    err: str
    wall_s: float

    def text(self, rel: str) -> str:
        return (self.run_dir / rel).read_text(errors="replace")

    def json(self, rel: str) -> dict:
        return json.loads(self.text(rel))

    def iterations(self, cycle: int) -> dict[int, tuple[int, str]]:
        """iteration -> (consumed samples, printed loss) from train_cycle<cycle>.log."""
        found = {}
        for line in self.text(f"logs/train_cycle{cycle}.log").splitlines():
            match = ITERATION.match(line)
            if match:
                found[int(match[2])] = (int(match[4]), match[5])
        return found

    def cycle_files(self) -> list[str]:
        return sorted(
            p.name
            for p in (self.run_dir / "cycle_infos").iterdir()
            if re.fullmatch(r"cycle_info\..*\.\d+", p.name)
        )


def scenario_env(
    repo_root: Path, work: Path, run_id: str, fault: str, extra: dict[str, str]
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NVRX_", "SLURM_"))}
    env.update(
        {
            "FTQUAL_PYTHON": sys.executable,
            "NVRX_WORKLOAD": "smoke",
            "NVRX_WORK_DIR": str(work),
            "NVRX_RUN_ID": run_id,
            "NVRX_DEMO_FAULT": fault,
            "GPUS_PER_NODE": "2",
            "TRAIN_ITERS": str(TRAIN_ITERS),
            "SAVE_INTERVAL": str(SAVE_INTERVAL),
            "NVRX_TERM_TIMEOUT": "5",
            "NVRX_WORKERS_STOP_TIMEOUT": "5",
            "TMPDIR": "/tmp",  # NVRx's rank-monitor sockets live there; long paths break AF_UNIX
        }
    )
    env.update(extra)
    return env


def start(repo_root: Path, env: dict[str, str]) -> subprocess.Popen:
    # bash execs Python: the Popen pid is our launcher's.
    return subprocess.Popen(
        ["bash", str(repo_root / "scripts" / "run_megatron_gpt.sh")],
        env=env,
        cwd=repo_root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_scenario(
    repo_root: Path, work: Path, run_id: str, fault: str, extra: dict[str, str] | None = None
) -> Run:
    env = scenario_env(repo_root, work, run_id, fault, extra or {})
    began = time.monotonic()
    proc = start(repo_root, env)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"{run_id} did not finish in {RUN_TIMEOUT_S} s:\n{out}\n{err}")
    run = Run(run_id, work / "runs" / run_id, env, proc.returncode, out, err, time.monotonic() - began)
    print(f"\n[e2e] {run_id}: exit {run.rc} in {run.wall_s:.1f} s")
    return run


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="module")
def none_run(repo_root, work) -> Run:
    return run_scenario(repo_root, work, "none-1", "none")


@pytest.fixture(scope="module")
def kill_run(repo_root, work) -> Run:
    return run_scenario(repo_root, work, "kill-1", "kill")


@pytest.fixture(scope="module")
def hang_run(repo_root, work) -> Run:
    return run_scenario(repo_root, work, "hang-1", "hang", HANG_ENV)


def assert_finished_cleanly(run: Run) -> None:
    assert run.rc == 0, f"{run.out}\n{run.err}\n{run.text('logs/launcher.log')[-3000:]}"
    record = run.json("run.json")
    assert record["schema"] == "ftqual.run/v1" and record["run_id"] == run.run_id
    assert record["exit_code"] == 0 and record["finished_at"] and record["interrupted_by"] is None
    assert (run.run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text() == str(TRAIN_ITERS)
    assert cleanup.survivors(run.run_dir) == []


def assert_recovered(run: Run) -> dict:
    """The walkthrough's five points, from the run directory; returns the marker."""
    assert_finished_cleanly(run)
    marker = run.json("fault_injected.json")
    assert marker["schema"] == "ftqual.fault/v1" and marker["run_id"] == run.run_id
    identity = (marker["rank"], marker["local_rank"], marker["cycle"], marker["baseline_iteration"])
    assert identity == (1, 1, 0, 0)
    k = marker["checkpoint_iteration"]
    assert k >= SAVE_INTERVAL and k % SAVE_INTERVAL == 0 and k < TRAIN_ITERS
    assert (marker["placement"], marker["section"]) == ("step", "step")
    # 1. the checkpoint completed before the failure
    cycle0 = run.text("logs/train_cycle0.log")
    assert re.search(rf"^0: .*successfully saved checkpoint from iteration +{k} to ", cycle0, re.M)
    assert (run.run_dir / "checkpoints" / f"iter_{k:07d}" / ".metadata").is_file()
    # 2. the launcher recorded the failed cycle and started replacements
    assert run.cycle_files() == ["cycle_info..0.0", "cycle_info..0.1"]
    assert run.json("cycle_infos/cycle_info..0.0")["cycle_end_time"]
    assert re.search(
        r"Worker group (UNHEALTHY|FAILED)\. 3/3 attempts left; will restart worker group",
        run.text("logs/launcher.log"),
    )
    # 3. restored from that checkpoint, with optimizer state, not from zero
    cycle1 = run.text("logs/train_cycle1.log")
    assert f" loading distributed checkpoint from {run.run_dir / 'checkpoints'} at iteration {k}\n" in cycle1
    assert re.search(rf"^0:   successfully loaded checkpoint from .* at iteration {k}$", cycle1, re.M)
    assert "could not find the metadata file" not in cycle1
    after = run.iterations(1)
    assert min(after) == k + 1 and after[k + 1][0] == (k + 1) * 2
    # 4. progress past the restore: a later checkpoint, the final iteration
    assert re.search(rf"successfully saved checkpoint from iteration +{TRAIN_ITERS} to ", cycle1)
    assert max(after) == TRAIN_ITERS and sorted(after) == list(range(k + 1, TRAIN_ITERS + 1))
    # 5. one injection, no no-progress stop
    logs = "".join(run.text(f"logs/train_cycle{n}.log") for n in (0, 1))
    assert logs.count("[ftqual-inject] ") == 1
    assert "not injecting again" in cycle1
    assert "EARLY TERMINATION" not in run.text("logs/launcher.log")
    # replayed iterations (trained in both cycles) print the same loss: the restore is exact
    before = run.iterations(0)
    assert k + 1 in before  # the tracker trails the training (async save), so iteration k+1 is replayed
    for iteration in set(before) & set(after):
        assert before[iteration] == after[iteration], iteration
    return marker


@pytest.mark.timeout(300)
def test_no_fault_finishes_in_one_cycle(none_run):
    assert_finished_cleanly(none_run)
    assert not (none_run.run_dir / "fault_injected.json").exists()
    assert none_run.cycle_files() == ["cycle_info..0.0"]
    assert not (none_run.run_dir / "logs" / "train_cycle1.log").exists()
    assert sorted(none_run.iterations(0)) == list(range(1, TRAIN_ITERS + 1))
    cycle0 = none_run.text("logs/train_cycle0.log")
    assert (
        "0: FT: initialized. Timeouts=SectionTimeouts(out_of_section=180.00, sections=[setup=900.00, "
        "step=120.00, checkpointing=600.00, ], calculated_sections=set(), "
        "is_out_of_section_calculated=False)\n" in cycle0
    )
    assert "0: FT: closed.\n" in cycle0 and "[ftqual-inject]" not in cycle0
    pids = sorted(p.name.split(".", 1)[1] for p in (none_run.run_dir / "pids").iterdir())
    assert pids == ["cycle0.rank0.json", "cycle0.rank1.json", "launcher.json"]


def rank_code(run: Run) -> set[str]:
    """The folders of ftqual.rank that the run's ranks imported (their pid records say)."""
    return {
        run.json(f"pids/{p.name}")["rank_code"] for p in (run.run_dir / "pids").glob("*.cycle*.rank*.json")
    }


@pytest.mark.timeout(300)
def test_the_ranks_import_the_package_of_the_interpreter_ft_launcher_runs(repo_root, none_run):
    """ft_launcher runs the workers with its own interpreter, where ftqual is installed (pip install -e .):
    they import ftqual.rank from this checkout."""
    assert rank_code(none_run) == {str(repo_root / "ftqual" / "rank")}


@pytest.mark.timeout(300)
def test_the_ranks_import_the_package_of_a_source_checkout(repo_root, tmp_path_factory):
    """A source checkout elsewhere (not the installed one): its scripts/run_megatron_gpt.sh puts it on
    PYTHONPATH, and its launcher's ranks import its own ftqual.rank, not the installed package."""
    checkout = tmp_path_factory.mktemp("checkout")
    for folder in ("ftqual", "scripts", "workloads", "config"):
        shutil.copytree(repo_root / folder, checkout / folder, ignore=shutil.ignore_patterns("__pycache__"))
    run = run_scenario(checkout, tmp_path_factory.mktemp("e2e-checkout"), "none-checkout", "none")
    assert_finished_cleanly(run)
    assert rank_code(run) == {str(checkout / "ftqual" / "rank")}


@pytest.mark.timeout(300)
def test_kill_is_detected_restarted_and_resumed(kill_run):
    assert_recovered(kill_run)
    launcher_log = kill_run.text("logs/launcher.log")
    assert re.search(r"failed \(exitcode: -9\) local_rank: 1 \(pid: \d+\)", launcher_log)


@pytest.mark.timeout(300)
def test_hang_is_detected_by_the_step_timeout_and_resumed(hang_run):
    assert_recovered(hang_run)
    launcher_log = hang_run.text("logs/launcher.log")
    assert re.search(
        r"\[Cycle 0\] Section 'step' has been open for [\d.]+ seconds\. "
        r"Timeout is 5\.00 seconds\.",
        launcher_log,
    )
    assert (
        "FT: initialized. Timeouts=SectionTimeouts(out_of_section=20.00, sections=[setup=60.00, "
        "step=5.00, checkpointing=30.00, ]" in hang_run.text("logs/train_cycle1.log")
    )
    assert hang_run.json("run.json")["timeouts"] == {
        "setup": 60,
        "step": 5,
        "checkpointing": 30,
        "out_of_section": 20,
    }


@pytest.mark.timeout(300)
def test_second_launch_of_the_same_run_id_is_refused(repo_root, kill_run):
    before = {p: p.stat().st_mtime_ns for p in kill_run.run_dir.rglob("*")}
    proc = start(repo_root, kill_run.env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "use a new NVRX_RUN_ID" in err
    assert {p: p.stat().st_mtime_ns for p in kill_run.run_dir.rglob("*")} == before


@pytest.mark.timeout(300)
def test_sigterm_leaves_no_process_and_keeps_the_evidence(repo_root, work):
    """A hung rank ignores SIGTERM: our launcher forwards it, waits, and the run leaves nothing behind."""
    # Default timeouts: the stopped rank stays stopped (120 s step timeout) until we interrupt.
    env = scenario_env(repo_root, work, "term-1", "hang", {"TRAIN_ITERS": "200"})
    run_dir = work / "runs" / "term-1"
    proc = start(repo_root, env)
    try:

        def injected() -> bool:
            assert proc.poll() is None, proc.communicate()
            return (run_dir / "fault_injected.json").exists()

        wait_until(injected, RUN_TIMEOUT_S, 0.2, "the hang's injection")

        def recorded() -> list[dict]:  # ft_launcher and two workers, one of them stopped
            records = [json.loads(p.read_text()) for p in (run_dir / "pids").glob("*.json")]
            return records if len(records) == 3 else []

        listing = lambda: sorted(run_dir.glob("pids/*"))  # noqa: E731
        records = wait_until(recorded, 30, 0.2, "three pid records", detail=listing)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=5 + 30 + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
            cleanup.kill_run(run_dir)
    print(f"\n[e2e] term-1: exit {proc.returncode} {time.monotonic() - began:.1f} s after SIGTERM")
    for rec in records:
        assert not procs.alive(rec["pid"], rec["start_time"]), rec
    assert cleanup.survivors(run_dir) == []
    record = json.loads((run_dir / "run.json").read_text())
    assert record["interrupted_by"] == "SIGTERM" and record["exit_code"] is not None and record["finished_at"]
    assert proc.returncode == (record["exit_code"] if record["exit_code"] >= 0 else 128 - record["exit_code"])
    assert proc.returncode != 0
    assert (run_dir / "fault_injected.json").is_file()
    assert "Received 15 death signal" in (run_dir / "logs" / "launcher.log").read_text()
    assert (run_dir / "logs" / "train_cycle0.log").stat().st_size > 0
    assert (run_dir / "checkpoints" / "latest_checkpointed_iteration.txt").read_text().strip().isdigit()
