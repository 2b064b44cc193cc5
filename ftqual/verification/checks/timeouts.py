"""The fixed timeouts were the ones in force in every cycle (a check beyond the contract's list)."""

from __future__ import annotations

from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, plain
from ftqual.verification.evidence import endings
from ftqual.verification.evidence.snapshot import RunSnapshot

FIXED_TIMEOUTS = "fixed_timeouts_in_force"
SECTIONS = ("setup", "step", "checkpointing")
TOLERANCE_S = 0.01


def _same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= TOLERANCE_S


def fixed_timeouts_in_force(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: the timeouts in force were run.json's in every cycle: each cycle's last
    `FT: initialized. Timeouts=...` equals them and is not calculated, no cycle loaded timeouts from
    ft_state.json, every timeout the rank monitor reported used them, and no ft_state.json exists."""
    cid = FIXED_TIMEOUTS
    if exp.calc_ft_timeouts:
        return skip(cid, "calculated timeouts (calc_ft_timeouts): calculated_timeouts says what NVRx chose")
    wanted = exp.timeouts
    if not all(key in wanted for key in (*SECTIONS, "out_of_section")):
        return inconclusive(
            cid, "run.json does not list all timeouts (setup, step, checkpointing, out_of_section)"
        )
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    f = Findings(cid)
    last = max((log.cycle for log in snap.train_logs), default=None)
    # The restart agent's STOP can end the last cycle while its ranks are still starting: no timeout was in
    # force there (the launcher's stop line is the evidence), so that cycle has nothing to check.
    cut = any(not log.ft_inits and log.cycle == last for log in snap.train_logs)
    agent_stop = endings.restart_agent_stop(snap) if cut else None
    for log in snap.train_logs:
        for item in log.ft_loaded:
            f.problem("Megatron loaded calculated timeouts (FT: loaded timeouts from ...ft_state.json)", item)
        if not log.ft_inits and agent_stop is not None and log.cycle == last:
            f.fact(f"cycle {log.cycle}: stopped on the restart agent's STOP before FT started", agent_stop)
            continue
        if not log.ft_inits:
            f.unknown(f"{log.path} has no 'FT: initialized. Timeouts=...' line")
            continue
        init = log.ft_inits[-1]
        diffs = [
            f"{name} {init.sections.get(name)} != {wanted[name]:g}"
            for name in SECTIONS
            if not _same(init.sections.get(name), wanted[name])
        ]
        if not _same(init.out_of_section, wanted["out_of_section"]):
            diffs.append(f"out_of_section {init.out_of_section} != {wanted['out_of_section']:g}")
        if diffs:
            f.problem(f"cycle {log.cycle}: {', '.join(diffs)}", init.ref)
        elif init.calculated:
            f.problem(f"cycle {log.cycle}: timeouts marked as calculated", init.ref)
        else:
            f.fact(
                f"cycle {log.cycle}: setup/step/checkpointing/out_of_section = "
                f"{'/'.join(f'{wanted[k]:g}' for k in (*SECTIONS, 'out_of_section'))} s",
                init.ref,
            )
    if snap.launcher is not None:
        for fired in snap.launcher.timeouts:
            key = fired.section or "out_of_section"
            if key in wanted and not _same(fired.timeout_s, wanted[key]):
                f.problem(
                    f"rank monitor used {fired.timeout_s:g} s for {key}, run.json says {wanted[key]:g}",
                    fired.ref,
                )
    if snap.checkpoints is None:
        f.unknown(snap.reason("checkpoints"))
    elif snap.checkpoints.ft_state is not None:
        f.problem(
            f"{snap.checkpoints.ft_state.path} exists: calculated timeouts override the fixed ones",
            snap.checkpoints.ft_state,
        )
    else:
        f.fact(f"no ft_state.json in {snap.checkpoints.root}")
    return f.result()


SPEC = CheckSpec(
    "fixed_timeouts_in_force",
    "the section timeouts Megatron reported in every cycle equal the configured ones (no calculated timeouts"
    " loaded from ft_state.json)",
    plain(fixed_timeouts_in_force),
)
