"""nodes/<host>.json (ftqual.node/v1): how each node's ft_launcher ended, written by that node's launcher.

run.json is written by the first node only; these records are every node's own word: its ft_launcher's pid,
exit code (negative: killed by that signal) and when it ended. A lost node's record says SIGKILL; the
survivors' say how and when NVRx ended them. A record that cannot be read, is not the schema, or names
another host than its file is kept with `error` (a check needing it is inconclusive, never a pass).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ftqual.verification.evidence.clock import parse_utc
from ftqual.verification.evidence.model import Ref, SourceStatus, missing
from ftqual.verification.evidence.run_meta import _int
from ftqual.verification.evidence.safeio import inside, load_json_object

NODES_DIR = "nodes"
SCHEMA = "ftqual.node/v1"
_RECORD = re.compile(r"(?P<host>[^/]+)\.json")
MAX_FILES = 10_000


@dataclass(frozen=True)
class NodeRecord:
    host: str
    ref: Ref
    error: str | None = None
    node_rank: int | None = None
    launcher_pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def describe(self) -> str:
        how = f"killed by {self.signal}" if self.signal else f"exit {self.exit_code}"
        return f"{self.host} (node rank {self.node_rank}): ft_launcher pid {self.launcher_pid} {how}"


def _record(path: Path, rel: str, host: str, run_dir: Path) -> NodeRecord:
    here = Ref(rel)
    try:
        data = load_json_object(path, run_dir)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return NodeRecord(host, here, error=f"{rel} unreadable: {exc}")
    if data.get("schema") != SCHEMA or data.get("host") != host:
        return NodeRecord(host, here, error=f"{rel} is not a {SCHEMA} record of host {host}")
    signal = data.get("signal")
    return NodeRecord(
        host=host,
        ref=here,
        node_rank=_int(data.get("node_rank")),
        launcher_pid=_int(data.get("launcher_pid")),
        exit_code=_int(data.get("exit_code")),
        signal=signal if isinstance(signal, str) else None,
        started_at=parse_utc(data.get("started_at") or ""),
        finished_at=parse_utc(data.get("finished_at") or ""),
    )


def read_nodes(run_dir: Path) -> tuple[dict[str, NodeRecord], SourceStatus]:
    """host -> record; not ok when nodes/ is absent or cannot be listed."""
    folder = run_dir / NODES_DIR
    if not folder.is_dir():
        return {}, missing("nodes", f"{NODES_DIR}/ is absent (no node wrote how its launcher ended)")
    if not inside(folder, run_dir):
        return {}, missing("nodes", f"{NODES_DIR}/ resolves outside the run directory")
    try:
        names = sorted(os.listdir(folder))[:MAX_FILES]
    except OSError as exc:
        return {}, missing("nodes", f"{NODES_DIR}/ cannot be listed: {exc.strerror or exc}")
    records = {}
    for name in names:
        if m := _RECORD.fullmatch(name):
            records[m["host"]] = _record(folder / name, f"{NODES_DIR}/{name}", m["host"], run_dir)
    paths = tuple(r.ref.path for r in records.values())
    if not records:
        return {}, missing("nodes", f"no {NODES_DIR}/<host>.json")
    return records, SourceStatus("nodes", ok=True, paths=paths)
