"""`ftqual install-profiles` with HOME and XDG_CONFIG_HOME pointed at temporary folders."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
# The user profiles; profiles/default is the workflow's own (Snakemake reads it beside the Snakefile).
OUR_PROFILES = sorted(
    p.name for p in (REPO / "profiles").iterdir() if (p / "config.yaml").is_file() and p.name != "default"
)


def install(home: Path, *args: str, xdg: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("XDG_CONFIG_HOME", None)
    if xdg is not None:
        env["XDG_CONFIG_HOME"] = str(xdg)
    return subprocess.run(
        [sys.executable, "-m", "ftqual", "install-profiles", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=60,
    )


@pytest.fixture
def home(tmp_path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def test_project_has_the_local_and_slurm_profiles():
    assert {"local", "slurm"} <= set(OUR_PROFILES)


def test_install_links_every_profile_and_is_idempotent(home):
    first = install(home)
    assert first.returncode == 0, first.stderr
    config_dir = home / ".config" / "snakemake"
    for name in OUR_PROFILES:
        link = config_dir / name
        assert link.is_symlink() and link.resolve() == (REPO / "profiles" / name).resolve()
        assert os.path.isabs(os.readlink(link))
        assert f"installed     {link}" in first.stdout
    assert not (config_dir / "default").exists()  # the workflow profile is never a user profile
    second = install(home)
    assert second.returncode == 0
    assert "installed" not in second.stdout and second.stdout.count("unchanged") == len(OUR_PROFILES)


def test_xdg_config_home_is_honoured_like_snakemake_does(home, tmp_path):
    xdg = tmp_path / "xdg"
    assert install(home, xdg=xdg).returncode == 0
    assert (xdg / "snakemake" / "slurm").is_symlink()
    assert not (home / ".config").exists()
    # Snakemake's own answer for the same environment
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from snakemake.common import get_appdirs; print(get_appdirs().user_config_dir)",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(xdg)},
        timeout=60,
    )
    assert probe.stdout.strip() == str(xdg / "snakemake")


def test_a_foreign_profile_of_that_name_is_refused_and_left_untouched(home):
    foreign = home / ".config" / "snakemake" / "slurm"
    foreign.mkdir(parents=True)
    (foreign / "config.yaml").write_text("executor: cluster-generic\n")
    proc = install(home)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and str(foreign) in err[0] and "--name-prefix ftqual-" in err[0]
    assert (foreign / "config.yaml").read_text() == "executor: cluster-generic\n"
    assert not foreign.is_symlink()
    assert not (home / ".config" / "snakemake" / "local").exists()  # all or nothing


def test_a_foreign_link_is_refused_even_with_force_ours(home, tmp_path):
    other = tmp_path / "someone-elses" / "slurm"
    other.mkdir(parents=True)
    (other / "config.yaml").write_text("jobs: 1\n")
    link = home / ".config" / "snakemake" / "slurm"
    link.parent.mkdir(parents=True)
    link.symlink_to(other)
    for args in ((), ("--force-ours",)):
        assert install(home, *args).returncode == 2
        assert link.resolve() == other.resolve()


def test_force_ours_repoints_a_dead_link_and_another_checkouts_link(home, tmp_path):
    config_dir = home / ".config" / "snakemake"
    config_dir.mkdir(parents=True)
    (config_dir / "local").symlink_to(tmp_path / "gone" / "profiles" / "local")
    old = tmp_path / "old-checkout"
    (old / "profiles" / "slurm").mkdir(parents=True)
    (old / "ftqual").mkdir()
    (old / "ftqual" / "profiles.py").write_text("")  # a checkout from before ftqual/workflow/
    (config_dir / "slurm").symlink_to(old / "profiles" / "slurm")

    assert install(home).returncode == 2
    proc = install(home, "--force-ours")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("re-pointed") == 2
    assert (config_dir / "slurm").resolve() == (REPO / "profiles" / "slurm").resolve()


def test_prefix_installs_beside_a_foreign_profile(home):
    foreign = home / ".config" / "snakemake" / "slurm"
    foreign.mkdir(parents=True)
    (foreign / "config.yaml").write_text("jobs: 1\n")
    proc = install(home, "--name-prefix", "ftqual-")
    assert proc.returncode == 0, proc.stderr
    for name in OUR_PROFILES:
        assert (foreign.parent / f"ftqual-{name}").resolve() == (REPO / "profiles" / name).resolve()
    assert not foreign.is_symlink()


def test_uninstall_removes_only_our_links(home):
    config_dir = home / ".config" / "snakemake"
    assert install(home, "--name-prefix", "ftqual-").returncode == 0
    (config_dir / "slurm").mkdir()
    proc = install(home, "--uninstall", "--name-prefix", "ftqual-")
    assert proc.returncode == 0
    assert not any(p.name.startswith("ftqual-") for p in config_dir.iterdir())
    assert (config_dir / "slurm").is_dir()
    assert install(home, "--uninstall").returncode == 0  # slurm dir there is not ours: left alone
    assert (config_dir / "slurm").is_dir()


def test_config_dir_option_and_bad_prefix(home, tmp_path):
    target = tmp_path / "elsewhere"
    assert install(home, "--config-dir", str(target)).returncode == 0
    assert (target / "local").is_symlink()
    proc = install(home, "--name-prefix", "a/b")
    assert proc.returncode == 2 and "must not contain" in proc.stderr


def test_a_link_into_another_checkout_of_either_layout_is_replaceable(tmp_path):
    from ftqual.workflow.profiles import replaceable_link

    for mark in ("ftqual/workflow/profiles.py", "ftqual/profiles.py", "ftqual/elsewhere.py"):
        checkout = tmp_path / mark.replace("/", "-")
        (checkout / "profiles" / "local").mkdir(parents=True)
        (checkout / mark).parent.mkdir(parents=True, exist_ok=True)
        (checkout / mark).write_text("")
        link = checkout / "link"
        link.symlink_to(checkout / "profiles" / "local")
        assert replaceable_link(link) is (mark != "ftqual/elsewhere.py"), mark
