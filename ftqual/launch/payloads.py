"""Disk that does not fill: drop a verified run's checkpoint payloads, keep the evidence.

A qualification writes every checkpoint its scenarios save (Megatron keeps each one it writes), and a large
model's checkpoint is tens to thousands of GB: kept, a few scenarios fill the disk they write to. Once a run
is verified (its verify.json written) the payloads are no evidence any check reads: the checks read the
logs, the tracker and each `iter_XXXXXXX` folder's `.metadata` (completion), never the tensors. So after
verification the payload files of the run's own checkpoint directory are deleted, and what they were stays
in `<checkpoint_dir>/payloads_dropped.json` (`ftqual.payloads/v1`: each file's path and bytes, written
atomically BEFORE any deletion, so that a crash mid-way leaves the list of what was there). The evidence
reader (`ftqual.verification.evidence.checkpoints`) counts the listed files as the folder's payload, so a
re-verification gives the same verdict and check statuses.

What is a payload: a regular file below an `iter_XXXXXXX` folder named `*.distcp`, `*.pt` or `*.bin` (the
smoke workload's payload is each rank's `__<rank>_0.distcp`, as Megatron's) of at least `SMALL_FILE_BYTES`.
Kept always: `.metadata` and
`metadata.json` (a checkpoint's completion), every file smaller than the bound (e.g. Megatron's `common.pt`),
the tracker, `ft_state.json` and everything outside `iter_*` folders.

Whose checkpoints: only a checkpoint directory that is the run's own: the run directory's `checkpoints/`
(run.json's relative `checkpoint_dir`) or a directory named after the run id (the workflow's per-run folders:
a resume_from scenario's seeded copy, a config's `checkpoint_dir/<run id>`). A directory the user gave
(NVRX_CHECKPOINT_DIR, to resume an existing run) is refused: Megatron may still need it. A link below the
checkpoint directory that leads out of it refuses the whole drop, and nothing is deleted.

Modes (config `checkpoint_payloads`): `keep`, `drop`, `auto` (the default: drop when the run's payloads
total at least `AUTO_DROP_BYTES`, keep the small ones of the smoke and walkthrough runs). A baseline whose
last checkpoint a resume_from scenario copies keeps that checkpoint's payloads (`keep_last`).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ftqual.jsonfile import write_json_atomic
from ftqual.scenario.job import AUTO_DROP_BYTES

SCHEMA = "ftqual.payloads/v1"
MANIFEST = "payloads_dropped.json"
MODES = ("keep", "drop", "auto")
DEFAULT_MODE = "auto"
PAYLOAD_SUFFIXES = (".distcp", ".pt", ".bin")
ALWAYS_KEPT = (".metadata", "metadata.json")
# Smaller files stay whatever their name: a checkpoint's small records (Megatron's common.pt, a few KB) cost
# nothing and may be read by a person; a payload worth dropping is MBs to GBs per file.
SMALL_FILE_BYTES = 1 << 20
TRACKER = "latest_checkpointed_iteration.txt"
MAX_MANIFEST_BYTES = 64 << 20


class PayloadError(Exception):
    """Why a run's payloads are not dropped, in one line."""


@dataclass(frozen=True)
class Dropped:
    """What one drop did: the checkpoint directory, the files deleted now, the manifest's total."""

    checkpoint_dir: Path
    files: list[dict] = field(default_factory=list)
    bytes_total: int = 0
    skipped: str | None = None  # why nothing was dropped (keep, auto below the bound), None when dropped


def _is_payload(name: str, size: int) -> bool:
    return name not in ALWAYS_KEPT and name.endswith(PAYLOAD_SUFFIXES) and size >= SMALL_FILE_BYTES


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def checkpoint_dir_of(run_dir: Path) -> Path:
    """The run's own checkpoint directory (from run.json), or PayloadError saying why it is not the run's."""
    try:
        record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PayloadError(f"{run_dir}: no readable run.json ({exc}): not a run directory") from exc
    if not isinstance(record, Mapping):
        raise PayloadError(f"{run_dir}/run.json is not a JSON object")
    configured = record.get("checkpoint_dir") or "checkpoints"
    run_id = record.get("run_id")
    if not isinstance(configured, str):
        raise PayloadError(f"{run_dir}/run.json: checkpoint_dir {configured!r} is not a path")
    path = Path(configured)
    if path.is_absolute():
        if not (isinstance(run_id, str) and run_id and path.name == run_id):
            raise PayloadError(
                f"checkpoint directory {path} was given to the run (NVRX_CHECKPOINT_DIR), not made for it: "
                "Megatron may still need it; its payloads are never dropped"
            )
        return path
    if ".." in path.parts:
        raise PayloadError(f"checkpoint directory {configured} leaves the run directory: not dropped")
    root = run_dir / path
    if not _under(Path(os.path.realpath(root)), Path(os.path.realpath(run_dir))):
        raise PayloadError(f"checkpoint directory {root} resolves outside the run directory: not dropped")
    return root


