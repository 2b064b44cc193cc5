"""Fault disk_full's size-capped ext4 filesystem, mounted at the run's checkpoint directory for the run.

The size-capped filesystem of fault disk_full: an ext4 filesystem on a loop device over a sparse file,
mounted at the run's checkpoint directory for the run, then unmounted with its contents kept.

The fault rank fills it (workloads/megatron_gpt_worker.py) so that the next save runs out of space; a real
filesystem of the run's own keeps the test off the shared storage, which we must never fill. Mounting needs
root (CAP_SYS_ADMIN), mkfs.ext4 and a loop device: without them the launch is refused in one line before
anything starts. After the run the tree is copied back into the (now plain) checkpoint directory, the filler
as an empty file (its size is in the marker: it held zeros of ours, no evidence), and the image is removed
only once the copy is complete; a failed copy keeps the image and says where it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ftqual.rank.storage import FILLER_NAME

IMAGE_NAME = "checkpoints.ext4"
COMMAND_TIMEOUT_S = 120


class StorageError(Exception):
    """The capped filesystem cannot be made or kept; the message is one line."""


@dataclass
class CappedMount:
    mount_point: Path
    image: Path
    cap_bytes: int

    def record(self) -> dict:
        """run.json's `storage` (the unmount adds what it kept)."""
        return {
            "filesystem": "ext4 on a loop device",
            "cap_bytes": self.cap_bytes,
            "mount_point": str(self.mount_point),
            "image": str(self.image),
        }


def _run(argv: list[str]) -> str | None:
    """None when `argv` succeeded, else its error in one line."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]}: {exc}"
    if done.returncode == 0:
        return None
    said = " ".join((done.stderr or done.stdout).split())[:300]
    return f"{' '.join(argv[:2])} exited {done.returncode}: {said or 'no message'}"


def cannot_mount(geteuid=None, which=None) -> str | None:
    """Why this machine cannot make the capped filesystem (checked before any directory is made), or None."""
    geteuid, which = geteuid or os.geteuid, which or shutil.which  # looked up now: tests replace them
    if geteuid() != 0:
        return (
            "fault disk_full mounts a size-capped filesystem at the run's checkpoint directory and needs "
            "root (CAP_SYS_ADMIN); run this scenario as root, or leave it out"
        )
    if which("mkfs.ext4") is None or which("mount") is None:
        return "fault disk_full needs mkfs.ext4 (e2fsprogs) and mount to make its size-capped filesystem"
    return None


def mount_capped(mount_point: Path, image_dir: Path, cap_mb: int) -> CappedMount:
    """Make a sparse `cap_mb` MiB ext4 image in `image_dir` and mount it at `mount_point` (an empty
    directory). StorageError, with nothing left behind, when it cannot."""
    problem = cannot_mount()
    if problem is not None:
        raise StorageError(problem)
    if any(mount_point.iterdir()):
        raise StorageError(f"fault disk_full needs an empty checkpoint directory to mount on: {mount_point}")
    image = image_dir / IMAGE_NAME
    if image.exists():
        raise StorageError(f"{image} already exists: an earlier mount's image, kept as evidence; archive it")
    cap = cap_mb * 1024 * 1024
    try:
        with open(image, "xb") as fh:
            fh.truncate(cap)
    except OSError as exc:
        raise StorageError(f"cannot create {image}: {exc.strerror or exc}") from exc
    problem = _run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)]) or _run(
        ["mount", "-o", "loop", str(image), str(mount_point)]
    )
    if problem is not None:
        image.unlink(missing_ok=True)  # ours, empty: nothing of the run is in it yet
        raise StorageError(f"fault disk_full cannot mount a capped filesystem at {mount_point}: {problem}")
    # ext4's lost+found would be the only entry a reader does not expect in a checkpoint directory
    shutil.rmtree(mount_point / "lost+found", ignore_errors=True)
    os.chmod(mount_point, 0o777)  # the ranks may run as another user than the launcher
    return CappedMount(mount_point=mount_point, image=image, cap_bytes=cap)


def _copy(source: Path, target: Path) -> tuple[int, int]:
    """Copy the tree `source` into the directory `target`, FILLER_NAME as an empty file; (files, bytes)."""
    files = size = 0
    for root, dirs, names in os.walk(source):
        rel = Path(root).relative_to(source)
        (target / rel).mkdir(parents=True, exist_ok=True)
        for d in dirs:
            (target / rel / d).mkdir(exist_ok=True)
        for name in names:
            src, dst = Path(root) / name, target / rel / name
            if rel == Path(".") and name == FILLER_NAME:
                dst.touch()
            else:
                shutil.copy2(src, dst, follow_symlinks=False)
                size += dst.lstat().st_size
            files += 1
    return files, size


def unmount_keeping(mount: CappedMount, staging: Path) -> dict:
    """Copy the mount's tree to `staging`, unmount, move it into the mount point (now a plain directory) and
    remove the image; run.json's `storage` with what was kept. Never raises: a step that fails leaves the
    evidence where it is (the image, or the staging copy) and says so in `problem`."""
    record = mount.record()
    try:
        files, size = _copy(mount.mount_point, staging)
    except OSError as exc:
        problem = _run(["umount", str(mount.mount_point)])
        record["problem"] = (
            f"copying the checkpoints out failed ({exc}); the image {mount.image} keeps them"
            + (f"; unmount failed too: {problem}" if problem else "")
        )
        return record
    record.update(copied_files=files, copied_bytes=size)
    problem = _run(["umount", str(mount.mount_point)])
    if problem is not None:
        record["problem"] = f"unmount failed ({problem}); the copy is in {staging}"
        return record
    try:
        for entry in staging.iterdir():
            os.rename(entry, mount.mount_point / entry.name)
        staging.rmdir()
    except OSError as exc:
        record["problem"] = f"moving the copy back failed ({exc}); what is left of it is in {staging}"
        return record
    mount.image.unlink()
    record["image_removed"] = True
    return record
