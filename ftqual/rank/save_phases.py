"""A save's phase as the disk shows it (`SaveOnDisk`, `phase_reached`, `PhaseWatch`).

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
are not needed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from ftqual.rank.ids import SAVE_PHASES
from ftqual.rank.tracker import iteration_dir_name, newest_checkpoint_iteration

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
