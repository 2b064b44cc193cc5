"""The checkpoint directory: tracker file, `iter_XXXXXXX` folders, and a stray `ft_state.json`.

The tracker (`latest_checkpointed_iteration.txt`) is truncated then written by Megatron, so an empty file
means "unknown", not zero. A torch_dist checkpoint folder is complete when its `.metadata` (written by the
finalize step) is a non-empty regular file; `metadata.json` follows. A name alone proves nothing: an empty
`.metadata`, a directory of that name, a dangling link or a link leaving the run directory is "not
finalized". Payload files (`*.distcp`, `*.pt`) may have been trimmed from copies, or dropped after
verification (`ftqual.launch.payloads`): the folder's payload then counts the files its
`payloads_dropped.json` lists, never `.metadata` or `metadata.json`, which a manifest cannot stand in for.

A folder's `bytes` (the checkpoint and restart account's size of a save) is the sum of its regular files'
sizes, where `checkpoints/payloads_dropped.json` ({"files": [{"path", "bytes"}]}, written when a verified
run's payloads are dropped) gives the size of each file it lists instead; a complete folder with no payload
file that the manifest does not account for was trimmed, and its bytes are unknown (None), never the few
KiB of metadata left.

The checkpoint directory is relative to the run directory, or an absolute path run.json names; links below
it must stay inside the run directory or that named directory.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ftqual.contract import DAMAGE_SUFFIX
from ftqual.launch.payloads import listed_files, read_manifest
from ftqual.verification.evidence.model import Ref, SourceStatus, missing
from ftqual.verification.evidence.safeio import inside, open_regular

TRACKER = "latest_checkpointed_iteration.txt"
FT_STATE = "ft_state.json"
_ITER_DIR = re.compile(r"^iter_(\d{7,})$")
# A folder a checkpoint_damage moved aside (contract.DAMAGE_SUFFIX): the checkpoint that completed, kept as
# evidence under another name, so that Megatron no longer finds it.
_MOVED_DIR = re.compile(r"^iter_(\d{7,})" + re.escape(DAMAGE_SUFFIX) + "$")
_PAYLOAD_SUFFIXES = (".distcp", ".pt")
MAX_ITER_DIRS = 100000  # a listing beyond this is not a real checkpoint directory


@dataclass(frozen=True)
class Tracker:
    state: str  # "absent" | "empty" | "invalid" | "value"
    value: int | None
    raw: str
    ref: Ref


@dataclass(frozen=True, slots=True)
class CheckpointDir:
    iteration: int
    has_metadata: (
        bool  # `.metadata` (torch_dist global metadata, written at finalize): non-empty regular file
    )
    has_metadata_json: bool
    payload_files: int  # on disk, plus those payloads_dropped.json lists as dropped after verification
    ref: Ref
    why_incomplete: str = ""  # what is wrong with `.metadata` when has_metadata is False
    bytes: int | None = None  # on disk, or as the dropped-payload manifest recorded; None: unknown
    bytes_from: str = ""  # "disk" | "manifest" (every payload listed there) | "" (unknown)
    payload_files_dropped: int = 0  # of payload_files, those only the manifest lists

    @property
    def complete(self) -> bool:
        return self.has_metadata


@dataclass(frozen=True)
class Checkpoints:
    root: str  # as the evidence paths show it: relative to the run dir when inside it
    tracker: Tracker
    dirs: tuple[CheckpointDir, ...]
    ft_state: Ref | None
    moved: tuple[CheckpointDir, ...] = ()  # folders a checkpoint damage moved aside (iter_X.ftqual-moved)

    def dir_for(self, iteration: int) -> CheckpointDir | None:
        return self._by_iteration.get(iteration)

    def moved_dir_for(self, iteration: int) -> CheckpointDir | None:
        return next((item for item in self.moved if item.iteration == iteration), None)

    @cached_property
    def _by_iteration(self) -> dict[int, CheckpointDir]:
        """The first folder of each iteration (as a scan in order finds it), indexed once: a baseline that
        saved thousands of times asks for every one."""
        index: dict[int, CheckpointDir] = {}
        for item in self.dirs:
            index.setdefault(item.iteration, item)
        return index


def resolve_checkpoint_dir(run_dir: Path, configured: str) -> tuple[Path, str]:
    """(filesystem path, display path). A relative run.json value is relative to the run directory."""
    path = Path(configured)
    if not path.is_absolute():
        return run_dir / path, path.as_posix()
    try:
        return path, path.relative_to(run_dir).as_posix()
    except ValueError:
        return path, path.as_posix()


def _tracker(root: Path, shown: str, roots: tuple[Path, ...]) -> Tracker:
    rel = f"{shown}/{TRACKER}"
    path = root / TRACKER
    if not path.exists() and not path.is_symlink():
        return Tracker("absent", None, "", Ref(rel))
    try:
        with open_regular(path, *roots, limit=4096) as handle:
            raw = handle.read(256).decode("utf-8", errors="replace")
    except OSError as exc:
        return Tracker("invalid", None, f"unreadable: {exc}", Ref(rel))
    text = raw.strip()
    if not text:
        return Tracker("empty", None, raw, Ref(rel, 1, ""))
    if text.isascii() and text.isdigit() and len(text) <= 18:
        return Tracker("value", int(text), text, Ref(rel, 1, text))
    return Tracker("invalid", None, text[:80], Ref(rel, 1, text[:80]))


def _metadata(folder: Path, roots: tuple[Path, ...]) -> str:
    """'' when `.metadata` is a non-empty regular file inside the roots, else what is wrong with it."""
    path = folder / ".metadata"
    if not path.exists():
        return "dangling link" if path.is_symlink() else "absent"
    if not inside(path, *roots):
        return "a link leaving the run directory"
    try:
        info = os.stat(path)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_size == 0:
        return "empty"
    return ""


def read_dropped(root: Path) -> dict[str, dict[str, int]]:
    """The dropped-payload manifest (ftqual.launch.payloads' reader: its schema, paths inside an iter_*
    folder, sizes >= 0): {iter folder name: {payload file name: bytes}}; {} when absent or unusable (a
    manifest that cannot be read leaves the bytes to the files on disk, and trimmed folders unknown)."""
    out: dict[str, dict[str, int]] = {}
    for entry in listed_files(read_manifest(root)):
        parts = entry["path"].split("/")
        if len(parts) == 2 and parts[1].endswith(_PAYLOAD_SUFFIXES):  # torch_dist's folders are flat
            out.setdefault(parts[0], {})[parts[1]] = entry["bytes"]
    return out


def _folder_bytes(path: Path, names: list[str], dropped: dict[str, int]) -> tuple[int | None, str]:
    """(bytes, where they came from) of one iteration folder (its own files; torch_dist's are flat)."""
    total, payload_seen = 0, False
    for name in names:
        if name in dropped:
            continue
        try:
            info = os.lstat(path / name)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            total += info.st_size
            payload_seen |= name.endswith(_PAYLOAD_SUFFIXES)
    if dropped:
        return total + sum(dropped.values()), "manifest"
    if not payload_seen:
        return None, ""  # trimmed: what is left is metadata, not the checkpoint
    return total, "disk"


def _iter_dir(
    path: Path, shown: str, iteration: int, roots: tuple[Path, ...], dropped: dict[str, int] | None = None
) -> CheckpointDir:
    names = os.listdir(path)
    dropped = dropped or {}
    payload = {name for name in names if name.endswith(_PAYLOAD_SUFFIXES)}
    gone = set(dropped) - payload
    why = _metadata(path, roots)
    size, size_from = _folder_bytes(path, names, dropped)
    return CheckpointDir(
        iteration=iteration,
        has_metadata=not why,
        has_metadata_json="metadata.json" in names,
        payload_files=len(payload) + len(gone),
        ref=Ref(f"{shown}/{path.name}"),
        why_incomplete=f".metadata {why}" if why else "",
        bytes=size,
        bytes_from=size_from,
        payload_files_dropped=len(gone),
    )


def read_checkpoints(run_dir: Path, configured: str) -> tuple[Checkpoints | None, SourceStatus]:
    root, shown = resolve_checkpoint_dir(run_dir, configured)
    # An absolute checkpoint_dir is what run.json asked for; a relative one (or a link) must stay in the run.
    roots = (run_dir, root) if Path(configured).is_absolute() else (run_dir,)
    if not root.is_dir():
        return None, missing("checkpoints", f"checkpoint directory {shown} is absent")
    if not inside(root, *roots):
        return None, missing(
            "checkpoints", f"checkpoint directory {shown} resolves outside the run directory"
        )
    try:
        dirs, moved = [], []
        names = os.listdir(root)
        dropped = read_dropped(root) if inside(root, *roots) else {}
        if len(names) > MAX_ITER_DIRS:
            return None, missing("checkpoints", f"checkpoint directory {shown} holds {len(names)} entries")
        for name in sorted(names):
            match = _ITER_DIR.match(name)
            folder = root / name
            if match and len(match[1]) <= 12 and folder.is_dir() and inside(folder, *roots):
                dirs.append(_iter_dir(folder, shown, int(match[1]), roots, dropped.get(name)))
            elif (aside := _MOVED_DIR.match(name)) and len(aside[1]) <= 12 and folder.is_dir():
                if inside(folder, *roots):
                    moved.append(_iter_dir(folder, shown, int(aside[1]), roots, dropped.get(name)))
    except OSError as exc:
        return None, missing("checkpoints", f"checkpoint directory {shown} unreadable: {exc}")
    ft_state_path = root / FT_STATE
    ft_state = Ref(f"{shown}/{FT_STATE}") if ft_state_path.exists() or ft_state_path.is_symlink() else None
    dirs.sort(key=lambda d: d.iteration)
    status = SourceStatus("checkpoints", ok=True, paths=(shown,))
    checkpoints = Checkpoints(shown, _tracker(root, shown, roots), tuple(dirs), ft_state, tuple(moved))
    return checkpoints, status
