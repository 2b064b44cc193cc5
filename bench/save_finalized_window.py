#!/usr/bin/env python3
"""How short a `.metadata` to tracker window the save_finalized kill catches, with inotify and without.

    .venv/bin/python bench/save_finalized_window.py [--trials 20] [--gaps-us 100,300,1000,3000,10000]

A child process stands in for a rank's finalize: it writes iter_S's `.metadata` as torch does (`.metadata.tmp`
renamed), spins for the gap, then writes the tracker. This process runs the worker's own watch
(wait_for_metadata, as the freeze helper does) and stops the child (SIGSTOP) on its answer; a trial is caught
when the tracker still names the older checkpoint at the stop. For each gap and each way of waiting it prints
the share caught and the latency from the call of the rename to the stop (median and 95th percentile, µs):
`inotify` (the default scheduling: the woken watch may be queued behind the writer on its CPU), `inotify,
off the rank's CPU` (the helper's fallback), `inotify, SCHED_FIFO` (the helper's choice where permitted;
left out where not) and `poll` (a look every PHASE_POLL_SECONDS, where inotify is not there). Figures depend
on the machine and its load: run it on the machine whose ranks are to be killed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "workloads" / "megatron_gpt_worker.py"

FINALIZE = """
import os, sys, time
from pathlib import Path
folder, tracker, gap = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) / 1e6
sys.stdin.readline()
time.sleep(0.05)  # the watch is up by then
start = time.monotonic_ns()
(folder / ".metadata.tmp").write_bytes(b"m" * 4096)
renaming = time.monotonic_ns()
os.rename(folder / ".metadata.tmp", folder / ".metadata")
renamed = time.monotonic_ns()
while time.monotonic_ns() - renamed < gap * 1e9:
    pass
tracker.write_text("8")
print(renaming, flush=True)
time.sleep(60)
"""


def load_worker():
    spec = importlib.util.spec_from_file_location("megatron_gpt_worker", WORKER)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def trial(w, root: Path, gap_us: int, way: str) -> tuple[bool, float | None]:
    """(caught, latency in µs from the call of the rename to the stop)."""
    ckpt = root / "ckpt"
    (ckpt / "iter_0000004").mkdir(parents=True)
    folder = ckpt / "iter_0000008"
    folder.mkdir()
    (folder / "__0_0.distcp").write_bytes(b"x" * 4096)
    tracker = ckpt / w.TRACKER_NAME
    tracker.write_text("4")
    child = subprocess.Popen(
        [sys.executable, "-c", FINALIZE, str(folder), str(tracker), str(gap_us)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    allowed = os.sched_getaffinity(0)
    try:
        request = {"checkpoint_dir": str(ckpt), "save_iteration": 8}
        if way == WAYS[2]:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        avoid = child.pid if way == WAYS[1] else None
        child.stdin.write("go\n")  # no thread of this process may hold the GIL while the watch waits
        child.stdin.flush()
        stopped = []

        def stop() -> None:
            os.kill(child.pid, signal.SIGSTOP)
            stopped.append(time.monotonic_ns())

        inotify = way != WAYS[3]
        trigger, _ = w.wait_for_metadata(request, None, use_inotify=inotify, avoid_pid=avoid, on_seen=stop)
        if not stopped:  # the save went past unseen
            stop()
        caught = trigger is not None and tracker.read_text() == "4"
        os.kill(child.pid, signal.SIGCONT)
        renaming = child.stdout.readline()
        latency = (stopped[0] - int(renaming)) / 1000 if renaming.strip() else None
        return caught, latency
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.sched_setaffinity(0, allowed)
        child.kill()
        child.wait()


WAYS = ("inotify", "inotify, off the rank's CPU", "inotify, SCHED_FIFO", "poll")


def realtime_allowed() -> bool:
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        return False
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--gaps-us", default="100,300,1000,3000,10000")
    args = parser.parse_args(argv)
    w = load_worker()
    gaps = [int(g) for g in args.gaps_us.split(",")]
    print(f"cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.2f}, {args.trials} trials each\n")
    print("| gap (µs) | wait | caught | latency median (µs) | latency p95 (µs) |")
    print("|---|---|---|---|---|")
    ways = [way for way in WAYS if way != WAYS[2] or realtime_allowed()]
    for gap in gaps:
        for way in ways:
            results = []
            for _ in range(args.trials):
                with tempfile.TemporaryDirectory() as tmp:
                    results.append(trial(w, Path(tmp), gap, way))
            caught = sum(1 for ok, _ in results if ok)
            latencies = sorted(lat for _, lat in results if lat is not None)
            median = f"{statistics.median(latencies):.0f}" if latencies else "-"
            p95 = f"{latencies[int(0.95 * (len(latencies) - 1))]:.0f}" if latencies else "-"
            print(f"| {gap} | {way} | {caught}/{len(results)} | {median} | {p95} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
