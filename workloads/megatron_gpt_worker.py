#!/usr/bin/env python3
"""ft_launcher's entrypoint on every rank: run the workload in-process, inject up to N faults, one per cycle.

    megatron_gpt_worker.py --entrypoint FILE --checkpoint-dir DIR --fault-marker FILE
        --fault none|kill|hang|node_loss|segfault|abort|exception|sigterm|sigint|gil_lock|gpu_error|gpu_hang
        [--fault-rank N] [--run-id ID] [--hang-placement step|immediate|checkpointing|out_of_section|setup]
        [--injections N] [--pid-dir DIR] [--leftovers-dir DIR]
        [--fault-timing checkpoint|in_save|save_staged|save_shards_partial|save_shards_complete|
                        save_finalized]
        [--checkpoint-damage none|tracker_not_a_number|tracker_missing_iteration|tracker_removed|
                             shard_truncated|shard_corrupted]
        -- <workload args>
    (--megatron-path DIR is accepted as --entrypoint DIR/pretrain_gpt.py)

The workload runs in this process (runpy, as `__main__`), so the pid that NVRx's rank monitor watches is the
pid we signal. Injection k of N (--injections, default 1) is recorded in its own marker: the first in
--fault-marker (fault_injected.json), the k-th in fault_injected.<k>.json beside it. A worker counts the
markers at its start; on the fault rank, while fewer than N exist, it arms injection count+1 with the
tracker's value at its start as baseline, so each injection follows a checkpoint completed in its own cycle.
Once armed, the rank claims that marker (O_CREAT|O_EXCL, fsynced) and then injects the fault: SIGKILL
(kill), SIGSTOP (hang), a segmentation fault, os.abort(), an exception raised on the training thread, SIGTERM
or SIGINT to itself, a thread that holds the GIL forever (gil_lock), or on a GPU an illegal device access
(gpu_error) or a kernel that never ends (gpu_hang); the marker's `method` says how (Injector.action).
Once N markers exist, replacement workers never inject again. node_loss takes the whole
node: the node's ft_launcher (from --pid-dir's <host>.launcher.json, proven this worker's live ancestor) is
stopped, every process below it listed in the marker's `node`, then all of them, ft_launcher and this rank
are SIGKILLed.

Timing `checkpoint` (the default): a daemon thread polls the checkpoint tracker until it advances past the
baseline. With placement `step` (the default, for both faults; `--hang-placement` keeps the walkthrough's
variable's name) the training thread itself claims the marker and signals at the start of the next NVRx `step`
section (seen by wrapping RankMonitorClient.start_section/end_section in this process), so a hang is detected
by the step timeout rather than whichever section happened to be open; `immediate` signals from the poller
thread at once, as the walkthrough does (and lands wherever training is once the marker is fsynced).
Placement `setup` stops a replacement in its own `setup` section: injection 1 (cycle 0) is placed in a step,
as `step` does (a replacement needs an earlier fault); every later injection is armed by the cycle's start
from a completed checkpoint (tracker >= 1) and lands on the training thread as the workload closes `setup`,
before NVRx is told it closed (after the checkpoint load and everything else the workload does in setup),
so the `setup` timeout must catch it. Its marker names the checkpoint the replacement loaded.
Timing `in_save` (kill only): at the end of an NVRx `checkpointing` section, on the training thread, once the
tracker is past the baseline and the newest iter_XXXXXXX directory is newer than the tracker (an async save
was scheduled and not finalized), the rank records that iteration as `save_iteration` and kills itself.

Save phases (kill only; the timings are ftqual/contract.py's SAVE_PHASES): a SIGKILL timed to a phase of a
save S newer than the tracker, as the fault rank sees it on disk. A torch_dist save of S makes iter_S at its
start, then the shard files `__<rank>_<n>.distcp` (the async writer, or the training thread for a sync save),
then the coordinator's `iter_S/.metadata`; Megatron's finalize then writes metadata.json and the tracker.
`save_staged`: iter_S exists and holds no shard yet; `save_shards_partial`: >= 1 shard, no `.metadata`;
`save_shards_complete`: >= 1 shard, no `.metadata`, the shard files and their total size unchanged over
STABLE_POLLS polls and each shard of the completed checkpoint C (the tracker's) there at (nearly) its size
in C (a `.metadata` seen first means the window was missed: the next save is awaited); `save_finalized`:
`.metadata` a non-empty file while the tracker still names C < S. A poller thread of its own reads the
tracker, the newest iter dir and iter_S's entries every PHASE_POLL_SECONDS; armed only once the tracker is
past the cycle's baseline (the replacement has a checkpoint of this cycle to resume from). On the phase the
fault is injected at once; the marker gets `save_iteration` (S), `checkpoint_iteration` (C) and
`on_disk` ({shards, bytes, metadata, metadata_json} of iter_S), placement = the timing. NVRx's section hooks
are not needed. The kill is made by a helper process (freeze_helper): it stops the rank, sees the phase
again on disk, and only then claims the marker and kills; a phase gone by the stop lets the rank go on.
save_finalized (`.metadata` to the tracker in one finalize, milliseconds) is awaited by the helper itself
(wait_for_metadata: inotify on iter_S) once the poller sees a save S newer than the tracker.

Checkpoint damage (--checkpoint-damage, kill with timing `checkpoint` only; the kinds are ftqual/contract.py's
CHECKPOINT_DAMAGES): what a replacement meets when the dying rank left its checkpoint broken. Once the fault
is prepared and before the marker is claimed, the fault rank damages the checkpoint whose tracker armed the
injection (iteration X): `tracker_not_a_number` overwrites the tracker in place with NUL bytes of its length
(a write cut short by a crash), `tracker_missing_iteration` renames iter_X to iter_X + DAMAGE_SUFFIX (the
tracker still names X), `tracker_removed` renames the tracker to its name + DAMAGE_SUFFIX, `shard_truncated`
cuts the largest *.distcp shard of iter_X to half its size, `shard_corrupted` inverts (XOR 0xFF) CORRUPT_BYTES
in the middle of that shard, its size kept (bytes a disk or a copy changed; the same XOR restores them); each
fsynced, nothing deleted. The marker's `damage` records it (kind, iteration, path and moved_to relative to the
checkpoint directory, size_before, size_after, tracker_before, tracker_after escaped, at; shard_corrupted adds
offset, length and xor). A damage that cannot be made (no shard, a rename that
fails, the tracker no longer naming X) is logged and the fault is not injected, so the run fails with exit 3.
A replacement refuses an untrustworthy tracker (exit 2) unless the run's first marker records a damage: then
the workload meets the tracker as it is (the question under test), with baseline 0.

Storage faults (the rank lives on; the kinds are ftqual/contract.py's STORAGE_FAULTS). `disk_full` (timing
`checkpoint`): once the tracker passed the baseline (checkpoint C complete), the fault rank fills the
checkpoint directory's filesystem (the size-capped mount the launcher made for the run) with FILLER_NAME,
allocated until FILLER_HEADROOM of C's bytes stay free, so the next save runs out of space midway; the
marker's `storage` has the filesystem's size and free bytes before and after, the filler's bytes and C's.
`writer_stall` (timing save_shards_partial or save_shards_complete): at that phase of a save S, the processes
below this rank that hold a file of iter_S open (the persistent checkpoint worker or its writers; never the
rank itself, whose own writes are a synchronous save or a thread) are SIGSTOPped once the marker is claimed;
`storage.writers` lists them (pid, command, the files held). No writer process seen: the poll goes on.

A requested injection that never happened fails the fault rank at exit (exit 3), so an uninterrupted cycle
cannot pass as a recovery. On local rank 0 of every cycle >= 1, before the workload starts, the wrapper
writes --leftovers-dir/<host>.cycle<c>.json (schema ftqual.leftovers/v1): the earlier cycles' processes of
this host (from --pid-dir) that still run, and the GPU memory they hold per nvidia-smi where it exists,
with this user's /dev/shm entries (sizes, allocated bytes) and the room left there (statvfs).

Standard library only, besides ftqual/contract.py (the tracker name and fault kinds; it imports nothing),
loaded by its path; and no work at import time beyond that load: NVRx's persistent checkpoint worker is
started with `spawn`, which re-imports the main script; tests import this file to unit-test the helpers.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import mmap
import os
import re
import runpy
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

CONTRACT_PATH = Path(__file__).resolve().parents[1] / "ftqual" / "contract.py"
CONTRACT_MODULE = "_ftqual_contract"


def load_contract():
    """ftqual/contract.py, the one source of the tracker name and the fault kinds, loaded by its path (the
    repository's ftqual/ beside workloads/): it imports nothing outside the standard library, while the
    ftqual package would. Registered in sys.modules (its dataclass looks its module up there), once."""
    if CONTRACT_MODULE in sys.modules:
        return sys.modules[CONTRACT_MODULE]
    spec = importlib.util.spec_from_file_location(CONTRACT_MODULE, CONTRACT_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[CONTRACT_MODULE] = module
    spec.loader.exec_module(module)
    return module


contract = load_contract()
TRACKER_NAME = contract.TRACKER_NAME
FAULTS = contract.FAULTS
GPU_ONLY_FAULTS = contract.GPU_ONLY_FAULTS
CHECKPOINT_DAMAGES = contract.CHECKPOINT_DAMAGES
DAMAGES_TO_FILES = contract.DAMAGES_TO_FILES
DAMAGE_SUFFIX = contract.DAMAGE_SUFFIX
# shard_corrupted: a sector's worth and more of bytes inverted, so a float of the model or the optimizer
# changes wherever the middle of the shard falls; the XOR is its own undo
CORRUPT_BYTES = 4096
CORRUPT_XOR = 0xFF
# A torch_dist shard is a run of torch.save archives (zip, stored): the raw bytes of each tensor are a record
# named <archive>/data/<n>. Its local header: signature, then 22 bytes, then name and extra-field lengths.
ZIP_LOCAL_HEADER = b"PK\x03\x04"
ZIP_LOCAL_HEADER_SIZE = 30
STORAGE_FAULTS = contract.STORAGE_FAULTS
FILLER_NAME = contract.FILLER_NAME
FILLER_HEADROOM = contract.FILLER_HEADROOM
TRACKER_RECORD_CHARS = 40  # a damage record keeps this much of the tracker's text, escaped
MARKER_SCHEMA = "ftqual.fault/v1"
SMOKE_ENTRYPOINT = "smoke_train.py"
# Where a rank fault lands once armed: inside the next training step (default), inside the next checkpointing
# section (a hang there is caught by the 'checkpointing' timeout), right after a step's section closed, out of
# every section (the out-of-section timeout), or at once wherever the rank is (the walkthrough's behaviour).
PLACEMENTS = ("step", "immediate", "checkpointing", "out_of_section", "setup")
SECTION_OF_PLACEMENT = {"step": "step", "checkpointing": "checkpointing"}
POLL_SECONDS = 0.2
INJECT_PREFIX = "[ftqual-inject]"
LOG_PREFIX = "[ftqual-worker]"
EXIT_BAD_TRACKER = 2
EXIT_FAULT_NEVER_INJECTED = 3
EXIT_BAD_PLAN = 4
CAMPAIGN_PLAN_SCHEMA = "ftqual.campaign_plan/v1"
SAVE_PHASES = contract.SAVE_PHASES
IN_SAVE_TIMINGS = contract.IN_SAVE_TIMINGS
TIMINGS = ("checkpoint", *IN_SAVE_TIMINGS)
# A save phase is seen by polling the disk: a tiny model's save on a GPU lasts tenths of a second, its
# phases milliseconds (a shard's write, the wait for `.metadata`), so a poll every 0.2 s would miss most.
PHASE_POLL_SECONDS = 0.002
# From outside, "every shard written" is "no shard grows any more": the shard files and their total size
# unchanged over this many consecutive polls (about 10 ms at PHASE_POLL_SECONDS), `.metadata` still absent.
STABLE_POLLS = 5
# Stability alone is fooled by a writer that pauses mid-shard (seen: torch's writer paused 15 ms between a
# shard's small tensors and its large one, longer than STABLE_POLLS polls) or by a rank whose shard file is
# not opened yet. So every shard file of the completed checkpoint C (the tracker's) must also be there in
# iter_S, each at least this fraction of its size in C: the same model saves the same tensors, and only
# pickled objects may differ by a few bytes from one save to the next.
COMPLETE_SIZE_FRACTION = 0.99
SHARD_SUFFIX = ".distcp"
DCP_METADATA = ".metadata"  # torch's global metadata, written by the coordinator after every shard
MEGATRON_METADATA = "metadata.json"  # Megatron's, written at finalize (before the tracker)
LEFTOVERS_SCHEMA = "ftqual.leftovers/v1"
SHM_DIR = Path("/dev/shm")
SHM_MAX_ENTRIES = 100_000  # entries listed with their sizes; the totals count every one
NVIDIA_SMI_TIMEOUT_S = 10
NVIDIA_SMI_QUERY = ("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")
ITER_DIR_RE = re.compile(r"iter_([0-9]{7,12})")


class TrackerError(Exception):
    """The tracker exists but cannot be trusted (empty, not an integer, unreadable)."""


class DamageError(Exception):
    """The checkpoint damage asked for cannot be made here (nothing to damage, a rename that fails)."""


def log(message: str) -> None:
    print(f"{LOG_PREFIX} {message}", file=sys.stderr, flush=True)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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


# --- save phases (--fault-timing save_*): a save's state as the disk shows it -----------------------------


class SaveOnDisk(NamedTuple):  # not a dataclass: tests load this file without registering it as a module
    """What iter_S holds at one look: its shard files (name -> size), whether torch's `.metadata` is a
    non-empty file, and whether Megatron's metadata.json exists."""

    shards: dict[str, int]
    metadata: bool
    metadata_json: bool

    def signature(self) -> tuple:
        """What "no shard grows any more" compares between polls: the shard files' names and total size."""
        return tuple(sorted(self.shards)), sum(self.shards.values())

    def record(self) -> dict:
        """The marker's `on_disk`."""
        return {
            "shards": len(self.shards),
            "bytes": sum(self.shards.values()),
            "metadata": self.metadata,
            "metadata_json": self.metadata_json,
        }


def look_at_save(iter_dir: Path) -> SaveOnDisk | None:
    """iter_S's shards, `.metadata` and metadata.json now; None when it cannot be listed (gone, renamed).
    A file that vanishes between the listing and its stat is left out (the next poll sees the truth)."""
    shards, metadata, metadata_json = {}, False, False
    try:
        entries = list(os.scandir(iter_dir))
    except OSError:
        return None
    for entry in entries:
        try:
            if entry.name.endswith(SHARD_SUFFIX) and entry.is_file():
                shards[entry.name] = entry.stat().st_size
            elif entry.name == DCP_METADATA and entry.is_file():
                metadata = entry.stat().st_size > 0
            elif entry.name == MEGATRON_METADATA:
                metadata_json = True
        except OSError:
            continue
    return SaveOnDisk(shards, metadata, metadata_json)


def as_large_as(shards: dict[str, int], reference: dict[str, int]) -> bool:
    """Every shard file of `reference` (the completed checkpoint's, name -> size) is in `shards`, each at
    least COMPLETE_SIZE_FRACTION of its reference size."""
    return all(shards.get(name, -1) >= size * COMPLETE_SIZE_FRACTION for name, size in reference.items())


def phase_reached(phase: str, on_disk: SaveOnDisk, stable: int, reference: dict[str, int]) -> bool:
    """Whether a save S newer than the tracker is in `phase` (one of SAVE_PHASES), seen as `on_disk` after
    `stable` consecutive polls with the same shard signature (1: first seen like this); `reference`: the
    shard sizes of the completed checkpoint the tracker names (empty when it has none: stability alone)."""
    shards, total = len(on_disk.shards), sum(on_disk.shards.values())
    if phase == "save_staged":
        return shards == 0 and not on_disk.metadata
    if phase == "save_shards_partial":
        return shards >= 1 and not on_disk.metadata
    if phase == "save_shards_complete":
        # empty shard files only were opened: nothing is written yet, however long they stay empty
        written = shards >= 1 and total > 0 and not on_disk.metadata and stable >= STABLE_POLLS
        return written and as_large_as(on_disk.shards, reference)
    if phase == "save_finalized":
        return on_disk.metadata
    raise ValueError(f"unknown save phase {phase!r}")


class PhaseWatch:
    """Polls of one rank's checkpoint directory for a save phase: each `look` says, for the tracker's value
    now, the save S > tracker under way (the newest iter dir) and what the disk shows, whether `phase` is
    reached; it counts how many consecutive polls showed S's shards unchanged (save_shards_complete)."""

    def __init__(self, phase: str, checkpoint_dir: Path) -> None:
        if phase not in SAVE_PHASES:
            raise ValueError(f"unknown save phase {phase!r}")
        self.phase = phase
        self.checkpoint_dir = checkpoint_dir
        self.last: tuple[int, tuple] | None = None  # (S, shard signature) of the previous poll
        self.stable = 0
        self.reference: tuple[int, dict[str, int]] = (-1, {})  # (C, its shard sizes), read once per C

    def reference_shards(self, tracker: int) -> dict[str, int]:
        """The shard sizes of the completed checkpoint `tracker` names (only save_shards_complete needs
        them); empty when it cannot be read."""
        if self.phase != "save_shards_complete":
            return {}
        if self.reference[0] != tracker:
            found = look_at_save(self.checkpoint_dir / iteration_dir_name(tracker))
            self.reference = (tracker, found.shards if found is not None else {})
        return self.reference[1]

    def look(self, tracker: int) -> tuple[int, SaveOnDisk] | None:
        """(S, what iter_S holds) when the phase is reached now, else None."""
        seen = self.in_flight(tracker)
        if seen is None:
            self.last, self.stable = None, 0  # no save in flight: a later one starts its count afresh
            return None
        newest, on_disk = seen
        now = (newest, on_disk.signature())
        self.stable = self.stable + 1 if now == self.last else 1
        self.last = now
        reached = phase_reached(self.phase, on_disk, self.stable, self.reference_shards(tracker))
        return (newest, on_disk) if reached else None

    def in_flight(self, tracker: int) -> tuple[int, SaveOnDisk] | None:
        """(S, what iter_S holds) for a save S newer than the tracker, in whatever phase; else None (the
        phase is then awaited by the helper's watch)."""
        newest = newest_checkpoint_iteration(self.checkpoint_dir)
        if newest is None or newest <= tracker:
            return None
        on_disk = look_at_save(self.checkpoint_dir / iteration_dir_name(newest))
        return (newest, on_disk) if on_disk is not None else None


# --- the save-phase kill, made by a helper process: the rank frozen while its phase is confirmed -----------
#
# A phase can last less than making the marker durable takes (Megatron's finalize writes `.metadata`,
# metadata.json and the tracker within a millisecond), so a rank that claims its marker and then kills itself
# lets the save run on in between and can die after the save it was meant to interrupt. A helper process,
# started with the poller, takes the poll's request instead: it stops the rank (SIGSTOP, every thread, once
# each has left the system call it was in), looks at the disk again, and only if the phase still holds claims
# the marker and kills the rank; else it lets the rank go on (SIGCONT) and the poller looks for the phase
# again. The rank's checkpoint writer processes, if any, are not stopped: a crash of the rank alone spares
# them too.

FREEZE_HELPER_ARG = "--freeze-helper"
FREEZE_STOP_WAIT_S = 2.0  # the longest wait for every thread to show stopped (one in a long disk write)
FREEZE_METHOD = (
    "SIGSTOP of the rank by its injector's helper (pid {pid}), the phase seen again on disk, SIGKILL"
)


def threads_stopped(pid: int) -> bool | None:
    """Whether every thread of `pid` is stopped (state T or t in /proc); None where /proc cannot tell."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # a thread that ended
        if stat.rsplit(")", 1)[-1].split()[:1] not in (["T"], ["t"]):
            return False
    return True


def phase_still_holds(request: dict) -> tuple[str | None, SaveOnDisk | None]:
    """(None, iter_S's contents) when the disk still shows the poll's phase of save S with the tracker
    before S; else (what the disk shows instead, what iter_S held)."""
    checkpoint_dir = Path(request["checkpoint_dir"])
    save = int(request["save_iteration"])
    tracker = poll_tracker(checkpoint_dir / TRACKER_NAME)
    on_disk = look_at_save(checkpoint_dir / iteration_dir_name(save))
    if tracker is None or tracker >= save:
        return f"the tracker reads {tracker} (the save of {save} was finalized)", on_disk
    if on_disk is None:
        return f"{iteration_dir_name(save)} cannot be listed", None
    names, total = on_disk.signature()
    same = [list(names), total] == request["signature"]
    stable = int(request["stable"]) + 1 if same else 1
    if not phase_reached(request["phase"], on_disk, stable, request["reference"]):
        return f"{iteration_dir_name(save)} holds {on_disk.record()}: past {request['phase']}", on_disk
    return None, on_disk


# save_finalized, watched by the helper itself (the request's `watch`): `.metadata` and the tracker are
# written by one finalize on the rank's training thread within milliseconds, while the rank's poller thread
# waits for the GIL that finalize holds; a 2 ms poll from there rarely sees the window (core_v0.19.0's async
# save on an H200: not seen in 30 iterations). The helper, a process of its own, waits on inotify for iter_S's
# `.metadata` (closed after writing, or renamed from torch's `.metadata.tmp`) and stops the rank on the event
# before it looks at anything else. Where inotify is not there it looks every PHASE_POLL_SECONDS itself.

WATCHED_PHASE = "save_finalized"
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_TO = 0x00000080
INOTIFY_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name
WATCH_LOOK_S = 0.05  # with inotify: how often the watch looks at the disk anyway (a save finalized unseen)
TRIGGER_RANK_POLL = "rank poll"  # the rank's poller saw the phase and asked for the kill
TRIGGER_INOTIFY = "inotify"  # the helper's watch: the event of `.metadata`
TRIGGER_HELPER_POLL = "helper poll"  # the helper's watch: `.metadata` found by a look


def inotify_watch(directory: Path, mask: int) -> int | None:
    """A non-blocking inotify descriptor watching `directory` for `mask`; None where there is none (not
    Linux, no such libc symbol, the watch limit reached, the directory gone)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(str(directory)), mask) < 0:
        os.close(fd)
        return None
    return fd


def inotify_names(fd: int) -> list[str]:
    """The names of the events waiting on `fd` (none when there are none)."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return []
    names, offset = [], 0
    while offset + INOTIFY_EVENT.size <= len(data):
        length = INOTIFY_EVENT.unpack_from(data, offset)[3]
        start = offset + INOTIFY_EVENT.size
        names.append(os.fsdecode(data[start : start + length].rstrip(b"\0")))
        offset = start + length
    return names


# The helper is woken by the rank's own write of `.metadata`, and the kernel tends to queue a woken task on
# the waker's CPU, where it waits until the rank yields: on a 2-CPU machine the wakeup came only once a
# writer spinning 3 ms after the rename had finished (bench/save_finalized_window.py), which is the whole
# window. A real-time policy makes the wakeup preempt; without the privilege for it the watch keeps itself
# off the CPU the rank's main thread (the one that finalizes) last ran on.
WAKEUP_REALTIME = "SCHED_FIFO"
WAKEUP_OFF_RANK_CPU = "off the rank's CPU"


def prompt_wakeups() -> str:
    """Make this process's wakeups preempt the rank (WAKEUP_REALTIME) where allowed, else say the watch
    must keep off the rank's CPU (WAKEUP_OFF_RANK_CPU). The helper mostly sleeps; every loop of it waits."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        return WAKEUP_REALTIME
    except (OSError, AttributeError):  # no CAP_SYS_NICE, or no such call here
        return WAKEUP_OFF_RANK_CPU


def avoid_cpu_of(pid: int, allowed: set[int]) -> None:
    """Run on any of `allowed` except the CPU `pid`'s main thread last ran on (/proc/<pid>/stat's
    `processor`); unchanged where that cannot be read or no other CPU is allowed."""
    try:
        cpu = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[36])
        others = allowed - {cpu}
        if others and others != os.sched_getaffinity(0):
            os.sched_setaffinity(0, others)
    except (OSError, ValueError, IndexError):
        pass


