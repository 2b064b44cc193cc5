"""Calculated timeouts: whether NVRx's values catch a hang without firing on the healthy run.

Calculated timeouts (`calc_ft_timeouts`): the values NVRx chose in each cycle, and whether they would have
caught a hang in each section without firing on the healthy run (a check beyond the contract's).

The workload (Megatron's `--calc-ft-timeouts`, or the smoke workload doing the same) has NVRx calculate the
timeouts after each checkpoint and at the end (`calculate_and_set_section_timeouts`), rank 0 persisting them
in ft_state.json and printing `FT: updated timeouts saved to ... SectionTimeouts(...)`; a later cycle loads
them (`FT: loaded timeouts from ...`, then `FT: initialized. Timeouts=...` with the loaded values).
"""

from __future__ import annotations

from collections.abc import Mapping

from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.section_times import CANNOT_TELL
from ftqual.verification.checks.spec import CheckSpec, plain
from ftqual.verification.evidence.sections import RANK_MONITOR_INTERVAL_S, RunSections, run_sections
from ftqual.verification.evidence.snapshot import RunSnapshot
from ftqual.verification.evidence.train_log import FtInit

CALCULATED_TIMEOUTS = "calculated_timeouts"
KEYS = ("setup", "step", "checkpointing", "out_of_section")
TOLERANCE_S = 0.01
NONE_CALCULATED = (
    "NVRx calculated no timeout in this run: Megatron's rule calculates step after 16 training iterations of "
    "one process, setup only after a checkpoint was loaded, checkpointing never with asynchronous saves, and "
    "out of section only at the end when setup and step were"
)


def _values(init: FtInit) -> dict[str, float | None]:
    return {**{k: init.sections.get(k) for k in KEYS[:3]}, "out_of_section": init.out_of_section}


def _shown(values: Mapping[str, float | None]) -> str:
    return "/".join("?" if values.get(k) is None else f"{values[k]:g}" for k in KEYS)


def calculated_timeouts(snap: RunSnapshot, exp: RunPlan, sections: RunSections | None = None) -> CheckResult:
    """Invariant (calc_ft_timeouts runs): every cycle says the timeouts it started with (initial, or loaded
    from ft_state.json) and each update NVRx made; every update is persisted (ft_state.json exists); every
    timeout the rank monitor fired used a value in force in its cycle; and the final values (the last
    update, else the last cycle's start) exceed every healthy section's measured duration (else they would
    fire on a healthy run: fail; an upper bound that can exceed by more than noise, out of section or a
    setup from the worker start, only noted). The values say, per section,
    the final timeout and how soon it catches a hang (+ the rank monitor interval)."""
    cid = CALCULATED_TIMEOUTS
    if not exp.calc_ft_timeouts:
        return skip(cid, "fixed timeouts (calc_ft_timeouts off)")
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    f = Findings(cid)
    cycles, in_force, final = [], {}, None
    for log in snap.train_logs:
        if not log.ft_inits:
            f.unknown(f"{log.path} has no 'FT: initialized. Timeouts=...' line")
            continue
        start = _values(log.ft_inits[-1])
        updates = [_values(u) for u in log.ft_updates]
        in_force[log.cycle] = [start, *updates]
        how = "loaded from ft_state.json" if log.ft_loaded else "initial"
        f.fact(
            f"cycle {log.cycle}: started with setup/step/checkpointing/out_of_section = {_shown(start)} s "
            f"({how})",
            log.ft_inits[-1].ref,
        )
        for update, values in zip(log.ft_updates, updates, strict=True):
            f.fact(f"cycle {log.cycle}: NVRx calculated {_shown(values)} s", update.ref)
        final = updates[-1] if updates else start
        cycles.append({"cycle": log.cycle, "start": start, "loaded": bool(log.ft_loaded), "updates": updates})
    if final is None:
        return f.result()
    if not any(c["updates"] for c in cycles):
        f.note(NONE_CALCULATED)
    elif snap.checkpoints is not None and snap.checkpoints.ft_state is None:
        f.problem("NVRx's updates were printed but no ft_state.json persists them")
    elif snap.checkpoints is not None:
        f.fact(f"{snap.checkpoints.ft_state.path} persists them", snap.checkpoints.ft_state)
    if snap.launcher is not None:
        for fired in snap.launcher.timeouts:
            key = fired.section or "out_of_section"
            allowed = [v[key] for v in in_force.get(fired.cycle, []) if v.get(key) is not None]
            if allowed and not any(abs(fired.timeout_s - a) <= TOLERANCE_S for a in allowed):  # type: ignore[operator]
                f.problem(
                    f"rank monitor used {fired.timeout_s:g} s for {key} in cycle {fired.cycle}; in force "
                    "there: " + ", ".join(f"{a:g}" for a in allowed),  # type: ignore[str-format]
                    fired.ref,
                )
    overall = (sections if sections is not None else run_sections(snap)).overall()
    catches = {}
    for key in KEYS:
        limit, figure = final.get(key), overall[key]
        if limit is None:
            continue
        catches[key] = {"timeout_s": limit, "hang_detected_within_s": limit + RANK_MONITOR_INTERVAL_S,
                        "healthy_max_s": figure.seconds}  # fmt: skip
        if figure.seconds is None:
            continue
        if figure.seconds >= limit and key in CANNOT_TELL and figure.bound == "upper":
            # The logs bound the section only from above, by more than noise: cannot tell.
            f.note(
                f"{key}: calculated {limit:g} s, below the logs' upper bound {figure.seconds:.2f} s "
                f"({CANNOT_TELL[key]}): whether it fires on a healthy run cannot be told from the logs"
            )
        elif figure.seconds >= limit:
            f.problem(
                f"the calculated {key} timeout {limit:g} s would fire on the healthy run ({key} took "
                f"{figure.seconds:.2f} s)",
                *figure.evidence[-1:],
            )
        else:
            f.fact(
                f"{key}: calculated {limit:g} s catches a hang within {limit + RANK_MONITOR_INTERVAL_S:g} s; "
                f"the healthy {key} took at most {figure.seconds:.2f} s"
            )
    f.values.update(cycles=cycles, final=final, sections=catches)
    return f.result()


SPEC = CheckSpec(
    "calculated_timeouts",
    "the timeouts NVRx calculated (each cycle's start, every update, ft_state.json) are reported, none fired"
    " with a value not in force, and the final ones stay above every healthy section's duration",
    plain(calculated_timeouts),
    # Only calculated-timeout runs carry it (a campaign's report keeps its own list).
    carried=lambda i: i.exp.calc_ft_timeouts and not i.campaign,
)
