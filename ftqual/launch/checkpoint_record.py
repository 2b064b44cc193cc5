"""The run directory holds its checkpoint evidence: `<run>/checkpoint_record/`, written when a run ends.

A run's checkpoints may live outside its run directory (config `checkpoint_dir`, a scratch filesystem that
is purged). The verifier reads the checkpoint directory's metadata: the tracker, each `iter_XXXXXXX` folder's
listing (`.metadata`, `metadata.json`, how many payload files and their bytes) and `ft_state.json`; a tensor's
content only through the digests below. So when a run ends the launcher records exactly that into the run
directory:

```
checkpoint_record/record.json       ftqual.checkpoint_record/v1: every entry below the checkpoint directory
checkpoint_record/<path>            a copy of each small file (the tracker, `.metadata`, `metadata.json`,
                                    `common.pt`, `ft_state.json`, ...), at its path below the directory
checkpoint_record/digests/          ftqual.checkpoint_digest/v1: per-tensor digests of every saved iteration
                                    (ftqual.launch.checkpoint_digest; the one record of a tensor's content,
                                    read by the check checkpoint_equal only)
```

`record.json`: `checkpoint_dir` (as run.json names it), `recorded_at`, `existed` (false: there was no
checkpoint directory to record), `problem` (null, or why the record is incomplete: the verifier then never
reads it), `hashed_up_to` and `copied_up_to` (the caps below), and `entries`, one per path below the
directory (never following a link, except into a top-level folder link that stays inside): `path`
(relative, posix), `type` (`file|dir|link|other`), `bytes` and `mtime_ns` (a file's, or the file a link
resolves to), `sha256` (files up to the hash cap; null above it), `copied` (whether `checkpoint_record/<path>`
holds the file's bytes), and for a link `target`, `resolves` (`file|dir|other|missing`) and `inside` (its
target lies inside the run directory or the checkpoint directory, the verifier's own rule).

The record is written always, also when the checkpoints lie inside the run directory (a manifest and a few
KB of copies), so that a run verifies alike wherever its checkpoints were; the verifier reads it only when
the checkpoint directory is absent (`ftqual.verification.evidence.checkpoints`). It is written into a
temporary folder and renamed, so a reader sees a whole record or none, and an existing record is never
replaced: evidence is never deleted. Payload shards (`*.distcp`) are never copied: the record holds the
evidence, not the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from ftqual.jsonfile import write_json_atomic
from ftqual.launch.checkpoint_digest import DIGESTS_DIR, write_digests

SCHEMA = "ftqual.checkpoint_record/v1"
RECORD_DIR = "checkpoint_record"
MANIFEST = "record.json"
# Small files are copied whole: the tracker, `.metadata` and `metadata.json`, Megatron's `common.pt`,
# `ft_state.json` are bytes to kilobytes (a large model's `.metadata` may reach hundreds of KB). A file above
# the cap is recorded (size, mtime, hash) but not copied; the verifier then judges it from its entry.
COPY_BYTES = 1 << 20
NEVER_COPIED = (".distcp",)  # payload shards: the tensors, whatever their size
# Files up to this size are hashed (every metadata file, the smoke workload's shards, a small model's). A
# large model's shards are GBs each and a run keeps every save: hashing them all would take the launch job
# minutes to hours after the run, for evidence no check reads (the verifier reads no payload's content);
# their size and mtime are recorded instead.
HASH_BYTES = 64 << 20
MAX_ENTRIES = 200_000  # a listing beyond this is not a checkpoint directory: the record says so
MAX_DEPTH = 4  # torch_dist folders are flat; the legacy format nests one level (mp_rank_XX/)
MAX_MANIFEST_BYTES = 128 << 20
TYPES = ("file", "dir", "link", "other")
LINK_RESOLVES = ("file", "dir", "other", "missing")


@dataclass(frozen=True, slots=True)
class Entry:
    """One path below the checkpoint directory as the run left it."""

    path: str  # relative to the checkpoint directory, posix
    type: str  # "file" | "dir" | "link" | "other"
    bytes: int | None = None  # a file's size, or the size of the file a link resolves to
    mtime_ns: int | None = None
    sha256: str | None = None  # None: above HASH_BYTES, or not hashed (an interrupted run's quick record)
    copied: bool = False  # checkpoint_record/<path> holds its bytes
    target: str | None = None  # a link's text
    resolves: str | None = None  # a link: what its target is ("missing": dangling)
    inside: bool = True  # a link: its target lies inside the run or the checkpoint directory

    def as_dict(self) -> dict:
        out: dict = {"path": self.path, "type": self.type}
        if self.type in ("file", "link"):
            out.update(bytes=self.bytes, mtime_ns=self.mtime_ns, sha256=self.sha256, copied=self.copied)
        if self.type == "link":
            out.update(target=self.target, resolves=self.resolves, inside=self.inside)
        return out

    @property
    def regular(self) -> bool:
        """A regular file as the verifier's reader sees it: itself, or a link to one inside the roots."""
        return self.type == "file" or (self.type == "link" and self.resolves == "file" and self.inside)


