"""How long a rank whose fault unwinds (an exception, SIGINT) lived on after the injection.

How long a rank whose fault unwinds (an exception, SIGINT: ftqual.contract.UNWINDING_FAULTS) lived on after
its fault, and what held it (pure functions of a RunSnapshot).

Such a rank prints its traceback and then exits when its interpreter has finished shutting down: at once on
CPU (1.2 s), or much later where the interpreter waits for something at shutdown (on one H200 with
Megatron-LM, 37.4 s: the main thread joining the DataLoader's worker processes). Either its own exit or the
open section's timeout ends it, and both are a detection; which comes first depends on the timeout, so the
verdict must not. The linger is measured from the injection (`injected_at`: the traceback's lines carry no
time) to the rank's end: its own exit where the launcher reported it, else the timeout that cut it, a lower
bound ("at least N s": the rank was still alive when the rank monitor fired).

What held the rank is a stack dump's to say (ftqual.verification.checks.held, from the rank sentinels' dumps):
`held_by`
is None without one, and `held_by_phrase` then says why there is none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ftqual.contract import EXIT_CODES, UNWIND_MARGIN_S, UNWINDING_FAULTS
from ftqual.verification.checks import held
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.launcher_log import TimeoutFired, WorkerExit
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.run_meta import FaultMarker
from ftqual.verification.evidence.snapshot import RunSnapshot

# The rank prefix ft_launcher writes before each line of a worker's output in the per-cycle log.
RANK_PREFIX = re.compile(r"^\d+: ")
# The exit codes a rank the launcher killed after a timeout leaves: the rank monitor's SIGKILL, the
# launcher's SIGTERM.
KILLED_CODES = (-9, -15, 137, 143)
# The verify report's metrics of a linger (ftqual.verification.metrics, ftqual.verification.schema)
METRICS = (
    "linger_s",
    "linger_cut_by_timeout",
    "linger_ended_by",
    "linger_section",
    "linger_bound_s",
    "held_by",
)


@dataclass(frozen=True)
class Linger:
    """One unwinding fault's linger: `seconds` from the injection to the rank's end (None: no end reported
    for the faulted rank, e.g. a peer's exit stopped the group first), what ended it (`ended_by`; cut by the
    open section's timeout or killed by another, `seconds` is a lower bound), the section whose timeout
    bounds it (`out_of_section` for the out-of-section one; None: unknown) and that timeout."""

    seconds: float | None
    cut_by_timeout: bool
    ended_by: str  # "exit" (by itself), "timeout" (cut by it), "killed" (another's kill: a stop from outside)
    section: str | None
    timeout_s: float | None
    traceback: Ref | None
    end: Ref | None  # the rank's exit line, or the timeout line that cut it

    @property
    def lingered(self) -> bool:
        """Longer than the interpreter takes to unwind, or cut before it ended."""
        return self.ended_by != "exit" or (self.seconds is not None and self.seconds > UNWIND_MARGIN_S)

    def phrase(self) -> str:
        """'at least 11.4 s', '37.4 s', or 'unknown'."""
        if self.seconds is None:
            return "unknown"
        return f"{self.seconds:.1f} s" if self.ended_by == "exit" else f"at least {self.seconds:.1f} s"

    def metrics(self, held: str | None) -> dict[str, object]:
        return {
            "linger_s": None if self.seconds is None else round(self.seconds, 3),
            "linger_cut_by_timeout": self.cut_by_timeout,
            "linger_ended_by": self.ended_by,
            "linger_section": self.section,
            "linger_bound_s": self.timeout_s,
            "held_by": held,
        }


def exits_of_rank(exits: list[WorkerExit], local_rank: int | None, host: str | None) -> list[WorkerExit]:
    """The faulted worker's exits: its local rank, on its host where both the marker and the line name one."""
    return [
        e
        for e in exits
        if local_rank is not None
        and e.local_rank == local_rank
        and (host is None or e.host is None or e.host == host)
    ]


def traceback_after_injection(snap: RunSnapshot, marker: FaultMarker) -> Ref | None:
    """The first error line (a traceback) after the injection's `[ftqual-inject]` line in its cycle's log,
    written by the rank that wrote the injection line (ft_launcher prefixes each line with its rank, `1: `):
    a peer's traceback of its broken collective says nothing of whether the faulted rank unwound."""
    cycle = derive.fault_cycle(snap, marker)
    log = snap.train_log(cycle) if cycle is not None else None
    injected = next((i.ref for i in log.injections), None) if log is not None else None
    if log is None or injected is None:
        return None
    prefix = RANK_PREFIX.match(injected.text)
    return next(
        (
            ref
            for ref in log.errors
            if ref.line > injected.line and (prefix is None or ref.text.startswith(prefix[0]))
        ),
        None,
    )


def linger(snap: RunSnapshot, marker: FaultMarker | None) -> Linger | None:
    """The linger of `marker`'s fault; None for a fault that is not an unwinding one."""
    if marker is None or snap.meta.fault not in UNWINDING_FAULTS or snap.launcher is None:
        return None
    fault = snap.meta.fault
    exits = exits_of_rank(derive.exits_after_injection(snap, marker), marker.local_rank, marker.host)
    own = exits[0] if exits else None
    timeouts = [
        t for t in derive.qualifying_failures(snap, marker) if isinstance(t, TimeoutFired) and t.t is not None
    ]
    early = [t for t in timeouts if own is None or own.t is None or t.t < own.t]
    trace = traceback_after_injection(snap, marker)
    by_itself = own is not None and own.exit_code in EXIT_CODES[fault]
    if early and not by_itself:
        cut = early[0]
        return Linger(
            _since(marker, cut.t),
            True,
            "timeout",
            cut.section or "out_of_section",
            cut.timeout_s,
            trace,
            cut.ref,
        )
    # the section the rank was in at the injection (the marker names none: out of every section); unknown
    # for a marker that says nothing of where it landed
    section = (marker.section or "out_of_section") if marker.placement is not None else None
    bound = snap.meta.timeouts.get(section) if section else None
    if own is None:
        return Linger(None, False, "killed", section, bound, trace, None)
    ended = "exit" if by_itself else "killed"
    return Linger(_since(marker, own.t), False, ended, section, bound, trace, own.ref)


def _since(marker: FaultMarker, t) -> float | None:
    if marker.injected_at is None or t is None:
        return None
    return max(0.0, (t - marker.injected_at).total_seconds())


def held_by(snap: RunSnapshot, marker: FaultMarker | None) -> str | None:
    """The innermost frame that held the faulted rank, from the rank sentinels' stack dumps in the run
    directory (ftqual.verification.checks.held); None without one (every run recorded before the
    sentinels)."""
    if not snap.meta.dumps_recorded:
        return None
    line = held.held_metrics(snap)["held_by"]
    return line if isinstance(line, str) else None


def held_by_phrase(snap: RunSnapshot, held_line: str | None) -> str:
    """What held the rank, in the words the check's detail uses: the dump's line, or why there is none."""
    if held_line is None:
        return f"what held the rank: unknown ({held.why_no_dump(snap)})"
    return f"what held the rank: {held_line}"
