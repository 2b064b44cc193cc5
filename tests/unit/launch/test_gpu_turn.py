"""ftqual.launch.gpu_turn: runs that share a GPU take turns on it (one lock per GPU), runs on disjoint GPUs do
not, a run that uses no GPU takes no lock, the one waiting is told which run of which checkout holds the GPU,
and a holder that dies gives its GPUs back (the kernel drops its flock)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from ftqual.launch import gpu_turn
from ftqual.launch.gpu_turn import GpuSet, GpuTurn
from tests.support.wait import wait_until

HOLD = (
    "import sys, time\n"
    "from pathlib import Path\n"
    "from ftqual.launch.gpu_turn import GpuSet, GpuTurn\n"
    "turn = GpuTurn(Path(sys.argv[1]), GpuSet(tuple(sys.argv[2].split(','))), sys.argv[3])\n"
    "assert turn.take()\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)
CHECKOUT_A = "scenario kill (run kill-1-a1) of /home/a/checkout-one (pid 11)"


def holder(base, gpus: str, who: str):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(base), gpus, who], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def stop(proc) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


@pytest.fixture
def base(tmp_path):
    return tmp_path / "gpus.lock"


def turn(base, exclusive=(), shared=(), who="run"):
    return GpuTurn(base, GpuSet(tuple(exclusive), tuple(shared)), who)


# --- which GPUs a run holds -------------------------------------------------------------------------------


def test_no_gpu_on_the_machine_no_lock_whatever_the_run_or_cuda_visible_devices(base):
    for env in ({}, {"CUDA_VISIBLE_DEVICES": "0,1"}, {gpu_turn.GPUS_ENV: ""}):
        env = {gpu_turn.LOCK_ENV: str(base), gpu_turn.GPUS_ENV: "", **env}
        assert not gpu_turn.run_gpus(2, "megatron", env)
        assert not gpu_turn.run_gpus(2, "smoke", env)
        assert gpu_turn.for_run(2, "megatron", "run", env) is None
    assert list(base.parent.iterdir()) == []  # nothing taken, nothing written


def test_cuda_visible_devices_naming_no_gpu_computes_on_none(base):
    machine = ["0", "1", "2", "3"]
    for nothing in ("", "-1", "none", " "):
        gpus = gpu_turn.run_gpus(2, "megatron", {"CUDA_VISIBLE_DEVICES": nothing}, machine)
        # nothing to compute on; ft_launcher's memory check still looks at GPUs 0 and 1
        assert gpus == GpuSet((), ("0", "1"))


def test_a_run_computes_on_its_visible_gpus_and_shares_those_ft_launcher_looks_at():
    machine = ["0", "1", "2", "3"]
    run = gpu_turn.run_gpus
    assert run(2, "megatron", {}, machine) == GpuSet(("0", "1"), ())  # no CUDA_VISIBLE_DEVICES: the first
    assert run(1, "megatron", {}, machine) == GpuSet(("0",), ())
    assert run(2, "megatron", {"CUDA_VISIBLE_DEVICES": "3,2"}, machine) == GpuSet(("3", "2"), ("0", "1"))
    assert run(2, "megatron", {"CUDA_VISIBLE_DEVICES": "1,2,3"}, machine) == GpuSet(("1", "2"), ("0",))
    # CUDA's reading: the list ends at the first entry naming no GPU of the machine
    assert run(2, "megatron", {"CUDA_VISIBLE_DEVICES": "2,7,3"}, machine) == GpuSet(("2",), ("0", "1"))
    assert run(2, "megatron", {"CUDA_VISIBLE_DEVICES": "2,-1,3"}, machine) == GpuSet(("2",), ("0", "1"))
    # the smoke workload computes on CPU: it only shares what its ft_launcher looks at
    assert run(2, "smoke", {"CUDA_VISIBLE_DEVICES": "2,3"}, machine) == GpuSet((), ("0", "1"))
    assert run(8, "smoke", {}, machine) == GpuSet((), ("0", "1", "2", "3"))
    assert run(2, "megatron", {}, machine).label() == "GPUs 0,1"
    assert run(1, "megatron", {}, machine).label() == "GPU 0"


def test_a_gpu_uuid_is_the_gpu_of_its_index(monkeypatch):
    uuids = {"GPU-aaaa1111": "0", "GPU-bbbb2222": "1", "MIG-cccc3333": "1"}
    monkeypatch.setattr(gpu_turn, "_smi_uuids", lambda: uuids)
    assert gpu_turn.visible_gpus("GPU-bbbb", ["0", "1"]) == ["1"]  # CUDA takes a unique prefix
    assert gpu_turn.visible_gpus("MIG-cccc3333,GPU-aaaa1111", ["0", "1"]) == ["1", "0"]
    assert gpu_turn.visible_gpus("GPU-zzzz", ["0", "1"]) == ["GPU-zzzz"]  # unknown: kept as it is


def test_the_machines_gpus_come_from_the_driver(tmp_path, monkeypatch):
    proc = tmp_path / "gpus"
    monkeypatch.setattr(gpu_turn, "PROC_GPUS", proc)
    monkeypatch.setattr(gpu_turn.shutil, "which", lambda name: None)
    assert gpu_turn.machine_gpus({}) == []  # no driver, no nvidia-smi
    proc.mkdir()
    for bus in ("0000:3b:00.0", "0000:5e:00.0"):
        (proc / bus).mkdir()
    assert gpu_turn.machine_gpus({}) == ["0", "1"]
    assert gpu_turn.machine_gpus({gpu_turn.GPUS_ENV: "1, 0"}) == ["0", "1"]
    assert gpu_turn.machine_gpus({gpu_turn.GPUS_ENV: ""}) == []


def test_a_turn_is_taken_unless_slurm_placed_the_run(tmp_path):
    assert gpu_turn.needed({})
    assert gpu_turn.needed({"SLURM_JOB_ID": ""})
    assert not gpu_turn.needed({"SLURM_JOB_ID": "1234"})
    env = {gpu_turn.GPUS_ENV: "0", "SLURM_JOB_ID": "1234"}
    assert gpu_turn.for_run(1, "megatron", "run", env) is None
    made = gpu_turn.for_run(1, "megatron", "run", {**env, "SLURM_JOB_ID": "", gpu_turn.LOCK_ENV: "/x/y.lock"})
    assert made is not None and made.gpus == GpuSet(("0",)) and made.lock_file("0").name == "y-gpu0.lock"
    assert gpu_turn.lock_path({gpu_turn.LOCK_ENV: str(tmp_path / "x.lock")}) == tmp_path / "x.lock"
    assert gpu_turn.lock_path({}).name == f"ftqual-gpus-{os.getuid()}.lock"


# --- taking turns -----------------------------------------------------------------------------------------


def test_disjoint_gpus_do_not_wait_for_each_other(base):
    first, second = turn(base, ["0", "1"], who="A"), turn(base, ["2", "3"], who="B")
    try:
        assert first.take() and second.take()
    finally:
        first.release()
        second.release()


def test_runs_that_share_a_gpu_take_turns(base):
    first, second = turn(base, ["0", "1"], who=CHECKOUT_A), turn(base, ["1", "2"], who="B")
    try:
        assert first.take() and first.take()  # taking again while held is a no-op
        assert not second.take()
        assert second.waiting_for() == f"GPU 1 of GPUs 1,2: held by {CHECKOUT_A}"
        first.release()
        assert second.take() and second.waiting_for() == ""
        assert not first.take() and first.waiting_for() == "GPU 1 of GPUs 0,1: held by B"
    finally:
        first.release()
        second.release()
    anyone = turn(base, ["0", "1", "2"])
    assert anyone.take()  # released: free for anyone
    anyone.release()
    assert [p.name for p in base.parent.iterdir() if ".holder-" in p.name] == []  # nobody named any more


def test_the_gpus_are_taken_in_order_and_kept_while_waiting_for_the_next(base):
    a, b, c = turn(base, ["1"], who="A"), turn(base, ["1", "0"], who="B"), turn(base, ["0"], who="C")
    try:
        assert a.take()
        assert not b.take() and b.waiting_for() == "GPU 1 of GPUs 0,1: held by A"
        assert not c.take() and c.waiting_for() == "GPU 0: held by B"  # B keeps GPU 0 while it waits
        a.release()
        assert b.take()
    finally:
        for t in (a, b, c):
            t.release()


def test_runs_that_only_look_at_a_gpu_share_it_and_one_computing_on_it_waits_for_both(base):
    look1, look2 = turn(base, shared=["0", "1"], who="smoke-1"), turn(base, shared=["0"], who="smoke-2")
    compute = turn(base, ["0"], who="megatron")
    try:
        assert look1.take() and look2.take()
        assert not compute.take()
        assert compute.waiting_for() in ("GPU 0: held by smoke-1; smoke-2", "GPU 0: held by smoke-2; smoke-1")
        look1.release()
        assert not compute.take() and compute.waiting_for() == "GPU 0: held by smoke-2"
        look2.release()
        assert compute.take()
        assert not look1.take() and look1.waiting_for() == "GPU 0 of GPUs 0,1: held by megatron"
    finally:
        for t in (look1, look2, compute):
            t.release()


def test_another_process_holds_them_until_it_dies_and_the_waiter_is_told_its_checkout(base):
    proc = holder(base, "0,1", CHECKOUT_A)
    waiter = turn(base, ["1"], who="B")
    try:
        assert not waiter.take()
        assert waiter.waiting_for() == f"GPU 1: held by {CHECKOUT_A}"
        os.kill(proc.pid, signal.SIGKILL)  # no release(): a crashed run script
        proc.wait()
        wait_until(waiter.take, 10, 0.05, "the dead holder's lock to be dropped")
        # the dead holder's record is gone once its GPU is taken: nobody is told it holds them
        other = turn(base, ["1"], who="C")
        assert not other.take() and other.waiting_for() == "GPU 1: held by B"
    finally:
        waiter.release()
        stop(proc)


def test_a_holder_that_wrote_nothing_is_named_by_its_lock_file(base):
    silent = turn(base, ["0"], who="")
    waiter = turn(base, ["0"], who="B")
    try:
        assert silent.take() and not waiter.take()
        assert waiter.waiting_for() == f"GPU 0: held by another run (see {base.parent / 'gpus-gpu0.lock'})"
    finally:
        silent.release()