@dataclass(frozen=True)
class Record:
    """A checkpoint record read back: what the checkpoint directory held when the run ended."""

    checkpoint_dir: str
    recorded_at: str
    existed: bool
    problem: str | None
    entries: Mapping[str, Entry]

    def children(self, folder: str = "") -> list[Entry]:
        """The entries directly below `folder` ("" the checkpoint directory itself), sorted by path."""
        return self._by_folder.get(folder, [])

    @cached_property
    def _by_folder(self) -> dict[str, list[Entry]]:
        """Every folder's entries, indexed once: a long baseline's record lists thousands of saves."""
        index: dict[str, list[Entry]] = {}
        for path, entry in sorted(self.entries.items()):
            index.setdefault(path.rpartition("/")[0], []).append(entry)
        return index


def record_path(run_dir: Path) -> Path:
    return run_dir / RECORD_DIR


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def resolve(run_dir: Path, configured: str) -> tuple[Path, tuple[Path, ...]]:
    """(the checkpoint directory, the roots a link below it may lead into): run.json's rule, as the
    verifier applies it (a relative checkpoint_dir and its links stay in the run directory)."""
    path = Path(configured)
    if path.is_absolute():
        return path, (run_dir, path)
    return run_dir / path, (run_dir,)


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    target = Path(os.path.realpath(path))
    for root in roots:
        base = Path(os.path.realpath(root))
        if target == base or base in target.parents:
            return True
    return False


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class _Walk:
    """One pass over the checkpoint directory, copying the small files into `dest` as it goes."""

    def __init__(self, root: Path, roots: tuple[Path, ...], dest: Path, hash_bytes: int) -> None:
        self.root, self.roots, self.dest, self.hash_bytes = root, roots, dest, hash_bytes
        self.entries: list[Entry] = []
        self.problem: str | None = None

    def folder(self, path: Path, rel: str, depth: int) -> None:
        try:
            names = sorted(os.listdir(path))
        except OSError as exc:
            self.problem = f"{rel or '.'} unreadable: {exc.strerror or exc}"
            return
        for name in names:
            if len(self.entries) >= MAX_ENTRIES:
                self.problem = f"more than {MAX_ENTRIES} entries: not a checkpoint directory"
                return
            self.entry(path / name, f"{rel}/{name}" if rel else name, depth)

    def entry(self, path: Path, rel: str, depth: int) -> None:
        try:
            info = os.lstat(path)
        except OSError:
            return  # gone between the listing and the look: a file the run removed as it ended
        if stat.S_ISLNK(info.st_mode):
            self.link(path, rel, depth)
        elif stat.S_ISREG(info.st_mode):
            self.file(path, rel, info, "file")
        elif stat.S_ISDIR(info.st_mode):
            self.entries.append(Entry(rel, "dir"))
            if depth < MAX_DEPTH:
                self.folder(path, rel, depth + 1)
        else:
            self.entries.append(Entry(rel, "other"))

    def link(self, path: Path, rel: str, depth: int) -> None:
        target = os.readlink(path)
        inside = _inside(path, self.roots)
        try:
            info = os.stat(path)
        except OSError:
            self.entries.append(Entry(rel, "link", target=target, resolves="missing", inside=inside))
            return
        resolves = _kind(info.st_mode)
        if resolves == "file":
            self.file(path, rel, info, "link", target=target, inside=inside)
            return
        self.entries.append(Entry(rel, "link", target=target, resolves=resolves, inside=inside))
        # A top-level folder linked inside the roots is read as a folder by the verifier: record its listing.
        if resolves == "dir" and inside and depth == 0:
            self.folder(path, rel, depth + 1)

    def file(self, path: Path, rel: str, info: os.stat_result, kind: str, **link: object) -> None:
        size = info.st_size
        # Only what the verifier may read is copied: a link leaving the roots is recorded, never followed.
        readable = kind == "file" or bool(link.get("inside"))
        sha = copied = None
        try:
            if readable and size <= self.hash_bytes:
                sha = _sha256(path)
            if readable and size <= COPY_BYTES and not rel.endswith(NEVER_COPIED):
                copy = self.dest / rel
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, copy)  # the bytes, not the link
                copied = True
        except OSError as exc:
            print(f"ftqual launch: checkpoint record: {rel} not copied: {exc}", file=sys.stderr)
        self.entries.append(
            Entry(
                rel, kind, bytes=size, mtime_ns=info.st_mtime_ns, sha256=sha, copied=bool(copied),
                target=link.get("target"), resolves="file" if kind == "link" else None,  # type: ignore[arg-type]
                inside=bool(link.get("inside", True)),
            )
        )  # fmt: skip


