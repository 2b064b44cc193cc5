"""Slurm tests need the daemons of .ci/slurm/start.sh: skipped when `sinfo` cannot reach a controller,
unless FTQUAL_REQUIRE_SLURM=1 (CI), which turns the skip into a failure."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def slurm_problem() -> str | None:
    if shutil.which("sinfo") is None:
        return "sinfo not found (start Slurm with `bash .ci/slurm/start.sh`)"
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%P %a %D"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return "sinfo timed out"
    if proc.returncode != 0 or not proc.stdout.strip():
        return f"sinfo cannot reach a controller: {(proc.stderr or proc.stdout).strip()[:200]}"
    return None


@pytest.fixture(scope="session")
def slurm_cluster():
    problem = slurm_problem()
    if problem is not None:
        if os.environ.get("FTQUAL_REQUIRE_SLURM") == "1":
            pytest.fail(f"FTQUAL_REQUIRE_SLURM=1 but {problem}")
        pytest.skip(problem)
