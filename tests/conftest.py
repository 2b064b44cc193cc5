"""Shared test fixtures: where the project, its interpreter and the recorded GPU fixtures are."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.workflow import failed_runs_digest

REPO_ROOT = Path(__file__).resolve().parents[1]
# The first recorded 2 x H200 runs (baseline-2gpu, kill-2gpu); every recorded run lives in tests/data.
SHARED_FIXTURES = REPO_ROOT / "tests" / "data" / "megatron-h200-2gpu-dp2"


def pytest_configure(config):
    os.environ.setdefault("TZ", "UTC")


def pytest_terminal_summary(terminalreporter, exitstatus):
    """Why the session's failed workflow runs failed, from their rule logs, last (what CI keeps)."""
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
