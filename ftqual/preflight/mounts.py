"""The mount table: the filesystem holding a path (mount point, type, device).

The mount table: which filesystem holds a path (mount point, type, device), read from
/proc/self/mountinfo, else /proc/mounts. Parsing and picking are pure; only `read_mount_table` reads.

The kernel escapes a space, tab, newline and backslash in a path or source as an octal `\\ooo` (`\\040` for a
space); they are decoded here byte by byte, so a UTF-8 name survives. A path's mount is the mount point
that is its longest component-wise prefix, the later of two mounts on one point (the one on top) winning;
the path must already be resolved (os.path.realpath), as the kernel's table names real paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MOUNTINFO = "/proc/self/mountinfo"
PROC_MOUNTS = "/proc/mounts"
_OCTAL = re.compile(rb"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    point: str
    fs_type: str
    device: str  # the mount's source: /dev/nvme0n1p1, server:/export, 10.0.0.1@tcp:/lustre, tmpfs, overlay
    device_number: str | None = None  # major:minor (mountinfo only)


def unescape(field: str) -> str:
    """A mount table field with the kernel's octal escapes decoded."""
    raw = field.encode("utf-8", "surrogateescape")
    return _OCTAL.sub(lambda m: bytes([int(m.group(1), 8) & 0xFF]), raw).decode("utf-8", "surrogateescape")


def parse_mountinfo(text: str) -> list[Mount]:
    """/proc/self/mountinfo's lines: `id parent major:minor root point options [optional...] - type source
    super-options`; a line that does not have that shape is skipped."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        try:
            dash = fields.index("-", 6)
        except ValueError:
            continue
        if len(fields) < dash + 3:
            continue
        mounts.append(
            Mount(
                point=unescape(fields[4]),
                fs_type=unescape(fields[dash + 1]),
                device=unescape(fields[dash + 2]),
                device_number=fields[2],
            )
        )
    return mounts


def parse_proc_mounts(text: str) -> list[Mount]:
    """/proc/mounts's (fstab-style) lines: `source point type options dump pass`."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            mounts.append(
                Mount(point=unescape(fields[1]), fs_type=unescape(fields[2]), device=unescape(fields[0]))
            )
    return mounts


def read_mount_table(mountinfo: str = MOUNTINFO, proc_mounts: str = PROC_MOUNTS) -> list[Mount]:
    """This process's mounts: mountinfo (it has the device numbers), else /proc/mounts, else []."""
    for path, parse in ((mountinfo, parse_mountinfo), (proc_mounts, parse_proc_mounts)):
        try:
            text = Path(path).read_bytes().decode("utf-8", "surrogateescape")
        except OSError:
            continue
        mounts = parse(text)
        if mounts:
            return mounts
    return []


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding the resolved absolute `path`: the longest mount point that is `path` or a folder
    above it (`/a/b` holds `/a/b/c`, not `/a/bc`); of two mounts on one point the later (on top) wins."""
    best: Mount | None = None
    for m in mounts:
        inside = path == m.point or path.startswith(m.point.rstrip("/") + "/")
        if inside and (best is None or len(m.point) >= len(best.point)):
            best = m
    return best
