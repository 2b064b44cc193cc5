#!/usr/bin/env python3
"""ft_launcher's entrypoint on every rank: run the workload in-process, inject one fault, once per run.

    megatron_gpt_worker.py --entrypoint FILE --checkpoint-dir DIR --fault-marker FILE
        --fault none|kill|hang [--fault-rank N] [--run-id ID] [--hang-placement step|immediate]
        [--pid-dir DIR] -- <workload args>
    (--megatron-path DIR is accepted as --entrypoint DIR/pretrain_gpt.py)

The workload runs in this process (runpy, as `__main__`), so the pid that NVRx's rank monitor watches is the
pid we signal. On the fault rank a daemon thread polls the checkpoint tracker; once it advances past its
startup value the rank claims the marker (O_CREAT|O_EXCL, fsynced) and sends itself SIGKILL (kill) or SIGSTOP
(hang). With placement `step` (the default, for both faults; `--hang-placement` keeps the walkthrough's
variable's name) the training thread itself claims the marker and signals at the start of the next NVRx `step`
section (seen by wrapping RankMonitorClient.start_section/end_section in this process), so a hang is detected
by the step timeout rather than whichever section happened to be open; `immediate` signals from the poller
thread at once, as the walkthrough does (and lands wherever training is once the marker is fsynced).
Replacement workers find the marker and never inject again. A requested fault that never happened fails the
fault rank at exit, so an uninterrupted run cannot pass as a recovery.

Standard library only, and no work at import time: NVRx's persistent checkpoint worker is started with
`spawn`, which re-imports the main script; tests import this file to unit-test the helpers.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import signal
import socket
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

MARKER_SCHEMA = "ftqual.fault/v1"
# Copies of ftqual.contract (this file stays stdlib-only); tests/test_contract.py pins them to it.
TRACKER_NAME = "latest_checkpointed_iteration.txt"
FAULTS = ("none", "kill", "hang")
POLL_SECONDS = 0.2
INJECT_PREFIX = "[ftqual-inject]"
LOG_PREFIX = "[ftqual-worker]"
EXIT_BAD_TRACKER = 2
EXIT_FAULT_NEVER_INJECTED = 3


class TrackerError(Exception):
    """The tracker exists but cannot be trusted (empty, not an integer, unreadable)."""


def log(message: str) -> None:
    print(f"{LOG_PREFIX} {message}", file=sys.stderr, flush=True)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read_tracker_baseline(path: Path) -> int:
    """The tracker's iteration at startup: 0 when absent; TrackerError when empty, invalid or unreadable.

    An empty file is not zero: Megatron truncates then writes it, so empty means "unknown", and treating it
    as 0 would let an old checkpoint trigger the injection.
    """
    try:
        text = path.read_text()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError) as exc:
        raise TrackerError(f"checkpoint tracker {path} is unreadable: {exc}") from exc
    value = text.strip()
    if not value:
        raise TrackerError(f"checkpoint tracker {path} is empty")
    if not value.isdigit() or not value.isascii():
        raise TrackerError(f"checkpoint tracker {path} does not hold an integer iteration: {value[:40]!r}")
    return int(value)


def poll_tracker(path: Path) -> int | None:
    """The tracker's iteration now, or None for any read failure (absent, mid-write, garbage)."""
    try:
        value = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(value) if value.isdigit() and value.isascii() else None


def claim_marker(path: Path, record: dict) -> bool:
    """Create the marker exclusively and make it durable; False when it already exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(fd, (json.dumps(record, indent=2) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the new directory entry must survive a crash too
    finally:
        os.close(dir_fd)
    return True


def proc_start_time(pid: int | str = "self") -> int:
    """Field 22 of /proc/<pid>/stat: start time in clock ticks since boot."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return int(text.rpartition(")")[2].split()[19])


def write_pid_record(pid_dir: Path, host: str, cycle: int, rank: int, local_rank: int) -> Path:
    record = {
        "pid": os.getpid(),
        "pgid": os.getpgrp(),
        "start_time": proc_start_time(),
        "rank": rank,
        "local_rank": local_rank,
        "cycle": cycle,
        "host": host,
    }
    path = pid_dir / f"{host}.cycle{cycle}.rank{rank}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)
    return path


