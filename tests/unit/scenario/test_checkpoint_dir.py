"""checkpoint_dir_problems (ftqual/scenario/checkpoint_dir.py): a configured checkpoint root must exist as a
writable directory; each problem is one line saying what is wrong and how to fix it, and nothing is left
behind. Refusals the test user cannot make for real (a read-only mount, root's bypass of mode bits) are
made by failing the probe file's creation."""

from __future__ import annotations

import errno
import os

import pytest

from ftqual.scenario import checkpoint_dir as cd
from ftqual.scenario.checkpoint_dir import checkpoint_dir_problems


def one_line(problems: list[str]) -> str:
    assert len(problems) == 1, problems
    assert "\n" not in problems[0]
    return problems[0]


def test_an_existing_writable_directory_has_no_problem_and_keeps_nothing(tmp_path):
    assert checkpoint_dir_problems(tmp_path) == []
    assert checkpoint_dir_problems(str(tmp_path)) == []
    assert os.listdir(tmp_path) == []  # the probe file is gone


def test_empty_is_not_configured():
    assert checkpoint_dir_problems("") == []


def test_missing_says_so_names_the_parent_and_the_fix(tmp_path):
    path = tmp_path / "nonexistent" / "ckpt"
    line = one_line(checkpoint_dir_problems(str(path)))
    assert line.startswith(
        f"checkpoint_dir {path} does not exist (its nearest existing parent is {tmp_path})"
    )
    assert "create it on the filesystem you want qualified" in line
    assert "ftqual makes only each run's folder below it" in line and "or fix the path" in line
    assert not (tmp_path / "nonexistent").exists()  # nothing was created


def test_the_issues_path():
    line = one_line(checkpoint_dir_problems("/nonexistent/ckpt"))
    assert line.startswith(
        "checkpoint_dir /nonexistent/ckpt does not exist (its nearest existing parent is /)"
    )
    assert not os.path.exists("/nonexistent")


def test_a_relative_path_is_shown_resolved(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line(checkpoint_dir_problems("ckpt"))
    assert line.startswith(f"checkpoint_dir ckpt ({tmp_path / 'ckpt'}) does not exist")


def test_the_setting_is_named_as_the_caller_says(tmp_path):
    line = one_line(checkpoint_dir_problems(tmp_path / "x", "NVRX_CHECKPOINT_ROOT"))
    assert line.startswith(f"NVRX_CHECKPOINT_ROOT {tmp_path / 'x'} does not exist")


def test_a_file_is_not_a_directory(tmp_path):
    path = tmp_path / "ckpt"
    path.write_text("x")
    line = one_line(checkpoint_dir_problems(path))
    assert f"checkpoint_dir {path} is a file, not a directory" in line and "point it at a directory" in line


def test_a_file_above_it_is_named(tmp_path):
    (tmp_path / "file").write_text("x")
    line = one_line(checkpoint_dir_problems(tmp_path / "file" / "ckpt"))
    assert f"cannot exist: {tmp_path / 'file'} is not a directory; fix the path" in line


def test_a_dangling_link_names_its_target(tmp_path):
    (tmp_path / "ckpt").symlink_to(tmp_path / "gone")
    line = one_line(checkpoint_dir_problems(tmp_path / "ckpt"))
    assert f"is a symbolic link to {tmp_path / 'gone'}, which does not exist" in line


def test_a_link_to_a_directory_is_fine(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "ckpt").symlink_to(tmp_path / "real")
    assert checkpoint_dir_problems(tmp_path / "ckpt") == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through mode bits (the probe file test covers it)")
def test_mode_555_is_not_writable_for_a_normal_user(tmp_path):
    path = tmp_path / "ro"
    path.mkdir()
    path.chmod(0o555)
    try:
        line = one_line(checkpoint_dir_problems(path))
    finally:
        path.chmod(0o755)
    assert "is not writable by this user" in line


def refuse_the_probe(monkeypatch, code: int) -> None:
    """os.open fails with `code` for the probe file only (what a read-only mount, an ACL, a full disk or
    a server refusal does to root, whom os.access lets through)."""
    real = os.open

    def fake(path, flags, mode=0o777, *args, **kwargs):
        if cd.PROBE_PREFIX in os.fspath(path):
            raise OSError(code, os.strerror(code), os.fspath(path))
        return real(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake)


@pytest.mark.parametrize(
    ("code", "said", "fix"),
    [
        (errno.EROFS, "Read-only file system, EROFS", "remount it read-write"),
        (errno.EACCES, "Permission denied, EACCES", "give the user running ftqual write access"),
        (errno.EPERM, "EPERM", "lift the restriction"),
        (errno.ENOSPC, "ENOSPC", "free space or inodes there"),
        (errno.EDQUOT, "EDQUOT", "raise the quota"),
        (errno.ENOENT, "ENOENT", "a virtual filesystem such as /proc"),
        (errno.EIO, "Input/output error, EIO", "fix the filesystem, or choose another directory"),
    ],
)
def test_a_refused_probe_file_is_the_real_check(tmp_path, monkeypatch, code, said, fix):
    refuse_the_probe(monkeypatch, code)
    line = one_line(checkpoint_dir_problems(tmp_path))
    assert line.startswith(f"checkpoint_dir {tmp_path} refused a test file (")
    assert said in line and fix in line
    assert os.listdir(tmp_path) == []


def test_proc_takes_no_files_even_from_root():
    line = one_line(checkpoint_dir_problems("/proc"))
    assert line.startswith("checkpoint_dir /proc ")
    assert not any(n.startswith(cd.PROBE_PREFIX) for n in os.listdir("/proc"))


def test_a_read_only_mount_is_said_before_any_probe(tmp_path, monkeypatch):
    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(cd.os, "statvfs", lambda p: ReadOnly())
    monkeypatch.setattr(cd, "probe_write", lambda d: pytest.fail("no probe on a read-only mount"))
    line = one_line(checkpoint_dir_problems(tmp_path))
    assert f"checkpoint_dir {tmp_path} is on a read-only mount: remount it read-write" in line


def test_access_refused_skips_the_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(cd.os, "access", lambda p, m: False)
    monkeypatch.setattr(cd, "probe_write", lambda d: pytest.fail("access already said no"))
    assert "is not writable by this user" in one_line(checkpoint_dir_problems(tmp_path))


def test_a_probe_file_that_cannot_be_removed_is_said(tmp_path, monkeypatch):
    real = os.unlink

    def fake(path, *args, **kwargs):
        if cd.PROBE_PREFIX in os.fspath(path):
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", fake)
    line = one_line(checkpoint_dir_problems(tmp_path))
    assert "refused a test file that could not be removed" in line and "EBUSY" in line
