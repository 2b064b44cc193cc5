"""A JSON record written whole: `write_json_atomic` (a temporary file beside it, fsync, rename), so that a
reader never sees half a record. Below every stage: the stack record, run.json, the attempt and verify
records, the lock all write through it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write via a temporary file and rename, so a reader never sees half a record."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
