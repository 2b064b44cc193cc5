"""leftovers/<host>.cycle<c>.json (ftqual.leftovers/v1) and the pid records of pids/ they are judged against.

Local rank 0 of every node writes one leftovers record at the start of every cycle c >= 1, before the
workload runs: `earlier` (the pid records of pids/ of its host with a cycle < c), `alive` (those still
running: same pid, same start time) and `gpu` (nvidia-smi's compute apps, `held_by_earlier` those that are
earlier workers; `sampled` false with an `error` where nvidia-smi is absent or failed). `shm_segments` names
this user's /dev/shm entries; `shm` (records written since) gives each its size and allocated bytes
(st_blocks * 512), their totals, and the filesystem's size, free bytes and inodes (statvfs). A record without
`shm` has names only (`shm` None: sizes and room unknown); a garbled `shm` is kept as `shm.error` without
making the rest of the record unreadable.

A record that cannot be read, is not the schema, or whose host/cycle disagree with its file name is kept as
`error` (a check needing it is inconclusive, never a pass). The pid records (`pids/<host>.cycle<c>.rank<r>
.json`) say which hosts ran which cycle and which workers an `earlier` list must name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ftqual.rank.ids import LEFTOVERS_SCHEMA
from ftqual.verification.evidence.model import Ref, SourceStatus, missing
from ftqual.verification.evidence.run_meta import _int
from ftqual.verification.evidence.safeio import inside, load_json_object

LEFTOVERS_DIR = "leftovers"
PIDS_DIR = "pids"
SCHEMA = LEFTOVERS_SCHEMA  # the rank writes the records (ftqual.rank.leftovers)
_RECORD = re.compile(r"(?P<host>[^/]+)\.cycle(?P<cycle>[0-9]{1,9})\.json")
_PID = re.compile(r"(?P<host>[^/]+)\.cycle(?P<cycle>[0-9]{1,9})\.rank(?P<rank>[0-9]{1,9})\.json")
MAX_FILES = 100_000  # nodes x cycles
MAX_LISTED = 10_000  # processes in one list of one record
MAX_SHM_ENTRIES = 100_000  # /dev/shm entries of one record (the wrapper lists at most as many)


@dataclass(frozen=True)
class Proc:
    pid: int | None
    start_time: int | None
    cycle: int | None
    rank: int | None
    used_memory_mib: int | None = None

    def describe(self) -> str:
        mem = f", {self.used_memory_mib} MiB" if self.used_memory_mib is not None else ""
        return f"pid {self.pid} (cycle {self.cycle}, rank {self.rank}{mem})"


@dataclass(frozen=True)
class ShmFs:
    """statvfs of /dev/shm at a cycle's start; inodes 0: the filesystem reports no inode limit."""

    size_bytes: int
    free_bytes: int
    inodes: int
    free_inodes: int


@dataclass(frozen=True)
class ShmSample:
    """This user's /dev/shm at a cycle's start: entries (name, size, allocated bytes), their totals, the
    filesystem's room. A part that could not be read is None, with its error."""

    entries: tuple[tuple[str, int, int], ...] | None = None  # (name, st_size, st_blocks * 512)
    count: int | None = None
    size_bytes: int | None = None
    allocated_bytes: int | None = None
    fs: ShmFs | None = None
    error: str | None = None  # the entries could not be listed, or the record's `shm` is garbled
    fs_error: str | None = None


@dataclass(frozen=True)
class LeftoverRecord:
    host: str
    cycle: int
    ref: Ref
    error: str | None = None  # unreadable or garbled: nothing below is evidence
    earlier: tuple[Proc, ...] = ()
    alive: tuple[Proc, ...] = ()
    gpu_sampled: bool = False
    gpu_error: str | None = None
    held_by_earlier: tuple[Proc, ...] = ()
    unreadable_pid_records: tuple[str, ...] = ()  # pid records the sampler could not read
    shm_segments: tuple[str, ...] | None = None  # this user's /dev/shm entries at the cycle's start
    agent_open_fds: int | None = None  # open file descriptors of the agent that started the workers
    shm: ShmSample | None = None  # sizes and room (None: a record with names only, written before them)


