"""How long our launcher may wait for ft_launcher's own shutdown after a stop from outside.

Outside a scheduler the wait is ft_launcher's --term-timeout plus a margin: a SIGSTOPped rank ignores SIGTERM,
so past that every recorded process group of the run is killed. Inside a Slurm job a cancel (scancel, a time
limit, a stopped workflow) signals every process of the job at once and SIGKILLs what still lives KillWait
seconds later: a launcher still waiting then dies before it records the run's end (seen on a busy CI
machine: ft_launcher, hit by two SIGTERMs, sat in its shutdown for more than Slurm's 10 s, and run.json kept
no exit code). So inside a job the wait ends `RESERVE_S` before Slurm's KillWait, read from
`scontrol show config` once at the start, leaving the cleanup and the records their time.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping

# What the cleanup (ftqual.launch.cleanup.kill_run) and the two records need after the wait, on a busy node.
RESERVE_S = 3.0
SCONTROL_TIMEOUT_S = 5
_KILL_WAIT = re.compile(r"^\s*KillWait\s*=\s*(\d+)\s*sec", re.M)

Runner = Callable[..., subprocess.CompletedProcess]


def parse_kill_wait(config_text: str) -> int | None:
    """Slurm's KillWait in seconds, from `scontrol show config`'s text; None when it is not there."""
    found = _KILL_WAIT.search(config_text)
    return int(found.group(1)) if found else None


def slurm_kill_wait_s(env: Mapping[str, str], run: Runner = subprocess.run) -> int | None:
    """KillWait of the Slurm cluster this job runs in; None outside a Slurm job or when scontrol cannot say
    (then the stop is bounded by the term-timeout and margin alone)."""
    if not env.get("SLURM_JOB_ID"):
        return None
    try:
        done = run(
            ["scontrol", "show", "config"],
            capture_output=True,
            text=True,
            timeout=SCONTROL_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return parse_kill_wait(done.stdout) if done.returncode == 0 else None


def wait_budget_s(term_timeout: float, margin_s: float, kill_wait_s: int | None) -> float:
    """Seconds to wait for ft_launcher after the stop before killing the run's processes ourselves."""
    budget = float(term_timeout) + float(margin_s)
    if kill_wait_s is None:
        return budget
    return max(0.0, min(budget, kill_wait_s - RESERVE_S))
