"""The tests' load mode: busy CPU loops beside the session, so that anyone can run the tests the way a busy CI
machine does (seen: two cores shared with other work failed tests that passed alone).

FTQUAL_TEST_LOAD (or `make test LOAD=...`): unset, empty, 0, "off" or "no": off; "1", "on", "yes" or "true":
DEFAULT_LOOPS loops; a number N > 1: N loops. The loops are separate processes that spin without a pause,
started by the session's controller only (under pytest-xdist: once, not once per worker) and killed at its
end. One that outlives the session anyway (the controller was SIGKILLed) ends itself: it asks the kernel for
SIGKILL when its parent dies and looks for its parent every few million iterations.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

ENV = "FTQUAL_TEST_LOAD"
DEFAULT_LOOPS = 2

# PR_SET_PDEATHSIG (1): SIGKILL when the parent thread dies; then make sure the parent did not die first.
LOOP = """
import ctypes, os, signal, sys
parent = int(sys.argv[1])
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
except Exception:
    pass
while os.getppid() == parent:
    for _ in range(5_000_000):
        pass
"""


def loops_wanted(environ: dict[str, str] | os._Environ = os.environ) -> int:
    """How many busy loops FTQUAL_TEST_LOAD asks for; ValueError on a value that is none of the above."""
    value = environ.get(ENV, "").strip().lower()
    if value in ("", "0", "off", "no", "false"):
        return 0
    if value in ("1", "on", "yes", "true"):
        return DEFAULT_LOOPS
    try:
        count = int(value)
    except ValueError:
        count = -1
    if count < 0:
        given = environ.get(ENV)
        raise ValueError(f"{ENV}={given!r}: give a number of busy loops, or 'on' for {DEFAULT_LOOPS}")
    return count


class Load:
    """The session's busy loops."""

    def __init__(self, count: int):
        self.procs: list[subprocess.Popen] = []
        for _ in range(count):
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", LOOP, str(os.getpid())],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # out of the way of a Ctrl-C meant for the tests
                    env={k: v for k, v in os.environ.items() if k != ENV},
                )
            )

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc in self.procs]

    def running(self) -> list[int]:
        return [proc.pid for proc in self.procs if proc.poll() is None]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            proc.wait()
        self.procs = []
