"""run.json (ftqual.run/v1) and the injection markers (ftqual.fault/v1): what was asked, and what was done.

run.json is read once into `RunMeta`: the launcher's `RunRecord` (ftqual.launch.run_schema, where each key,
its rule and its default for an absent key are stated once) plus which keys the file named, from which
`leftovers_recorded` and `dumps_recorded` follow. The markers: `fault_injected.json` (the first injection)
and `fault_injected.<k>.json` for k = 2..N, read in order of k.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import ClassVar

from ftqual.launch import run_schema
from ftqual.launch.run_schema import RunRecord, RunRecordError
from ftqual.verification.evidence.clock import parse_utc
from ftqual.verification.evidence.model import Ref, SourceStatus, missing
from ftqual.verification.evidence.safeio import MAX_JSON_BYTES, load_json_object

RUN_JSON = "run.json"
MARKER_JSON = "fault_injected.json"
MARKER_K = re.compile(r"fault_injected\.([1-9][0-9]{0,5})\.json")
MAX_MARKERS = run_schema.MAX_INJECTIONS
# run.json keys that shape the loss trajectory: a baseline is a reference only when these agree.
TRAJECTORY_KEYS = (
    "workload",
    "world_size",
    "train_iters",
    "global_batch_size",
    "tp",
    "pp",
    "dist_optimizer",
    "transformer_impl",
)


class RunMetaError(Exception):
    """run.json is missing or unusable: the verifier cannot even say what was expected (exit 2)."""


@dataclass(frozen=True, kw_only=True)
class RunMeta(RunRecord):
    """run.json as the verifier reads it: the record, and the keys the file named (older files lack some)."""

    named: frozenset[str] = frozenset()
    ref: ClassVar[Ref] = Ref(RUN_JSON)

    @property
    def leftovers_recorded(self) -> bool:
        """run.json names `injections`: it was written by a launcher that samples leftovers."""
        return "injections" in self.named

    @property
    def dumps_recorded(self) -> bool:
        """run.json names `stack_dump_tool`: its ranks had sentinels that dump their stacks."""
        return "stack_dump_tool" in self.named

    @property
    def dump_tool(self) -> str | None:
        return self.stack_dump_tool

    @property
    def settings(self) -> dict[str, object]:
        """The TRAJECTORY_KEYS the file gave a value."""
        return {key: value for key in TRAJECTORY_KEYS if (value := getattr(self, key)) is not None}


@dataclass(frozen=True)
class FaultMarker:
    run_id: str | None
    fault: str | None
    rank: int | None
    local_rank: int | None
    host: str | None
    pid: int | None
    cycle: int | None
    baseline_iteration: int | None
    checkpoint_iteration: int | None
    injected_at: datetime | None
    ref: Ref = Ref(MARKER_JSON)
    injection: int | None = None  # 1-based number the marker claims (absent in older markers)
    injections: int | None = None  # N requested, as the marker says
    timing: str | None = None  # "checkpoint" | "in_save" | a save phase
    save_iteration: int | None = None  # in_save: the save in flight at the injection
    number: int = 1  # k, from the file name (fault_injected.json is 1)
    node: dict | None = None  # node_loss: {"host", "launcher_pid", "processes"} the wrapper killed
    method: str | None = (
        None  # how the wrapper injected it, e.g. "os.abort() (SIGABRT)" (absent in older markers)
    )
    placement: str | None = None  # where it landed: step, checkpointing, out_of_section, setup, immediate
    section: str | None = None  # the section the rank was in at the injection (None: out of every section)
    plan_index: int | None = None  # a campaign's: the plan entry this injection followed
    # checkpoint_damage: what the wrapper broke before the kill ({"kind", "iteration", "path", "moved_to",
    # "size_before", "size_after", "tracker_before", "tracker_after", "at"}); None: nothing
    damage: dict | None = None
    # a save phase: what the save in flight had on disk at the kill ({"shards", "bytes", "metadata",
    # "metadata_json"}); None: not recorded
    on_disk: dict | None = None
    # a save phase's kill made by the worker's helper: the rank stopped, the phase seen again on disk, then
    # the kill ({"helper_pid", "threads_stopped", "stop_wait_ms", "polled_on_disk", "missed_before"}); None:
    # the rank killed itself after the poll (older markers)
    freeze: dict | None = None
    # a storage fault: disk_full's filler and filesystem ({"filler_bytes", "checkpoint_bytes",
    # "headroom_bytes", "filesystem_before", "filesystem_after"}) or writer_stall's stopped writers
    # ({"iteration", "writers": [{"pid", "command", "files"}]}); None: not a storage fault
    storage: dict | None = None


_int = run_schema.as_int  # the markers' integers are read as run.json's


def _load_json(path: Path, run_dir: Path) -> dict:
    return load_json_object(path, run_dir, limit=MAX_JSON_BYTES)


def read_run_meta(run_dir: Path) -> RunMeta:
    """Parse run.json; raise RunMetaError with one clear sentence when it is absent or unusable."""
    path = run_dir / RUN_JSON
    if not path.exists() and not path.is_symlink():
        raise RunMetaError(f"{path}: no run.json (is this a run directory?)")
    try:
        data = _load_json(path, run_dir)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunMetaError(f"{path}: unreadable run.json ({exc})") from exc
    try:
        return RunMeta.from_json(data, run_id=run_dir.name, named=frozenset(data))
    except RunRecordError as exc:
        raise RunMetaError(f"{path}: {exc}") from exc


def _marker(data: dict, rel: str, number: int) -> FaultMarker:
    timing = data.get("timing")
    return FaultMarker(
        run_id=data.get("run_id") if isinstance(data.get("run_id"), str) else None,
        fault=data.get("fault") if isinstance(data.get("fault"), str) else None,
        rank=_int(data.get("rank")),
        local_rank=_int(data.get("local_rank")),
        host=data.get("host") if isinstance(data.get("host"), str) else None,
        pid=_int(data.get("pid")),
        cycle=_int(data.get("cycle")),
        baseline_iteration=_int(data.get("baseline_iteration")),
        checkpoint_iteration=_int(data.get("checkpoint_iteration")),
        injected_at=parse_utc(data.get("injected_at") or ""),
        ref=Ref(rel),
        injection=_int(data.get("injection")),
        injections=_int(data.get("injections")),
        timing=timing if isinstance(timing, str) else None,
        save_iteration=_int(data.get("save_iteration")),
        number=number,
        node=data.get("node") if isinstance(data.get("node"), dict) else None,
        method=data.get("method") if isinstance(data.get("method"), str) else None,
        placement=data.get("placement") if isinstance(data.get("placement"), str) else None,
        section=data.get("section") if isinstance(data.get("section"), str) else None,
        plan_index=_int(data.get("plan_index")),
        damage=data.get("damage") if isinstance(data.get("damage"), dict) else None,
        on_disk=data.get("on_disk") if isinstance(data.get("on_disk"), dict) else None,
        freeze=data.get("freeze") if isinstance(data.get("freeze"), dict) else None,
        storage=data.get("storage") if isinstance(data.get("storage"), dict) else None,
    )


def read_marker(run_dir: Path) -> tuple[FaultMarker | None, SourceStatus]:
    """fault_injected.json: (None, ok) when absent (no injection), (None, not ok) when unreadable."""
    markers, status = read_markers(run_dir)
    return (markers[0] if markers and markers[0].number == 1 else None), status


def marker_names(run_dir: Path) -> list[tuple[int, str]]:
    """(k, name) of every marker file present, in order of k (fault_injected.json is k = 1)."""
    try:
        names = os.listdir(run_dir)
    except OSError:
        names = []
    found = [(int(m[1]), name) for name in names if (m := MARKER_K.fullmatch(name))]
    if (run_dir / MARKER_JSON).exists() or (run_dir / MARKER_JSON).is_symlink():
        found.append((1, MARKER_JSON))
    return sorted(found)


def read_markers(run_dir: Path) -> tuple[tuple[FaultMarker, ...], SourceStatus]:
    """Every marker, in order of k: fault_injected.json (k = 1), then fault_injected.<k>.json. ((), ok) when
    there is none; any unreadable marker, or one without a valid injected_at, makes the source not ok (the
    readable markers are still returned). A `fault_injected.1.json`, or a k-th marker without the first,
    is no marker of the contract: the source is not ok."""
    found = marker_names(run_dir)
    if not found:
        return (), SourceStatus("marker", ok=True, reason="no fault_injected.json (no injection recorded)")
    if len(found) > MAX_MARKERS:
        return (), missing("marker", f"{len(found)} fault_injected*.json files: not a real run")
    markers: list[FaultMarker] = []
    problems: list[str] = []
    for number, name in found:
        if number < 1 or (number == 1 and name != MARKER_JSON) or any(m.number == number for m in markers):
            problems.append(f"{name} is not a marker name of the contract")
            continue
        try:
            data = _load_json(run_dir / name, run_dir)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            problems.append(f"{name} unreadable: {exc}")
            continue
        marker = _marker(data, name, number)
        markers.append(marker)
        if marker.injected_at is None:
            problems.append(f"{name} has no valid injected_at")
    if markers and markers[0].number != 1:
        problems.append(f"{markers[0].ref.path} without {MARKER_JSON}")
    paths = tuple(name for _, name in found)
    if problems:
        return tuple(markers), missing("marker", "; ".join(problems), *paths)
    return tuple(markers), SourceStatus("marker", ok=True, paths=paths)
