"""Reading evidence from a directory we do not trust: regular files only, inside the run, bounded.

A run directory may have been copied, trimmed, or tampered with. Every evidence file is opened through
`open_regular`, which
- resolves links and refuses a file whose real path lies outside the allowed roots (the run directory, or a
  checkpoint directory run.json names by absolute path): a link to `/etc/passwd` is not evidence;
- opens with O_NONBLOCK and refuses anything that is not a regular file once open (fstat), so a FIFO or a
  device never blocks and `/dev/zero` never streams;
- refuses files larger than a per-kind limit.
Lines are read by `bounded_lines` (or a block of whole lines at a time by `line_block`): chunks of fixed size,
a line longer than MAX_LINE_BYTES cut there (its rest skipped), so memory per line is bounded and time is
linear in the file size. `UnsafeFile` is an
OSError: parsers that already turn OSError into "source missing" need no second path.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

MAX_LINE_BYTES = 256 << 10  # facts live in the first few hundred bytes of a line; the rest is noise
MAX_JSON_BYTES = 4 << 20  # run.json, the marker, cycle records: kilobytes in real runs
MAX_LOG_BYTES = 16 << 30  # a log is streamed; this only stops a runaway file from taking hours
MAX_JSON_DEPTH = 64
_CHUNK = 1 << 20


class UnsafeFile(OSError):
    """An evidence path that is not a regular file inside the allowed roots, or is too large."""


def real(path: Path) -> Path:
    """The path with every link resolved (strict=False: a missing tail stays as written)."""
    return Path(os.path.realpath(path))


def inside(path: Path, *roots: Path) -> bool:
    """Whether `path`, links resolved, lies in one of `roots` (links resolved too)."""
    target = real(path)
    for root in roots:
        base = real(root)
        if target == base or base in target.parents:
            return True
    return False


def check_inside(path: Path, *roots: Path) -> None:
    if not inside(path, *roots):
        raise UnsafeFile(f"{path.name} resolves outside the run directory ({real(path)}): not read")


def open_regular(path: Path, *roots: Path, limit: int = MAX_LOG_BYTES) -> BinaryIO:
    """Open `path` for binary reading if it is a regular file inside `roots` of at most `limit` bytes."""
    if roots:
        check_inside(path, *roots)
    try:
        fd = os.open(real(path), os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UnsafeFile(f"{path.name}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{path.name} is not a regular file ({_kind(info.st_mode)}): not read")
        if info.st_size > limit:
            raise UnsafeFile(f"{path.name} is {info.st_size} bytes, over the limit of {limit}: not read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def read_bytes(path: Path, *roots: Path, limit: int = MAX_JSON_BYTES) -> bytes:
    with open_regular(path, *roots, limit=limit) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:  # grew while we read
        raise UnsafeFile(f"{path.name} is over the limit of {limit} bytes: not read")
    return data


def _depth_ok(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Nesting depth of brackets outside strings, in one linear scan (json would recurse first)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def load_json_object(path: Path, *roots: Path, limit: int = MAX_JSON_BYTES) -> dict:
    """A JSON object from a regular file inside `roots`. Raises OSError or ValueError with a clear reason."""
    text = read_bytes(path, *roots, limit=limit).decode("utf-8")
    if not _depth_ok(text):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    if not isinstance(data, dict):
        raise ValueError("top level is not a JSON object")
    return data


def line_block(handle: BinaryIO, size: int, max_line: int = MAX_LINE_BYTES) -> bytes:
    """About `size` bytes, extended to the end of the line they stop in (b"" at the end of the file). The
    rest of that line is cut after `max_line` bytes (the remainder skipped, its newline kept), so a line
    longer than `max_line` still yields its first `max_line` bytes, as `bounded_lines` does."""
    block = handle.read(size)
    if not block or block.endswith(b"\n"):
        return block
    tail = handle.readline(max_line)
    if len(tail) < max_line or tail.endswith(b"\n"):
        return block + tail
    while chunk := handle.readline(max_line):
        if chunk.endswith(b"\n"):
            return block + tail + b"\n"
    return block + tail


def bounded_lines(handle: BinaryIO, max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[bytes, bool]]:
    """(line without its newline, ended by a newline) for each line, a line cut after `max_line` bytes."""
    pending = b""
    skipping = False  # inside the rest of an over-long line
    while chunk := handle.read(_CHUNK):
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not skipping:
                    pending += chunk[start : start + max_line - len(pending)]
                    if len(pending) >= max_line:
                        skipping = True
                break
            if not skipping:
                pending += chunk[start : min(end, start + max_line - len(pending))]
            yield pending, True
            pending, skipping = b"", False
            start = end + 1
    if pending or skipping:
        yield pending, False
