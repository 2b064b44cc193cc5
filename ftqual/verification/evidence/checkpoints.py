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

When the checkpoint directory is absent (a scratch filesystem purged, a run directory copied without it),
the run directory's own record of it is read instead (`checkpoint_record/`, written by the launcher when the
run ended: ftqual.launch.checkpoint_record): the same facts from the recorded listing, the tracker read from
the record's copy, every evidence path inside `checkpoint_record/`. A record that is absent, unusable,
incomplete, of another checkpoint directory or of one that did not exist leaves the source missing, as
before; a copy altered since it was recorded is never read as the run's evidence.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ftqual.launch import checkpoint_record as recorded
from ftqual.launch.payloads import listed_files, read_manifest
from ftqual.rank.damage import DAMAGE_SUFFIX
from ftqual.verification.evidence.model import Ref, SourceStatus, missing
from ftqual.verification.evidence.safeio import inside, open_regular

TRACKER = "latest_checkpointed_iteration.txt"
FT_STATE = "ft_state.json"
_ITER_DIR = re.compile(r"^iter_(\d{7,})$")
# A folder a checkpoint_damage moved aside (rank.damage.DAMAGE_SUFFIX): the checkpoint that completed, kept as
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


def _folder_bytes(
    names: list[str], sizes: Mapping[str, int], dropped: dict[str, int]
) -> tuple[int | None, str]:
    """(bytes, where they came from) of one iteration folder (its own files; torch_dist's are flat);
    `sizes`: the regular files' sizes by name."""
    total, payload_seen = 0, False
    for name in names:
        if name in dropped or name not in sizes:
            continue
        total += sizes[name]
        payload_seen |= name.endswith(_PAYLOAD_SUFFIXES)
    if dropped:
        return total + sum(dropped.values()), "manifest"
    if not payload_seen:
        return None, ""  # trimmed: what is left is metadata, not the checkpoint
    return total, "disk"


def _regular_sizes(path: Path, names: list[str], dropped: dict[str, int]) -> dict[str, int]:
    """The sizes of the folder's regular files (lstat: a link is no file of the folder's)."""
    sizes = {}
    for name in names:
        if name in dropped:
            continue
        try:
            info = os.lstat(path / name)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            sizes[name] = info.st_size
    return sizes


def _folder(
    ref: Ref, iteration: int, names: list[str], sizes: Mapping[str, int], why: str, dropped: dict[str, int]
) -> CheckpointDir:
    """One iteration folder from its listing, its regular files' sizes and what is wrong with `.metadata`
    (the same whether the listing is the disk's or the record's)."""
    payload = {name for name in names if name.endswith(_PAYLOAD_SUFFIXES)}
    gone = set(dropped) - payload
    size, size_from = _folder_bytes(names, sizes, dropped)
    return CheckpointDir(
        iteration=iteration,
        has_metadata=not why,
        has_metadata_json="metadata.json" in names,
        payload_files=len(payload) + len(gone),
        ref=ref,
        why_incomplete=f".metadata {why}" if why else "",
        bytes=size,
        bytes_from=size_from,
        payload_files_dropped=len(gone),
    )


def _iter_dir(
    path: Path, shown: str, iteration: int, roots: tuple[Path, ...], dropped: dict[str, int] | None = None
) -> CheckpointDir:
    names = os.listdir(path)
    dropped = dropped or {}
    sizes = _regular_sizes(path, names, dropped)
    return _folder(Ref(f"{shown}/{path.name}"), iteration, names, sizes, _metadata(path, roots), dropped)


def read_checkpoints(run_dir: Path, configured: str) -> tuple[Checkpoints | None, SourceStatus]:
    root, shown = resolve_checkpoint_dir(run_dir, configured)
    # An absolute checkpoint_dir is what run.json asked for; a relative one (or a link) must stay in the run.
    roots = (run_dir, root) if Path(configured).is_absolute() else (run_dir,)
    if (root.exists() or root.is_symlink()) and not root.is_dir():
        # something else stands where the checkpoints were: that is no purged scratch space to read past
        return None, missing("checkpoints", f"checkpoint directory {shown} is not a directory")
    if not root.is_dir():
        return _read_recorded(run_dir, configured, f"checkpoint directory {shown} is absent")
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


# ---------------------------------------------------------------------------------------------
# the checkpoint directory as the run directory's record of it (ftqual.launch.checkpoint_record)


