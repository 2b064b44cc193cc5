"""Where the iteration records of long logs go, and what a spill that fails says.

`IterationTable` keeps one 73-byte record per iteration line and writes full chunks to an unlinked
temporary file: page cache on a disk, not the process's memory. Two things can defeat that on a real
machine, and neither is the run's fault:
- the temporary directory is a memory filesystem (`/tmp` is a tmpfs on many distributions and login
  nodes): the records then sit in RAM, charged to the user's memory limit. Where the user has not chosen a
  directory (no TMPDIR, TEMP or TMP), `/var/tmp` is taken instead when it is on a disk; a directory the user
  chose is kept, with one line on stderr saying it is memory;
- the directory fills up: that is a `SpillError` (not an OSError, so that no reader mistakes it for an
  unreadable source and calls the run inconclusive); `ftqual verify` says it in one line and exits 2.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from functools import cache
from typing import BinaryIO

MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
DISK_FALLBACK = "/var/tmp"  # FHS: kept across reboots, so on a disk where /tmp is memory
CHOSEN_BY_USER = ("TMPDIR", "TEMP", "TMP")  # what tempfile.gettempdir() reads first
RECORD_BYTES_PER_LINE = 73


class SpillError(Exception):
    """The records of iteration lines could not be written to or read from their temporary file."""

    def __init__(self, directory: str, reason: str) -> None:
        self.directory, self.reason = directory, reason
        super().__init__(
            f"cannot keep the records of the iteration lines in {directory}: {reason}; they need about "
            f"{RECORD_BYTES_PER_LINE} bytes per iteration line (a quarter of a dense log's size) there: "
            "set TMPDIR to a directory on a disk with room"
        )


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes are written as octal escapes."""
    for code in ("\\040", "\\011", "\\012", "\\134"):
        field = field.replace(code, chr(int(code[1:], 8)))
    return field


def filesystem_type(path: str, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the filesystem `path` lies on (its deepest mount point), or None where unknown."""
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    target = os.path.realpath(path)
    best, best_type = "", None
    for line in lines:
        # id parent major:minor root mount-point options [optional fields...] - fstype source super-options
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(" "), tail.split(" ")
        if not sep or len(fields) < 5 or not rest[0]:
            continue
        point = _unescape(fields[4])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):  # a later mount on the same point hides the earlier one
            best, best_type = point, rest[0]
    return best_type


def choose_directory(
    environ: Mapping[str, str],
    default: str,
    fs_type: Callable[[str], str | None] = filesystem_type,
    usable: Callable[[str], bool] = lambda d: os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK),
) -> tuple[str, bool]:
    """(directory for the records, whether it is memory). The user's choice is kept; else a memory `/tmp`
    gives way to a disk `/var/tmp`."""
    in_memory = fs_type(default) in MEMORY_FILESYSTEMS
    if not in_memory or any(environ.get(name) for name in CHOSEN_BY_USER):
        return default, in_memory
    if usable(DISK_FALLBACK) and fs_type(DISK_FALLBACK) not in MEMORY_FILESYSTEMS:
        return DISK_FALLBACK, False
    return default, True


@cache
def _directory() -> str:
    directory, in_memory = choose_directory(os.environ, tempfile.gettempdir(), filesystem_type)
    if in_memory:
        print(
            f"ftqual verify: note: {directory} is a memory filesystem: the records of long logs' iteration "
            f"lines ({RECORD_BYTES_PER_LINE} bytes each) are held in RAM there; set TMPDIR to a directory "
            "on a disk to keep them out of memory",
            file=sys.stderr,
        )
    return directory


def open_spill() -> BinaryIO:
    """An unlinked temporary file for spilled records (gone with the process, whatever its end)."""
    try:
        return tempfile.TemporaryFile(prefix="ftqual-iterations-", dir=_directory())
    except OSError as exc:
        raise spill_failed(exc) from exc


def spill_failed(exc: OSError) -> SpillError:
    """The SpillError for an OSError while writing or reading the spilled records."""
    return SpillError(_directory(), exc.strerror or str(exc))
