"""Plain helpers shared by the launcher's tests (fixtures live in conftest.py)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LaunchResult:
    rc: int
    out: str
    err: str

    @property
    def argv(self) -> list[str]:
        """The dry run's command line, split back into arguments."""
        return shlex.split(self.out.strip().splitlines()[-1])


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def checkpoint_dir(tmp_path: Path, tracker: str | bytes, iterations=()) -> str:
    """A checkpoint directory as a finished run leaves it: the tracker (as given) and iter_XXXXXXX folders."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    data = tracker.encode() if isinstance(tracker, str) else tracker
    (ckpt / "latest_checkpointed_iteration.txt").write_bytes(data)
    for iteration in iterations:
        (ckpt / f"iter_{iteration:07d}").mkdir()
    return str(ckpt)
