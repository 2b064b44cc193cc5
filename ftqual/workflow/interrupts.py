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

A signal that lands as a job starts: the main process's handler may run before the job is on record, and
Snakemake's local executor still starts a job it had already handed to its thread pool, then waits for it
(seen: a Ctrl-C right after `localrule run_scenario`, the baseline trained to its end). So the handler first
leaves a marker (`interrupted_by`: the signal, for this workflow process), then signals the jobs on record;
a job puts itself on record first, then looks for the marker (`stop_asked`), before it launches and while it
runs. Whichever comes first, the job sees one of the two.

Which process is the workflow: `forward_to_jobs` puts the main process's identity (host, pid, start ticks)
into its environment as FTQUAL_WORKFLOW, which every local job inherits. A job watches that process (and the
processes between it and the job) to notice a workflow killed outright, never the processes above it: a
shell that started `nohup snakemake ... &` and then exited is no reason to stop (`watched_chain`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
from base64 import urlsafe_b64encode
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from ftqual.jsonfile import write_json_atomic
from ftqual.launch import procs

JOBS = Path(".snakemake") / "ftqual-jobs"
# Not *.json: live_jobs reads every *.json there as a job.
MARKER = JOBS / "interrupted"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WORKFLOW_ENV = "FTQUAL_WORKFLOW"  # "<host> <pid> <start ticks>" of the workflow's main process


def identity(pid: int | None = None) -> str | None:
    """ "<host> <pid> <start ticks>" of process `pid` (this one by default); None when it is gone."""
    pid = os.getpid() if pid is None else pid
    start = procs.start_time(pid)
    return None if start is None else f"{socket.gethostname()} {pid} {start}"


def workflow_process(env: Mapping[str, str] = os.environ) -> tuple[int, int] | None:
    """(pid, start ticks) of the workflow that started this job, when it runs on this host; None otherwise
    (no record: a job started otherwise; another host: a Slurm job on its node)."""
    try:
        host, pid, start = env.get(WORKFLOW_ENV, "").split()
        return (int(pid), int(start)) if host == socket.gethostname() else None
    except ValueError:
        return None


def watched_chain(
    chain: Sequence[tuple[int, int]], workflow: tuple[int, int] | None
) -> list[tuple[int, int]]:
    """What a job watches of its `chain` (procs.ancestry(): parent first): the processes up to and including
    the workflow's main process where it is among them. Never what is above it: a shell that started the
    workflow in the background (`nohup make run &`) may exit, and the workflow runs on. Without the
    workflow among them (a Slurm job on its node, a job started by hand), the whole chain, as before."""
    if workflow is None or workflow not in chain:
        return list(chain)
    return list(chain[: chain.index(workflow) + 1])


def interrupted_by(workdir: Path, signum: int, workflow: str | None) -> None:
    """The main process's marker that it was interrupted by `signum`; written before the jobs on record
    are signalled, so that a job not yet on record finds it (module docstring)."""
    path = workdir / MARKER
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"workflow": workflow, "signal": signal.Signals(signum).name})


def stop_asked(workdir: Path, env: Mapping[str, str] = os.environ) -> str | None:
    """The signal that interrupted the workflow which started this job (its marker names this job's
    FTQUAL_WORKFLOW), or None: no marker, or one an earlier workflow left."""
    workflow = env.get(WORKFLOW_ENV)
    if not workflow:
        return None
    try:
        marker = json.loads((workdir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("workflow") != workflow:
        return None
    return str(marker.get("signal") or "interrupted")


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
    me = identity()
    if me is not None:
        # inherited by every job this workflow starts (Snakemake's shell passes os.environ on)
        os.environ[WORKFLOW_ENV] = me
    (workdir / MARKER).unlink(missing_ok=True)
    handled = []
    for sig in FORWARDED:
        # nohup's ignored SIGHUP is the user's choice to survive a closed terminal; an ignored SIGINT is only
        # a shell's habit for a background command (`snakemake ... &`), and a SIGINT sent to it is a request
        # to stop
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue

        def interrupt(signum, frame, workdir=workdir):
            name = signal.Signals(signum).name
            try:
                interrupted_by(workdir, signum, me)
            except OSError:  # a full or read-only disk: the jobs on record are still signalled
                pass
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