def metadata_written(iter_dir: Path) -> bool:
    try:
        return (iter_dir / DCP_METADATA).stat().st_size > 0
    except OSError:
        return False


def closed(fd: int | None) -> bool:
    """Whether the rank closed its end of the requests (finish(): the workload ended); never blocks."""
    if fd is None:
        return False
    import select

    return bool(select.select([fd], [], [], 0)[0])


def wait_for_metadata(
    request: dict,
    stop_fd: int | None,
    use_inotify: bool = True,
    avoid_pid: int | None = None,
    on_seen=lambda: None,
) -> tuple[str | None, str | None]:
    """Wait until iter_S's `.metadata` is written: (trigger, None) with trigger TRIGGER_INOTIFY or
    TRIGGER_HELPER_POLL, `on_seen()` (the rank's stop) called the moment it is seen, before anything else:
    closing an inotify descriptor waits for the kernel's grace period (8 to 16 ms measured), longer than
    the window; (None, why) when the save went past without it being seen (the tracker reached S, iter_S
    gone); (None, None) when the rank closed the requests (`stop_fd` readable: its end). With `avoid_pid`,
    the watch keeps off that process's CPU at every look (avoid_cpu_of)."""
    import select

    allowed = os.sched_getaffinity(0) if avoid_pid is not None else set()

    checkpoint_dir = Path(request["checkpoint_dir"])
    save = int(request["save_iteration"])
    iter_dir = checkpoint_dir / iteration_dir_name(save)
    fd = inotify_watch(iter_dir, IN_CLOSE_WRITE | IN_MOVED_TO) if use_inotify else None
    look_every = WATCH_LOOK_S if fd is not None else PHASE_POLL_SECONDS
    waiting = [x for x in (fd, stop_fd) if x is not None]
    try:
        while True:
            # the events first (a non-blocking read), so that a look never takes credit for what one said
            if fd is not None and DCP_METADATA in inotify_names(fd):
                on_seen()
                return TRIGGER_INOTIFY, None
            if metadata_written(iter_dir):  # written before the watch began, or without an event
                on_seen()
                return TRIGGER_HELPER_POLL, None
            tracker = poll_tracker(checkpoint_dir / TRACKER_NAME)
            if tracker is None or tracker >= save:
                return None, f"the tracker reads {tracker}: the save of {save} was finalized unseen"
            if not iter_dir.is_dir():
                return None, f"{iteration_dir_name(save)} is gone"
            if avoid_pid is not None:
                avoid_cpu_of(avoid_pid, allowed)
            ready: list[int] = []
            if waiting:
                ready = select.select(waiting, [], [], look_every)[0]
            else:
                time.sleep(look_every)
            if stop_fd in ready and fd not in ready:
                return None, None
    finally:
        if fd is not None:
            os.close(fd)
        if avoid_pid is not None and allowed:
            os.sched_setaffinity(0, allowed)


