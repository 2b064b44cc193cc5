"""Shared test fixtures: where the project, its interpreter and the recorded GPU fixtures are."""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import load
from tests.support.workflow import FAILED_RUNS, failed_runs_digest

REPO_ROOT = Path(__file__).resolve().parents[1]
# The first recorded 2 x H200 runs (baseline-2gpu, kill-2gpu); every recorded run lives in tests/data.
SHARED_FIXTURES = REPO_ROOT / "tests" / "data" / "megatron-h200-2gpu-dp2"


# The layout says what a test is: tests/unit/ (mirroring the package: pure functions, recorded runs, the
# smoke workload's parts) and tests/integration/<kind>/, whose folder is the test's marker (`e2e`: the real
# ft_launcher, `workflow`: snakemake in a temporary directory, `slurm`: the Slurm daemons of .ci/run,
# `workload`: the smoke workload trained in a subprocess, without ft_launcher, `stack`: ftqual's commands in a
# subprocess on this machine's stack: torch, NVRx, ft_launcher; `browser`: a report page in headless
# Chromium). No file sets its own marker, so none can forget it and leak into `make test-fast`.
INTEGRATION = "tests/integration"
# the markers; the slow folders in scheduling order
KINDS = ("slurm", "workflow", "e2e", "workload", "stack", "browser")
# Two pytest-xdist workers (`make test`: `-n 2 --dist loadscope`), each with its own session:
# - a test module is one unit of work, run on one worker: a module's shared run (a module-scoped fixture
#   that several tests read) is made once, not once per worker;
# - the Slurm tests share one three-node cluster and size their jobs to it: all of tests/integration/slurm
#   is one unit;
# - the tests of SOLO_MODULES are one unit, run first, in a row, with nothing beside them (see Turns; the
#   other worker waits for them); then the slow folders (Slurm, Snakemake, real ft_launcher), and the fast
#   tests fill in after them, so both workers finish together;
# - each worker has its own GPU-turn lock file (ftqual.launch.gpu_turn), so the scenario runs of one worker
#   never wait for the other's (the lock itself is tested with its own file in test_gpu_turn.py and
#   test_workflow_gpu_turn.py).
# Verdicts that compare timings measured in one run with each other: a setup timeout NVRx calculated in one
# cycle against another cycle's setup, a recommendation from a baseline against the next run's sections, a
# trend across a campaign's cycles. Another worker's load could fail them on CPU contention alone (seen: a
# calculated setup timeout of 3.44 s against a setup that took 3.63 s beside another launch).
SOLO_MODULES = (
    f"{INTEGRATION}/e2e/test_calculated_timeouts_real.py",
    f"{INTEGRATION}/e2e/test_recommended_timeouts_real.py",
    f"{INTEGRATION}/e2e/test_e2e_campaign.py",
    f"{INTEGRATION}/workflow/test_workflow_campaign.py",
)
ONE_UNIT_KINDS = ("slurm",)


