"""What held a rank, from the rank sentinels' stack dumps (`what_held_the_rank`, informative).

What held a rank, from the rank sentinels' stack dumps (ftqual.verification.evidence.dumps): the
informative check
`what_held_the_rank` (it never gates: a run without dumps has the verdict it would have had with them), the
metrics `held_by` and `stack_dump`, and the verify report's `stack_dumps` list.

The dump that answers is the last one taken of the faulted rank in the fault's cycle (the closest to the
kill, or to the rank's own late exit); without a fault there, the last one of the rank a timeout named in
its cycle; without either, none: a rank that died of its fault at once leaves no dump, and a healthy run
only the dumps of sections that came close to their timeouts.
"""

from __future__ import annotations

from ftqual.contract import is_fault
from ftqual.verification.checks.result import CheckResult
from ftqual.verification.checks.spec import CheckSpec
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.dumps import StackDump, dump_problem, held_by, holder_of
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.snapshot import RunSnapshot

CHECK_ID = "what_held_the_rank"


def _last_with_stack(dumps: tuple[StackDump, ...]) -> StackDump | None:
    """The last dump with a Python frame of the rank, else the last with any stack, else the last one: a
    rank in its final teardown (native code only) says less than where it waited just before."""
    said = [(d, held_by(d)) for d in dumps]
    python = [d for d, line in said if line is not None and "in native code only" not in line]
    with_stack = [d for d, line in said if line is not None]
    return (python or with_stack or list(dumps) or [None])[-1]


def answering_dump(snap: RunSnapshot) -> StackDump | None:
    """The dump that says what held the rank (module docstring), None when there is none."""
    if snap.dumps is None:
        return None
    marker = snap.marker
    if marker is not None and marker.rank is not None:
        found = _last_with_stack(snap.dumps.of(derive.fault_cycle(snap, marker), marker.rank))
        if found is not None:
            return found
    timeouts = snap.launcher.timeouts if snap.launcher is not None else ()
    for fired in timeouts:
        mine = [
            d
            for d in snap.dumps.of(fired.cycle)
            if fired.local_rank is None or d.rank == fired.local_rank or (snap.meta.nnodes or 1) > 1
        ]
        found = _last_with_stack(tuple(mine))
        if found is not None:
            return found
    return None


def _when(group: list[StackDump]) -> str:
    after = [d.trigger.get("after_injection_s") for d in group]
    if all(isinstance(a, (int, float)) for a in after):
        span = f"{after[0]:.1f}" if len(after) == 1 else f"{after[0]:.1f}-{after[-1]:.1f}"
        return f"{span} s after the injection"
    numbers = [d.number for d in group]
    return f"dump {numbers[0]}" if len(numbers) == 1 else f"dumps {numbers[0]}-{numbers[-1]}"


def held_said(snap: RunSnapshot, dump: StackDump | None) -> str | None:
    """`dump`'s line (held_by); where the rank's earlier dumps of that cycle show other holders (a linger that
    goes through one wait after another), those first, each with when: "first <holder> (2.0-8.0 s after the
    injection), then <the last dump's line> (30.0 s after the injection)"."""
    line = held_by(dump) if dump is not None else None
    if line is None or snap.dumps is None:
        return line
    series = [d for d in snap.dumps.of(dump.cycle, dump.rank) if holder_of(d) is not None]
    series = series[: series.index(dump) + 1] if dump in series else [dump]
    groups: list[list[StackDump]] = []
    for d in series:
        if groups and holder_of(groups[-1][-1]) == holder_of(d):
            groups[-1].append(d)
        else:
            groups.append([d])
    if len(groups) < 2:
        return line
    earlier = ", then ".join(f"{holder_of(g[0])} ({_when(g)})" for g in groups[:-1])
    return f"first {earlier}, then {line} ({_when(groups[-1])})"


def why_no_dump(snap: RunSnapshot) -> str:
    """Why the run directory cannot say what held the rank, in one line."""
    if not snap.meta.dumps_recorded:
        return "no stack dump: the run predates the rank sentinels"
    if snap.dumps is None:
        return f"no stack dump readable: {snap.reason('stack_dumps')}"
    if snap.marker is not None and is_fault(snap.meta.fault, lambda f: f.ends_at_once):
        return "no stack dump: the faulted rank ended at once, nothing held it"
    tool = "" if snap.meta.dump_tool else " (no py-spy: faulthandler only, which a stopped rank cannot run)"
    return f"no stack dump of the faulted or timed-out rank{tool}"


def held_metrics(snap: RunSnapshot) -> dict[str, object]:
    """`held_by` (one line, None without a dump that shows the rank's stack) and `stack_dump` (its path)."""
    dump = answering_dump(snap)
    return {"held_by": held_said(snap, dump), "stack_dump": dump.path if dump else None}


def what_held_the_rank(snap: RunSnapshot) -> CheckResult:
    """Informative (gates=False): the dump that shows what held the faulted or timed-out rank, cited."""
    dump = answering_dump(snap)
    if dump is None:
        return CheckResult(CHECK_ID, "skip", why_no_dump(snap), gates=False)
    line = held_said(snap, dump)
    ref = Ref(dump.path, 0, f"{dump.host} cycle {dump.cycle} rank {dump.rank}, {dump.trigger_said()}")
    values = {
        "stack_dump": dump.path,
        "taken_at": dump.taken_at.isoformat().replace("+00:00", "Z") if dump.taken_at else None,
        "trigger": dump.trigger_said(),
        "tool": dump.tool or "faulthandler",
        "held_by": line,
    }
    if line is None:
        problem = dump_problem(dump) or "no stack of the rank"
        return CheckResult(
            CHECK_ID,
            "skip",
            f"the dump taken {dump.trigger_said()} holds no stack of the rank: {problem}",
            (ref,),
            values=values,
            gates=False,
        )
    others = len(snap.dumps.items) - 1 if snap.dumps else 0
    more = f"; {others} other dump(s) in dumps/" if others else ""
    return CheckResult(
        CHECK_ID,
        "pass",
        f"held by: {line} (rank {dump.rank}, cycle {dump.cycle}, dumped {dump.trigger_said()}{more})",
        (ref,),
        values=values,
        gates=False,
    )


def dumps_listing(snap: RunSnapshot) -> list[dict[str, object]]:
    """verify.json's `stack_dumps`: every dump with what it shows, in the order they were taken."""
    if snap.dumps is None:
        return []
    return [
        {
            "path": d.path,
            "host": d.host,
            "cycle": d.cycle,
            "rank": d.rank,
            "taken_at": d.taken_at.isoformat().replace("+00:00", "Z") if d.taken_at else None,
            "trigger": d.trigger_said(),
            "held_by": held_by(d),
            "problem": dump_problem(d),
            "processes": len(d.processes),
        }
        for d in snap.dumps.items
    ]


SPEC = CheckSpec(
    "what_held_the_rank",
    "the stack dump of the faulted or timed-out rank, taken before it was stopped, names the frame that held"
    " it (information: it does not gate the verdict)",
    lambda i: what_held_the_rank(i.snap),
    carried=lambda i: i.snap.meta.dumps_recorded,  # the ranks had sentinels
)
