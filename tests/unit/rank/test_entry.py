"""workloads/megatron_gpt_worker.py, the script ft_launcher runs on every rank: a few lines that import
ftqual.rank from where it is installed (pip install -e .), else from the checkout that holds the script, and
run nothing on import (NVRx's checkpoint worker is started with `spawn`, which re-imports it)."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ENTRY = ROOT / "workloads" / "megatron_gpt_worker.py"
PROBE = "import sys; print(sys.modules['ftqual.rank'].__file__)\n"


def run_entry(tmp_path: Path, *python_flags: str) -> subprocess.CompletedProcess:
    (tmp_path / "ep.py").write_text(PROBE)
    (tmp_path / "pids").mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    argv = [sys.executable, *python_flags, str(ENTRY), "--entrypoint", str(tmp_path / "ep.py")]
    argv += ["--checkpoint-dir", str(tmp_path), "--fault-marker", str(tmp_path / "m.json"), "--fault", "none"]
    argv += ["--pid-dir", str(tmp_path / "pids")]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd="/", env=env)


@pytest.mark.parametrize(
    ("how", "flags"),
    [("installed", ()), ("from the checkout, not installed", ("-S",))],  # -S: no site-packages, no install
)
def test_the_rank_imports_the_package(tmp_path, how, flags):
    done = run_entry(tmp_path, *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "ftqual" / "rank" / "__init__.py"), how
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "pids").glob("*.json")]
    assert record["rank_code"] == str(ROOT / "ftqual" / "rank")


def test_without_site_packages_ftqual_is_not_importable_otherwise(tmp_path):
    """The -S case above takes the fallback: nothing else would find ftqual there."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-S", "-c", "import ftqual"], capture_output=True, text=True, cwd="/", env=env
    )
    assert done.returncode != 0 and "ModuleNotFoundError" in done.stderr


def test_a_spawn_re_import_runs_nothing():
    """What multiprocessing's spawn does with the main script: run it under another name."""
    assert runpy.run_path(str(ENTRY), run_name="__mp_main__")["__name__"] == "__mp_main__"


def test_the_entry_script_is_a_few_lines():
    assert len(ENTRY.read_text().splitlines()) <= 20
