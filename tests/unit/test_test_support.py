"""The test tooling itself: waiting with a deadline (tests/support/wait.py) and the load mode
(tests/support/load.py)."""

from __future__ import annotations

import itertools
import os
import time

import pytest

from tests.support import load
from tests.support.wait import gone_within, stays, wait_until


def test_wait_until_returns_the_first_true_value():
    counter = itertools.count()
    assert wait_until(lambda: next(counter) >= 3 and "ready", 5, 0.01, "the counter") == "ready"


def test_wait_until_names_what_it_waited_for_and_the_last_value():
    with pytest.raises(AssertionError, match=r"for the marker file; last value: \[\]\nthe log's tail"):
        wait_until(lambda: [], 0.2, 0.05, "the marker file", detail=lambda: "the log's tail")


def test_wait_until_looks_once_more_at_the_deadline():
    started = time.monotonic()
    assert wait_until(lambda: time.monotonic() - started > 0.15, 0.15, interval=10) is True


def test_gone_within_says_what_is_still_there():
    assert gone_within(lambda: [], 1, "nothing") is None
    with pytest.raises(AssertionError, match=r"still there: \[4242\]"):
        gone_within(lambda: [4242], 0.2, "pid 4242 to end", 0.05)


def test_stays_fails_at_the_first_look_that_does_not_hold():
    stays(lambda: True, 0.1, "always", 0.02)
    counter = itertools.count()
    with pytest.raises(AssertionError, match="the innocent lives: no longer true"):
        stays(lambda: next(counter) < 2, 5, "the innocent lives", 0.01)


@pytest.mark.parametrize(
    ("value", "loops"),
    [(None, 0), ("", 0), ("0", 0), ("off", 0), ("no", 0), ("1", 2), ("on", 2), ("TRUE", 2), ("3", 3)],
)
def test_the_load_mode_counts_its_loops(value, loops):
    env = {} if value is None else {load.ENV: value}
    assert load.loops_wanted(env) == loops


@pytest.mark.parametrize("value", ["two", "-1", "1.5"])
def test_the_load_mode_refuses_what_is_not_a_count(value):
    with pytest.raises(ValueError, match="give a number of busy loops"):
        load.loops_wanted({load.ENV: value})


def cpu_ticks(pid: int) -> int:
    fields = open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def test_a_busy_loop_spins_until_stopped_and_is_gone_after():
    busy = load.Load(1)
    try:
        [pid] = busy.pids
        first = cpu_ticks(pid)
        wait_until(lambda: cpu_ticks(pid) > first, 10, 0.05, "the loop to use CPU time")
        assert busy.running() == [pid] and os.getpgid(pid) == pid  # its own group: no Ctrl-C of ours
    finally:
        busy.stop()
    assert busy.running() == [] and not os.path.exists(f"/proc/{pid}")