class SectionWatch:
    """The NVRx sections this process has open, as seen through RankMonitorClient's methods."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: list[str] = []
        self.on_start = None  # called with the section name after a section opened

    def started(self, name: str) -> None:
        with self.lock:
            self.open.append(name)
        if self.on_start is not None:
            self.on_start(name)

    def ended(self, name: str | None) -> None:
        with self.lock:
            if name is None:
                self.open.clear()
            elif name in self.open:
                self.open.remove(name)

    def current(self) -> str | None:
        with self.lock:
            return self.open[-1] if self.open else None

    def inside(self, name: str) -> bool:
        with self.lock:
            return name in self.open


def install_section_hooks(watch: SectionWatch) -> bool:
    """Wrap RankMonitorClient's section methods in this process; False when NVRx is not importable."""
    try:
        from nvidia_resiliency_ext.fault_tolerance.rank_monitor_client import RankMonitorClient
    except Exception:  # any import failure means: no hooks, inject immediately
        return False
    original_start = RankMonitorClient.start_section
    original_end = RankMonitorClient.end_section
    original_end_all = RankMonitorClient.end_all_sections

    def start_section(self, section):
        result = original_start(self, section)
        watch.started(section)  # after the monitor knows, so an injection lands inside the section
        return result

    def end_section(self, section):
        watch.ended(section)
        return original_end(self, section)

    def end_all_sections(self):
        watch.ended(None)
        return original_end_all(self)

    RankMonitorClient.start_section = start_section
    RankMonitorClient.end_section = end_section
    RankMonitorClient.end_all_sections = end_all_sections
    return True


