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
