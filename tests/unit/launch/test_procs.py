"""ftqual.launch.procs names a process by (pid, start ticks since boot) and must keep doing so while the wall
clock
moves: /proc/stat's `btime` (which psutil adds to every create_time()) flips by a second when a VM's clock
is adjusted. Seen on CI: the run script's watch on its own ancestors took the live workflow for gone,
stopped the run with SIGTERM and the Slurm job failed."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import psutil
import pytest

from ftqual.launch import procs
from ftqual.rank import procfs


@pytest.fixture
def flipping_boot_time(monkeypatch):
    """Every read of the boot time answers one second later or earlier than the one before."""
    real = psutil._psplatform.boot_time
    flips = itertools.cycle((0.0, 1.0))
    monkeypatch.setattr(psutil._psplatform, "boot_time", lambda: real() + next(flips))
    monkeypatch.setattr(psutil, "boot_time", lambda: real() + next(flips))
    # the flip is real for psutil: two objects for one process now disagree
    assert psutil.Process().create_time() != psutil.Process().create_time()


def test_start_time_are_the_kernels_and_the_wrappers():
    assert procs.start_time(os.getpid()) == procfs.proc_start_time(os.getpid())
    assert procs.read_stat(os.getpid()).start_time == procfs.proc_start_time()


def test_start_time_survive_a_command_name_with_spaces_and_parentheses(tmp_path):
    odd = tmp_path / "a b) (c"
    odd.symlink_to(sys.executable)
    child = subprocess.Popen([str(odd), "-c", "import time; time.sleep(30)"])
    try:  # Popen returns once the child exec'd: its stat shows the odd name
        assert procs.start_time(child.pid) == procfs.proc_start_time(child.pid)
    finally:
        child.kill()
        child.wait()
    assert procs.start_time(child.pid) is None


def test_a_live_ancestry_is_never_gone_while_the_boot_time_flips(flipping_boot_time):
    chain = procs.ancestry()
    assert chain and chain[0][0] == os.getppid()
    for _ in range(6):
        assert procs.first_gone(chain) is None
        assert all(procs.alive(pid, started) for pid, started in chain)


def test_a_process_is_the_same_one_while_the_boot_time_flips(flipping_boot_time):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        record = procs.pid_record(child.pid)
        for _ in range(6):
            assert procs.alive(child.pid, record["start_time"])
    finally:
        child.kill()
        child.wait()
    assert not procs.alive(child.pid, record["start_time"])


def test_an_ancestor_that_exits_or_is_replaced_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = procs.start_time(child.pid)
    chain = [(os.getppid(), procs.start_time(os.getppid())), (child.pid, started)]
    assert procs.first_gone(chain) is None
    assert procs.first_gone([(child.pid, started + 1)]) == child.pid  # the pid names another process
    child.kill()
    child.wait()
    assert procs.first_gone(chain) == child.pid


def test_descendants_finds_children_started_with_their_parent_while_the_boot_time_flips(flipping_boot_time):
    script = (
        "import subprocess, sys, time\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']) for _ in range(2)]\n"
        "print(' '.join(str(k.pid) for k in kids), flush=True)\n"
        "time.sleep(30)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        kids = {int(pid) for pid in parent.stdout.readline().split()}
        for _ in range(4):
            assert {s.pid for s in procs.descendants(parent.pid)} == kids
        assert os.getpid() not in {s.pid for s in procs.descendants(parent.pid)}
    finally:
        for stat in procs.descendants(parent.pid):
            os.kill(stat.pid, 9)
        parent.kill()
        parent.wait()
    assert procs.descendants(parent.pid) == []