@dataclass(frozen=True)
class PidRecord:
    host: str
    cycle: int
    rank: int
    ref: Ref
    pid: int | None = None  # None: the file could not be read
    start_time: int | None = None


@dataclass(frozen=True)
class Leftovers:
    records: dict[tuple[str, int], LeftoverRecord] = field(default_factory=dict)  # (host, cycle) -> record
    pids: tuple[PidRecord, ...] = ()
    pids_listed: bool = False  # pids/ exists and could be listed

    def hosts_of(self, cycle: int) -> set[str]:
        """The hosts that ran `cycle`: those with a pid record of it, or a leftovers record of it."""
        return {p.host for p in self.pids if p.cycle == cycle} | {h for h, c in self.records if c == cycle}


def _procs(value: object, what: str) -> tuple[Proc, ...]:
    if not isinstance(value, list) or len(value) > MAX_LISTED:
        raise ValueError(f"'{what}' is not a list")
    out = []
    for item in value:
        if not isinstance(item, dict):
            raise ValueError(f"an entry of '{what}' is not an object")
        proc = Proc(
            _int(item.get("pid")),
            _int(item.get("start_time")),
            _int(item.get("cycle")),
            _int(item.get("rank")),
            _int(item.get("used_memory_mib")),
        )
        if proc.pid is None:
            raise ValueError(f"an entry of '{what}' has no integer pid")
        out.append(proc)
    return tuple(out)


def _record(path: Path, rel: str, host: str, cycle: int, run_dir: Path) -> LeftoverRecord:
    here = Ref(rel)
    try:
        data = load_json_object(path, run_dir)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"schema is {data.get('schema')!r}, not {SCHEMA}")
        if data.get("host") != host or _int(data.get("cycle")) != cycle:
            raise ValueError(
                f"names host {data.get('host')!r} cycle {data.get('cycle')!r}, its file name "
                f"{host} cycle {cycle}"
            )
        earlier, alive = _procs(data.get("earlier"), "earlier"), _procs(data.get("alive"), "alive")
        gpu = data.get("gpu")
        if gpu is None:
            gpu = {"sampled": False, "error": "no 'gpu' entry"}
        if not isinstance(gpu, dict) or not isinstance(gpu.get("sampled"), bool):
            raise ValueError("'gpu' is not an object with a boolean 'sampled'")
        held = _procs(gpu.get("held_by_earlier") or [], "gpu.held_by_earlier") if gpu["sampled"] else ()
        error = gpu.get("error")
        unreadable = data.get("unreadable_pid_records") or []
        if not isinstance(unreadable, list):
            raise ValueError("'unreadable_pid_records' is not a list")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return LeftoverRecord(host, cycle, here, error=f"{rel} unreadable: {exc}")
    return LeftoverRecord(
        host,
        cycle,
        here,
        earlier=earlier,
        alive=alive,
        gpu_sampled=gpu["sampled"],
        gpu_error=str(error)[:200] if error is not None else None,
        held_by_earlier=held,
        unreadable_pid_records=tuple(str(item)[:200] for item in unreadable[:20]),
        shm_segments=_names(data.get("shm_segments")),
        agent_open_fds=_int(data.get("agent_open_fds")),
        shm=_shm(data.get("shm")),
    )


def _count(value: object) -> int:
    got = _int(value)
    if got is None or got < 0:
        raise ValueError(f"{value!r} is not a count of bytes or entries")
    return got


