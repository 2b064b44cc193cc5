"""The storage floor: the best sequential write and read rate of the directory checkpoints will go to.

A save cannot be faster than the storage writes, nor a load faster than it reads, so the checkpoint and
restart account (ftqual/verification/checkpoint_account.py) and the report set each save's and load's GB/s
against these figures. Measured once per preflight: large sequential files written in 8 MiB blocks and
fsync'd (the write time includes the fsync, as a checkpoint is durable only then), then read back with the
page cache bypassed: O_DIRECT where the filesystem allows it (`method` "o_direct"), else the file's cached
pages dropped with posix_fadvise(DONTNEED) after the fsync ("fadvise_dontneed"; on a memory filesystem such
as tmpfs nothing can be dropped, and the read rate is the memory's). The probe files are deleted whatever
happens.

The bytes are random (one block of os.urandom repeated): a compressing filesystem cannot shortcut them,
a deduplicating one could, which a `filesystem` of zfs or btrfs with dedup on would show as a write rate
above the device's.
"""

from __future__ import annotations

import mmap
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

MIB = 2**20
BLOCK = 8 * MIB  # one write or read call
FILE_MAX = 512 * MIB  # the probe's bytes, split into files of at most this size
RANDOM_BLOCK = 64 * MIB  # random bytes made once, written over and over
FREE_SHARE = 4  # never take more than a quarter of the free space
MEGATRON_DEFAULT_MB = 1024
SMOKE_MIN_MB = 16
PROBE_DIR_PREFIX = ".ftqual-storage-probe-"


@dataclass(frozen=True)
class StorageFloor:
    """preflight.json's `storage`: what one measurement found (rates in GB/s, 10^9 bytes per second)."""

    path: str
    filesystem: str | None
    bytes: int
    write_gbps: float | None
    read_gbps: float | None
    write_s: float | None
    read_s: float | None
    method: str  # "o_direct" | "fadvise_dontneed" | "skipped" | "failed"
    error: str = ""  # why it was skipped or failed, one line
    # The filesystem measured (ftqual/preflight/mounts.py): its mount point and source, and the bytes free
    # to this user before the probe (statvfs f_bavail); null where unknown or nothing was measured.
    mount_point: str | None = None
    device: str | None = None
    free_bytes: int | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        if not self.error:
            del out["error"]
        return out


def probe_megabytes(setting: int | str, workload: str, payload_mb: int) -> int:
    """How many MiB to write: the config's number, or for `auto` 1 GiB (megatron) or twice the largest
    smoke checkpoint payload (at least SMOKE_MIN_MB), so the probe is about a save's size."""
    if setting != "auto":
        return int(setting)
    if workload == "megatron":
        return MEGATRON_DEFAULT_MB
    return max(SMOKE_MIN_MB, 2 * payload_mb)


def checkpoint_root(checkpoint_dir: str, work_dir: str) -> str:
    """Where the runs' checkpoints go: config `checkpoint_dir` (a root on the team's storage, each run below
    it) when set, else the work dir's runs/ area, where each run keeps its checkpoints/."""
    if checkpoint_dir:
        return os.path.abspath(os.path.expanduser(checkpoint_dir))
    return os.path.join(work_dir, "runs")


def _gbps(nbytes: int, seconds: float) -> float | None:
    return round(nbytes / seconds / 1e9, 3) if seconds > 0 else None


def _sizes(total: int) -> list[int]:
    """The probe files' sizes: FILE_MAX each and the rest, each a whole number of blocks' worth of bytes."""
    sizes = []
    while total > 0:
        sizes.append(min(total, FILE_MAX))
        total -= sizes[-1]
    return sizes


def _write(path: Path, size: int, block: bytes) -> None:
    with open(path, "wb", buffering=0) as fh:
        done = 0
        view = memoryview(block)
        while done < size:
            n = min(BLOCK, size - done)
            start = done % len(block)
            if start + n > len(block):
                start = 0
            fh.write(view[start : start + n])
            done += n
        os.fsync(fh.fileno())


