"""How long is left: a run's elapsed time and an estimate of what remains, per scenario and workflow.

How long is left: the elapsed time of a run and an estimate of what remains, for the scenario and for the
workflow, from the configured timeouts and what was measured (the run's own pace, the baseline's start-up).

A scenario's duration = start-up + train_iters x seconds per iteration + per fault: its detection (a live
fault: its section's timeout + the monitor's interval; a crash: a second) + a restart's start-up + the
iterations replayed since the last checkpoint (half a save interval on average). The workflow's remaining
time is the current run's plus every scenario whose current attempt has no verdict yet. An estimate, said
as one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ftqual.contract import LIVE_FAULTS, family_of

MONITOR_S = 5.0  # ft_launcher's rank monitor sees a timeout within this of it firing
CRASH_DETECT_S = 1.0


@dataclass(frozen=True)
class Pace:
    s_per_iteration: float
    startup_s: float  # launch to the first step


def fault_cost_s(fault: str, timeouts: dict[str, float], pace: Pace, save_interval: int) -> float:
    """One fault: detection, a restart's start-up, the iterations replayed."""
    if family_of(fault) in (None, "none"):
        return 0.0
    detect = (timeouts.get("step") or 0.0) + MONITOR_S if fault in LIVE_FAULTS else CRASH_DETECT_S
    return detect + pace.startup_s + save_interval * pace.s_per_iteration / 2


def scenario_s(s, pace: Pace) -> float:
    """The whole scenario's expected duration (`s`: a resolved Scenario)."""
    faults = getattr(s, "injections", 1) if family_of(s.fault) not in (None, "none") else 0
    cost = fault_cost_s(s.fault, s.timeouts.as_dict(), pace, s.save_interval)
    return pace.startup_s + s.train_iters * pace.s_per_iteration + faults * cost


def run_left_s(s, pace: Pace, iteration: int | None, injected: bool, detected: bool) -> float:
    """What is left of the current run, from where it is."""
    done = iteration or 0
    left = max(0, s.train_iters - done) * pace.s_per_iteration
    if family_of(s.fault) not in (None, "none") and not (injected and detected):
        cost = fault_cost_s(s.fault, s.timeouts.as_dict(), pace, s.save_interval)
        left += cost
    return left


def baseline_pace(results: Path, baseline: str) -> Pace | None:
    """The baseline's measured pace (its verify report's iterations per second and start-up), if it ran."""
    for verify in sorted((results / baseline).glob("*/verify.json"), key=lambda p: p.stat().st_mtime):
        try:
            metrics = json.loads(verify.read_text()).get("metrics") or {}
        except (OSError, ValueError):
            continue
        rate, startup = metrics.get("iterations_per_s"), metrics.get("time_to_first_step_s")
        if isinstance(rate, int | float) and rate > 0 and isinstance(startup, int | float):
            return Pace(1.0 / rate, float(startup))
    return None


def pending(results: Path, keys: Mapping[str, str], current: str) -> list[str]:
    """The scenarios other than `current` whose current attempt has no verdict yet. `keys`: scenario ->
    the attempt key of the current settings and stack (ftqual.workflow.attempts.attempt_key); a verdict of
    an attempt under other settings is not this run's (it left every scenario out of the time left)."""
    return [
        name
        for name, key in keys.items()
        if name != current and not any((results / name).glob(f"{key}-*/verify.json"))
    ]


def human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def phrase(elapsed_s: float, run_left: float | None, workflow_left: float | None) -> str:
    out = f"{human(elapsed_s)} elapsed"
    if run_left is not None:
        out += f"; about {human(run_left)} left in this scenario"
    if workflow_left is not None:
        out += f", about {human(workflow_left)} in the workflow"
    return out
