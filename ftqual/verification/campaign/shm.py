"""A campaign's /dev/shm: what the faults leave there, in bytes and entries, judged against the room it eats.

Per host, from the first replacement cycle's leftovers record to the last (`leftovers/<host>.cycle<c>.json`,
written at each cycle's start before the workload runs), the growth of this user's /dev/shm per fault:
entries (each costs an inode) and allocated bytes (st_blocks * 512: what a tmpfs charges against its size),
over the faults between the two samples. Projected from the room the last sample saw (statvfs: free bytes,
free inodes), `faults_until_full` is the number of further faults after which /dev/shm would be full at that
rate. The campaign fails on it only when that comes within the horizon (`campaign.horizon_faults`, default
1000, ftqual.scenario.campaign_plan: a month-long job at scale meets tens to hundreds of faults); a smaller
leak is a
finding, named by family (`sem.loky-*`, `torch_*`, `cuda.shm.*`), creator (the dead rank a pid in the name
belongs to), bytes per fault and faults until full, and does not fail.

Records written before sizes were kept (names only) cannot tell bytes or room: a leak of entries there is
inconclusive (the count per fault is given, the room it eats is unknown), never a pass; names that do not
grow pass with a note that sizes were not recorded. The room is what was free at a cycle start, before
that cycle's workload made its own live segments: a job needs that much more while it trains.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from ftqual.verification.campaign.text import human_bytes
from ftqual.verification.evidence.leftovers import LeftoverRecord
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.snapshot import RunSnapshot

NAMED_FAMILIES = 6


@dataclass(frozen=True)
class Point:
    """One host's /dev/shm at one cycle's start."""

    cycle: int
    names: tuple[str, ...]
    count: int
    allocated_bytes: int | None  # None: the record keeps names only
    size_bytes: int | None
    sizes: dict[str, tuple[int, int]] | None  # name -> (st_size, allocated)
    free_bytes: int | None
    free_inodes: int | None
    inodes: int | None  # 0: no inode limit reported
    fs_size_bytes: int | None
    ref: Ref
    earlier: dict[int, tuple[int | None, int | None]]  # pid of an earlier worker -> (cycle, rank)


def point(record: LeftoverRecord) -> Point | None:
    """The record's /dev/shm, None where it has none (unreadable, not listed)."""
    if record.error is not None:
        return None
    shm = record.shm
    earlier = {p.pid: (p.cycle, p.rank) for p in record.earlier if p.pid is not None}
    if shm is not None and shm.error is None and shm.entries is not None and shm.count is not None:
        fs = shm.fs
        return Point(
            record.cycle,
            tuple(name for name, _, _ in shm.entries),
            shm.count,
            shm.allocated_bytes,
            shm.size_bytes,
            {name: (size, allocated) for name, size, allocated in shm.entries},
            fs.free_bytes if fs else None,
            fs.free_inodes if fs else None,
            fs.inodes if fs else None,
            fs.size_bytes if fs else None,
            record.ref,
            earlier,
        )
    if record.shm_segments is None:
        return None
    names = record.shm_segments
    unknown = (None,) * 7  # sizes and room: a record with names only
    return Point(record.cycle, names, len(names), *unknown, record.ref, earlier)


def shm_family(name: str) -> str:
    """`torch_1040_2992804948_0` -> `torch_*`, `sem.loky-1040-13h3` -> `sem.loky-*`, `cuda.shm.0.2b3.1` ->
    `cuda.shm.*`: the name up to its first part with a digit (a pid, a counter, a random tail)."""
    head = re.match(r"[^0-9]*?(?=[._-][^._-]*[0-9]|$)", name)
    stem = head.group(0) if head else ""
    return f"{stem}{name[len(stem)]}*" if stem and len(stem) < len(name) else name


def _creator(name: str, earlier: dict[int, tuple[int | None, int | None]]) -> tuple[int, int | None] | None:
    """(pid, rank) of the earlier worker whose pid the name carries: in decimal (`torch_<pid>_...`,
    `sem.loky-<pid>-...`) or, for CUDA's IPC segments, in hex (`cuda.shm.<device>.<pid in hex>.<n>`)."""
    parts = re.split(r"[._-]", name)
    pids = [int(part) for part in parts if part.isdigit()]
    if name.startswith("cuda.shm.") and len(parts) > 3 and re.fullmatch(r"[0-9a-f]{1,8}", parts[3]):
        pids.insert(0, int(parts[3], 16))
    for pid in pids:
        if pid in earlier:
            return pid, earlier[pid][1]
    return None


def families(new: list[str], last: Point) -> list[dict]:
    """The new entries by family, most first: count, bytes where known, the dead ranks that created them."""
    out: dict[str, dict] = {}
    for name in new:
        key = shm_family(name)
        fam = out.setdefault(
            key,
            {
                "family": key,
                "entries": 0,
                "allocated_bytes": None,
                "of_dead": 0,
                "pids": set(),
                "ranks": set(),
            },
        )
        fam["entries"] += 1
        if last.sizes is not None and name in last.sizes:
            fam["allocated_bytes"] = (fam["allocated_bytes"] or 0) + last.sizes[name][1]
        made = _creator(name, last.earlier)
        if made is not None:
            fam["of_dead"] += 1
            fam["pids"].add(made[0])
            if made[1] is not None:
                fam["ranks"].add(made[1])
    listed = sorted(out.values(), key=lambda f: (-f["entries"], f["family"]))
    return [
        {**f, "pids": len(f["pids"]), "ranks": sorted(f["ranks"])} for f in listed
    ]  # pids: how many dead processes' names it carries


