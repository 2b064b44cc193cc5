"""`ftqual cleanup RUN_DIR`: kill what a run left behind on this host, by its recorded process groups.

ft_launcher starts every worker in its own session, and a SIGSTOPped rank ignores SIGTERM, so a launcher
that died (OOM, scheduler timeout, SIGKILL) leaves training processes holding GPUs. The run directory
records every process group that matters (pids/<host>.launcher.json by our launcher,
pids/<host>.cycle<N>.rank<R>.json by the worker wrapper); this module kills exactly those groups, never
anything found by name. A group is only touched after the process table proves it is still the recorded
one (same start time), so a pid the kernel reused is left alone; and a process is only signalled when its own
environment carries the run's ID (FTQUAL_RUN_ID, set by the launcher for everything it starts), so a
forged or stale pid record naming someone else's process cannot get it stopped or killed.

Order matters: the launcher is frozen (SIGSTOP) first so it cannot start replacement workers while we
kill, then its descendants are collected, then every group gets SIGCONT and SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ftqual.launch import procs

RECORD_NAME = re.compile(r"(?P<host>.+)\.(?P<kind>launcher|cycle[0-9]+\.rank[0-9]+)\.json")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


@dataclass(frozen=True)
class PidRecord:
    path: Path
    host: str
    kind: str  # "launcher" or "worker"
    pid: int
    pgid: int
    start_time: int


@dataclass(frozen=True)
class Target:
    """One process group to kill: members must have started at or after `not_before`."""

    pgid: int
    not_before: int
    leader_start: int | None  # exact start time of the leader when recorded; None when only inferred
    source: str


@dataclass
class CleanupReport:
    killed: list[dict] = field(default_factory=list)  # {"pid", "pgid", "source"}
    skipped: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def load_records(run_dir: Path, host: str) -> tuple[list[PidRecord], list[str]]:
    """This host's pid records, and the names of record files that could not be read."""
    records, bad = [], []
    pid_dir = run_dir / "pids"
    if not pid_dir.is_dir():
        return records, bad
    for path in sorted(pid_dir.iterdir()):
        match = RECORD_NAME.fullmatch(path.name)
        if not match or match["host"] != host:
            continue
        try:
            data = json.loads(path.read_text())
            records.append(
                PidRecord(
                    path=path,
                    host=host,
                    kind="launcher" if match["kind"] == "launcher" else "worker",
                    pid=int(data["pid"]),
                    pgid=int(data["pgid"]),
                    start_time=int(data["start_time"]),
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            bad.append(path.name)  # a record being written right now; the next round reads it
    return records, bad


def expected_run_id(run_dir: Path) -> str:
    """The run's ID: run.json's `run_id` when readable, else the directory's name (runs/<run-id>)."""
    try:
        value = json.loads((run_dir / "run.json").read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        value = None
    if isinstance(value, str) and RUN_ID.fullmatch(value):
        return value
    return run_dir.resolve().name


def _signal(pid: int, sig: int, group: bool) -> bool:
    try:
        (os.killpg if group else os.kill)(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _members(target: Target, snapshot: list[procs.ProcStat]) -> list[procs.ProcStat] | None:
    """Live members of the target group, or None when the group id now belongs to someone else."""
    leader = next((p for p in snapshot if p.pid == target.pgid), None)
    if leader is not None:
        expected_ok = (
            leader.start_time == target.leader_start
            if target.leader_start is not None
            else leader.start_time >= target.not_before
        )
        if not expected_ok:
            return None
    return [p for p in snapshot if p.pgid == target.pgid and p.start_time >= target.not_before]


def _targets(records: list[PidRecord], snapshot: list[procs.ProcStat]) -> list[Target]:
    targets = [
        Target(r.pgid, r.start_time, r.start_time if r.pgid == r.pid else None, r.path.name) for r in records
    ]
    for rec in records:
        if rec.kind != "launcher" or not any(
            p.pid == rec.pid and p.start_time == rec.start_time for p in snapshot
        ):
            continue
        # Workers live in their own sessions: find them through the launcher's process tree.
        for child in procs.descendants(rec.pid):
            targets.append(Target(child.pgid, rec.start_time, None, f"descendant of {rec.path.name}"))
    return targets


def _proven(
    candidates: dict[int, tuple[procs.ProcStat, str]], run_id: str, report: CleanupReport
) -> dict[int, tuple[procs.ProcStat, str]]:
    """Only the candidates whose environment carries the run's ID; the others are reported, untouched."""
    proven = {}
    for pid, (member, source) in candidates.items():
        if procs.carries_run_id(pid, run_id):
            proven[pid] = (member, source)
        else:
            note = (
                f"pid {pid} ({source}): its environment does not carry {procs.RUN_ID_ENV}={run_id}; "
                "not provably this run's, left alone"
            )
            if note not in report.skipped:
                report.skipped.append(note)
    return proven


def _freeze_launchers(
    records: list[PidRecord], protected: set[int], run_id: str, report: CleanupReport
) -> None:
    """SIGSTOP each live, proven ft_launcher so it cannot start replacement workers while we kill."""
    for rec in records:
        if rec.kind != "launcher" or {rec.pid, rec.pgid} & protected:
            continue
        if not procs.alive(rec.pid, rec.start_time):
            continue
        if _proven({rec.pid: (procs.read_stat(rec.pid), rec.path.name)}, run_id, report):
            _signal(rec.pid, signal.SIGSTOP, group=False)


def _candidates(
    records: list[PidRecord], snapshot: list[procs.ProcStat], protected: set[int], report: CleanupReport
) -> dict[int, tuple[procs.ProcStat, str]]:
    """Live members of the recorded groups (and the launchers' trees) whose start times fit."""
    candidates: dict[int, tuple[procs.ProcStat, str]] = {}
    for target in _targets(records, snapshot):
        if target.pgid in protected:
            continue
        members = _members(target, snapshot)
        if members is None:
            note = f"group {target.pgid} ({target.source}): id reused by another process"
            if note not in report.skipped:
                report.skipped.append(note)
            continue
        for member in members:
            if member.pid not in protected:
                candidates.setdefault(member.pid, (member, target.source))
    return candidates


def kill_run(
    run_dir: Path,
    host: str | None = None,
    rounds: int = 5,
    pause_s: float = 0.3,
    run_id: str | None = None,
) -> CleanupReport:
    """Kill every live, provably owned process of the run's recorded groups on this host."""
    host = host or procs.host_name()
    run_id = run_id or expected_run_id(run_dir)
    report = CleanupReport()
    protected = {os.getpid(), os.getpgrp()}
    killed_pids: set[int] = set()
    for round_no in range(rounds):
        records, bad = load_records(run_dir, host)
        _freeze_launchers(records, protected, run_id, report)
        snapshot = procs.all_procs()
        victims = _proven(_candidates(records, snapshot, protected, report), run_id, report)
        if not victims:
            report.unreadable = bad
            if not bad or round_no == rounds - 1:
                break
            time.sleep(pause_s)
            continue
        for member, _ in victims.values():
            _signal(member.pid, signal.SIGCONT, group=False)
        for member, source in victims.values():
            if _signal(member.pid, signal.SIGKILL, group=False) and member.pid not in killed_pids:
                killed_pids.add(member.pid)
                report.killed.append({"pid": member.pid, "pgid": member.pgid, "source": source})
        # Let the kernel finish them; the next round rereads the records (one written meanwhile lands).
        procs.wait_gone([member for member, _ in victims.values()], pause_s)
    return report


def survivors(run_dir: Path, host: str | None = None, run_id: str | None = None) -> list[procs.ProcStat]:
    """Live, provably owned processes of the run's recorded groups (what kill_run would kill now)."""
    host = host or procs.host_name()
    run_id = run_id or expected_run_id(run_dir)
    records, _ = load_records(run_dir, host)
    snapshot = procs.all_procs()
    candidates = _candidates(records, snapshot, {os.getpid()}, CleanupReport())
    return [member for member, _ in _proven(candidates, run_id, CleanupReport()).values()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ftqual cleanup", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="the run directory (runs/<run-id>)")
    parser.add_argument("--host", help="host name of the pid records (default: this host)")
    parser.add_argument("--dry-run", action="store_true", help="list survivors, kill nothing")
    parser.add_argument(
        "--run-id", help=f"the run ID its processes carry in {procs.RUN_ID_ENV} (default: from run.json)"
    )
    args = parser.parse_args(argv)
    if not args.run_dir.is_dir():
        print(f"ftqual cleanup: {args.run_dir} is not a directory", file=sys.stderr)
        return 2
    if args.run_id is not None and not RUN_ID.fullmatch(args.run_id):
        print(f"ftqual cleanup: --run-id {args.run_id!r} is not a run ID", file=sys.stderr)
        return 2
    if args.dry_run:
        for proc in survivors(args.run_dir, args.host, args.run_id):
            print(f"alive: pid {proc.pid} pgid {proc.pgid}")
        return 0
    report = kill_run(args.run_dir, args.host, run_id=args.run_id)
    for item in report.killed:
        print(f"killed pid {item['pid']} (group {item['pgid']}, {item['source']})")
    for line in report.skipped:
        print(f"skipped {line}")
    for name in report.unreadable:
        print(f"unreadable pid record: {name}", file=sys.stderr)
    if not report.killed:
        print("nothing left to kill")
    return 0
