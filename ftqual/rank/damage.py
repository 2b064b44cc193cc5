"""The checkpoint damages a dying fault rank makes (`damage_checkpoint`) and their records.

Checkpoint damage (--checkpoint-damage, kill with timing `checkpoint` only; the kinds are
ftqual/contract.py's CHECKPOINT_DAMAGES): what a replacement meets when the dying rank left its checkpoint
broken. Once the fault is prepared and before the marker is claimed, the fault rank damages the checkpoint
whose tracker armed the injection (iteration X): `tracker_not_a_number` overwrites the tracker in place
with NUL bytes of its length (a write cut short by a crash), `tracker_missing_iteration` renames iter_X to
iter_X + DAMAGE_SUFFIX (the tracker still names X), `tracker_removed` renames the tracker to its name +
DAMAGE_SUFFIX, `shard_truncated` cuts the largest *.distcp shard of iter_X to half its size,
`shard_corrupted` inverts (XOR 0xFF) CORRUPT_BYTES in the middle of that shard, its size kept (bytes a disk
or a copy changed; the same XOR restores them); each fsynced, nothing deleted. The marker's `damage`
records it (kind, iteration, path and moved_to relative to the checkpoint directory, size_before,
size_after, tracker_before, tracker_after escaped, at; shard_corrupted adds offset, length and xor). A
damage that cannot be made (no shard, a rename that fails, the tracker no longer naming X) is logged and
the fault is not injected, so the run fails with exit 3. A replacement refuses an untrustworthy tracker
(exit 2) unless the run's first marker records a damage: then the workload meets the tracker as it is (the
question under test), with baseline 0."""

from __future__ import annotations

import mmap
import os
import re
import struct
from pathlib import Path

from ftqual.rank.markers import fsync_path, log, utc_now
from ftqual.rank.tracker import iteration_dir_name, poll_tracker, tracker_text

# The damages that break the named iteration's own files: the tracker must still name it when they are made
# (else no replacement meets them), and a replacement that loads that iteration loads a broken checkpoint.
DAMAGES_TO_FILES = ("tracker_missing_iteration", "shard_truncated", "shard_corrupted")
DAMAGE_SUFFIX = ".ftqual-moved"  # what a moved-aside tracker or directory is renamed to (its name + this)

# shard_corrupted: a sector's worth and more of bytes inverted, so a float of the model or the optimizer
# changes wherever the middle of the shard falls; the XOR is its own undo
CORRUPT_BYTES = 4096


CORRUPT_XOR = 0xFF


# A torch_dist shard is a run of torch.save archives (zip, stored): the raw bytes of each tensor are a record
# named <archive>/data/<n>. Its local header: signature, then 22 bytes, then name and extra-field lengths.
ZIP_LOCAL_HEADER = b"PK\x03\x04"


ZIP_LOCAL_HEADER_SIZE = 30


class DamageError(Exception):
    """The checkpoint damage asked for cannot be made here (nothing to damage, a rename that fails)."""


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


def make_damage(marker: Path, kind: str, tracker: Path, iteration: int) -> dict | None:
    """Damage the checkpoint of `iteration` (whose tracker armed the injection) before `marker` is claimed;
    its record, or None with the reason logged: a run whose damage was not made must not pass as one that
    met it."""
    if marker.exists():
        # another process claimed this injection: the checkpoint stays whole
        log(f"marker {marker} already exists; not damaging the checkpoint, not injecting")
        return None
    try:
        return damage_checkpoint(kind, tracker, iteration)
    except (DamageError, OSError) as exc:
        log(f"checkpoint damage {kind} of iteration {iteration} cannot be made: {exc}; not injecting")
        return None