def marker_iterations(run_dir: Path) -> frozenset[int]:
    """The iterations the run's injection markers name (`checkpoint_iteration`, `save_iteration`): the
    checkpoints a replacement restored, which the digests keep however large the run's saves."""
    found: set[int] = set()
    for path in sorted(run_dir.glob("fault_injected*.json"))[:1000]:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        for key in ("checkpoint_iteration", "save_iteration"):
            value = doc.get(key) if isinstance(doc, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                found.add(value)
    return frozenset(found)


def write(
    run_dir: Path,
    configured: str,
    hash_bytes: int = HASH_BYTES,
    now: str | None = None,
    digests: bool = True,
) -> Path | None:
    """Record the checkpoint directory run.json names (`configured`) into `run_dir/checkpoint_record/`.

    Returns the record's folder, or None when one exists already (never replaced). `hash_bytes`: the hash
    cap (0: hash nothing, for a run stopped from outside whose job must end before the scheduler's kill;
    nor digest). `digests`: also the per-tensor digests of every saved iteration (checkpoint_digest).
    OSError when the record cannot be written (the caller says so; the run's exit code stays)."""
    final = record_path(run_dir)
    if final.exists() or final.is_symlink():
        return None
    root, roots = resolve(run_dir, configured)
    staging = run_dir / f".{RECORD_DIR}.{os.getpid()}.tmp"
    if staging.exists():
        shutil.rmtree(staging)  # our own leftover of a crashed attempt, never evidence
    staging.mkdir()
    walk = _Walk(root, roots, staging, hash_bytes)
    existed = root.is_dir()
    if existed:
        if not _inside(root, roots):
            walk.problem = f"checkpoint directory {configured} resolves outside the run directory"
        else:
            walk.folder(root, "", 0)
    manifest = {
        "schema": SCHEMA,
        "checkpoint_dir": configured,
        "recorded_at": now or utc_now(),
        "existed": existed,
        "problem": walk.problem,
        "hashed_up_to": hash_bytes,
        "copied_up_to": COPY_BYTES,
        "entries": [entry.as_dict() for entry in walk.entries],
    }
    write_json_atomic(staging / MANIFEST, manifest)
    if digests and existed and walk.problem is None and hash_bytes > 0:
        # inside the staging folder: renamed with the record
        write_digests(root, staging / DIGESTS_DIR, marker_iterations(run_dir))
    os.rename(staging, final)  # whole or not at all
    return final


def record_at_end(run_dir: Path, configured: str, stopped: bool = False) -> Path | None:
    """The launcher's call once ft_launcher has ended and run.json holds the end: the record, or one line on
    stderr when it cannot be written (never a change of the run's exit code). A run stopped from outside
    hashes nothing: its job must end before the scheduler's kill, and sizes and copies are all the
    verifier reads."""
    try:
        return write(run_dir, configured, hash_bytes=0 if stopped else HASH_BYTES)
    except OSError as exc:
        print(f"ftqual launch: no checkpoint record in {run_dir}: {exc}", file=sys.stderr)
        return None


def write_for_run(run_dir: Path, hash_bytes: int = HASH_BYTES) -> Path | None:
    """Record the checkpoint directory of the run in `run_dir` (its run.json's `checkpoint_dir`) unless a
    record exists: for a caller that did not launch the run (a launcher killed before it could). None when
    nothing was written; never raises: a record that cannot be written is one line on stderr."""
    try:
        if record_path(run_dir).exists():
            return None
        run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        if not isinstance(run, dict):
            return None
        configured = run.get("checkpoint_dir") or "checkpoints"
        if not isinstance(configured, str):
            return None
        return write(run_dir, configured, hash_bytes)
    except (OSError, ValueError) as exc:
        print(f"ftqual: no checkpoint record for {run_dir}: {exc}", file=sys.stderr)
        return None


# ---------------------------------------------------------------------------------------------
# the one reader of the format (the verifier's checkpoint reader calls it)


class RecordError(Exception):
    """A record that exists but cannot be used, in one line."""


def _entry(raw: object) -> Entry:
    if not isinstance(raw, Mapping):
        raise RecordError("an entry is not an object")
    path, kind = raw.get("path"), raw.get("type")
    parts = path.split("/") if isinstance(path, str) else []
    if not parts or any(part in ("", ".", "..") for part in parts) or path.startswith("/"):
        raise RecordError(f"entry path {str(path)[:80]!r} is not relative below the checkpoint directory")
    if kind not in TYPES:
        raise RecordError(f"entry {path}: type {str(kind)[:20]!r} is not one of {', '.join(TYPES)}")
    size, mtime = raw.get("bytes"), raw.get("mtime_ns")
    sha, resolves = raw.get("sha256"), raw.get("resolves")
    if kind in ("file", "link") and resolves in (None, "file"):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise RecordError(f"entry {path}: bytes {size!r} is not a size")
    if kind == "link" and resolves not in LINK_RESOLVES:
        raise RecordError(f"entry {path}: resolves {str(resolves)[:20]!r} is not one of {LINK_RESOLVES}")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64):
        raise RecordError(f"entry {path}: sha256 is not a hex digest")
    return Entry(
        path=path,
        type=kind,
        bytes=size if isinstance(size, int) and not isinstance(size, bool) else None,
        mtime_ns=mtime if isinstance(mtime, int) and not isinstance(mtime, bool) else None,
        sha256=sha,
        copied=raw.get("copied") is True,
        target=raw.get("target") if isinstance(raw.get("target"), str) else None,
        resolves=resolves if kind == "link" else None,
        inside=raw.get("inside") is not False,
    )