class Injector:
    """Once-only fault injection on the fault rank, triggered by the tracker advancing past its baseline."""

    def __init__(
        self,
        *,
        fault: str,
        placement: str,
        tracker: Path,
        marker: Path,
        baseline: int,
        identity: dict,
        watch: SectionWatch | None,
        kill=os.kill,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.fault = fault
        self.placement = placement if watch is not None else "immediate"
        self.tracker = tracker
        self.marker = marker
        self.baseline = baseline
        self.identity = identity  # run_id, rank, local_rank, host, cycle
        self.watch = watch
        self.kill = kill
        self.poll_seconds = poll_seconds
        self.lock = threading.Lock()
        self.armed_at: int | None = None  # the tracker value that triggered us
        self.finished = False  # injected, gave up, or the workload ended
        self.stop = threading.Event()
        if watch is not None:
            watch.on_start = self._on_section_start

    def record(self, section: str | None) -> dict:
        return {
            "schema": MARKER_SCHEMA,
            "run_id": self.identity["run_id"],
            "fault": self.fault,
            "rank": self.identity["rank"],
            "local_rank": self.identity["local_rank"],
            "host": self.identity["host"],
            "pid": os.getpid(),
            "cycle": self.identity["cycle"],
            "baseline_iteration": self.baseline,
            "checkpoint_iteration": self.armed_at,
            "injected_at": utc_now(),
            "placement": self.placement,
            "section": section,
        }

    def inject(self, section: str | None) -> bool:
        """Claim the marker and signal ourselves; at most once, never after the workload ended."""
        with self.lock:
            if self.finished or self.armed_at is None:
                return False
            self.finished = True
        record = self.record(section)
        if not claim_marker(self.marker, record):
            log(f"marker {self.marker} already exists; not injecting")
            return False
        print(f"{INJECT_PREFIX} {json.dumps(record)}", file=sys.stderr, flush=True)
        self.kill(os.getpid(), signal.SIGKILL if self.fault == "kill" else signal.SIGSTOP)
        return True

    def on_tracker(self, value: int | None) -> bool:
        """One poll result; True once armed (the poller can stop)."""
        if value is None or value <= self.baseline:
            return False
        with self.lock:
            if self.armed_at is None:
                self.armed_at = value
        if self.placement == "immediate":
            self.inject(self.watch.current() if self.watch else None)
        # else: the next start_section("step") injects, on the training thread itself (see
        # _on_section_start). Injecting from this poller thread while a step is open would race: claiming
        # and fsyncing the marker takes tens of milliseconds on a shared filesystem, longer than a whole
        # step of a small model on a GPU, so the signal would land wherever training had moved on to
        # (seen on an H200: decided inside 'step', stopped inside 'checkpointing', detected after 300 s).
        return True

    def _on_section_start(self, name: str) -> None:
        if name == "step" and self.placement == "step" and self.armed_at is not None:
            self.inject("step")

    def poll_forever(self) -> None:
        while not self.stop.is_set():
            if self.on_tracker(poll_tracker(self.tracker)):
                return
            self.stop.wait(self.poll_seconds)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.poll_forever, name="ftqual-injector", daemon=True)
        thread.start()
        return thread

    def finish(self) -> None:
        """The workload ended: never inject from now on."""
        self.stop.set()
        with self.lock:
            self.finished = True


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        own, workload = argv[:cut], argv[cut + 1 :]
    else:
        own, workload = argv, []
    parser = argparse.ArgumentParser(prog="megatron_gpt_worker.py", description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--entrypoint", type=Path, help="the training script to run (e.g. pretrain_gpt.py)")
    where.add_argument("--megatron-path", type=Path, help="a Megatron-LM checkout: runs its pretrain_gpt.py")
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    parser.add_argument("--fault-marker", type=Path, required=True)
    parser.add_argument("--fault", choices=FAULTS, required=True)
    parser.add_argument("--fault-rank", type=int, default=None)
    parser.add_argument("--run-id", default=None, help="default: TORCHELASTIC_RUN_ID")
    parser.add_argument("--hang-placement", choices=("step", "immediate"), default="step")
    parser.add_argument("--pid-dir", type=Path, default=None)
    args = parser.parse_args(own)
    if args.megatron_path is not None:
        args.entrypoint = args.megatron_path / "pretrain_gpt.py"
    if args.fault != "none" and args.fault_rank is None:
        parser.error("--fault-rank is required with --fault kill|hang")
    return args, workload


def run_entrypoint(entrypoint: Path, workload_args: list[str]) -> int:
    """Run the workload as `__main__` in this process; returns its exit status."""
    sys.argv = [str(entrypoint), *workload_args]
    sys.path[0] = str(entrypoint.parent)  # what `python entrypoint` would put there
    try:
        runpy.run_path(str(entrypoint), run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    args, workload_args = parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cycle = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    host = socket.gethostname()
    if args.pid_dir is not None:
        write_pid_record(args.pid_dir, host, cycle, rank, local_rank)

    tracker = args.checkpoint_dir / TRACKER_NAME
    try:
        baseline = read_tracker_baseline(tracker)
    except TrackerError as exc:
        log(f"{exc}; refusing to start the workload (fix or archive the tracker)")
        return EXIT_BAD_TRACKER

    injector = None
    fault_here = args.fault != "none" and rank == args.fault_rank
    if fault_here and args.fault_marker.exists():
        log(f"marker {args.fault_marker} exists (an earlier cycle injected); not injecting again")
        fault_here = False
    elif fault_here:
        watch = SectionWatch()
        if not install_section_hooks(watch):
            log(
                "NVRx is not importable here: sections are unknown, injecting as soon as the tracker advances"
            )
            watch = None
        injector = Injector(
            fault=args.fault,
            placement=args.hang_placement,
            tracker=tracker,
            marker=args.fault_marker,
            baseline=baseline,
            identity={
                "run_id": args.run_id or os.environ.get("TORCHELASTIC_RUN_ID", ""),
                "rank": rank,
                "local_rank": local_rank,
                "host": host,
                "cycle": cycle,
            },
            watch=watch,
        )
        log(
            f"fault {args.fault} armed on rank {rank} (cycle {cycle}): waiting for the tracker to pass "
            f"{baseline}, placement {injector.placement}"
        )
        injector.start()

    status = run_entrypoint(args.entrypoint, workload_args)
    if injector is not None:
        injector.finish()
        if status == 0 and not args.fault_marker.exists():
            log(
                f"the requested {args.fault} fault was never injected (tracker stayed at or below {baseline} "
                "while a step could follow); failing so an uninterrupted run cannot pass as recovery"
            )
            return EXIT_FAULT_NEVER_INJECTED
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