def fileno_or_none(stream) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError):  # io.StringIO in tests: no descriptor to wait on
        return None


def freeze_helper(rank_pid: int, requests, replies, kill=os.kill, wakeups=None) -> int:
    """The helper's loop: one JSON request per line (the marker's record and path, the phase and what the
    poll saw; with `watch`, save_finalized: wait_for_metadata first, and a save finalized unseen is a miss);
    it answers `missed` (the rank continued), `taken` (the marker existed: the rank continued) or
    `error` (the rank continued, nothing injected) on `replies`, or kills the rank. It ends at the end of
    `requests` (the rank is gone or done). A rank it stopped is never left stopped: that would be a hang,
    not the kill asked for."""

    def answer(result: str, why: str | None = None) -> None:
        kill(rank_pid, signal.SIGCONT)
        replies.write(json.dumps({"result": result, **({"why": why} if why else {})}) + "\n")
        replies.flush()

    stop_fd = fileno_or_none(requests)
    wakeup = None  # how a watch is woken promptly: `wakeups()` (prompt_wakeups) at the first watch
    for line in requests:
        request = json.loads(line)
        trigger = TRIGGER_RANK_POLL
        if request.get("watch"):
            if wakeup is None:
                wakeup = wakeups() if wakeups is not None else "default"
            avoid = rank_pid if wakeup == WAKEUP_OFF_RANK_CPU else None
            try:
                trigger, why = wait_for_metadata(
                    request, stop_fd, avoid_pid=avoid, on_seen=lambda: kill(rank_pid, signal.SIGSTOP)
                )
            except Exception as exc:  # noqa: BLE001 - the rank is not stopped: say why and end
                answer("error", f"{type(exc).__name__}: {exc}")
                return 1
            if trigger is None:
                if why is None:
                    return 0  # the rank closed the requests: the workload ended
                answer("missed", why)
                continue
        kill(rank_pid, signal.SIGSTOP)  # a watch stopped it already: a second SIGSTOP changes nothing
        if closed(stop_fd):  # the workload ended before the stop: no kill after its end
            kill(rank_pid, signal.SIGCONT)
            return 0
        try:
            record = dict(request["record"], injected_at=utc_now())
            start = time.monotonic()
            stopped = threads_stopped(rank_pid)
            while stopped is False and time.monotonic() - start < FREEZE_STOP_WAIT_S:
                time.sleep(0.0002)
                stopped = threads_stopped(rank_pid)
            why, on_disk = phase_still_holds(request)
            if why is not None:
                answer("missed", why)
                continue
            record["on_disk"] = on_disk.record()
            record["method"] = FREEZE_METHOD.format(pid=os.getpid())
            record["freeze"] = {
                "helper_pid": os.getpid(),
                "threads_stopped": stopped,
                "stop_wait_ms": round((time.monotonic() - start) * 1000, 3),
                "polled_on_disk": request["polled_on_disk"],
                "missed_before": int(request["missed_before"]),
                "trigger": trigger,
                **({"wakeup": wakeup} if request.get("watch") else {}),
            }
            claimed = claim_marker(Path(request["marker"]), record)
        except Exception as exc:  # noqa: BLE001 - whatever it was, the stopped rank must go on
            answer("error", f"{type(exc).__name__}: {exc}")
            return 1
        if not claimed:
            answer("taken")
            return 0
        print(f"{INJECT_PREFIX} {json.dumps(record)}", file=sys.stderr, flush=True)
        kill(rank_pid, signal.SIGKILL)
        return 0
    return 0


class FreezeHelper:
    """The rank's side: the helper process (this file run with FREEZE_HELPER_ARG) and its two pipes."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), FREEZE_HELPER_ARG, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def ask(self, request: dict) -> dict:
        """Send one request; the helper's answer (when it kills this rank, none comes: the rank is gone)."""
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise OSError(f"the freeze helper (pid {self.process.pid}) ended without an answer")
        return json.loads(answer)

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


# --- checkpoint damage (--checkpoint-damage): what a replacement meets ------------------------------------


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


