"""The injection markers (fault_injected.json, fault_injected.<k>.json): claimed once, counted, logged.

The injection markers (fault_injected.json, fault_injected.<k>.json: design.md section 2, a contract),
claimed once with O_CREAT|O_EXCL and fsynced, counted at a worker's start; and the rank's log line."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from ftqual.rank.ids import CHECKPOINT_DAMAGES, LOG_PREFIX


def log(message: str) -> None:
    print(f"{LOG_PREFIX} {message}", file=sys.stderr, flush=True)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def claim_marker(path: Path, record: dict) -> bool:
    """Create the marker exclusively and make it durable; False when it already exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, (json.dumps(record, indent=2) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the new directory entry must survive a crash too
    finally:
        os.close(dir_fd)
    return True


def marker_path(first: Path, injection: int) -> Path:
    """Injection k's marker: the first is `first` (fault_injected.json), the k-th fault_injected.<k>.json."""
    if injection == 1:
        return first
    return first.with_name(f"{first.stem}.{injection}{first.suffix}")


def count_markers(first: Path) -> int:
    """Injections already made in this run: 0 without the first marker, else 1 + the numbered ones."""
    if not first.exists():
        return 0
    numbered = re.compile(rf"{re.escape(first.stem)}\.([0-9]+){re.escape(first.suffix)}")
    try:
        names = [p.name for p in first.parent.iterdir()]
    except OSError:
        names = []
    return 1 + sum(1 for name in names if (m := numbered.fullmatch(name)) and int(m[1]) >= 2)


def fsync_path(path: Path) -> None:
    """Make `path`'s data (a file) or entries (a directory) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def marker_damage(marker: Path) -> dict | None:
    """The `damage` a run's marker records (this run broke its checkpoint on purpose), None without one."""
    try:
        record = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    damage = record.get("damage") if isinstance(record, dict) else None
    if isinstance(damage, dict) and damage.get("kind") in CHECKPOINT_DAMAGES:
        return damage
    return None
