"""cycle_infos/: the per-cycle records ft_launcher's store host writes (protobuf JSON, UTC times).

Names are `cycle_info.<job>.<attempt>.<N>` (`cycle_info..0.N` outside Slurm) plus `cycle_info.<job>.current`,
a symlink to the newest record (or, in copied run directories, a regular file holding its name or its JSON).
`*.tmp` files are transient updates and are ignored.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ftqual.verification.evidence.clock import parse_utc
from ftqual.verification.evidence.model import Ref, SourceStatus, missing
from ftqual.verification.evidence.safeio import inside, load_json_object, open_regular

CYCLE_DIR = "cycle_infos"
_RECORD = re.compile(r"^cycle_info\.(?P<job>[^.]*)\.(?P<attempt>\d+)\.(?P<cycle>\d+)$")
_CURRENT = re.compile(r"^cycle_info\.(?P<job>[^.]*)\.current$")
MAX_RECORDS = 10000  # cycles of one job: max_restarts is a handful
MAX_NODES_TEXT = 65536  # a Slurm host list of 10,000 nodes is far shorter


@dataclass(frozen=True)
class CycleInfo:
    cycle: int
    job_id: str
    attempt: int
    start: datetime | None
    end: datetime | None
    active_nodes: str
    generation: int | None
    ref: Ref


@dataclass(frozen=True)
class CycleInfos:
    records: tuple[CycleInfo, ...]
    current: str | None  # the file name `.current` points at, if it could be resolved

    def by_cycle(self, cycle: int) -> CycleInfo | None:
        found = [r for r in self.records if r.cycle == cycle]
        return max(found, key=lambda r: r.attempt) if found else None

    @property
    def cycle_numbers(self) -> tuple[int, ...]:
        return tuple(sorted({r.cycle for r in self.records}))


def _generation(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


def _small_int(value: object, what: str) -> int:
    """A cycle or attempt number: a non-negative integer below 10**9 (else ValueError, source unusable)."""
    number = _generation(value)
    if number is None or not 0 <= number < 10**9:
        raise ValueError(f"{what} is {str(value)[:40]!r}")
    return number


def _record(path: Path, rel: str, match: re.Match, run_dir: Path) -> CycleInfo:
    data = load_json_object(path, run_dir, limit=1 << 20)
    number = data["cycle_number"] if "cycle_number" in data else int(match["cycle"])
    if isinstance(number, str):
        raise ValueError(f"cycle_number is {number[:40]!r}")
    number = _small_int(number, "cycle_number")
    nodes = str(data.get("active_nodes") or "")
    if len(nodes) > MAX_NODES_TEXT:
        raise ValueError(f"active_nodes is {len(nodes)} characters long")
    return CycleInfo(
        cycle=number,
        job_id=str(data.get("job_id", match["job"]))[:200],
        attempt=_small_int(data.get("attempt_index", match["attempt"]) or 0, "attempt_index"),
        start=parse_utc(data.get("cycle_start_time") or ""),
        end=parse_utc(data.get("cycle_end_time") or ""),
        active_nodes=nodes,
        generation=_generation(data.get("generation")),
        ref=Ref(rel),
    )


def _current_target(path: Path, run_dir: Path) -> str | None:
    """Name of the record `.current` designates: symlink target, or a file holding a name or the JSON."""
    try:
        if path.is_symlink():
            return os.path.basename(os.readlink(path))
        with open_regular(path, run_dir, limit=1 << 20) as handle:
            text = handle.read(65536).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if text.startswith("{"):
        try:
            data = load_json_object(path, run_dir, limit=1 << 20)
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if isinstance(data, dict) and isinstance(data.get("cycle_number"), int):
            job, attempt = data.get("job_id", ""), data.get("attempt_index", 0)
            return f"cycle_info.{job}.{attempt}.{data['cycle_number']}"
        return None
    return os.path.basename(text) if _RECORD.match(os.path.basename(text)) else None


def read_cycle_infos(run_dir: Path) -> tuple[CycleInfos | None, SourceStatus]:
    folder = run_dir / CYCLE_DIR
    if not folder.is_dir():
        return None, missing("cycle_infos", f"{CYCLE_DIR}/ is absent")
    if not inside(folder, run_dir):
        return None, missing("cycle_infos", f"{CYCLE_DIR}/ resolves outside the run directory")
    records: list[CycleInfo] = []
    current: str | None = None
    try:
        names = sorted(os.listdir(folder))
    except OSError as exc:
        return None, missing("cycle_infos", f"{CYCLE_DIR}/ cannot be listed: {exc.strerror or exc}")
    if len(names) > MAX_RECORDS:
        return None, missing("cycle_infos", f"{CYCLE_DIR}/ holds {len(names)} entries, not a real job's")
    for name in names:
        if name.endswith(".tmp"):
            continue
        rel = f"{CYCLE_DIR}/{name}"
        if _CURRENT.match(name):
            current = _current_target(folder / name, run_dir)
            continue
        match = _RECORD.match(name)
        if not match:
            continue
        try:
            records.append(_record(folder / name, rel, match, run_dir))
        except (OSError, UnicodeDecodeError, ValueError, TypeError) as exc:
            return None, missing("cycle_infos", f"{rel} unreadable: {exc}", rel)
    if not records:
        return None, missing("cycle_infos", f"{CYCLE_DIR}/ holds no cycle_info records")
    records.sort(key=lambda r: (r.attempt, r.cycle))
    paths = tuple(r.ref.path for r in records)
    return CycleInfos(records=tuple(records), current=current), SourceStatus(
        "cycle_infos", ok=True, paths=paths
    )