def fsync_path(path: Path) -> None:
    """Make `path`'s data (a file) or entries (a directory) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def move_aside(path: Path) -> Path:
    """Rename `path` to its name + DAMAGE_SUFFIX (never deleted, never over another); fsync its directory."""
    if not os.path.lexists(path):
        raise DamageError(f"{path} does not exist")
    target = path.with_name(path.name + DAMAGE_SUFFIX)
    if os.path.lexists(target):
        # a rename would replace it (a file) or fail late (a directory): an earlier damage is kept as it is
        raise DamageError(f"{target} already exists")
    try:
        os.rename(path, target)
    except OSError as exc:
        raise DamageError(f"cannot rename {path} to {target.name}: {exc.strerror or exc}") from exc
    fsync_path(path.parent)
    return target


def damage_record(kind: str, iteration: int, root: Path, path: Path, **found) -> dict:
    record = {
        "kind": kind,
        "iteration": iteration,
        "path": str(path.relative_to(root)),
        "moved_to": None,
        "size_before": None,
        "size_after": None,
        "tracker_before": None,
        "tracker_after": None,
    }
    record.update(found)
    record["at"] = utc_now()
    return record


def damage_tracker_not_a_number(tracker: Path, iteration: int) -> dict:
    """Overwrite the tracker in place with NUL bytes of its length (at least one), fsynced: what a write cut
    short by a crash leaves on many filesystems (the size was set, the data never came)."""
    before = tracker_text(tracker)
    try:
        size = tracker.stat().st_size
        fd = os.open(tracker, os.O_WRONLY)
    except OSError as exc:
        raise DamageError(f"cannot open the tracker {tracker}: {exc.strerror or exc}") from exc
    try:
        os.write(fd, b"\0" * max(size, 1))
        os.fsync(fd)
    finally:
        os.close(fd)
    return damage_record(
        "tracker_not_a_number",
        iteration,
        tracker.parent,
        tracker,
        size_before=size,
        size_after=tracker.stat().st_size,
        tracker_before=before,
        tracker_after=tracker_text(tracker),
    )


def damage_tracker_missing_iteration(tracker: Path, iteration: int) -> dict:
    """Move the directory of the iteration the tracker names aside; the tracker still names it."""
    root = tracker.parent
    before = tracker_text(tracker)
    moved = move_aside(root / iteration_dir_name(iteration))
    return damage_record(
        "tracker_missing_iteration",
        iteration,
        root,
        root / iteration_dir_name(iteration),
        moved_to=str(moved.relative_to(root)),
        tracker_before=before,
        tracker_after=tracker_text(tracker),
    )


def damage_tracker_removed(tracker: Path, iteration: int) -> dict:
    """Move the tracker aside: the checkpoint directories stay, nothing names them."""
    before = tracker_text(tracker)
    moved = move_aside(tracker)
    return damage_record(
        "tracker_removed",
        iteration,
        tracker.parent,
        tracker,
        moved_to=str(moved.relative_to(tracker.parent)),
        tracker_before=before,
        tracker_after=tracker_text(tracker),
    )


def largest_shard(directory: Path) -> tuple[int, Path]:
    """(size, path) of the largest torch_dist shard (*.distcp) in `directory`; DamageError without one."""
    try:
        shards = [(p.stat().st_size, p.name, p) for p in directory.glob("*.distcp") if p.is_file()]
    except OSError as exc:
        raise DamageError(f"cannot list {directory}: {exc.strerror or exc}") from exc
    if not shards:
        raise DamageError(f"{directory} holds no *.distcp shard")
    size, _, shard = max(shards)
    return size, shard


def shard_damage_record(
    kind: str, tracker: Path, iteration: int, shard: Path, sizes: tuple[int, int], **extra
) -> dict:
    """The record of a damage to one shard: its (before, after) sizes; the tracker, left as it was."""
    named = tracker_text(tracker)
    before, after = sizes
    return damage_record(
        kind,
        iteration,
        tracker.parent,
        shard,
        size_before=before,
        size_after=after,
        tracker_before=named,
        tracker_after=named,
        **extra,
    )


def damage_shard_truncated(tracker: Path, iteration: int) -> dict:
    """Cut the largest torch_dist shard (*.distcp) of the iteration to half its size (floor), fsynced."""
    root = tracker.parent
    size, shard = largest_shard(root / iteration_dir_name(iteration))
    try:
        os.truncate(shard, size // 2)
        fsync_path(shard)
        after = shard.stat().st_size
    except OSError as exc:
        raise DamageError(f"cannot truncate {shard}: {exc.strerror or exc}") from exc
    return shard_damage_record("shard_truncated", tracker, iteration, shard, (size, after))


def largest_tensor_bytes(shard: Path) -> tuple[int, int] | None:
    """(start, end) of the largest tensor's raw bytes in a torch_dist shard: a record `.../data/<n>` of its
    torch.save archives, up to the next zip header (a data descriptor or the next record); None when the
    file holds none (not torch's format). Read through mmap: a shard of many GiB is never held in memory."""
    with open(shard, "rb") as fh:
        if os.fstat(fh.fileno()).st_size < ZIP_LOCAL_HEADER_SIZE:
            return None
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            best, at = None, view.find(ZIP_LOCAL_HEADER)
            while at >= 0 and at + ZIP_LOCAL_HEADER_SIZE <= len(view):
                name_len, extra_len = struct.unpack_from("<HH", view, at + 26)
                name = view[at + ZIP_LOCAL_HEADER_SIZE : at + ZIP_LOCAL_HEADER_SIZE + name_len]
                start = at + ZIP_LOCAL_HEADER_SIZE + name_len + extra_len
                following = view.find(ZIP_LOCAL_HEADER, max(start, at + 4))
                end = min(x for x in (view.find(b"PK\x07\x08", start), following, len(view)) if x >= 0)
                if (
                    re.fullmatch(rb"[^/]+/data/\d+", name)
                    and end > start
                    and (best is None or end - start > best[1] - best[0])
                ):
                    best = (start, end)
                at = following
    return best


def damage_shard_corrupted(tracker: Path, iteration: int) -> dict:
    """Invert CORRUPT_BYTES (fewer in a smaller span) in the middle of the largest tensor's bytes of the
    largest shard of the iteration (of the file where no tensor record is found), in place, fsynced: the size,
    the archive's structure and every other byte stay, so only a check of the bytes can notice, as after a
    bit flip on a disk or a copy (in a real checkpoint nearly every byte is a tensor's)."""
    root = tracker.parent
    size, shard = largest_shard(root / iteration_dir_name(iteration))
    try:
        span = largest_tensor_bytes(shard) or (0, size)
    except (OSError, ValueError) as exc:
        raise DamageError(f"cannot read {shard}: {exc}") from exc
    length = min(CORRUPT_BYTES, (span[1] - span[0]) // 2)
    offset = (span[0] + span[1] - length) // 2
    if length <= 0:
        raise DamageError(f"{shard} holds no byte to corrupt")
    try:
        with open(shard, "r+b") as fh:
            fh.seek(offset)
            original = fh.read(length)
            fh.seek(offset)
            fh.write(bytes(b ^ CORRUPT_XOR for b in original))
            fh.flush()
            os.fsync(fh.fileno())
        after = shard.stat().st_size
    except OSError as exc:
        raise DamageError(f"cannot corrupt {shard}: {exc.strerror or exc}") from exc
    extra = {"offset": offset, "length": len(original), "xor": CORRUPT_XOR}
    return shard_damage_record("shard_corrupted", tracker, iteration, shard, (size, after), **extra)


DAMAGE_FUNCTIONS = {
    "tracker_not_a_number": damage_tracker_not_a_number,
    "tracker_missing_iteration": damage_tracker_missing_iteration,
    "tracker_removed": damage_tracker_removed,
    "shard_truncated": damage_shard_truncated,
    "shard_corrupted": damage_shard_corrupted,
}


def damage_checkpoint(kind: str, tracker: Path, iteration: int) -> dict:
    """Damage the checkpoint of `iteration` (the one whose tracker triggered the injection) as `kind` says;
    its record, or DamageError with the reason when it cannot be made. The damages that act on that
    iteration's directory need the tracker to still name it: otherwise the replacement would load another
    checkpoint and never meet the damage."""
    if kind not in DAMAGE_FUNCTIONS:
        raise DamageError(f"unknown checkpoint damage {kind!r}")
    if kind in DAMAGES_TO_FILES:
        named = poll_tracker(tracker)
        if named != iteration:
            raise DamageError(f"the tracker names {named}, not iteration {iteration}, which armed the fault")
    return DAMAGE_FUNCTIONS[kind](tracker, iteration)


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


def tree_bytes(path: Path) -> int:
    """The bytes of the files below `path` (what a checkpoint takes on disk, before metadata)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def filesystem_record(path: Path) -> dict:
    st = os.statvfs(path)
    return {"size_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def fill_filesystem(checkpoint_dir: Path, iteration: int, is_mount=os.path.ismount) -> dict:
    """disk_full: allocate FILLER_NAME in `checkpoint_dir` until FILLER_HEADROOM of iter_<iteration>'s bytes
    stay free; the marker's `storage`. DamageError when it cannot be made (not a mount point, nothing to
    measure, no room)."""
    if not is_mount(checkpoint_dir):
        # only the capped filesystem the launcher mounted there may be filled, never a shared one
        raise DamageError(f"{checkpoint_dir} is not a mount point: no capped filesystem of the launcher")
    completed = checkpoint_dir / iteration_dir_name(iteration)
    checkpoint = tree_bytes(completed)
    if checkpoint <= 0:
        raise DamageError(f"{completed} holds no bytes to size the headroom by")
    before = filesystem_record(checkpoint_dir)
    headroom = int(checkpoint * FILLER_HEADROOM)
    size = before["free_bytes"] - headroom
    if size <= 0:
        raise DamageError(
            f"only {before['free_bytes']} bytes are free, already under the {headroom} bytes of headroom"
        )
    filler = checkpoint_dir / FILLER_NAME
    try:
        fd = os.open(filler, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError as exc:
        raise DamageError(f"cannot create {filler}: {exc.strerror or exc}") from exc
    try:
        os.posix_fallocate(fd, 0, size)
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        os.unlink(filler)  # our own file, not evidence: the fault was not made
        raise DamageError(f"cannot allocate {size} bytes in {filler}: {exc.strerror or exc}") from exc
    os.close(fd)
    fsync_path(checkpoint_dir)
    return {
        "kind": "disk_full",
        "iteration": iteration,
        "filler": FILLER_NAME,
        "filler_bytes": size,
        "checkpoint_bytes": checkpoint,
        "headroom_bytes": headroom,
        "filesystem_before": before,
        "filesystem_after": filesystem_record(checkpoint_dir),
        "at": utc_now(),
    }


def open_files_under(pid: int, directory: Path) -> list[str]:
    """The files below `directory` that process `pid` holds open (names relative to it); [] if unreadable."""
    found = []
    prefix = str(directory) + os.sep
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(prefix):
            found.append(target[len(prefix) :])
    return sorted(set(found))


def command_of(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200]


def writers_of(iter_dir: Path, root: int | None = None) -> list[dict]:
    """The processes below `root` (this rank) holding a file of `iter_dir` open: a save's writers. The rank
    itself is never one (stopping it would be a hang of the rank, not of its writer)."""
    root = os.getpid() if root is None else root
    resolved = Path(os.path.realpath(iter_dir))
    writers = []
    for pid in descendants_of(root, parent_pids()):
        files = open_files_under(pid, resolved)
        if files:
            writers.append({"pid": pid, "command": command_of(pid), "files": files})
    return writers


def read_campaign_plan(path: Path) -> list[dict]:
    """The campaign plan's faults (ftqual.scenario.campaign_plan writes it), in order of their index 1..K."""
    data = json.loads(path.read_text())
    if data["schema"] != CAMPAIGN_PLAN_SCHEMA:
        raise ValueError(f"not a {CAMPAIGN_PLAN_SCHEMA} plan")
    faults = []
    for number, item in enumerate(data["faults"], start=1):
        entry = {
            "index": int(item["index"]),
            "fault": str(item["fault"]),
            "rank": int(item["rank"]),
            "placement": str(item["placement"]),
            "arm_iteration": int(item["arm_iteration"]),
        }
        if (
            entry["index"] != number
            or entry["fault"] not in FAULTS[1:]
            or entry["placement"] not in PLACEMENTS
        ):
            raise ValueError(f"entry {number} is malformed")
        faults.append(entry)
    return faults


def proc_start_time(pid: int | str = "self") -> int:
    """Field 22 of /proc/<pid>/stat: start time in clock ticks since boot."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text.rpartition(")")[2].split()[19])


def write_pid_record(pid_dir: Path, host: str, cycle: int, rank: int, local_rank: int) -> Path:
    record = {
        "pid": os.getpid(),
        "pgid": os.getpgrp(),
        "start_time": proc_start_time(),
        "rank": rank,
        "local_rank": local_rank,
        "cycle": cycle,
        "host": host,
    }
    path = pid_dir / f"{host}.cycle{cycle}.rank{rank}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)
    return path


def read_launcher_record(pid_dir: Path, host: str) -> dict | None:
    """pids/<host>.launcher.json (our launcher records ft_launcher's pid there), None when unreadable."""
    try:
        record = json.loads((pid_dir / f"{host}.launcher.json").read_text())
        return {"pid": int(record["pid"]), "start_time": int(record["start_time"])}
    except (OSError, ValueError, TypeError, KeyError):
        return None


def parent_pids() -> dict[int, int]:
    """pid -> parent pid of every process /proc shows (processes that vanish meanwhile are left out)."""
    parents = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(text.rpartition(")")[2].split()[1])
    return parents


def descendants_of(root: int, parents: dict[int, int]) -> list[int]:
    """Every process below `root` (children, theirs, ...), parents before children."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in sorted(children.get(todo.pop(0), ())):
            found.append(child)
            todo.append(child)
    return found


def is_ancestor(pid: int, of: int, parents: dict[int, int]) -> bool:
    seen = set()
    while of in parents and of not in seen:
        seen.add(of)
        of = parents[of]
        if of == pid:
            return True
    return False


def is_alive(pid: int, start_time: int) -> bool:
    """The recorded process still runs: /proc/<pid>/stat has its start time (not a reused pid)."""
    try:
        return proc_start_time(pid) == start_time
    except (OSError, ValueError, IndexError):
        return False


def earlier_processes(pid_dir: Path, host: str, cycle: int) -> tuple[list[dict], list[str]]:
    """(pid records of this host's workers from cycles before `cycle`, names of unreadable records)."""
    earlier, unreadable = [], []
    for path in sorted(pid_dir.glob(f"{glob_escape(host)}.cycle*.rank*.json")):
        try:
            record = json.loads(path.read_text())
            item = {
                "pid": int(record["pid"]),
                "start_time": int(record["start_time"]),
                "cycle": int(record["cycle"]),
                "rank": int(record["rank"]),
            }
        except (OSError, ValueError, TypeError, KeyError):
            unreadable.append(path.name)
            continue
        if record.get("host") == host and item["cycle"] < cycle:
            earlier.append(item)
    earlier.sort(key=lambda r: (r["cycle"], r["rank"]))
    return earlier, unreadable


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def sample_gpu_apps(run=subprocess.run, which=shutil.which) -> dict:
    """nvidia-smi's compute apps: {"sampled", "error", "apps"}; every failure is recorded, none raised."""
    exe = which("nvidia-smi")
    if exe is None:
        return {"sampled": False, "error": "nvidia-smi not found", "apps": []}
    try:
        proc = run(
            [exe, *NVIDIA_SMI_QUERY],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"sampled": False, "error": f"nvidia-smi timed out after {NVIDIA_SMI_TIMEOUT_S} s", "apps": []}
    except (OSError, ValueError) as exc:
        return {"sampled": False, "error": f"nvidia-smi could not run: {exc}", "apps": []}
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout or "").strip().splitlines()
        detail = f": {said[-1][:200]}" if said else ""
        return {"sampled": False, "error": f"nvidia-smi exited {proc.returncode}{detail}", "apps": []}
    apps = []
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        pid_text, _, memory_text = (part.strip() for part in line.partition(","))
        if not pid_text.isdigit():
            return {"sampled": False, "error": f"unexpected nvidia-smi line: {line[:200]!r}", "apps": []}
        memory = int(memory_text) if memory_text.isdigit() else None  # [N/A] where memory is not reported
        apps.append({"pid": int(pid_text), "used_memory_mib": memory})
    return {"sampled": True, "error": None, "apps": apps}


def leftovers_record(pid_dir: Path, host: str, cycle: int, gpu: dict) -> dict:
    """What the earlier cycles of this host left behind, seen at the start of `cycle`."""
    earlier, unreadable = earlier_processes(pid_dir, host, cycle)
    alive = [item for item in earlier if is_alive(item["pid"], item["start_time"])]
    by_pid = {item["pid"]: item for item in alive}
    held = [
        {"pid": app["pid"], "used_memory_mib": app["used_memory_mib"], **_cycle_rank(by_pid[app["pid"]])}
        for app in gpu["apps"]
        if app["pid"] in by_pid
    ]
    return {
        "schema": LEFTOVERS_SCHEMA,
        "host": host,
        "cycle": cycle,
        "sampled_at": utc_now(),
        "earlier": earlier,
        "alive": alive,
        "gpu": {**gpu, "held_by_earlier": held},
        "unreadable_pid_records": unreadable,
        **resources_now(),
    }


def resources_now(shm: Path = SHM_DIR, parent: int | None = None) -> dict:
    """What a cycle inherits besides processes: this user's /dev/shm segments and the open file descriptors
    of the agent that starts the workers (ft_launcher); counts that grow cycle after cycle are a leak.
    `shm` also keeps each entry's size (st_size) and allocated bytes (st_blocks * 512) and the filesystem's
    size, free bytes and inodes (os.statvfs): what a leak costs, judged against the room it eats."""
    uid = os.getuid()
    entries, error = [], None
    try:
        with os.scandir(shm) as listing:
            for entry in listing:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # gone between the listing and the stat
                if st.st_uid == uid:
                    entries.append({"name": entry.name, "size": st.st_size, "allocated": st.st_blocks * 512})
    except OSError as exc:
        entries, error = None, f"{shm} cannot be listed: {exc.strerror or exc}"
    if entries is not None:
        entries.sort(key=lambda item: item["name"])
    parent = os.getppid() if parent is None else parent
    try:
        fds = len(os.listdir(f"/proc/{parent}/fd"))
    except OSError:
        fds = None
    return {
        "shm_segments": [item["name"] for item in entries] if entries is not None else None,
        "shm": shm_usage(shm, entries, error),
        "agent_pid": parent,
        "agent_open_fds": fds,
    }


def shm_usage(shm: Path, entries: list[dict] | None, error: str | None) -> dict:
    """This user's entries with their sizes and totals, and the filesystem's room (statvfs), each part
    null with its error where it could not be read."""
    out: dict = {"path": str(shm), "error": error, "entries": None, "count": None}
    if entries is not None:
        out.update(
            entries=entries[:SHM_MAX_ENTRIES],
            count=len(entries),
            size_bytes=sum(item["size"] for item in entries),
            allocated_bytes=sum(item["allocated"] for item in entries),
        )
    try:
        vfs = os.statvfs(shm)
    except OSError as exc:
        out.update(fs=None, fs_error=f"statvfs({shm}) failed: {exc.strerror or exc}")
        return out
    out["fs"] = {
        "size_bytes": vfs.f_blocks * vfs.f_frsize,
        "free_bytes": vfs.f_bavail * vfs.f_frsize,  # what an unprivileged user can still write
        "inodes": vfs.f_files,  # 0: the filesystem reports no inode limit
        "free_inodes": vfs.f_favail,
    }
    out["fs_error"] = None
    return out


def _cycle_rank(item: dict) -> dict:
    return {"cycle": item["cycle"], "rank": item["rank"]}


def write_leftovers(
    leftovers_dir: Path, pid_dir: Path, host: str, cycle: int, gpu: dict | None = None
) -> Path:
    """Write leftovers/<host>.cycle<c>.json atomically (written once per node and cycle)."""
    record = leftovers_record(pid_dir, host, cycle, sample_gpu_apps() if gpu is None else gpu)
    leftovers_dir.mkdir(exist_ok=True)
    path = leftovers_dir / f"{host}.cycle{cycle}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(json.dumps(record, indent=2) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


class SectionWatch:
    """The NVRx sections this process has open, as seen through RankMonitorClient's methods."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: list[str] = []
        self.on_start = None  # called with the section name after a section opened
        self.on_end = None  # called with the section name after a section closed (the monitor knows)
        self.on_closing = None  # called with the section name before the monitor is told it closed
        # the rank sentinel's link: told of every section start and end, with the timeouts in force
        self.sentinel: SentinelLink | None = None

    def started(self, name: str, client=None) -> None:
        with self.lock:
            self.open.append(name)
        if self.sentinel is not None:
            self.sentinel.send({"event": "start", "section": name, "timeouts": timeouts_in_force(client)})
        if self.on_start is not None:
            self.on_start(name)

    def closing(self, name: str) -> None:
        if self.on_closing is not None:
            self.on_closing(name)

    def ended(self, name: str | None, client=None) -> None:
        with self.lock:
            if name is None:
                self.open.clear()
            elif name in self.open:
                self.open.remove(name)
        if self.sentinel is not None:
            self.sentinel.send({"event": "end", "section": name, "timeouts": timeouts_in_force(client)})

    def closed(self, name: str) -> None:
        if self.on_end is not None:
            self.on_end(name)

    def current(self) -> str | None:
        with self.lock:
            return self.open[-1] if self.open else None

    def inside(self, name: str) -> bool:
        with self.lock:
            return name in self.open


def install_section_hooks(watch: SectionWatch) -> bool:
    """Wrap RankMonitorClient's section methods in this process; False when NVRx is not importable."""
    try:
        from nvidia_resiliency_ext.fault_tolerance.rank_monitor_client import RankMonitorClient
    except Exception:  # any import failure means: no hooks, inject immediately
        return False
    original_start = RankMonitorClient.start_section
    original_end = RankMonitorClient.end_section
    original_end_all = RankMonitorClient.end_all_sections

    def start_section(self, section):
        result = original_start(self, section)
        watch.started(section, self)  # after the monitor knows, so an injection lands inside the section
        return result

    def end_section(self, section):
        watch.closing(section)  # a setup hang lands here: the section is still open for the monitor
        watch.ended(section, self)
        result = original_end(self, section)
        watch.closed(section)  # an in_save kill lands here, once the monitor saw the section end
        return result

    def end_all_sections(self):
        watch.ended(None, self)
        return original_end_all(self)

    RankMonitorClient.start_section = start_section
    RankMonitorClient.end_section = end_section
    RankMonitorClient.end_all_sections = end_all_sections
    return True


def timeouts_in_force(client) -> dict | None:
    """The section and out-of-section timeouts a RankMonitorClient holds now (calculated ones included), as
    {section: seconds, "out_of_section": seconds}; None when it holds none yet."""
    held = getattr(client, "section_timeouts", None)
    sections = getattr(held, "section", None)
    if not isinstance(sections, dict):
        return None
    found = {str(k): v for k, v in sections.items() if v is None or isinstance(v, (int, float))}
    found["out_of_section"] = getattr(held, "out_of_section", None)
    return found


class SentinelLink:
    """The write end of the rank sentinel's stdin: one JSON event per line, never blocking the rank (an event
    the pipe cannot take now is dropped, a sentinel that is gone is forgotten)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.fd: int | None = process.stdin.fileno()
        os.set_blocking(self.fd, False)
        self.lock = threading.Lock()

    def send(self, event: dict) -> None:
        with self.lock:
            if self.fd is None:
                return
            try:
                os.write(self.fd, (json.dumps(event) + "\n").encode())
            except BlockingIOError:
                pass
            except OSError:
                self.fd = None


# The signal the rank's faulthandler answers with every thread's stack (the sentinel's fallback without
# py-spy): a real-time signal nothing in the stack uses (NVRx's rank monitor takes SIGUSR1 and SIGUSR2).
FAULTHANDLER_SIGNAL = signal.SIGRTMIN + 5 if hasattr(signal, "SIGRTMIN") else None
SENTINEL = Path(__file__).resolve().with_name("rank_sentinel.py")


def start_sentinel(
    dump_dir: Path, tool: str | None, timeouts: dict, host: str, cycle: int, rank: int
) -> SentinelLink | None:
    """Register the faulthandler fallback and start this rank's sentinel (workloads/rank_sentinel.py), which
    dumps this process's stacks before a timeout's kill; None, logged, when it cannot start (the run goes on:
    dumps are evidence, not a condition of training)."""
    prefix = f"{host}.cycle{cycle}.rank{rank}"
    argv = [sys.executable, str(SENTINEL), "--pid", str(os.getpid()), "--dump-dir", str(dump_dir)]
    argv += ["--prefix", prefix, "--tool", tool or "", "--timeouts", json.dumps(timeouts)]
    try:
        dump_dir.mkdir(parents=True, exist_ok=True)
        if FAULTHANDLER_SIGNAL is not None:
            import faulthandler

            path = dump_dir / f"{prefix}.faulthandler.txt"
            handle = open(path, "a")  # noqa: SIM115 - kept open for the process's life: the handler writes to it
            faulthandler.register(FAULTHANDLER_SIGNAL, file=handle, all_threads=True, chain=False)
            argv += ["--faulthandler-file", str(path), "--faulthandler-signal", str(int(FAULTHANDLER_SIGNAL))]
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, close_fds=True)
    except (OSError, RuntimeError, ValueError) as exc:
        log(f"cannot start the rank sentinel (no stack dumps of this rank): {exc}")
        return None
    allow_tracer(process.pid)
    return SentinelLink(process)


PR_SET_PTRACER = 0x59616D61


def allow_tracer(pid: int) -> None:
    """Let `pid` and its children (the sentinel's py-spy) ptrace this process where Yama's ptrace_scope is 1,
    which otherwise lets a process trace only its own descendants; nothing elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PTRACER, pid, 0, 0, 0)
    except (OSError, AttributeError):
        pass


class InjectedFault(Exception):
    """The `exception` fault: an exception of the training loop's thread, which nothing in it catches."""


GIL_SLEEP_S = 0xFFFFFFFF  # libc sleep()'s longest: 136 years


def hold_gil_forever(ready: threading.Event | None = None) -> None:
    """Call libc's sleep() through ctypes.PyDLL, which keeps the GIL for the whole call (ctypes.CDLL releases
    it): no other thread of this process runs Python again, yet the process lives. What does not block the
    GIL: time.sleep and any blocking I/O (they release it), and sys.setswitchinterval (it only sets how soon
    a holder is asked to drop the GIL at its next bytecode; a holder inside one C call never sees the ask).
    NVRx's lock_gil (a regular expression that backtracks for hours) holds it too, but burns a core the
    whole time, which a test machine of two cores cannot spare. Ours, not NVRx's, for that reason; a signal
    with a Python handler interrupts sleep(), hence the loop."""
    import ctypes

    libc = ctypes.PyDLL(None)
    libc.sleep.argtypes = [ctypes.c_uint]
    if ready is not None:
        ready.set()
    while True:
        libc.sleep(GIL_SLEEP_S)


def async_raise(thread_id: int, exc_type: type) -> None:
    """Raise `exc_type` in another thread at its next bytecode (NVRx's inject_fault.async_raise, which we do
    not import: its module imports torch at import time)."""
    import ctypes

    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
    set_async_exc.restype = ctypes.c_int
    if set_async_exc(thread_id, exc_type) != 1:
        set_async_exc(thread_id, None)
        raise RuntimeError(f"could not raise {exc_type.__name__} in thread {thread_id}")


def nvrx_injector():
    """NVRx's own injector module (nvidia_resiliency_ext.shared_utils.inject_fault), None when it cannot be
    imported; imported only at a GPU fault's injection (it imports torch, which the workload already did)."""
    try:
        from nvidia_resiliency_ext.shared_utils import inject_fault
    except Exception as exc:  # any import failure: the GPU fault cannot be injected, said in one line
        log(f"NVRx's inject_fault cannot be imported ({type(exc).__name__}: {exc}); not injecting")
        return None
    return inject_fault


def gpu_present() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:
        return False


class Injector:
    """Once-only injection k of a run on the fault rank, triggered by the tracker advancing past its baseline
    (timing `checkpoint`), by the end of a checkpointing section with a save in flight (`in_save`), or by a
    phase of a save newer than the tracker seen on disk (SAVE_PHASES)."""

    def __init__(
        self,
        *,
        fault: str,
        placement: str,
        tracker: Path,
        marker: Path,
        baseline: int,
        identity: dict,
        watch: SectionWatch | None,
        kill=os.kill,
        poll_seconds: float | None = None,
        injection: int = 1,
        injections: int = 1,
        timing: str = "checkpoint",
        pid_dir: Path | None = None,
        arm_iteration: int | None = None,
        plan_index: int | None = None,
        damage: str | None = None,
        freeze_helper: bool = True,
    ) -> None:
        self.fault = fault
        self.freeze_helper = (
            freeze_helper  # a save-phase kill through FreezeHelper (off: the rank kills itself)
        )
        self.damage = damage  # a CHECKPOINT_DAMAGES kind made to the triggering checkpoint before the fault
        self.arm_iteration = arm_iteration  # a campaign's: armed once the tracker reaches it, not before
        self.plan_index = plan_index  # a campaign's entry this injection follows
        self.pid_dir = pid_dir  # node_loss: where pids/<host>.launcher.json is
        self.timing = timing
        if timing in IN_SAVE_TIMINGS:
            # in_save needs the section hooks (without them it never fires); a save phase is seen on disk
            self.placement = timing
        else:
            self.placement = placement if watch is not None else "immediate"
        self.tracker = tracker
        self.marker = marker
        self.baseline = baseline
        self.identity = identity  # run_id, rank, local_rank, host, cycle
        self.watch = watch
        self.kill = kill
        if poll_seconds is None:
            poll_seconds = PHASE_POLL_SECONDS if timing in SAVE_PHASES else POLL_SECONDS
        self.poll_seconds = poll_seconds
        self.injection = injection
        self.injections = injections
        self.lock = threading.Lock()
        self.armed_at: int | None = None  # the tracker value that triggered us
        self.save_iteration: int | None = None  # in_save and save phases: the iteration of the save in flight
        self.on_disk: dict | None = None  # a save phase: what iter_S held at the poll that saw the phase
        self.writers: list[dict] = []  # writer_stall: the processes writing iter_S at the poll that saw them
        self.finished = False  # injected, gave up, or the workload ended
        self.claimed = False  # this process created the marker
        self.stop = threading.Event()
        self.sentinel: SentinelLink | None = None  # told of the injection (stack dumps of a live rank)
        self.helper: FreezeHelper | None = None  # a save-phase kill's: stops the rank, then kills it
        self.missed = 0  # a save-phase kill's: phases that had passed once the rank was stopped
        if watch is not None:
            watch.on_start = self._on_section_start
            watch.on_end = self._on_section_end
            watch.on_closing = self._on_section_closing

    def record(self, section: str | None) -> dict:
        record = {
            "schema": MARKER_SCHEMA,
            "run_id": self.identity["run_id"],
            "fault": self.fault,
            "rank": self.identity["rank"],
            "local_rank": self.identity["local_rank"],
            "host": self.identity["host"],
            "pid": os.getpid(),
            "cycle": self.identity["cycle"],
            "baseline_iteration": self.baseline,
            "checkpoint_iteration": self.armed_at,
            "injected_at": utc_now(),
            "placement": self.placement,
            "section": section,
            "injection": self.injection,
            "injections": self.injections,
            "timing": self.timing,
        }
        if self.timing in IN_SAVE_TIMINGS:
            record["save_iteration"] = self.save_iteration
        if self.timing in SAVE_PHASES:
            record["on_disk"] = self.on_disk
        if self.plan_index is not None:
            record["plan_index"] = self.plan_index
            record["arm_iteration"] = self.arm_iteration
        return record

    def action(self) -> tuple[str, object] | None:
        """(how the fault is injected, as the marker's `method` says it; the call that injects it), prepared
        before the marker is claimed; None, with the reason logged, when it cannot be injected here.

        Ours (stdlib, in this process, at once) where NVRx's inject_fault does not suit the once-only
        contract: its injectors run after a delay on a thread or a forked process of their own, and its
        module imports torch. The signals and os.abort() are one call each; the segfault reads address 1
        through ctypes, as NVRx's segfault injector does. The GPU faults are NVRx's own functions, called
        with no delay on the thread that injects (raise_gpu_error, gpu_sleep)."""
        pid = os.getpid()
        training = threading.current_thread() is threading.main_thread()
        fault = self.fault
        signals = {
            "kill": signal.SIGKILL,
            "hang": signal.SIGSTOP,
            "node_loss": signal.SIGKILL,
            "sigterm": signal.SIGTERM,
            "sigint": signal.SIGINT,
        }
        if fault in signals:
            sig = signals[fault]
            method = f"os.kill(own pid, {sig.name})"
            if fault == "node_loss":
                method = (
                    "SIGSTOP of the node's ft_launcher, then SIGKILL of every process below it, of it, and "
                    + method
                )
            return method, lambda: self.kill(pid, sig)
        if fault == "segfault":
            import ctypes

            return "ctypes.string_at(1): a read of address 1 (SIGSEGV)", lambda: ctypes.string_at(1)
        if fault == "abort":
            return "os.abort() (SIGABRT)", os.abort
        if fault == "exception":
            if training:
                return "raise InjectedFault on the training thread", self._raise
            main = threading.main_thread().ident
            return "PyThreadState_SetAsyncExc(training thread, InjectedFault)", lambda: async_raise(
                main, InjectedFault
            )
        if fault == "gil_lock":
            if training:
                return (
                    "thread ftqual-gil-lock holds the GIL (libc sleep() through ctypes.PyDLL); the training "
                    "thread waits for it",
                    self._lock_gil,
                )
            return "libc sleep() through ctypes.PyDLL on the injector's thread (GIL held)", hold_gil_forever
        if fault == "disk_full":
            return "posix_fallocate of a filler file on the checkpoint filesystem (made before the marker)", (
                lambda: None
            )
        if fault == "writer_stall":
            pids = [w["pid"] for w in self.writers]
            return f"os.kill(writer pid(s) {pids}, SIGSTOP)", lambda: [
                self._signal(pid, signal.SIGSTOP) for pid in pids
            ]
        if fault in GPU_ONLY_FAULTS:
            if not gpu_present():
                log(f"fault {fault} needs a CUDA device and this process sees none; not injecting")
                return None
            nvrx = nvrx_injector()
            if nvrx is None:
                return None
            if fault == "gpu_error":
                method = "NVRx inject_fault.raise_gpu_error: an out-of-bounds index on the device"
                return method, lambda: nvrx.raise_gpu_error(0.0, None)
            torch = sys.modules["torch"]
            device = torch.cuda.current_device()
            method = "NVRx inject_fault.gpu_sleep: torch.cuda._sleep(1 << 62) on the current stream"
            return method, lambda: nvrx.gpu_sleep(0.0, device, None)
        log(f"no way to inject fault {fault!r}; not injecting")
        return None

    def _raise(self) -> None:
        raise InjectedFault(f"ftqual injected an exception on rank {self.identity['rank']}")

    def _lock_gil(self) -> None:
        ready = threading.Event()
        threading.Thread(target=hold_gil_forever, args=(ready,), name="ftqual-gil-lock", daemon=True).start()
        ready.wait()
        time.sleep(1.0)  # releases the GIL: the holder takes it, and this thread never runs again

    def inject(self, section: str | None) -> bool:
        """Claim the marker and signal ourselves; at most once, never after the workload ended."""
        with self.lock:
            if self.finished or self.armed_at is None:
                return False
            self.finished = True
        record = self.record(section)
        prepared = self.action()
        if prepared is None:
            return False
        record["method"], act = prepared
        node = None
        if self.fault == "node_loss":
            node = self.freeze_node()
            if node is None:
                return False
            record["node"] = node
        if self.damage is not None:
            damage = self.make_damage()
            if damage is None:
                return False  # never claimed: the wrapper's exit 3 says the fault never came
            record["damage"] = damage
        if self.fault in STORAGE_FAULTS:
            storage = self.make_storage_fault()
            if storage is None:
                return False
            record["storage"] = storage
        if not claim_marker(self.marker, record):
            log(f"marker {self.marker} already exists; not injecting")
            if node is not None:
                self._signal(node["launcher_pid"], signal.SIGCONT)
            if self.fault == "disk_full":
                (self.tracker.parent / FILLER_NAME).unlink(missing_ok=True)  # ours: the fault is not made
            return False
        self.claimed = True
        print(f"{INJECT_PREFIX} {json.dumps(record)}", file=sys.stderr, flush=True)
        if self.sentinel is not None:  # before the fault: a stopped rank tells nobody anything
            self.sentinel.send({"event": "injected", "fault": self.fault})
        if node is not None:
            # The node goes at once, as a lost node does: every process below its ft_launcher (workers,
            # their children, rank monitors), then ft_launcher itself, then this rank.
            for pid in node["processes"]:
                self._signal(pid, signal.SIGKILL)
            self._signal(node["launcher_pid"], signal.SIGKILL)
        act()
        return True

    def make_damage(self) -> dict | None:
        """Damage the checkpoint whose tracker armed this injection (--checkpoint-damage); its record, or
        None with the reason logged: a run whose damage was not made must not pass as one that met it."""
        if self.marker.exists():
            # another process claimed this injection: the checkpoint stays whole
            log(f"marker {self.marker} already exists; not damaging the checkpoint, not injecting")
            return None
        try:
            return damage_checkpoint(self.damage, self.tracker, self.armed_at)
        except (DamageError, OSError) as exc:
            log(
                f"checkpoint damage {self.damage} of iteration {self.armed_at} cannot be made: {exc}; "
                "not injecting"
            )
            return None

    def make_storage_fault(self) -> dict | None:
        """disk_full: the filler made now; writer_stall: the writers found by the poll. Its record (the
        marker's `storage`), or None with the reason logged: a fault not made must not pass as one met."""
        if self.fault == "writer_stall":
            return {"kind": "writer_stall", "iteration": self.save_iteration, "writers": self.writers}
        if self.marker.exists():
            log(f"marker {self.marker} already exists; not filling the filesystem, not injecting")
            return None
        try:
            return fill_filesystem(self.tracker.parent, self.armed_at)
        except (DamageError, OSError) as exc:
            log(f"disk_full after iteration {self.armed_at} cannot be made: {exc}; not injecting")
            return None

    def _signal(self, pid: int, sig: signal.Signals) -> None:
        try:
            self.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # already gone (or never ours to signal)

    def freeze_node(self) -> dict | None:
        """node_loss: stop this node's ft_launcher (SIGSTOP, so it cannot react or start replacements) and
        list every process below it; None, with the reason logged, when the launcher is not provably ours."""
        host = self.identity["host"]
        if (os.environ.get("NVRX_NODE_RANK") or os.environ.get("SLURM_NODEID")) == "0":
            # NVRx chose where this rank runs (with a spare node, any node may hold it): never the first
            # node, whose ft_launcher hosts the rendezvous store and log server every node needs.
            log(
                "node_loss: this rank runs on the first node, which hosts the rendezvous store; not injecting"
            )
            return None
        if self.pid_dir is None:
            log("node_loss needs --pid-dir (pids/<host>.launcher.json names the node's ft_launcher)")
            return None
        launcher = read_launcher_record(self.pid_dir, host)
        if launcher is None:
            log(f"node_loss: no readable {self.pid_dir}/{host}.launcher.json; not injecting")
            return None
        pid = launcher["pid"]
        if not is_alive(pid, launcher["start_time"]) or not is_ancestor(pid, os.getpid(), parent_pids()):
            log(f"node_loss: the recorded ft_launcher (pid {pid}) is not this worker's live ancestor")
            return None
        self._signal(pid, signal.SIGSTOP)
        own = os.getpid()
        processes = [p for p in descendants_of(pid, parent_pids()) if p != own]
        return {"host": host, "launcher_pid": pid, "processes": processes}

    def on_tracker(self, value: int | None) -> bool:
        """One poll result; True once armed (the poller can stop). Timing in_save arms at a section's end,
        placement setup at the setup section's close."""
        if self.placement == "setup":
            return True
        if self.timing != "checkpoint" or value is None or value <= self.baseline:
            return False
        if self.arm_iteration is not None and value < self.arm_iteration:
            return False
        with self.lock:
            if self.armed_at is None:
                self.armed_at = value
        if self.placement == "immediate":
            self.inject(self.watch.current() if self.watch else None)
        # else: the next start_section("step") injects, on the training thread itself (see
        # _on_section_start). Injecting from this poller thread while a step is open would race: claiming
        # and fsyncing the marker takes tens of milliseconds on a shared filesystem, longer than a whole
        # step of a small model on a GPU, so the signal would land wherever training had moved on to
        # (seen on an H200: decided inside 'step', stopped inside 'checkpointing', detected after 300 s).
        return True

    def _on_section_start(self, name: str) -> None:
        if self.timing != "checkpoint" or SECTION_OF_PLACEMENT.get(self.placement) != name:
            return
        if self.armed_at is None:
            # The training thread reads the tracker itself at every step: on a GPU a whole save interval
            # can pass between two polls (seen on 2 x H200 resuming at 30: saves at 35 and 40 finalized
            # within 0.7 s, the poller never armed, and the run ended without its fault).
            self.on_tracker(poll_tracker(self.tracker))
        if self.armed_at is not None:
            self.inject(name)

    def _on_section_closing(self, name: str) -> None:
        """placement setup: the workload closes its setup section (the checkpoint loaded); stop it there,
        before the monitor knows, when this cycle started from a completed checkpoint."""
        if name != "setup" or self.placement != "setup" or self.timing != "checkpoint":
            return
        if self.baseline < 1:
            log("placement setup: this cycle started from no checkpoint (tracker 0); not injecting")
            return
        with self.lock:
            if self.armed_at is None:
                self.armed_at = self.baseline  # the checkpoint this replacement loaded
        self.inject("setup")

    def _on_section_end(self, name: str) -> None:
        """in_save: a checkpointing section ended with a save newer than the tracker still in flight;
        placement out_of_section: a step's section ended (the monitor knows), and no section is open."""
        if name == "step" and self.placement == "out_of_section" and self.timing == "checkpoint":
            if self.armed_at is None:
                self.on_tracker(poll_tracker(self.tracker))
            if self.armed_at is not None and self.watch is not None and self.watch.current() is None:
                self.inject(None)
            return
        if name != "checkpointing" or self.timing != "in_save":
            return
        value = poll_tracker(self.tracker)
        if value is None or value <= self.baseline:
            return
        newest = newest_checkpoint_iteration(self.tracker.parent)
        if newest is None or newest <= value:
            return  # no save in flight: this section finalized one (or saved nothing new)
        with self.lock:
            if self.finished:
                return
            self.armed_at, self.save_iteration = value, newest
        self.inject("checkpointing")

    def poll_forever(self) -> None:
        while not self.stop.is_set():
            if self.on_tracker(poll_tracker(self.tracker)):
                return
            self.stop.wait(self.poll_seconds)

    def on_phase_poll(self, phases: PhaseWatch) -> bool:
        """One poll of a save phase; True once injected or given up (the poller can stop). Armed only once
        the tracker is past the baseline (a checkpoint completed in this cycle: the replacement has one to
        resume from) and a save S newer than it shows the phase on disk."""
        value = poll_tracker(self.tracker)
        if value is None or value <= self.baseline:
            return False
        if self.arm_iteration is not None and value < self.arm_iteration:
            return False
        watched = self.helper is not None and self.timing == WATCHED_PHASE
        seen = phases.in_flight(value) if watched else phases.look(value)
        if seen is None:
            return False
        writers = []
        if self.fault == "writer_stall":
            writers = writers_of(self.tracker.parent / iteration_dir_name(seen[0]))
            if not writers:
                return False  # the rank writes itself, or its writer holds no file now: look again
        with self.lock:
            if self.finished:
                return True
            self.armed_at, self.save_iteration = value, seen[0]
            self.on_disk = seen[1].record()
            self.writers = writers
        if self.helper is not None:
            return self.inject_frozen(phases, seen)
        # From this thread, at once: the phase lasts milliseconds, while the training thread may be inside
        # the save's own calls (a sync save) with no section boundary to wait for.
        self.inject(self.watch.current() if self.watch else None)
        return True

    def inject_frozen(self, phases: PhaseWatch, seen: tuple[int, SaveOnDisk]) -> bool:
        """A save-phase kill through the helper (FreezeHelper): True when this poller is done (the marker
        was taken, or the helper is gone), False when the phase had passed once the rank was stopped, or a
        watched save was finalized unseen (the rank went on: poll again). When the helper kills the rank,
        this never returns. The answer is awaited without the lock: a watch lasts as long as the save, and
        finish() closes the requests instead, which the helper checks before it kills."""
        with self.lock:
            if self.finished:
                return True
            names, total = seen[1].signature()
            request = {
                "record": self.record(self.watch.current() if self.watch else None),
                "marker": str(self.marker),
                "checkpoint_dir": str(self.tracker.parent),
                "phase": self.timing,
                "save_iteration": seen[0],
                "signature": [list(names), total],
                "stable": phases.stable,
                "reference": phases.reference_shards(self.armed_at),
                "polled_on_disk": self.on_disk,
                "missed_before": self.missed,
                "watch": self.timing == WATCHED_PHASE,
            }
        try:
            answer = self.helper.ask(request)
        except (OSError, ValueError) as exc:
            if not self.stop.is_set():  # else the workload ended and closed the helper's requests
                log(f"{exc}; not injecting")
            with self.lock:
                self.finished = True
            return True
        with self.lock:
            if answer.get("result") == "missed":
                self.missed += 1
                log(f"{self.timing} of the save of {seen[0]} was missed ({answer.get('why')}); polling on")
                return False
            if answer.get("result") == "taken":
                log(f"marker {self.marker} already exists; not injecting")
            else:
                log(f"the freeze helper could not inject ({answer.get('why')}); not injecting")
            self.finished = True
            return True

    def poll_phases(self) -> None:
        phases = PhaseWatch(self.timing, self.tracker.parent)
        while not self.stop.is_set():
            if self.on_phase_poll(phases):
                return
            self.stop.wait(self.poll_seconds)

    def start(self) -> threading.Thread | None:
        """Start the poller: the tracker's (timing checkpoint) or the save phases' (its own, polling every
        PHASE_POLL_SECONDS); in_save and placement setup need none."""
        if self.timing in SAVE_PHASES:
            target = self.poll_phases
            if self.fault == "kill" and self.freeze_helper:
                try:
                    self.helper = FreezeHelper()
                except OSError as exc:  # the kill is then made by this rank itself, as for other timings
                    log(f"the freeze helper cannot be started ({exc}): the rank kills itself on the phase")
        elif self.timing != "checkpoint" or self.placement == "setup":
            return None
        else:
            target = self.poll_forever
        thread = threading.Thread(target=target, name="ftqual-injector", daemon=True)
        thread.start()
        return thread

    def finish(self) -> None:
        """The workload ended: never inject from now on."""
        self.stop.set()
        with self.lock:
            self.finished = True
        if self.helper is not None:
            self.helper.close()


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        own, workload = argv[:cut], argv[cut + 1 :]
    else:
        own, workload = argv, []
    parser = argparse.ArgumentParser(prog="megatron_gpt_worker.py", description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--entrypoint", type=Path, help="the training script to run (e.g. pretrain_gpt.py)")
    where.add_argument("--megatron-path", type=Path, help="a Megatron-LM checkout: runs its pretrain_gpt.py")
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    parser.add_argument("--fault-marker", type=Path, required=True)
    parser.add_argument("--fault", choices=FAULTS, required=True)
    parser.add_argument("--fault-rank", type=int, default=None)
    parser.add_argument("--run-id", default=None, help="default: TORCHELASTIC_RUN_ID")
    parser.add_argument("--hang-placement", choices=PLACEMENTS, default="step")
    parser.add_argument("--pid-dir", type=Path, default=None)
    parser.add_argument("--injections", type=positive_int, default=1, help="faults in the run, one per cycle")
    parser.add_argument("--fault-timing", choices=TIMINGS, default="checkpoint")
    parser.add_argument("--leftovers-dir", type=Path, default=None)
    parser.add_argument(
        "--checkpoint-damage",
        choices=("none", *CHECKPOINT_DAMAGES),
        default="none",
        help="with --fault kill: damage the checkpoint that armed the fault before the kill",
    )
    parser.add_argument("--campaign-plan", type=Path, default=None, help="with --fault campaign: the plan")
    parser.add_argument("--dump-dir", type=Path, default=None, help="stack dumps of this rank (its sentinel)")
    parser.add_argument("--dump-tool", default=None, help="py-spy's path; without it, faulthandler only")
    parser.add_argument(
        "--dump-timeouts", type=json.loads, default={}, help="JSON {section: s, out_of_section: s}"
    )
    args = parser.parse_args(own)
    if args.megatron_path is not None:
        args.entrypoint = args.megatron_path / "pretrain_gpt.py"
    if args.fault == "campaign" and args.campaign_plan is None:
        parser.error("--fault campaign needs --campaign-plan")
    if args.fault not in ("none", "campaign") and args.fault_rank is None:
        parser.error(f"--fault-rank is required with --fault {args.fault}")
    stall = args.fault == "writer_stall" and args.fault_timing in SAVE_PHASES
    if args.fault_timing in IN_SAVE_TIMINGS and args.fault not in ("kill", "none") and not stall:
        parser.error(f"--fault-timing {args.fault_timing} needs --fault kill")
    if args.fault == "writer_stall" and args.fault_timing not in SAVE_PHASES:
        parser.error("--fault writer_stall needs a save phase as --fault-timing")
    if args.checkpoint_damage != "none" and args.fault != "kill":
        parser.error("--checkpoint-damage needs --fault kill")
    if args.checkpoint_damage != "none" and args.fault_timing != "checkpoint":
        parser.error("--checkpoint-damage needs --fault-timing checkpoint")
    if args.fault in GPU_ONLY_FAULTS and args.entrypoint.name == SMOKE_ENTRYPOINT:
        parser.error(f"--fault {args.fault} is GPU-only: the smoke workload runs on CPU and has no GPU")
    return args, workload


def positive_int(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {text!r})")
    return int(text)


def run_entrypoint(entrypoint: Path, workload_args: list[str]) -> int:
    """Run the workload as `__main__` in this process; returns its exit status."""
    sys.argv = [str(entrypoint), *workload_args]
    sys.path[0] = str(entrypoint.parent)  # what `python entrypoint` would put there
    try:
        runpy.run_path(str(entrypoint), run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    args, workload_args = parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cycle = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    host = socket.gethostname()
    if args.pid_dir is not None:
        write_pid_record(args.pid_dir, host, cycle, rank, local_rank)
    if cycle >= 1 and local_rank == 0 and args.pid_dir is not None and args.leftovers_dir is not None:
        try:
            path = write_leftovers(args.leftovers_dir, args.pid_dir, host, cycle)
            log(f"leftovers of earlier cycles on {host} recorded in {path}")
        except OSError as exc:  # evidence, not a reason to stop training: the verifier reports it missing
            log(f"cannot record leftovers of earlier cycles: {exc}")

    tracker = args.checkpoint_dir / TRACKER_NAME
    try:
        baseline = read_tracker_baseline(tracker)
    except TrackerError as exc:
        damage = marker_damage(args.fault_marker)
        if damage is None:
            log(f"{exc}; refusing to start the workload (fix or archive the tracker)")
            return EXIT_BAD_TRACKER
        # This run broke the tracker on purpose: what the workload (Megatron) does with it is under test.
        log(
            f"the tracker was damaged by this run's injection ({damage['kind']}); "
            "the workload meets it as it is"
        )
        baseline = 0

    sentinel = None
    if args.dump_dir is not None:
        sentinel = start_sentinel(args.dump_dir, args.dump_tool, args.dump_timeouts, host, cycle, rank)
    injector = None
    fault, fault_rank, placement, entry = args.fault, args.fault_rank, args.hang_placement, None
    if fault == "campaign":
        try:
            planned = read_campaign_plan(args.campaign_plan)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log(f"cannot read the campaign plan {args.campaign_plan}: {exc}; refusing to start the workload")
            return EXIT_BAD_PLAN
        args.injections = len(planned)
        made = count_markers(args.fault_marker)
        entry = planned[made] if made < len(planned) else None
        if entry is not None:  # this cycle's fault is the plan's next entry
            fault, fault_rank, placement = entry["fault"], entry["rank"], entry["placement"]
    fault_here = fault != "none" and rank == fault_rank
    made = count_markers(args.fault_marker) if fault_here else 0
    if fault_here and made >= args.injections:
        log(
            f"{made} of {args.injections} injection marker(s) exist (earlier cycles injected); "
            "not injecting again"
        )
        fault_here = False
    watch = SectionWatch() if fault_here or sentinel is not None else None
    hooked = False
    if watch is not None:
        watch.sentinel = sentinel
        hooked = install_section_hooks(watch)
    if fault_here:
        injection = made + 1
        if placement == "setup" and injection == 1:
            placement = "step"  # a replacement's setup needs an earlier fault: the first lands in a step
        if not hooked:
            if args.fault_timing == "in_save":
                log("NVRx is not importable here: sections are unknown, an in_save injection cannot happen")
            elif args.fault_timing in SAVE_PHASES:
                log(f"NVRx is not importable here: no sections known; {args.fault_timing} watches the disk")
            else:
                log(
                    "NVRx is not importable here: sections are unknown, "
                    "injecting as soon as the tracker advances"
                )
            watch = None
        injector = Injector(
            fault=fault,
            placement=placement,
            tracker=tracker,
            marker=marker_path(args.fault_marker, injection),
            baseline=baseline,
            identity={
                "run_id": args.run_id or os.environ.get("TORCHELASTIC_RUN_ID", ""),
                "rank": rank,
                "local_rank": local_rank,
                "host": host,
                "cycle": cycle,
            },
            watch=watch,
            injection=injection,
            injections=args.injections,
            timing=args.fault_timing,
            pid_dir=args.pid_dir,
            arm_iteration=entry["arm_iteration"] if entry else None,
            plan_index=entry["index"] if entry else None,
            damage=None if args.checkpoint_damage == "none" else args.checkpoint_damage,
        )
        injector.sentinel = sentinel
        log(
            f"fault {fault} injection {injection} of {args.injections} armed on rank {rank} "
            f"(cycle {cycle}): waiting for the tracker to pass {baseline}, timing {args.fault_timing}, "
            f"placement {injector.placement}"
            + (f", checkpoint damage {injector.damage}" if injector.damage else "")
        )
        injector.start()

    status = run_entrypoint(args.entrypoint, workload_args)
    if injector is not None:
        injector.finish()
        if status == 0 and not injector.claimed:
            log(
                f"the requested {fault} fault (injection {injector.injection} of {args.injections}) "
                f"was never injected (tracker stayed at or below {baseline} while a step could follow, or "
                "no save was in flight at a checkpointing section's end, or no save newer than the tracker "
                "showed the save phase on disk); failing so an uninterrupted "
                "run cannot pass as recovery"
            )
            return EXIT_FAULT_NEVER_INJECTED
    return status


if __name__ == "__main__":
    if sys.argv[1:2] == [FREEZE_HELPER_ARG]:
        sys.exit(freeze_helper(int(sys.argv[2]), sys.stdin, sys.stdout, wakeups=prompt_wakeups))
    sys.exit(main(sys.argv[1:]))