def payload_files(root: Path, keep_last: bool = False) -> list[dict]:
    """The payload files below `root`'s iter_* folders: [{"path" (relative), "bytes"}], sorted. Refuses
    (PayloadError) a link leading out of `root`; never follows one. `keep_last`: the tracker's checkpoint is
    left whole (a resume_from scenario copies it)."""
    if root.is_symlink():
        raise PayloadError(f"checkpoint directory {root} is a link ({os.path.realpath(root)}): not dropped")
    real_root = Path(os.path.realpath(root))
    keep = _tracker_folder(root) if keep_last else None
    found = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        here = Path(folder)
        for name in [*dirs, *names]:
            path = here / name
            if path.is_symlink() and not _under(Path(os.path.realpath(path)), real_root):
                raise PayloadError(
                    f"{path} is a link leading out of the checkpoint directory: nothing dropped"
                )
        rel = here.relative_to(root)
        if not rel.parts or not rel.parts[0].startswith("iter_") or rel.parts[0] == keep:
            continue
        for name in names:
            info = os.lstat(here / name)
            if stat.S_ISREG(info.st_mode) and _is_payload(name, info.st_size):
                found.append({"path": (rel / name).as_posix(), "bytes": info.st_size})
    return sorted(found, key=lambda f: f["path"])


def _tracker_folder(root: Path) -> str | None:
    try:
        text = (root / TRACKER).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return f"iter_{int(text):07d}" if text.isascii() and text.isdigit() and len(text) <= 12 else None


def read_manifest(root: Path) -> dict | None:
    """The checkpoint directory's manifest when it is one (schema, files of relative paths and sizes)."""
    path = root / MANIFEST
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_MANIFEST_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("files"), list):
        return None
    return doc


def listed_files(doc: Mapping | None) -> list[dict]:
    """A manifest's entries that can be what a drop wrote: relative paths inside an iter_* folder, never a
    completion record (`.metadata`, `metadata.json`: a manifest cannot stand in for those), sizes >= 0."""
    out = []
    for entry in (doc or {}).get("files") or []:
        if not isinstance(entry, Mapping):
            continue
        rel, size = entry.get("path"), entry.get("bytes")
        if not isinstance(rel, str) or isinstance(size, bool) or not isinstance(size, int) or size < 0:
            continue
        parts = Path(rel).parts
        if Path(rel).is_absolute() or ".." in parts or len(parts) < 2 or not parts[0].startswith("iter_"):
            continue
        if parts[-1] in ALWAYS_KEPT:
            continue
        out.append({"path": Path(rel).as_posix(), "bytes": size})
    return out


def drop(run_dir: Path, mode: str = "drop", keep_last: bool = False, now: datetime | None = None) -> Dropped:
    """Drop the payloads of a verified run's own checkpoint directory (module docstring). Idempotent: a
    second call deletes nothing new and keeps the manifest's list. PayloadError: nothing deleted."""
    if mode not in MODES:
        raise PayloadError(f"checkpoint_payloads must be one of {', '.join(MODES)} (got {mode!r})")
    root = checkpoint_dir_of(run_dir)
    if mode == "keep":
        return Dropped(root, skipped="checkpoint_payloads: keep")
    if not root.is_dir():
        return Dropped(root, skipped=f"no checkpoint directory {root}")
    found = payload_files(root, keep_last)
    earlier = listed_files(read_manifest(root))
    total = sum(f["bytes"] for f in found) + sum(f["bytes"] for f in earlier)
    if mode == "auto" and not earlier and total < AUTO_DROP_BYTES:
        return Dropped(
            root,
            bytes_total=0,
            skipped=f"checkpoint_payloads: auto keeps {total} bytes (< {AUTO_DROP_BYTES})",
        )
    if not found:
        return Dropped(root, bytes_total=sum(f["bytes"] for f in earlier))
    listed = {f["path"]: f for f in earlier}
    listed.update({f["path"]: f for f in found})  # a file still there after a crash: its size as it is
    files = sorted(listed.values(), key=lambda f: f["path"])
    run_id = _run_id(run_dir)
    manifest = {
        "schema": SCHEMA,
        "dropped_at": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "run_id": run_id,
        "files": files,
        "bytes_total": sum(f["bytes"] for f in files),
    }
    write_json_atomic(root / MANIFEST, manifest)  # first: a crash below leaves what was there on record
    for entry in found:
        os.unlink(root / entry["path"])
    return Dropped(root, files=found, bytes_total=manifest["bytes_total"])