def _drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _open_direct(path: Path) -> int | None:
    """A descriptor reading `path` past the page cache, or None where the filesystem refuses O_DIRECT."""
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return None
    try:
        return os.open(path, os.O_RDONLY | flag)
    except OSError:
        return None


def _read_all(fd: int, buffer: mmap.mmap) -> int:
    """Read `fd` to its end into the page-aligned `buffer` (O_DIRECT needs aligned memory)."""
    total = 0
    while True:
        n = os.readv(fd, [buffer])
        if n <= 0:
            return total
        total += n


def _read(paths: list[Path]) -> tuple[float, str]:
    """Seconds to read every file back uncached, and how the cache was kept out: O_DIRECT when every file
    opens and reads that way, else the cached pages dropped first."""
    buffer = mmap.mmap(-1, BLOCK)
    try:
        started = time.perf_counter()
        for path in paths:
            fd = _open_direct(path)
            if fd is None:
                break
            try:
                _read_all(fd, buffer)
            except OSError:  # O_DIRECT opened but the read was refused (EINVAL on some filesystems)
                break
            finally:
                os.close(fd)
        else:
            return time.perf_counter() - started, "o_direct"
    finally:
        buffer.close()
    return _read_fadvise(paths)


def _read_fadvise(paths: list[Path]) -> tuple[float, str]:
    for path in paths:
        _drop_cache(path)
    buffer = mmap.mmap(-1, BLOCK)
    try:
        started = time.perf_counter()
        for path in paths:
            fd = os.open(path, os.O_RDONLY)
            try:
                _read_all(fd, buffer)
            finally:
                os.close(fd)
        return time.perf_counter() - started, "fadvise_dontneed"
    finally:
        buffer.close()


def measure(
    directory: str | Path,
    megabytes: int,
    filesystem: str | None = None,
    mount_point: str | None = None,
    device: str | None = None,
) -> StorageFloor:
    """Write `megabytes` MiB (capped by a quarter of the free space) of probe files in a folder of their own
    in the existing `directory`, fsync'd, read them back uncached, delete them (the folder too: nothing is
    left). `filesystem`, `mount_point` and `device` name the mount holding `directory`, for the record.
    Never raises: a failure is the record's `method` "failed"."""
    directory = Path(directory)
    shown = str(directory)
    try:
        free: int | None = shutil.disk_usage(directory).free
        usage_error = None
    except OSError as exc:
        free, usage_error = None, exc
    fs_place = {"mount_point": mount_point, "device": device, "free_bytes": free}
    if megabytes <= 0:
        return StorageFloor(
            shown, filesystem, 0, None, None, None, None, "skipped", "storage_probe_mb is 0", **fs_place
        )
    if usage_error is not None or free is None:
        why = _why(usage_error) if usage_error else "free space unknown"
        return StorageFloor(shown, filesystem, 0, None, None, None, None, "failed", why, **fs_place)
    size = min(megabytes * MIB, (free // FREE_SHARE) // BLOCK * BLOCK)
    if size < BLOCK:
        why = f"only {free // MIB} MiB free: too little to measure"
        return StorageFloor(shown, filesystem, 0, None, None, None, None, "skipped", why, **fs_place)
    probe = directory / f"{PROBE_DIR_PREFIX}{os.getpid()}"
    try:
        probe.mkdir()
        block = os.urandom(min(RANDOM_BLOCK, size))
        paths = [probe / f"probe_{n}.bin" for n in range(len(_sizes(size)))]
        started = time.perf_counter()
        for path, part in zip(paths, _sizes(size), strict=True):
            _write(path, part, block)
        write_s = time.perf_counter() - started
        del block
        read_s, method = _read(paths)
    except OSError as exc:
        return StorageFloor(shown, filesystem, size, None, None, None, None, "failed", _why(exc), **fs_place)
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return StorageFloor(
        path=shown,
        filesystem=filesystem,
        bytes=size,
        write_gbps=_gbps(size, write_s),
        read_gbps=_gbps(size, read_s),
        write_s=round(write_s, 3),
        read_s=round(read_s, 3),
        method=method,
        **fs_place,
    )


def _why(exc: OSError) -> str:
    return f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
