"""A signal sent to the workflow's own process reaches every scenario run it started.

Why: a terminal's Ctrl-C signals the whole foreground process group, so each run_scenario job gets its own
SIGINT and stops its launcher. A SIGINT or SIGTERM sent to Snakemake's pid alone (a CI cancel, `kill <pid>`, a
supervising script) reaches Snakemake only: with the local executor it stops scheduling and then waits for the
running jobs to end, and its SIGTERM is a "graceful" stop that waits the same way, so a baseline trained on to
its last iteration after the signal.

How: each run_scenario job records itself (pid, start time, host) in `.snakemake/ftqual-jobs/` of the working
directory while its launcher may run (`registered`). The main process, from `onstart` (after Snakemake has
installed its own SIGTERM handler), handles SIGINT, SIGTERM and SIGHUP (unless ignored: nohup) by sending the
same signal to every recorded job of this host that is still the process it recorded, then stopping as Ctrl-C
does: a KeyboardInterrupt, on which Snakemake cancels its jobs (under Slurm it scancels them) and releases its
lock. A job's own handler stops its launcher at the first signal and ignores a second, so a Ctrl-C that
reaches the job twice (from the terminal and from here) stops it once.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from base64 import urlsafe_b64encode
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ftqual.jsonfile import write_json_atomic
from ftqual.launch import procs

JOBS = Path(".snakemake") / "ftqual-jobs"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def registered(workdir: Path) -> Iterator[Path]:
    """This job on record in `workdir` while the block runs, so that a signal to the workflow reaches it."""
    path = workdir / JOBS / f"{os.getpid()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(
        path, {"pid": os.getpid(), "start_ticks": procs.start_time(os.getpid()), "host": socket.gethostname()}
    )
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def live_jobs(workdir: Path) -> list[int]:
    """The recorded jobs of this host that are still the processes they recorded (a reused pid is not)."""
    found = []
    for path in sorted((workdir / JOBS).glob("*.json")):
        try:
            job = json.loads(path.read_text())
            pid, start = int(job["pid"]), job.get("start_ticks")
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if job.get("host") == socket.gethostname() and start is not None and procs.start_time(pid) == start:
            found.append(pid)
    return found


def forward(workdir: Path, signum: int, kill: Callable[[int, int], None] = os.kill) -> list[int]:
    """Send `signum` to every live recorded job; the pids it reached."""
    reached = []
    for pid in live_jobs(workdir):
        if pid == os.getpid():
            continue
        try:
            kill(pid, signum)
            reached.append(pid)
        except ProcessLookupError:
            continue
    return reached


def forward_to_jobs(workdir: Path, say: Callable[[str], None]) -> list[signal.Signals]:
    """In the main process: SIGINT, SIGTERM and SIGHUP (unless ignored) reach the recorded jobs, then stop
    the workflow as Ctrl-C does, also where a shell started it with SIGINT ignored. Returns the signals
    handled."""
    handled = []
    for sig in FORWARDED:
        # nohup's ignored SIGHUP is the user's choice to survive a closed terminal; an ignored SIGINT is only
        # a shell's habit for a background command (`snakemake ... &`), and a SIGINT sent to it is a request
        # to stop
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue

        def interrupt(signum, frame, workdir=workdir):
            name = signal.Signals(signum).name
            reached = forward(workdir, signum)
            if reached:
                say(f"ftqual: {name}: stopping the scenario runs (jobs {', '.join(map(str, reached))})")
            raise KeyboardInterrupt(name)

        signal.signal(sig, interrupt)
        handled.append(sig)
    return handled


def left_incomplete(workdir: Path, output: str) -> bool:
    """Whether Snakemake marks `output` (as the rule names it, relative to `workdir`) incomplete: a job
    that started and was never seen to end, as an interrupted workflow leaves it. The file may exist (its
    job ran on after Snakemake stopped); Snakemake reruns it and deletes it first (rerun-incomplete). Read
    where Snakemake 9's persistence keeps the marker: .snakemake/incomplete/<urlsafe base64 of the path>
    (a name too long for the filesystem is split into folders; ftqual's paths are far shorter)."""
    return (workdir / ".snakemake" / "incomplete" / urlsafe_b64encode(output.encode()).decode()).exists()
