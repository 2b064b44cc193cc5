"""The storage faults a rank makes: disk_full's filler and writer_stall's writers.

Storage faults (the rank lives on; the kinds are ftqual/contract.py's STORAGE_FAULTS). `disk_full` (timing
`checkpoint`): once the tracker passed the baseline (checkpoint C complete), the fault rank fills the
checkpoint directory's filesystem (the size-capped mount the launcher made for the run) with FILLER_NAME,
allocated until FILLER_HEADROOM of C's bytes stay free, so the next save runs out of space midway; the
marker's `storage` has the filesystem's size and free bytes before and after, the filler's bytes and C's.
`writer_stall` (timing save_shards_partial or save_shards_complete): at that phase of a save S, the processes
below this rank that hold a file of iter_S open (the persistent checkpoint worker or its writers; never the
rank itself, whose own writes are a synchronous save or a thread) are SIGSTOPped once the marker is claimed;
`storage.writers` lists them (pid, command, the files held). No writer process seen: the poll goes on."""

from __future__ import annotations

import os
from pathlib import Path

from ftqual.rank.damage import DamageError
from ftqual.rank.markers import fsync_path, utc_now
from ftqual.rank.procfs import command_of, descendants_of, open_files_under, parent_pids
from ftqual.rank.tracker import iteration_dir_name

# disk_full's file on the checkpoint filesystem (hidden: never taken for a checkpoint), and the share of the
# completed checkpoint's bytes it leaves free: the next save starts and runs out of space midway.
FILLER_NAME = ".ftqual-filler"
FILLER_HEADROOM = 0.5


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