def _family_text(fam: dict) -> str:
    said = f"{fam['family']} {fam['entries']}"
    if fam["allocated_bytes"] is not None:
        said += f" ({human_bytes(fam['allocated_bytes'])})"
    if fam["pids"]:
        ranks = ", ".join(str(r) for r in fam["ranks"]) or "?"
        said += f", carrying the pids of {fam['pids']} dead process(es) of rank {ranks}"
    return said


def _until(free: int | None, per_fault: float) -> int | None:
    """Further faults before `free` is used up at `per_fault`; None: never (no growth) or unknown."""
    if free is None or per_fault <= 0:
        return None
    return math.floor(free / per_fault)


@dataclass(frozen=True)
class Projection:
    host: str
    from_cycle: int
    to_cycle: int
    faults: int
    new_entries: int
    entries_per_fault: float
    bytes_per_fault: float | None  # allocated; None: sizes not recorded at both ends
    size_per_fault: float | None  # st_size
    free_bytes: int | None  # at the last sample
    free_inodes: int | None
    inodes: int | None
    fs_size_bytes: int | None
    faults_until_full_space: int | None
    faults_until_full_inodes: int | None
    faults_until_full: int | None  # the sooner of the two; None: never, or unknown (see `known`)
    full_by: str | None  # "space" | "inodes"
    horizon_faults: int
    within_horizon: bool | None  # None: cannot be told (sizes or room unknown)
    leaks: bool
    known: bool  # bytes and room known at both ends
    families: list[dict]
    of_dead: int  # new entries naming a dead rank process's pid
    ref: str

    def as_dict(self) -> dict:
        return asdict(self)


def project(host: str, first: Point, last: Point, horizon: int) -> Projection:
    """What /dev/shm gained from `first` to `last` per fault, and when at that rate it would be full."""
    faults = max(1, last.cycle - first.cycle)
    new = sorted(set(last.names) - set(first.names))
    per_entry = (last.count - first.count) / faults
    sized = first.allocated_bytes is not None and last.allocated_bytes is not None
    per_byte = (last.allocated_bytes - first.allocated_bytes) / faults if sized else None
    per_size = (last.size_bytes - first.size_bytes) / faults if sized else None
    room = last.free_bytes is not None and last.free_inodes is not None
    known = sized and room
    space = _until(last.free_bytes, per_byte) if per_byte is not None else None
    inodes = _until(last.free_inodes, per_entry) if last.inodes else None  # inodes 0: no limit
    soonest = [(n, by) for n, by in ((space, "space"), (inodes, "inodes")) if n is not None]
    until, by = min(soonest) if soonest else (None, None)
    leaks = per_entry > 0 or (per_byte or 0) > 0
    within = until < horizon if until is not None else (False if known else None)
    fams = families(new, last)
    return Projection(
        host=host,
        from_cycle=first.cycle,
        to_cycle=last.cycle,
        faults=faults,
        new_entries=len(new),
        entries_per_fault=round(per_entry, 3),
        bytes_per_fault=round(per_byte, 1) if per_byte is not None else None,
        size_per_fault=round(per_size, 1) if per_size is not None else None,
        free_bytes=last.free_bytes,
        free_inodes=last.free_inodes,
        inodes=last.inodes,
        fs_size_bytes=last.fs_size_bytes,
        faults_until_full_space=space,
        faults_until_full_inodes=inodes,
        faults_until_full=until,
        full_by=by,
        horizon_faults=horizon,
        within_horizon=within,
        leaks=leaks,
        known=known,
        families=fams,
        of_dead=sum(f["of_dead"] for f in fams),
        ref=last.ref.path,
    )


def projections(snap: RunSnapshot, horizon: int) -> tuple[list[Projection], list[str]]:
    """One projection per host with two sampled cycle starts, and what could not be sampled."""
    by_host: dict[str, list[Point]] = {}
    gaps: list[str] = []
    for (host, cycle), record in sorted(snap.leftovers.records.items() if snap.leftovers else ()):
        got = point(record)
        if got is None:
            why = record.error or (record.shm.error if record.shm else None) or "no /dev/shm listing"
            gaps.append(f"{host} cycle {cycle}: {why}")
            continue
        by_host.setdefault(host, []).append(got)
    out = [project(host, pts[0], pts[-1], horizon) for host, pts in sorted(by_host.items()) if len(pts) >= 2]
    return out, gaps


def describe(p: Projection) -> str:
    """One line: the growth per fault, the families, the room and the faults until full."""
    said = (
        f"/dev/shm on {p.host}: {p.new_entries} entries at the start of cycle {p.to_cycle} that cycle "
        f"{p.from_cycle}'s start did not have, {p.entries_per_fault:g} entries"
    )
    if p.bytes_per_fault is not None:
        said += f" and {human_bytes(p.bytes_per_fault)} allocated"
    said += f" per fault over {p.faults} faults"
    if p.families:
        shown = p.families[:NAMED_FAMILIES]
        more = f", {len(p.families) - len(shown)} more families" if len(p.families) > len(shown) else ""
        said += f" ({'; '.join(_family_text(f) for f in shown)}{more})"
    if p.of_dead:
        said += f"; {p.of_dead} name the pid of a rank process of an earlier cycle, which died leaving them"
    if p.free_bytes is not None:
        inodes = f", {p.free_inodes:,} of {p.inodes:,} inodes" if p.inodes else ", no inode limit"
        said += (
            f"; {human_bytes(p.free_bytes)} of {human_bytes(p.fs_size_bytes or 0)} free{inodes} at cycle "
            f"{p.to_cycle}'s start"
        )
    if p.faults_until_full is not None:
        said += f": faults until full {p.faults_until_full:,} (by {p.full_by})"
    elif p.known:
        said += ": faults until full: never at this rate"
    return said