def _shm(value: object) -> ShmSample | None:
    """The record's `shm` block; None where the record has none (older records)."""
    if value is None:
        return None
    try:
        if not isinstance(value, dict):
            raise ValueError("'shm' is not an object")
        entries = value.get("entries")
        listed = None
        if entries is not None:
            if not isinstance(entries, list) or len(entries) > MAX_SHM_ENTRIES:
                raise ValueError(f"'shm.entries' is not a list of at most {MAX_SHM_ENTRIES}")
            listed = []
            for item in entries:
                if not isinstance(item, dict):
                    raise ValueError("an entry of 'shm.entries' is not an object")
                size, allocated = _count(item.get("size")), _count(item.get("allocated"))
                listed.append((str(item.get("name"))[:200], size, allocated))
        known = listed is not None
        count = _count(value["count"]) if known else None
        total = _count(value["size_bytes"]) if known else None
        allocated_total = _count(value["allocated_bytes"]) if known else None
        if known and count < len(listed):
            raise ValueError(f"'shm.count' {count} is below the {len(listed)} entries listed")
        fs = value.get("fs")
        room = None
        if fs is not None:
            if not isinstance(fs, dict):
                raise ValueError("'shm.fs' is not an object")
            room = ShmFs(*(_count(fs.get(k)) for k in ("size_bytes", "free_bytes", "inodes", "free_inodes")))
        error, fs_error = value.get("error"), value.get("fs_error")
    except (KeyError, ValueError) as exc:
        return ShmSample(error=f"'shm' is garbled: {exc}")
    return ShmSample(
        entries=tuple(listed) if listed is not None else None,
        count=count,
        size_bytes=total,
        allocated_bytes=allocated_total,
        fs=room,
        error=str(error)[:200] if error is not None else None,
        fs_error=str(fs_error)[:200] if fs_error is not None else (None if room else "no 'shm.fs' entry"),
    )


def _names(value: object) -> tuple[str, ...] | None:
    """A list of names (older records have none: None, not recorded)."""
    if not isinstance(value, list):
        return None
    return tuple(str(item)[:200] for item in value[:1000])


def _listing(folder: Path, run_dir: Path) -> list[str] | str:
    """The names in `folder`, or why they cannot be listed."""
    if not folder.is_dir():
        return f"{folder.name}/ is absent"
    if not inside(folder, run_dir):
        return f"{folder.name}/ resolves outside the run directory"
    try:
        names = os.listdir(folder)
    except OSError as exc:
        return f"{folder.name}/ cannot be listed: {exc.strerror or exc}"
    if len(names) > MAX_FILES:
        return f"{folder.name}/ holds {len(names)} files: not a real run"
    return names


def _pid_records(run_dir: Path) -> tuple[tuple[PidRecord, ...], bool]:
    names = _listing(run_dir / PIDS_DIR, run_dir)
    if isinstance(names, str):
        return (), False
    out = []
    for name in sorted(names):
        m = _PID.fullmatch(name)
        if not m:
            continue
        rel = f"{PIDS_DIR}/{name}"
        host, cycle, rank = m["host"], int(m["cycle"]), int(m["rank"])
        try:
            data = load_json_object(run_dir / rel, run_dir)
            pid, start = _int(data.get("pid")), _int(data.get("start_time"))
        except (OSError, UnicodeDecodeError, ValueError):
            pid = start = None
        out.append(PidRecord(host, cycle, rank, Ref(rel), pid, start))
    return tuple(out), True


def read_leftovers(run_dir: Path) -> tuple[Leftovers | None, SourceStatus]:
    """leftovers/ and pids/. (None, not ok) when leftovers/ cannot be listed; a record that cannot be read
    is kept with its error (and the source is then not complete)."""
    names = _listing(run_dir / LEFTOVERS_DIR, run_dir)
    if isinstance(names, str):
        return None, missing("leftovers", names)
    records: dict[tuple[str, int], LeftoverRecord] = {}
    for name in sorted(names):
        m = _RECORD.fullmatch(name)
        if not m:
            continue
        rel = f"{LEFTOVERS_DIR}/{name}"
        host, cycle = m["host"], int(m["cycle"])
        records[(host, cycle)] = _record(run_dir / rel, rel, host, cycle, run_dir)
    pids, listed = _pid_records(run_dir)
    bad = [r.ref.path for r in records.values() if r.error]
    status = SourceStatus(
        "leftovers",
        ok=True,
        complete=not bad,
        reason=f"unreadable: {', '.join(bad[:5])}" if bad else "",
        paths=tuple(r.ref.path for r in records.values()),
    )
    return Leftovers(records, pids, listed), status
