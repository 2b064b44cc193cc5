"""Every directory the run needs is checked up front: a file in the way, a read-only, immutable or
uncreatable directory is one line on stderr and exit 2, before anything is created (and a creation that
fails anyway is undone)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.support.launch import tree
from tests.unit.launch.test_launch_validation import assert_refused


def test_work_dir_that_is_a_file_is_reported_as_such(base_env, work, run_launch):
    as_file = work / "file"
    as_file.write_text("x")
    before = tree(work)
    result = run_launch({**base_env, "NVRX_WORK_DIR": str(as_file)})
    assert_refused(result, f"NVRX_WORK_DIR {as_file} is a file, not a directory")
    assert tree(work) == before


def test_checkpoint_dir_that_is_a_file_is_reported_as_such(base_env, work, run_launch):
    as_file = work / "ckpt"
    as_file.write_text("x")
    before = tree(work)
    result = run_launch({**base_env, "NVRX_CHECKPOINT_DIR": str(as_file)})
    assert_refused(result, f"NVRX_CHECKPOINT_DIR {as_file} is a file, not a directory")
    assert tree(work) == before


def test_a_file_above_the_work_dir_is_named(base_env, work, run_launch):
    (work / "file").write_text("x")
    result = run_launch({**base_env, "NVRX_WORK_DIR": str(work / "file" / "below")})
    assert_refused(result, f"{work / 'file'} is a file, not a directory")


def test_runs_entry_that_is_a_file_is_refused(base_env, work, run_launch):
    (work / "runs").write_text("x")
    assert_refused(run_launch(base_env), f"{work / 'runs'} is a file, not a directory")


@pytest.fixture
def immutable(work):
    """`work/frozen`, made immutable with chattr (refused even to root); skipped where chattr cannot."""
    path = work / "frozen"
    path.mkdir()
    if not shutil.which("chattr"):
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot set the immutable flag here: {made.stderr.decode().strip()}")
    yield path
    subprocess.run(["chattr", "-i", str(path)], check=True)


def test_immutable_work_dir_is_refused(base_env, immutable, run_launch):
    result = run_launch({**base_env, "NVRX_WORK_DIR": str(immutable)})
    assert_refused(result, f"NVRX_WORK_DIR {immutable} is not writable (read-only, immutable or not ours)")
    assert list(immutable.iterdir()) == []


def test_immutable_parent_of_the_work_dir_is_refused(base_env, immutable, run_launch):
    target = immutable / "work"
    result = run_launch({**base_env, "NVRX_WORK_DIR": str(target)})
    assert_refused(result, f"NVRX_WORK_DIR {target} cannot be created: {immutable} is not writable")
    assert list(immutable.iterdir()) == []


def test_immutable_checkpoint_dir_is_refused(base_env, immutable, work, run_launch):
    before = tree(work)
    result = run_launch({**base_env, "NVRX_CHECKPOINT_DIR": str(immutable)})
    assert_refused(result, f"NVRX_CHECKPOINT_DIR {immutable} is not writable")
    assert tree(work) == before


@pytest.fixture
def read_only(work):
    """`work/ro`, read-only for us: mode 555 for a normal user; for root (who writes through modes) a
    read-only bind mount, skipped where mounting is not allowed."""
    path = work / "ro"
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "--bind", str(path), str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mounted.stderr.decode().strip()}")
    try:
        remounted = subprocess.run(["mount", "-o", "remount,bind,ro", str(path)], capture_output=True)
        if remounted.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {remounted.stderr.decode().strip()}")
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


def test_read_only_work_dir_is_refused(base_env, read_only, run_launch):
    result = run_launch({**base_env, "NVRX_WORK_DIR": str(read_only)})
    assert_refused(result, f"NVRX_WORK_DIR {read_only} is not writable (read-only, immutable or not ours)")
    assert list(read_only.iterdir()) == []


def test_read_only_parent_of_the_checkpoint_dir_is_refused(base_env, read_only, work, run_launch):
    before = tree(work)
    result = run_launch({**base_env, "NVRX_CHECKPOINT_DIR": str(read_only / "ckpt")})
    assert_refused(result, f"{read_only / 'ckpt'} cannot be created: {read_only} is not writable")
    assert tree(work) == before


def test_uncreatable_work_dir_is_refused(base_env, run_launch):
    """/proc refuses new entries even to root, whom os.access lets through: the creation fails, cleanly."""
    target = "/proc/ftqual-no-such-dir/work"
    result = run_launch({**base_env, "NVRX_WORK_DIR": target})
    assert result.rc == 2 and result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and "ftqual-no-such-dir" in lines[0], result.err
    assert "Traceback" not in result.err
    assert not os.path.exists("/proc/ftqual-no-such-dir")


def test_failed_creation_is_undone(base_env, work, run_launch):
    """The run's own directories are made, then the checkpoint directory cannot be: none is left."""
    before = tree(work)
    result = run_launch({**base_env, "NVRX_CHECKPOINT_DIR": "/proc/ftqual-no-such-ckpt"})
    assert result.rc == 2 and result.out == ""
    assert (
        result.err.strip().splitlines()
        == ["ftqual launch: cannot create /proc/ftqual-no-such-ckpt: No such file or directory"]
        or "is not writable" in result.err
    )
    assert tree(work) == before


def test_temp_dir_too_long_for_ft_launchers_sockets_is_refused(base_env, work, run_launch):
    """NVRx binds AF_UNIX sockets in the temp dir: a deep TMPDIR made every rank monitor fail at start."""
    deep = work / ("t" * 80)
    deep.mkdir()
    before = tree(work)
    result = run_launch({**base_env, "TMPDIR": str(deep)})
    assert_refused(result, f"TMPDIR '{deep}' is too long for ft_launcher's sockets")
    assert "set TMPDIR=/tmp" in result.err and tree(work) == before


def test_missing_temp_dir_falls_back_like_python(base_env, work, run_launch):
    from ftqual.launch import runstate

    assert runstate.temp_dir({"TMPDIR": str(work / "absent")}) == ("TMPDIR", "/tmp")
    assert run_launch({**base_env, "TMPDIR": str(work / "absent")}).rc == 0


def test_work_dir_that_is_a_fifo_is_not_a_directory(base_env, work, run_launch):
    fifo = work / "fifo"
    os.mkfifo(fifo)
    assert_refused(
        run_launch({**base_env, "NVRX_WORK_DIR": str(fifo)}), f"NVRX_WORK_DIR {fifo} is not a directory"
    )
