"""ftqual.launch.gpu_turn: one scenario run at a time holds a machine's GPUs, the next waits, and a holder
that dies gives them back (the kernel drops its flock)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from ftqual.launch import gpu_turn
from tests.support.wait import wait_until

HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from ftqual.launch.gpu_turn import GpuTurn\n"
    "turn = GpuTurn(Path(sys.argv[1]), 'run-A (pid 1)')\n"
    "assert turn.take()\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)


def holder(path):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_the_second_run_waits_until_the_first_lets_go(tmp_path):
    path = tmp_path / "gpus.lock"
    first = gpu_turn.GpuTurn(path, "run-A (pid 1)")
    second = gpu_turn.GpuTurn(path, "run-B (pid 2)")
    try:
        assert first.take() and first.take()  # taking again while held is a no-op
        assert not second.take()
        assert second.current_holder() == "run-A (pid 1)"
        first.release()
        assert second.take()
        assert first.current_holder() == "run-B (pid 2)" and not first.take()
    finally:
        first.release()
        second.release()
    assert gpu_turn.GpuTurn(path, "run-C").take()  # released: free for anyone


def test_another_process_holds_them_until_it_dies(tmp_path):
    path = tmp_path / "gpus.lock"
    proc = holder(path)
    turn = gpu_turn.GpuTurn(path, "run-B")
    try:
        assert not turn.take()
        assert turn.current_holder() == "run-A (pid 1)"
        os.kill(proc.pid, signal.SIGKILL)  # no release(): a crashed run script
        proc.wait()
        wait_until(turn.take, 10, 0.05, "the dead holder's lock to be dropped")
    finally:
        turn.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_turn_is_taken_unless_slurm_placed_the_run(tmp_path):
    assert gpu_turn.needed({})
    assert gpu_turn.needed({"SLURM_JOB_ID": ""})
    assert not gpu_turn.needed({"SLURM_JOB_ID": "1234"})
    assert gpu_turn.lock_path({gpu_turn.LOCK_ENV: str(tmp_path / "x.lock")}) == tmp_path / "x.lock"
    default = gpu_turn.lock_path({})
    assert default.name == f"ftqual-gpus-{os.getuid()}.lock"
