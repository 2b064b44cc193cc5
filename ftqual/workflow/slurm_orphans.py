"""Slurm jobs left by a workflow that was killed outright: cancelled by the next run in the same directory.

Ctrl-C and a closed terminal make the executor plugin `scancel` the workflow's jobs. A workflow killed
outright (SIGKILL, the OOM killer, a reboot of the login node) cancels nothing: its jobs train on, on a
node nobody watches. On one H200 under Slurm the next run's stack probe (`srun --gpus=1`) then waited
three minutes behind them for the GPU, and its plan took their finished attempts for its own. So the next
real run, where no live workflow holds the directory's lock, cancels every queued job of this directory
that the plugin submitted (its comment names a rule) before it probes or plans, says which in one line,
and waits until they left the queue. Their run directories keep their evidence: the job's own handler
records the stop.
"""

from __future__ import annotations

import getpass
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# squeue's job id, working directory, comment (the plugin writes `rule_<rule>[_wildcards_<values>]`), state
SQUEUE_FORMAT = "%i|%Z|%k|%T"


@dataclass(frozen=True)
class QueuedJob:
    job_id: str
    workdir: str
    comment: str
    state: str

    def describe(self) -> str:
        what = self.comment.strip().removeprefix("rule_").replace("_wildcards_", " ", 1)
        return f"{self.job_id} ({what}, {self.state.lower()})"


def parse_squeue(text: str) -> list[QueuedJob]:
    jobs = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 4 and parts[0].strip():
            jobs.append(QueuedJob(*(part.strip() for part in parts)))
    return jobs


def orphans(jobs: list[QueuedJob], workdir: Path) -> list[QueuedJob]:
    """This directory's jobs that the executor plugin submitted."""
    here = os.path.realpath(workdir)
    return [j for j in jobs if j.comment.startswith("rule_") and os.path.realpath(j.workdir) == here]


def _list(run: Callable) -> subprocess.CompletedProcess:
    return run(["squeue", "-h", "-u", getpass.getuser(), "-o", SQUEUE_FORMAT], capture_output=True, text=True)


def cancel_orphans(
    workdir: Path,
    say: Callable[[str], None],
    run: Callable = subprocess.run,
    wait_s: float = 90.0,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Cancel the directory's jobs of an earlier workflow and wait (at most `wait_s`) until they have left
    the queue, so that none still holds a GPU or writes into the workspace; the ids cancelled. Called where
    no live workflow holds the directory's lock and this one has submitted nothing yet."""
    listed = _list(run)
    if listed.returncode != 0:
        problem = listed.stderr.strip()[:200]
        say(f"could not list this directory's Slurm jobs (squeue: {problem}); none cancelled")
        return []
    found = orphans(parse_squeue(listed.stdout), workdir)
    if not found:
        return []
    ids = [job.job_id for job in found]
    cancelled = run(["scancel", *ids], capture_output=True, text=True)
    if cancelled.returncode != 0:
        problem = cancelled.stderr.strip()[:200]
        say(f"could not cancel Slurm job(s) {', '.join(ids)} of an earlier workflow here: {problem}")
        return []
    say(
        f"cancelled Slurm job(s) {', '.join(job.describe() for job in found)} left in this directory by an "
        "earlier workflow that is gone; their run directories keep their evidence"
    )
    waited = 0.0
    while waited < wait_s:
        listed = _list(run)
        if listed.returncode == 0 and not {j.job_id for j in parse_squeue(listed.stdout)} & set(ids):
            return ids
        sleep(1.0)
        waited += 1.0
    say(f"Slurm job(s) {', '.join(ids)} still queued {wait_s:.0f} s after scancel; going on")
    return ids
