"""`snakemake --profile local|slurm -n` from the project root really uses our profiles once installed.

The project is copied into tmp_path, the profiles are installed with HOME pointed there, and Snakemake's
own CLI is run. Evidence that *our* profile is in effect, not just one with that name:
- Snakemake's resolver (`snakemake.cli.get_profile_dir`) returns our profiles/<name>;
- before the install the bare name does not resolve at all (the project root is not searched for it);
- local: the local executor is intended ("Assuming unrestricted shared filesystem usage.") and our
  `printshellcmds: true` prints a "Shell command:" line per job;
- slurm: our default-resources (`slurm_partition=gpu`) and set-resources (`cpus_per_gpu=8`) are on the jobs
  and the local-executor line is absent (a dry run never submits, so the executor shows only this way);
- Snakemake's own `parse_args` reads `executor: slurm`, `jobs: 16` resp. the global `gpu: 2` resource.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.workflow import NO_SLURM_CONF, uses_slurm

REPO = Path(__file__).resolve().parents[3]
COPY = ("Snakefile", "rules", "envs", "config", "profiles", "scripts", "workloads", "ftqual", "report")

pytestmark = [
    pytest.mark.workflow,
    pytest.mark.skipif(
        not (REPO / "Snakefile").is_file(), reason="the workflow's Snakefile does not exist yet"
    ),
]


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("project")
    for name in COPY:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__", ".snakemake"))
        elif src.is_file():
            shutil.copy2(src, root / name)
    home = root.parent / f"{root.name}-home"
    home.mkdir()
    site = root.parent / f"{root.name}-site"  # no site-wide profiles either
    site.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_DIRS": str(site), "PYTHONPATH": str(root)}
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("SNAKEMAKE_PROFILE", None)
    return root, env


def run(cmd: list[str], root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)


def snakemake(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`python -m snakemake ARGS`; without a Slurm configuration unless ARGS name Slurm (NO_SLURM_CONF)."""
    env = env if uses_slurm(args) else {**env, "SLURM_CONF": NO_SLURM_CONF}
    return run([sys.executable, "-m", "snakemake", *args], root, env)


def profile_dir(root: Path, env: dict[str, str], name: str) -> Path:
    code = f"from snakemake.cli import get_profile_dir; print(get_profile_dir({name!r})[0].resolve())"
    proc = run([sys.executable, "-c", code], root, env)
    assert proc.returncode == 0, proc.stderr
    return Path(proc.stdout.strip())


@pytest.fixture(scope="module")
def installed(project) -> tuple[Path, dict[str, str]]:
    root, env = project
    before = snakemake(root, env, "--profile", "local", "-n")
    assert before.returncode != 0 and "no profile.yaml (or config.yaml) found" in before.stderr
    proc = run([sys.executable, "-m", "ftqual", "install-profiles"], root, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root, env


def test_local_profile_by_name(installed):
    root, env = installed
    assert profile_dir(root, env, "local") == (root / "profiles" / "local").resolve()
    proc = snakemake(root, env, "--profile", "local", "-n")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    # and the workflow's own profile (profiles/default: rerun-triggers), whatever profile is named
    assert "Using profiles local and workflow specific profile profiles/default for setting" in out
    assert "Assuming unrestricted shared filesystem usage." in out  # the local executor is the intended one
    assert "Shell command:" in out  # printshellcmds: true, set by our local profile only
    plain = snakemake(root, env, "-n")
    assert plain.returncode == 0 and "Shell command:" not in plain.stdout + plain.stderr


def test_slurm_profile_by_name(installed):
    root, env = installed
    assert profile_dir(root, env, "slurm") == (root / "profiles" / "slurm").resolve()
    proc = snakemake(root, env, "--profile", "slurm", "-n")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    # and the workflow's own profile (profiles/default: rerun-triggers), whatever profile is named
    assert "Using profiles slurm and workflow specific profile profiles/default for setting" in out
    assert "Assuming unrestricted shared filesystem usage." not in out  # a remote executor is intended
    assert "slurm_partition=gpu" in out  # our default-resources
    assert "cpus_per_gpu=8" in out  # our set-resources for run_scenario


def test_snakemakes_own_argument_parsing_applies_our_settings(installed):
    """The CLI's parse_args (what `snakemake --profile NAME` runs first) gets our executor and resources."""
    root, env = installed
    code = (
        "import sys; from snakemake.cli import parse_args\n"
        "_, a = parse_args(['--profile', sys.argv[1], '-n'])\n"
        "res = {k: getattr(v, 'value', v) for k, v in (a.resources or {}).items()}\n"
        "print(a.executor, a.jobs, res.get('gpu'), a.printshellcmds)\n"
    )
    for name in ("local", "slurm"):
        profile = yaml.safe_load((root / "profiles" / name / "config.yaml").read_text())
        want = [
            str(profile.get("executor")),
            str(profile.get("jobs")),
            str((profile.get("resources") or {}).get("gpu")),
            str(profile.get("printshellcmds", False)),
        ]
        proc = run([sys.executable, "-c", code, name], root, env)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == want, name
    assert want[0] == "slurm"  # the Slurm profile selects the Slurm executor plugin