def _run_id(run_dir: Path) -> str | None:
    try:
        value = json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


# ---------------------------------------------------------------------------------------------
# the workflow's verify rule, and how many checkpoints coexist on the disk


def rule_param(config: Mapping, scenarios: Mapping, scenario: str, baseline: str) -> dict:
    """The verify rule's `payloads` param: the config's mode, and whether this scenario's last checkpoint
    stays whole (the baseline, when a resume_from scenario copies its last checkpoint after its verify)."""
    mode = config.get("checkpoint_payloads") or DEFAULT_MODE
    keep_last = scenario == baseline and any(getattr(s, "resume_from", None) for s in scenarios.values())
    return {"mode": str(mode), "keep_last": keep_last}


def after_verify(attempt_json: str | Path, verify_json: str | Path, param: Mapping, log) -> Dropped | None:
    """The verify rule's one call once verify.json is written: drop the attempt's run's payloads as the
    config says. Never fails the rule: the verdict stands, a refusal is one line in the rule's log."""
    if not Path(verify_json).is_file():
        return None
    try:
        record = json.loads(Path(attempt_json).read_text(encoding="utf-8"))
        if not record.get("launched", True) or not record.get("run_dir"):
            return None
        done = drop(
            Path(record["run_dir"]), str(param.get("mode", DEFAULT_MODE)), bool(param.get("keep_last"))
        )
    except (PayloadError, OSError, ValueError, AttributeError) as exc:
        print(f"checkpoint payloads kept: {exc}", file=log)
        return None
    print(describe(done), file=log)
    return done


def describe(done: Dropped) -> str:
    if done.skipped:
        return f"checkpoint payloads kept in {done.checkpoint_dir}: {done.skipped}"
    now = sum(f["bytes"] for f in done.files)
    return (
        f"dropped {len(done.files)} payload files ({now} bytes) of {done.checkpoint_dir}; "
        f"{MANIFEST} lists {done.bytes_total} bytes"
    )


# ---------------------------------------------------------------------------------------------
# `ftqual drop-payloads RUN_DIR`


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ftqual drop-payloads",
        description="Drop a verified run's checkpoint payloads; sizes, metadata and evidence stay "
        f"({MANIFEST} lists what was there).",
    )
    parser.add_argument("run_dir", type=Path, help="the run directory (holding run.json)")
    parser.add_argument(
        "--report",
        type=Path,
        help="the run's verify.json (default RUN_DIR/verify.json): only a verified run is dropped",
    )
    parser.add_argument(
        "--keep-last", action="store_true", help="keep the tracker's checkpoint whole (to resume from it)"
    )
    args = parser.parse_args(argv)
    try:
        _verified(args.run_dir, args.report or args.run_dir / "verify.json")
        done = drop(args.run_dir, "drop", args.keep_last)
    except (PayloadError, OSError) as exc:
        print(f"ftqual drop-payloads: {exc}", file=sys.stderr)
        return 2
    print(describe(done))
    return 0


def _verified(run_dir: Path, report: Path) -> None:
    """PayloadError unless `report` is a verify report of this run (its run_id), so evidence is never
    dropped before its verdict."""
    if not report.is_file():
        raise PayloadError(
            f"no verify report at {report}: verify the run first (ftqual verify {run_dir} --json {report}) "
            "or name its report with --report"
        )
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PayloadError(f"{report}: unreadable verify report ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("schema") != "ftqual.verify/v1" or "verdict" not in doc:
        raise PayloadError(f"{report} is not a verify report (ftqual.verify/v1)")
    run_id = _run_id(run_dir)
    if doc.get("run_id") != run_id:
        raise PayloadError(f"{report} verifies run {doc.get('run_id')!r}, not {run_id!r} ({run_dir})")
