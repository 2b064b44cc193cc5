"""Helpers for the launcher's unit tests: run `ftqual.launch.main` in-process on a clean environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftqual import launch
from tests.support.launch import LaunchResult


@pytest.fixture
def work(tmp_path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.fixture
def base_env(work) -> dict[str, str]:
    """The smallest valid environment: a dry run of the smoke workload with a fixed run ID."""
    return {"NVRX_WORK_DIR": str(work), "NVRX_WORKLOAD": "smoke", "NVRX_RUN_ID": "r1", "NVRX_DRY_RUN": "1"}


@pytest.fixture
def run_launch(capsys):
    def _run(env: dict[str, str], argv: list[str] | None = None) -> LaunchResult:
        rc = launch.main(argv or [], env=env)
        captured = capsys.readouterr()
        return LaunchResult(rc, captured.out, captured.err)

    return _run


@pytest.fixture
def megatron_checkout(tmp_path) -> Path:
    path = tmp_path / "Megatron-LM"
    path.mkdir()
    (path / "pretrain_gpt.py").write_text("raise SystemExit('not for running in tests')\n")
    return path