def read(run_dir: Path) -> Record | None:
    """The run's checkpoint record; None when there is none; RecordError when it cannot be used."""
    path = record_path(run_dir) / MANIFEST
    folder = record_path(run_dir)
    if not folder.exists() and not folder.is_symlink():
        return None
    if folder.is_symlink() or not folder.is_dir():
        raise RecordError(f"{RECORD_DIR} is not a folder of the run")
    try:
        if path.is_symlink() or not path.is_file():
            raise RecordError(f"{RECORD_DIR}/{MANIFEST} is absent or not a regular file")
        if path.stat().st_size > MAX_MANIFEST_BYTES:
            raise RecordError(f"{RECORD_DIR}/{MANIFEST} is over {MAX_MANIFEST_BYTES} bytes")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecordError(f"{RECORD_DIR}/{MANIFEST} unreadable: {exc}") from exc
    if not isinstance(doc, Mapping) or doc.get("schema") != SCHEMA:
        raise RecordError(f"{RECORD_DIR}/{MANIFEST} is not a checkpoint record ({SCHEMA})")
    configured, entries = doc.get("checkpoint_dir"), doc.get("entries")
    if not isinstance(configured, str) or not isinstance(entries, list) or len(entries) > MAX_ENTRIES:
        raise RecordError(f"{RECORD_DIR}/{MANIFEST}: checkpoint_dir or entries unusable")
    problem = doc.get("problem")
    parsed = {entry.path: entry for entry in map(_entry, entries)}
    return Record(
        checkpoint_dir=configured,
        recorded_at=str(doc.get("recorded_at") or ""),
        existed=doc.get("existed") is True,
        problem=str(problem)[:240] if problem is not None else None,
        entries=parsed,
    )


def copy_problem(run_dir: Path, entry: Entry) -> str | None:
    """What is wrong with the record's copy of a copied entry (None: present, a regular file of the recorded
    size and hash), so that a copy altered since is never read as the run's evidence."""
    copy = record_path(run_dir) / entry.path
    try:
        if copy.is_symlink() or not copy.is_file():
            return "missing from the record"
        if copy.stat().st_size != entry.bytes:
            return "differs in size from its record"
        if entry.sha256 is not None and _sha256(copy) != entry.sha256:
            return "differs from its recorded sha256"
    except OSError as exc:
        return f"unreadable in the record ({exc.strerror or exc})"
    return None
