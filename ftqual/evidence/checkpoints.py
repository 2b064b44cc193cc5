"""The checkpoint directory: tracker file, `iter_XXXXXXX` folders, and a stray `ft_state.json`.

The tracker (`latest_checkpointed_iteration.txt`) is truncated then written by Megatron, so an empty file
means "unknown", not zero. A torch_dist checkpoint folder is complete when its `.metadata` (written by the
finalize step) exists; `metadata.json` follows. Payload files (`*.distcp`, `*.pt`) may have been trimmed from
copies.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ftqual.evidence.model import Ref, SourceStatus, missing

TRACKER = "latest_checkpointed_iteration.txt"
FT_STATE = "ft_state.json"
_ITER_DIR = re.compile(r"^iter_(\d{7,})$")
_PAYLOAD_SUFFIXES = (".distcp", ".pt")


@dataclass(frozen=True)
class Tracker:
    state: str  # "absent" | "empty" | "invalid" | "value"
    value: int | None
    raw: str
    ref: Ref


@dataclass(frozen=True)
class CheckpointDir:
    iteration: int
    has_metadata: bool  # `.metadata` (torch_dist global metadata, written at finalize)
    has_metadata_json: bool
    payload_files: int
    ref: Ref

    @property
    def complete(self) -> bool:
        return self.has_metadata


@dataclass(frozen=True)
class Checkpoints:
    root: str  # as the evidence paths show it: relative to the run dir when inside it
    tracker: Tracker
    dirs: tuple[CheckpointDir, ...]
    ft_state: Ref | None

    def dir_for(self, iteration: int) -> CheckpointDir | None:
        for item in self.dirs:
            if item.iteration == iteration:
                return item
        return None


def resolve_checkpoint_dir(run_dir: Path, configured: str) -> tuple[Path, str]:
    """(filesystem path, display path). A relative run.json value is relative to the run directory."""
    path = Path(configured)
    if not path.is_absolute():
        return run_dir / path, path.as_posix()
    try:
        return path, path.relative_to(run_dir).as_posix()
    except ValueError:
        return path, path.as_posix()


def _tracker(root: Path, shown: str) -> Tracker:
    rel = f"{shown}/{TRACKER}"
    path = root / TRACKER
    if not path.exists():
        return Tracker("absent", None, "", Ref(rel))
    try:
        with path.open("r", encoding="utf-8", errors="replace") as handle:
            raw = handle.read(256)
    except OSError as exc:
        return Tracker("invalid", None, f"unreadable: {exc}", Ref(rel))
    text = raw.strip()
    if not text:
        return Tracker("empty", None, raw, Ref(rel, 1, ""))
    if text.isdigit():
        return Tracker("value", int(text), text, Ref(rel, 1, text))
    return Tracker("invalid", None, text[:80], Ref(rel, 1, text[:80]))


def _iter_dir(path: Path, shown: str, iteration: int) -> CheckpointDir:
    names = os.listdir(path)
    payload = sum(1 for name in names if name.endswith(_PAYLOAD_SUFFIXES))
    return CheckpointDir(
        iteration=iteration,
        has_metadata=".metadata" in names,
        has_metadata_json="metadata.json" in names,
        payload_files=payload,
        ref=Ref(f"{shown}/{path.name}"),
    )


def read_checkpoints(run_dir: Path, configured: str) -> tuple[Checkpoints | None, SourceStatus]:
    root, shown = resolve_checkpoint_dir(run_dir, configured)
    if not root.is_dir():
        return None, missing("checkpoints", f"checkpoint directory {shown} is absent")
    try:
        dirs = []
        for name in sorted(os.listdir(root)):
            match = _ITER_DIR.match(name)
            if match and (root / name).is_dir():
                dirs.append(_iter_dir(root / name, shown, int(match[1])))
    except OSError as exc:
        return None, missing("checkpoints", f"checkpoint directory {shown} unreadable: {exc}")
    ft_state = Ref(f"{shown}/{FT_STATE}") if (root / FT_STATE).exists() else None
    dirs.sort(key=lambda d: d.iteration)
    status = SourceStatus("checkpoints", ok=True, paths=(shown,))
    return Checkpoints(shown, _tracker(root, shown), tuple(dirs), ft_state), status
