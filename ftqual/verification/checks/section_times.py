"""No configured timeout would have fired on the healthy sections of the run (a check beyond the contract's).

The figures are `ftqual.verification.evidence.sections`' (each with the lines it was taken from and the way it
errs);
this check only compares them with run.json's `timeouts`.
"""

from __future__ import annotations

from ftqual.verification.checks.result import CheckResult, Findings, inconclusive
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, plain
from ftqual.verification.evidence.in_force import in_force
from ftqual.verification.evidence.sections import SECTIONS, Figure, RunSections, run_sections
from ftqual.verification.evidence.snapshot import RunSnapshot

TIMEOUTS_NOT_EXCEEDED = "timeouts_not_exceeded"
# The sections every run must have measured for the check to pass: the out-of-section figure is an upper
# bound that holds a step, and a run can lack it (one step per cycle) without anything being unknown.
REQUIRED = ("setup", "step", "checkpointing")
# Upper bounds that can exceed the section by far more than noise: at or above a timeout they prove nothing.
# (A step's upper bound holds only Megatron's logging and data fetch around the step: it still proves.)
CANNOT_TELL = {
    "out_of_section": "an upper bound holding a step",
    "setup": "an upper bound from the worker start, imports included: no section-opening milestone",
}


def _limit(snap: RunSnapshot, exp: RunPlan, cycle: int, name: str, figure: Figure) -> tuple[float, str]:
    """The timeout a figure is judged by: run.json's; under calc_ft_timeouts the one in force in its cycle
    at the figure's last line in that cycle's log (NVRx's calculation printed before it, else the cycle's
    start), said in the detail."""
    fixed = float(exp.timeouts[name])
    if not exp.calc_ft_timeouts:
        return fixed, ""
    log = snap.train_log(cycle)
    lines = [ref.line for ref in figure.evidence if log is not None and ref.path == log.path]
    found = in_force(log, max(lines) if lines else 0)
    if found is None or name not in found.values:
        return fixed, "run.json's initial value: no timeout printed in this cycle"
    return float(found.values[name]), f"in force: {found.source}"


def timeouts_not_exceeded(
    snap: RunSnapshot, exp: RunPlan, sections: RunSections | None = None
) -> CheckResult:
    """Invariant: no healthy section's measured duration met or exceeded its configured timeout in any
    cycle (baseline and recovery alike): the timeout would have fired on a healthy run. The section an
    injected hang held in its fault cycle is left out (it is meant to exceed). A figure that over-estimates
    (`bound: upper`) only fails for `step`, where it over-estimates by a small part (logging, the data
    fetch); a setup measured from the worker start (a log without Megatron's section-opening milestone)
    holds the imports, up to 15 s on one H200, and the out-of-section figure holds a whole step, so at or
    above its timeout either proves nothing (inconclusive). Setup, step and checkpointing each measured in
    no cycle: inconclusive. Under calc_ft_timeouts each figure is judged by the timeout in force in its
    cycle at its line (the cycle's start, or NVRx's calculation printed before it), not run.json's initial
    one; the detail says which."""
    cid = TIMEOUTS_NOT_EXCEEDED
    wanted = exp.timeouts
    if not all(key in wanted for key in SECTIONS):
        return inconclusive(
            cid, "run.json does not list all timeouts (setup, step, checkpointing, out_of_section)"
        )
    sections = sections if sections is not None else run_sections(snap)
    if not sections.cycles:
        return inconclusive(cid, sections.reason or "no training log")
    f = Findings(cid)
    for cycle in sections.cycles:
        for name, figures in cycle.by_section().items():
            if cycle.hung == name:
                f.note(f"cycle {cycle.cycle}: {name} held the injected hang (expected to exceed its timeout)")
                continue
            for figure in figures:
                limit, source = _limit(snap, exp, cycle.cycle, name, figure)
                if figure.seconds is None or figure.seconds < limit:
                    continue
                what = f"cycle {cycle.cycle}: {name} took {figure.seconds:.2f} s >= its timeout {limit:g} s"
                what += f" ({source})" if source else ""
                if figure.bound == "upper" and name in CANNOT_TELL:
                    f.unknown(f"{what} ({CANNOT_TELL[name]}: cannot tell)", *figure.evidence)
                else:
                    f.problem(f"{what}: the timeout would have fired on a healthy run", *figure.evidence)
    overall = sections.overall()
    values: dict[str, object] = {}
    for name in SECTIONS:
        figure = overall[name]
        limit = float(wanted[name])
        values[name] = {
            "max_s": None if figure.seconds is None else round(figure.seconds, 4),
            "timeout_s": limit,
            "headroom": None if not figure.seconds else round(limit / figure.seconds, 2),
        }
        if figure.seconds is None:
            if name in REQUIRED:
                f.unknown(f"{name} not measured: {figure.reason}")
            else:
                f.note(f"{name} not measured: {figure.reason}")
            continue
        if figure.seconds < limit:
            f.fact(f"{name} max {figure.seconds:.2f} s < {limit:g} s", *figure.evidence[-1:])
    f.values.update(values)
    return f.result()


SPEC = CheckSpec(
    "timeouts_not_exceeded",
    "no healthy section (setup, step, checkpointing, out of section) took as long as its configured timeout"
    " in any cycle: the timeout would not have fired on a healthy run",
    plain(timeouts_not_exceeded),
)
