"""The checkpoint tracker and the iter_XXXXXXX directories as a rank reads them.

The checkpoint tracker and the iter_XXXXXXX directories as a rank reads them: the baseline at start (an
empty or garbled tracker is not 0), a poll that never raises, the newest iteration on disk."""

from __future__ import annotations

import os
import re
from pathlib import Path

TRACKER_NAME = "latest_checkpointed_iteration.txt"

TRACKER_RECORD_CHARS = 40  # a damage record keeps this much of the tracker's text, escaped


ITER_DIR_RE = re.compile(r"iter_([0-9]{7,12})")


class TrackerError(Exception):
    """The tracker exists but cannot be trusted (empty, not an integer, unreadable)."""


def read_tracker_baseline(path: Path) -> int:
    """The tracker's iteration at startup: 0 when absent; TrackerError when empty, invalid or unreadable.

    An empty file is not zero: Megatron truncates then writes it, so empty means "unknown", and treating it
    as 0 would let an old checkpoint trigger the injection.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise TrackerError(f"checkpoint tracker {path} is unreadable: {exc}") from exc
    value = text.strip()
    if not value:
        raise TrackerError(f"checkpoint tracker {path} is empty")
    if not value.isdigit() or not value.isascii():
        raise TrackerError(f"checkpoint tracker {path} does not hold an integer iteration: {value[:40]!r}")
    return int(value)


def poll_tracker(path: Path) -> int | None:
    """The tracker's iteration now, or None for any read failure (absent, mid-write, garbage)."""
    try:
        value = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(value) if value.isdigit() and value.isascii() else None


def newest_checkpoint_iteration(checkpoint_dir: Path) -> int | None:
    """The iteration of the newest iter_XXXXXXX directory in `checkpoint_dir`, None when there is none."""
    try:
        entries = list(os.scandir(checkpoint_dir))
    except OSError:
        return None
    found = []
    for entry in entries:
        match = ITER_DIR_RE.fullmatch(entry.name)
        try:
            if match and entry.is_dir():
                found.append(int(match[1]))
        except OSError:
            continue
    return max(found, default=None)


def iteration_dir_name(iteration: int) -> str:
    return f"iter_{iteration:07d}"


def tracker_text(path: Path) -> str | None:
    """The tracker's first characters as a record keeps them (escaped: NULs readable), None when absent."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    text = raw.decode("utf-8", errors="replace")[:TRACKER_RECORD_CHARS]
    return text.encode("unicode_escape").decode()