class Turns:
    """Between the workers of one run: a test of SOLO_MODULES runs alone, any other beside any other.

    A readers-writer lock of two flock(2) files: `lock`, held shared by a test and exclusively by a solo
    test, and `gate`, which a solo test holds while it waits for `lock`, so that the other worker's next
    tests wait behind it instead of passing it one after another."""

    def __init__(self, run_uid: str):
        base = Path(tempfile.gettempdir()) / f"ftqual-tests-{run_uid}"
        self.paths = (base.with_suffix(".gate"), base.with_suffix(".lock"))
        self.gate, self.lock = (os.open(path, os.O_RDWR | os.O_CREAT, 0o600) for path in self.paths)
        self.held_alone = False  # this worker holds `lock` exclusively from one solo test to the next

    def remove(self) -> None:
        """The files go with the first worker to finish (the other keeps its open descriptors)."""
        for path in self.paths:
            path.unlink(missing_ok=True)

    @contextmanager
    def turn(self, alone: bool, next_alone: bool = False):
        """The test's turn; a solo test followed by another (`next_alone`) keeps it for that one: the solo
        tests run in a row, not one by one between the other worker's tests (each of which would wait for
        them and they for it, the two workers taking turns instead of working side by side)."""
        if not (alone and self.held_alone):
            fcntl.flock(self.gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(self.lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            finally:
                fcntl.flock(self.gate, fcntl.LOCK_UN)
        self.held_alone = False
        try:
            yield
        finally:
            if alone and next_alone:
                self.held_alone = True
            else:
                fcntl.flock(self.lock, fcntl.LOCK_UN)


TURNS: Turns | None = None
# The load mode (FTQUAL_TEST_LOAD, `make test LOAD=2`; tests/support/load.py): busy loops started by the
# controller alone (an xdist worker has `workerinput`), for the whole session.
LOAD: load.Load | None = None


def pytest_configure(config):
    global TURNS, LOAD
    os.environ.setdefault("TZ", "UTC")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        os.environ.setdefault("FTQUAL_GPU_LOCK", f"/tmp/ftqual-gpus-{os.getuid()}-{worker}.lock")
        TURNS = Turns(os.environ["PYTEST_XDIST_TESTRUNUID"])
    elif not hasattr(config, "workerinput"):
        try:
            count = load.loops_wanted()
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        if count:
            LOAD = load.Load(count)
            atexit.register(LOAD.stop)  # also when the session ends in an error before pytest_unconfigure


def pytest_report_header(config):
    if LOAD is not None:
        return f"load mode ({load.ENV}): {len(LOAD.pids)} busy loop(s) beside the tests, pids {LOAD.pids}"
    return None


def pytest_unconfigure(config):
    global LOAD
    if LOAD is not None:
        LOAD.stop()
        LOAD = None


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outside pytest-timeout's: a test's time starts with its turn
def pytest_runtest_protocol(item, nextitem):
    if TURNS is None:
        return (yield)
    with TURNS.turn(alone=is_solo(item.nodeid), next_alone=nextitem is not None and is_solo(nextitem.nodeid)):
        return (yield)


def is_solo(nodeid: str) -> bool:
    return nodeid.split("::", 1)[0] in SOLO_MODULES


def kind_of(nodeid: str) -> str:
    """tests/integration/<kind>/test_x.py::test_y -> kind ("" for a unit test)."""
    path = nodeid.split("::", 1)[0]
    if not path.startswith(INTEGRATION + "/"):
        return ""
    return path[len(INTEGRATION) + 1 :].split("/", 1)[0]


def _rank(nodeid: str) -> int:
    if is_solo(nodeid):
        return 0
    kind = kind_of(nodeid)
    return 1 + (KINDS.index(kind) if kind in KINDS else len(KINDS))


def pytest_collection_modifyitems(config, items):
    """Each integration test is marked by its folder; under xdist, SOLO_MODULES, then the slow folders first
    (a stable sort: the same order on every worker, as xdist requires). An integration folder that is not a
    kind is a usage error, not a test that runs unmarked."""
    for item in items:
        kind = kind_of(item.nodeid)
        if not kind:
            continue
        if kind not in KINDS:
            raise pytest.UsageError(f"{INTEGRATION}/{kind}: not a test kind; use one of {', '.join(KINDS)}")
        item.add_marker(getattr(pytest.mark, kind))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: _rank(item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's loadscope (one module, one unit) in collection order, tests/integration/slurm as one unit. (Its
    loadgroup
    and xdist_group marks would say this too, but xdist 3.8 cannot group under pytest 9.2: it renames the
    items through `_nodeid`, which pytest 9.2 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if is_solo(nodeid):  # one worker runs them in a row, holding its turn (Turns.turn)
                return "SOLO_MODULES"
            kind = kind_of(nodeid)
            return f"{INTEGRATION}/{kind}" if kind in ONE_UNIT_KINDS else super()._split_scope(nodeid)

    config.option.loadscopereorder = False  # keep the slow folders first
    return Scheduling(config, log)


def pytest_sessionfinish(session):
    """A worker hands its failed workflow runs to the controller, which prints the closing digest."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["ftqual_failed_runs"] = [str(path) for path in FAILED_RUNS]
    if TURNS is not None:
        TURNS.remove()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    FAILED_RUNS.extend(Path(path) for path in getattr(node, "workeroutput", {}).get("ftqual_failed_runs", []))


def pytest_terminal_summary(terminalreporter, exitstatus):
    """Why the session's failed workflow runs failed, from their rule logs, last (what CI keeps)."""
    if LOAD is not None:  # a loop that died early would have left the machine quieter than asked
        running = LOAD.running()
        terminalreporter.write_line(
            f"load mode: {len(running)} of {len(LOAD.pids)} busy loop(s) still spinning at the session's end"
        )
    if exitstatus != 0:
        lines = failed_runs_digest()
        if lines:
            terminalreporter.section("failed workflow runs: telling lines of their rule logs")
            for line in lines[-80:]:
                terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def python_exe() -> str:
    return sys.executable


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.fail(f"recorded fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES


@pytest.fixture
def fixture_copy(tmp_path, shared_fixtures):
    """Copy one recorded run directory into tmp_path (writable) and return its path."""

    def _copy(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(shared_fixtures / name, dest)
        for path in [dest, *dest.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        return dest

    return _copy
