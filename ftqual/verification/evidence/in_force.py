"""The section timeouts in force at a line of a cycle's training log, under calculated timeouts.

With `calc_ft_timeouts` NVRx starts each cycle with the initial values or the ones ft_state.json persisted
(`FT: initialized. Timeouts=...`) and replaces them at each update it prints (`FT: updated timeouts saved
to ...`): the values in force at a line are the cycle's start updated by every update printed before it.
The same lines `ftqual.verification.checks.calculated` reads; pure, no pattern of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.train_log import FtInit, TrainLog

KEYS = ("setup", "step", "checkpointing", "out_of_section")


@dataclass(frozen=True)
class InForce:
    """The timeouts in force (seconds per section; a section NVRx did not print is left out) and where
    they were set."""

    values: Mapping[str, float]
    source: str  # said in a check's detail
    ref: Ref | None = None


def _values(init: FtInit) -> dict[str, float]:
    raw = {**{k: init.sections.get(k) for k in KEYS[:3]}, "out_of_section": init.out_of_section}
    return {k: float(v) for k, v in raw.items() if v is not None}


def in_force(log: TrainLog | None, line: int | None = None) -> InForce | None:
    """The values in force in `log`'s cycle before `line` (None: at its end); None when the log printed no
    `FT: initialized` line (nothing to say what was in force)."""
    if log is None or not log.ft_inits:
        return None
    start = log.ft_inits[-1]
    where = "loaded from ft_state.json" if log.ft_loaded else "initial"
    found = InForce(_values(start), f"cycle {log.cycle}'s start ({where})", start.ref)
    for update in log.ft_updates:
        if line is not None and update.ref.line >= line:
            break
        found = InForce(
            {**found.values, **_values(update)},
            f"NVRx's calculation in cycle {log.cycle} ({update.ref.path}:{update.ref.line})",
            update.ref,
        )
    return found


def injection_line(log: TrainLog | None, number: int) -> int | None:
    """The line of injection `number`'s `[ftqual-inject]` record in `log`, if printed there."""
    if log is None:
        return None
    for item in log.injections:
        if isinstance(item.payload, dict) and item.payload.get("injection", 1) == number:
            return item.ref.line
    return None
