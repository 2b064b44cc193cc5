"""run.json (ftqual.run/v1) and the injection markers (ftqual.fault/v1): what was asked, and what was done.

The markers: `fault_injected.json` (the first injection) and `fault_injected.<k>.json` for k = 2..N, read in
order of k. run.json's keys of the extended scenarios (`injections`, `fault_timing`, `checkpoint_load`,
`initial_checkpoint_iteration`) default to 1, "checkpoint", true and 0 when absent; `leftovers_recorded`
says whether run.json was written by a launcher that samples leftovers (it names `injections`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ftqual.launch import run_schema
from ftqual.verification.evidence.clock import parse_utc
from ftqual.verification.evidence.model import Ref, SourceStatus, missing
from ftqual.verification.evidence.safeio import MAX_JSON_BYTES, load_json_object

RUN_JSON = "run.json"
MARKER_JSON = "fault_injected.json"
MARKER_K = re.compile(r"fault_injected\.([1-9][0-9]{0,5})\.json")
MAX_MARKERS = run_schema.MAX_INJECTIONS
FAULT_TIMINGS = run_schema.FAULT_TIMINGS
TIMEOUT_KEYS = run_schema.TIMEOUT_KEYS
MAX_TZ_OFFSET_S = run_schema.MAX_TZ_OFFSET_S
# run.json keys that shape the loss trajectory: a baseline is a reference only when these agree.
TRAJECTORY_KEYS = (
    "workload",
    "world_size",
    "train_iters",
    "global_batch_size",
    "micro_batch_size",
    "tp",
    "pp",
    "dist_optimizer",
    "transformer_impl",
    "seed",
    "lr",
)


class RunMetaError(Exception):
    """run.json is missing or unusable: the verifier cannot even say what was expected (exit 2)."""


@dataclass(frozen=True)
class RunMeta:
    run_id: str
    scenario: str
    fault: str
    fault_rank: int | None
    world_size: int | None
    train_iters: int | None
    save_interval: int | None
    checkpoint_dir: str
    max_restarts: int | None
    timeouts: dict[str, float] = field(default_factory=dict)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    exit_code: int | None = None
    global_batch_size: int | None = None
    tz_offset_s: float | None = None
    workload: str | None = None
    nnodes: int | None = None
    gpus_per_node: int | None = None
    settings: dict[str, object] = field(default_factory=dict)  # TRAJECTORY_KEYS present in run.json
    ref: Ref = Ref(RUN_JSON)
    injections: int = 1  # faults the run injects, one per cycle
    fault_timing: str = "checkpoint"  # "checkpoint" | "in_save" | a save phase (contract.SAVE_PHASES)
    checkpoint_load: bool = True  # False: launched without --load (the no_resume negative control)
    initial_checkpoint_iteration: int = 0  # the tracker found in the checkpoint dir before launch
    leftovers_recorded: bool = False  # run.json names `injections`: its launcher samples leftovers
    # run.json names `stack_dump_tool`: its ranks had sentinels that dump their stacks (None: no py-spy)
    dumps_recorded: bool = False
    dump_tool: str | None = None
    host: str | None = None
    join_timeout: int | None = None  # --rdzv-conf join_timeout; None: NVRx's default (DEFAULT_JOIN_TIMEOUT_S)
    spare_nodes: int = 0  # standby nodes beyond nnodes (ft_launcher --nnodes=N:N+S)
    interrupted_by: str | None = None  # the signal that stopped our launcher from outside (run_schema)
    # run.json's timeouts_from: the configured timeouts `timeouts` were recommended from (None: configured)
    timeouts_from: dict[str, float] | None = None
    calc_ft_timeouts: bool = False  # run.json's: NVRx calculated the timeouts (`timeouts` the initial ones)
    # run.json's `job`: the job shape that ran (model preset, digest, estimates); carried to verify.json
    job: dict | None = None
    # run.json's `checkpoint_damage`: what the fault rank broke in its checkpoint before dying ("none")
    checkpoint_damage: str = "none"
    # run.json's `verify_integrity`: the workload ran with Megatron's --verify-integrity (absent: it did not)
    verify_integrity: bool = False
    # run.json's `storage` (fault disk_full): the capped filesystem the launcher mounted and what its unmount
    # kept ({"filesystem", "cap_bytes", "copied_files", "image_removed", "problem"}); None: none mounted
    storage: dict | None = None
    # run.json's `batch` ({world_size, data_parallel_size, micro_batch_size, global_batch_size,
    # accumulation_steps}) and `evaluation` ({interval, iters}); None in a run.json written before them
    batch: dict | None = None
    evaluation: dict | None = None
    # run.json's `max_no_progress_cycles`: ft_launcher's --ft-max-no-progress-cycles (None: NVRx's default)
    max_no_progress_cycles: int | None = None


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


RUN_SCHEMA = run_schema.SCHEMA
COUNTS = run_schema.COUNTS
_int = run_schema.as_int
_finite = run_schema.as_finite
_short = run_schema.short


def _load_json(path: Path, run_dir: Path) -> dict:
    return load_json_object(path, run_dir, limit=MAX_JSON_BYTES)


def _settings(data: dict) -> dict[str, object]:
    return {
        key: data[key]
        for key in TRAJECTORY_KEYS
        if key in data and isinstance(data[key], str | int | float | bool) and data[key] is not None
    }


def read_run_meta(run_dir: Path) -> RunMeta:
    """Parse run.json; raise RunMetaError with one clear sentence when it is absent or unusable."""
    path = run_dir / RUN_JSON
    if not path.exists() and not path.is_symlink():
        raise RunMetaError(f"{path}: no run.json (is this a run directory?)")
    try:
        data = _load_json(path, run_dir)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RunMetaError(f"{path}: unreadable run.json ({exc})") from exc
    bad = run_schema.problem(data)
    if bad:
        raise RunMetaError(f"{path}: {bad}")
    fault = data["fault"]
    raw_timeouts = data.get("timeouts") if isinstance(data.get("timeouts"), dict) else {}
    timeouts = {key: v for key, value in raw_timeouts.items() if (v := _finite(value)) is not None}
    tz = _finite(data.get("tz_offset_s"))
    injections, timing, load, initial = run_schema.extensions(data)
    return RunMeta(
        run_id=str(data.get("run_id") or run_dir.name),
        scenario=str(data.get("scenario") or fault),
        fault=fault,
        fault_rank=_int(data.get("fault_rank")),
        world_size=_int(data.get("world_size")),
        train_iters=_int(data.get("train_iters")),
        save_interval=_int(data.get("save_interval")),
        checkpoint_dir=str(data.get("checkpoint_dir") or "checkpoints"),
        max_restarts=_int(data.get("max_restarts")),
        timeouts=timeouts,
        started_at=parse_utc(data.get("started_at") or ""),
        finished_at=parse_utc(data.get("finished_at") or ""),
        exit_code=_int(data.get("exit_code")),
        global_batch_size=_int(data.get("global_batch_size")),
        tz_offset_s=tz,
        workload=data.get("workload") if isinstance(data.get("workload"), str) else None,
        nnodes=_int(data.get("nnodes")),
        gpus_per_node=_int(data.get("gpus_per_node")),
        settings=_settings(data),
        injections=injections,
        fault_timing=timing,
        checkpoint_load=load,
        initial_checkpoint_iteration=initial,
        leftovers_recorded="injections" in data,
        dumps_recorded="stack_dump_tool" in data,
        dump_tool=data.get("stack_dump_tool") if isinstance(data.get("stack_dump_tool"), str) else None,
        host=data.get("host") if isinstance(data.get("host"), str) else None,
        join_timeout=_int(data.get("join_timeout")),
        spare_nodes=_int(data.get("spare_nodes")) or 0,
        interrupted_by=data.get("interrupted_by"),
        calc_ft_timeouts=data.get("calc_ft_timeouts") is True,
        job=dict(data["job"]) if isinstance(data.get("job"), dict) else None,
        checkpoint_damage=str(data.get("checkpoint_damage") or "none"),
        verify_integrity=data.get("verify_integrity") is True,
        storage=dict(data["storage"]) if isinstance(data.get("storage"), dict) else None,
        batch=dict(data["batch"]) if isinstance(data.get("batch"), dict) else None,
        evaluation=dict(data["evaluation"]) if isinstance(data.get("evaluation"), dict) else None,
        max_no_progress_cycles=_int(data.get("max_no_progress_cycles")),
        timeouts_from=(
            {k: float(v) for k, v in data["timeouts_from"].items()}
            if isinstance(data.get("timeouts_from"), dict)
            else None
        ),
    )


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