def _recorded_metadata(run_dir: Path, entry: recorded.Entry | None) -> str:
    """`_metadata`'s answer from the record's entry of `.metadata` (the launcher recorded what the disk
    showed, its links judged against the same roots), and its copy unaltered where it was copied."""
    if entry is None:
        return "absent"
    if entry.type == "link" and entry.resolves == "missing":
        return "dangling link"
    if entry.type == "link" and not entry.inside:
        return "a link leaving the run directory"
    if not entry.regular:
        return "not a regular file"
    if not entry.bytes:
        return "empty"
    if entry.copied and (problem := recorded.copy_problem(run_dir, entry)):
        return problem
    return ""  # a `.metadata` above the copy cap is judged from its entry: a non-empty regular file


def _recorded_tracker(run_dir: Path, record: recorded.Record) -> Tracker:
    rel = f"{recorded.RECORD_DIR}/{TRACKER}"
    entry = record.entries.get(TRACKER)
    if entry is None:
        return Tracker("absent", None, "", Ref(rel))
    # Not copied: a link leaving the roots, a folder, a file above the copy cap: the disk reader fails too.
    if not entry.copied:
        what = f"a link to {entry.resolves}" if entry.type == "link" else entry.type
        return Tracker("invalid", None, f"unreadable: recorded as {what}, not copied", Ref(rel))
    if problem := recorded.copy_problem(run_dir, entry):
        return Tracker("invalid", None, f"unreadable: {TRACKER} {problem}", Ref(rel))
    return _tracker(recorded.record_path(run_dir), recorded.RECORD_DIR, (run_dir,))


def _is_folder(entry: recorded.Entry) -> bool:
    """A folder as `Path.is_dir()` and the roots rule see it: a directory, or a link to one inside."""
    return entry.type == "dir" or (entry.type == "link" and entry.resolves == "dir" and entry.inside)


def _recorded_iter_dir(
    run_dir: Path, record: recorded.Record, name: str, iteration: int, dropped: dict[str, int] | None
) -> CheckpointDir:
    children = record.children(name)
    names = [entry.path.rsplit("/", 1)[-1] for entry in children]
    dropped = dropped or {}
    sizes = {
        entry.path.rsplit("/", 1)[-1]: entry.bytes or 0
        for entry in children
        if entry.type == "file" and entry.path.rsplit("/", 1)[-1] not in dropped
    }
    why = _recorded_metadata(run_dir, record.entries.get(f"{name}/.metadata"))
    return _folder(Ref(f"{recorded.RECORD_DIR}/{name}"), iteration, names, sizes, why, dropped)


def _read_recorded(run_dir: Path, configured: str, absent: str) -> tuple[Checkpoints | None, SourceStatus]:
    """The checkpoints from the run directory's record, when the checkpoint directory is absent; the source
    missing (as without a record) unless the record is whole and of this checkpoint directory."""
    shown = recorded.RECORD_DIR
    manifest = f"{shown}/{recorded.MANIFEST}"
    try:
        record = recorded.read(run_dir)
    except recorded.RecordError as exc:
        return None, missing("checkpoints", f"{absent}; its record is unusable: {exc}", manifest)
    if record is None:
        return None, missing("checkpoints", absent)
    if record.checkpoint_dir != configured:
        return None, missing(
            "checkpoints", f"{absent}; {manifest} records another one ({record.checkpoint_dir})", manifest
        )
    if not record.existed:
        return None, missing("checkpoints", f"{absent}, as it was when the run ended ({manifest})", manifest)
    if record.problem:
        return None, missing("checkpoints", f"{absent}; its record is incomplete: {record.problem}", manifest)
    top = record.children()
    if len(top) > MAX_ITER_DIRS:
        return None, missing("checkpoints", f"{absent}; its record lists {len(top)} entries", manifest)
    dropped = read_dropped(recorded.record_path(run_dir))
    dirs, moved = [], []
    for entry in top:
        if not _is_folder(entry):
            continue
        name = entry.path
        if (match := _ITER_DIR.match(name)) and len(match[1]) <= 12:
            dirs.append(_recorded_iter_dir(run_dir, record, name, int(match[1]), dropped.get(name)))
        elif (aside := _MOVED_DIR.match(name)) and len(aside[1]) <= 12:
            moved.append(_recorded_iter_dir(run_dir, record, name, int(aside[1]), dropped.get(name)))
    ft_state = Ref(f"{shown}/{FT_STATE}") if FT_STATE in record.entries else None
    dirs.sort(key=lambda d: d.iteration)
    status = SourceStatus(
        "checkpoints",
        ok=True,
        reason=f"{absent}: read from the run's record of it ({manifest}, recorded {record.recorded_at})",
        paths=(shown,),
    )
    tracker = _recorded_tracker(run_dir, record)
    return Checkpoints(shown, tracker, tuple(dirs), ft_state, tuple(moved)), status
