"""Where long logs' iteration records are spilled, and a temporary directory that cannot hold them.

A full or memory-backed temporary directory is this machine's problem, not the run's: verify must say so in
one line and exit 2 (never call the run inconclusive, never a traceback), and a memory `/tmp` must not hold
records that a disk `/var/tmp` could.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ftqual.verification.evidence import spill
from ftqual.verification.evidence.iterations import CHUNK_ROWS
from tests.support.synthetic.runs import Spec, generate

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def long_run(tmp_path_factory) -> Path:
    """A passing kill run whose logs hold more iteration lines than one in-memory chunk (so it spills)."""
    run = tmp_path_factory.mktemp("spill") / "run"
    assert generate(Spec(ranks=2, iters=3 * CHUNK_ROWS), run)["verdict"] == "pass"
    return run


def _verify(run: Path, tmpdir: Path, out: Path, file_limit: int | None = None) -> subprocess.CompletedProcess:
    def limit() -> None:
        if file_limit is not None:  # a full filesystem, as the kernel reports it to a writer (EFBIG)
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))

    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "ftqual", "verify", str(run), "--json", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=300,
    )


def test_a_temporary_directory_without_room_is_one_line_and_exit_2(long_run, tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    full = _verify(long_run, tmpdir, tmp_path / "full.json", file_limit=1 << 20)
    assert full.returncode == 2, full.stdout + full.stderr
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1, full.stderr
    assert "Traceback" not in full.stderr and "inconclusive" not in full.stdout.lower()
    assert lines[0].startswith(f"ftqual verify: cannot keep the records of the iteration lines in {tmpdir}: ")
    assert "File too large" in lines[0] and "set TMPDIR" in lines[0]
    assert not (tmp_path / "full.json").exists()  # no report: the run was not judged
    # control: the same run, with room, passes (the failure above was the limit's alone)
    roomy = _verify(long_run, tmpdir, tmp_path / "roomy.json")
    assert roomy.returncode == 0, roomy.stdout + roomy.stderr
    assert json.loads((tmp_path / "roomy.json").read_text())["verdict"] == "pass"
    assert not list(tmpdir.iterdir())  # the spill file was unlinked: nothing left behind


def test_a_memory_temporary_directory_chosen_by_the_user_is_kept_and_said(long_run, tmp_path):
    shm = Path("/dev/shm")
    if spill.filesystem_type(str(shm)) not in spill.MEMORY_FILESYSTEMS or not os.access(shm, os.W_OK):
        pytest.skip("no writable tmpfs at /dev/shm on this machine")
    tmpdir = shm / f"ftqual-test-{os.getpid()}-{tmp_path.name}"
    tmpdir.mkdir()
    try:
        result = _verify(long_run, tmpdir, tmp_path / "verify.json")
    finally:
        leftovers = list(tmpdir.iterdir())
        tmpdir.rmdir()
    assert result.returncode == 0, result.stdout + result.stderr
    assert not leftovers
    notes = [line for line in result.stderr.splitlines() if "memory filesystem" in line]
    assert len(notes) == 1 and str(tmpdir) in notes[0] and "set TMPDIR" in notes[0], result.stderr


def test_a_short_run_never_spills_so_never_says_so(tmp_path):
    run = tmp_path / "run"
    generate(Spec(ranks=2, iters=200), run)
    result = _verify(run, Path("/dev/shm") if Path("/dev/shm").is_dir() else tmp_path, tmp_path / "v.json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "memory filesystem" not in result.stderr


def _types(mapping: dict[str, str]):
    return lambda path: mapping.get(path)


def test_a_memory_tmp_gives_way_to_a_disk_var_tmp_unless_the_user_chose():
    memory_tmp = _types({"/tmp": "tmpfs", "/var/tmp": "ext4"})
    ok = lambda d: True  # noqa: E731
    assert spill.choose_directory({}, "/tmp", memory_tmp, ok) == ("/var/tmp", False)
    for name in ("TMPDIR", "TEMP", "TMP"):
        assert spill.choose_directory({name: "/tmp"}, "/tmp", memory_tmp, ok) == ("/tmp", True)
    assert spill.choose_directory({"TMPDIR": ""}, "/tmp", memory_tmp, ok) == ("/var/tmp", False)
    # a disk /tmp stays; a memory /var/tmp or one that cannot be written is no better
    assert spill.choose_directory({}, "/tmp", _types({"/tmp": "xfs"}), ok) == ("/tmp", False)
    assert spill.choose_directory({}, "/tmp", _types({"/tmp": "tmpfs", "/var/tmp": "tmpfs"}), ok) == (
        "/tmp",
        True,
    )
    assert spill.choose_directory({}, "/tmp", _types({"/tmp": "ramfs"}), lambda d: False) == ("/tmp", True)
    # an unknown filesystem (no /proc) is taken as it is
    assert spill.choose_directory({}, "/tmp", _types({}), ok) == ("/tmp", False)


def test_filesystem_type_takes_the_deepest_mount(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "30 22 0:27 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw,size=8g\n"
        "31 30 8:2 / /tmp/scratch\\040disk rw - xfs /dev/sdb1 rw\n"
        "32 22 0:30 / /var/tmpfs rw - tmpfs tmpfs rw\n"
        "garbage line\n"
    )
    kind = lambda path: spill.filesystem_type(path, str(info))  # noqa: E731
    assert kind("/tmp") == "tmpfs"
    assert kind("/tmp/job-1") == "tmpfs"
    assert kind("/tmp/scratch disk/x") == "xfs"
    assert kind("/tmpfoo") == "ext4"  # a prefix of a name is not a mount point above it
    assert kind("/var/tmp") == "ext4"
    assert spill.filesystem_type("/tmp", str(tmp_path / "absent")) is None


def test_the_error_says_where_and_how_to_fix():
    text = str(spill.SpillError("/scratch", "No space left on device"))
    assert "/scratch" in text and "No space left on device" in text and "TMPDIR" in text
    assert not isinstance(spill.SpillError("/x", "y"), OSError)  # never read as an unreadable source
