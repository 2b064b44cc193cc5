"""Faults that come back: who stopped the job, what it cost, and whether within the bound.

Faults that come back: what stopped the job, what it cost before it stopped, and whether that was within
the bound (`recurring_fault_outcome`).

A fault a restart cannot cure (family `recurring`: an exception at the same iteration after every restart, a
NaN loss from a poisoned batch, a rank that dies in setup on every start) must be stopped, and soon: every
cycle after the first failure restores the same checkpoint and burns the world's GPUs for nothing. NVRx 0.7.0
stops such a job by its progress tracker (`--ft-max-no-progress-cycles`, 3 by default: exit 93, which a
scheduler must not requeue), by `--max-restarts` (exit 1), or by its restart agent (attribution, exit 93);
the workload may also end it itself (non-zero without NVRx's stop). Who stopped it is read once
(ftqual.verification.evidence.endings.job_stop), and so is its bill (`stop_bill`: the cycles, and the
GPU-seconds from the first failure to the end).

The bound, in cycles of the whole run: the configured no-progress cycles (run.json `max_no_progress_cycles`,
else NVRx's 3), or `max_restarts` where that is lower, plus the first cycle, which made progress before
the fault first came. NVRx's tracker counts a cycle without progress at its end, so a job it stops at the
threshold ran exactly that many cycles.

Pass (a loop): stopped non-zero within the bound. Fail: more cycles than the bound, a run to max restarts
while the no-progress bound was lower (the tracker did not stop it), an exit 0 short of `train_iters` (a
silent end) or an exit 0 at all (the fault did not recur: no stop was shown), no fault injected. Inconclusive:
who stopped the job unknown (an exit 93 without NVRx's line, launcher.log unreadable, stopped from outside).

The curable control (a rank fault injected more than once, each after a new checkpoint: progress kept
between) must never be stopped: NVRx's stop (exit 93 or restarts exhausted) of a job whose every cycle
completed a new checkpoint fails ("a curable job stopped while it was making progress"). Not stopped, or
stopped after a cycle without progress, it is the recovery checks' to judge (pass at exit 0, else skip).
"""

from __future__ import annotations

from ftqual.verification.checks.result import CheckResult, Findings, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, Waiver, plain
from ftqual.verification.evidence import endings
from ftqual.verification.evidence.endings import exit_meaning
from ftqual.verification.evidence.snapshot import RunSnapshot

RECURRING_OUTCOME = "recurring_fault_outcome"
# What the recovery checks say for a fault that comes back (their specs name this check in `waived_by`):
# nothing resumes past it; this check judges the ending.
RECURRING_STOPS = (
    "the fault comes back after every restart, so there is no recovery to verify "
    "(recurring_fault_outcome judges the stop)"
)
CURABLE_STOPPED = "a curable job stopped while it was making progress"
STOPPED_BY_WORDS = {
    "progress_tracker": "NVRx's progress tracker",
    "max_restarts": "max restarts",
    "restart_agent": "NVRx's restart agent",
    "workload": "the workload itself",
    "none": "nothing (exit 0)",
}


def slurm_words(code: int | None) -> str:
    """What a launcher exit means to Slurm: the job state, and whether to requeue (contract.EXIT_MEANINGS)."""
    if code is None:
        return "exit not recorded"
    state = "COMPLETED" if code == 0 else "FAILED"
    return f"Slurm: {state}, requeue: {exit_meaning(code)[1]}"


def scheduler_meaning(code: int | None) -> str:
    """What a launcher exit means (contract.EXIT_MEANINGS) and what it means to Slurm."""
    if code is None:
        return exit_meaning(code)[0]
    return f"{exit_meaning(code)[0]}; {slurm_words(code)}"


def recurring_fault_outcome(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant (family recurring): the job stopped non-zero within `RunPlan.stop_bound` cycles, its
    stopper named from the evidence and its bill measured; (a rank fault injected more than once) a job
    each of whose cycles made progress was not stopped by NVRx."""
    cid = RECURRING_OUTCOME
    role = endings.stop_role(exp.fault, exp.injections)
    if role is None:
        return skip(cid, "no fault that comes back in this scenario")
    if role == "curable":
        return _curable(snap, exp)
    return _loop(snap, exp)


def _stop_values(f: Findings, stop: endings.JobStop, bill: endings.StopBill) -> None:
    f.values.update(
        stopped_by=stop.by,
        stop_exit_code=stop.exit_code,
        scheduler=scheduler_meaning(stop.exit_code),
        cycles=bill.cycles,
        burned_cycles=len(bill.without_progress),
        cycles_without_progress=list(bill.without_progress),
        burned_wall_s=None if bill.wall_s is None else round(bill.wall_s, 3),
        burned_gpu_s=bill.gpu_s,
        world_size=bill.world_size,
    )


def _bill_text(bill: endings.StopBill) -> str:
    burned = f"{bill.gpu_s:g} GPU-s" if bill.gpu_s is not None else "GPU-s unknown"
    wall = f" ({bill.wall_s:.0f} s x {bill.world_size} GPUs)" if bill.gpu_s is not None else ""
    return (
        f"{len(bill.without_progress)} cycle(s) without progress, {burned}{wall} burned from the first "
        f"failure to the end"
    )


def _loop(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    f = Findings(RECURRING_OUTCOME)
    bound, npc = exp.stop_bound, exp.no_progress_cycles
    f.values.update(
        role="loop", bound_cycles=bound, max_no_progress_cycles=npc, max_restarts=exp.max_restarts
    )
    stop, bill = endings.job_stop(snap), endings.stop_bill(snap)
    _stop_values(f, stop, bill)
    if not snap.ok("marker"):
        f.unknown(snap.reason("marker"))
        return f.result()
    if snap.marker is None:
        f.values["outcome"] = "not_injected"
        f.problem("no fault_injected.json: the fault never came, so no stop of it was shown", snap.meta.ref)
        return f.result()
    f.cite(snap.marker.ref)
    if stop.by is None:
        f.unknown(stop.why, stop.line)
        return f.result()
    if stop.by == "none":
        _exit_zero(snap, f)
        return f.result()
    if bill.cycles is None:
        f.unknown(
            f"{stop.why}, but how many cycles ran is unknown (no cycle_infos, no per-cycle log)", stop.line
        )
        return f.result()
    if (gap := _evidence_gap(snap, bill.cycles)) is not None:
        f.unknown(f"{stop.why}, but {gap}", stop.line)
        return f.result()
    said = f"{stop.why}; {slurm_words(stop.exit_code)}"
    counted = f"{bill.cycles} cycle(s), bound {bound} ({_bound_words(exp)})"
    past = bill.cycles > bound or (
        stop.by == "max_restarts" and exp.max_restarts is not None and npc < exp.max_restarts
    )
    f.values["outcome"] = "kept_restarting" if past else "stopped"
    if bill.cycles > bound:
        f.problem(f"a loop past the bound: {counted}; {said}; {_bill_text(bill)}", stop.line, bill.start)
    if stop.by == "max_restarts" and exp.max_restarts is not None and npc < exp.max_restarts:
        f.problem(
            f"it ran until max restarts ({exp.max_restarts}) while the no-progress bound ({npc}) was lower: "
            "NVRx's progress tracker did not stop it (is --ft-checkpoint-iteration-file on the tracker?)",
            stop.line,
        )
    f.fact(f"stopped within the bound: {said} after {counted}; {_bill_text(bill)}", stop.line, bill.start)
    return f.result()


def _logs_gap(snap: RunSnapshot, cycles: int) -> str | None:
    """What is missing of the cycles' own record: every cycle's whole log and its cycle_info."""
    for source in ("train_logs", "cycle_infos"):
        if not snap.ok(source):
            return snap.reason(source)
    logs = {log.cycle: log for log in snap.train_logs}
    missing = [c for c in range(cycles) if c not in logs]
    if missing:
        return f"cycle(s) {missing} of {cycles} left no log: whether the fault came back there is unknown"
    cut = [c for c, log in sorted(logs.items()) if not log.complete]
    if cut:
        return f"the log of cycle(s) {cut} is cut short (its last line has no end)"
    if snap.cycles is not None and len(snap.cycles.cycle_numbers) != len(logs):
        return (
            f"cycle_infos name {len(snap.cycles.cycle_numbers)} cycle(s) and the logs {len(logs)}: a cycle's "
            "record is missing"
        )
    return None


def _evidence_gap(snap: RunSnapshot, cycles: int) -> str | None:
    """What keeps the stop from being shown as a loop's: every cycle's whole record (_logs_gap), and the
    tracker still naming the checkpoint the fault first came after (a loop keeps no progress); None when
    the evidence is whole."""
    if (gap := _logs_gap(snap, cycles)) is not None:
        return gap
    if not snap.ok("checkpoints"):
        return snap.reason("checkpoints")
    tracker = snap.checkpoints.tracker if snap.checkpoints is not None else None
    first = snap.marker.checkpoint_iteration if snap.marker is not None else None
    if tracker is None or tracker.state != "value" or tracker.value != first:
        said = "unreadable" if tracker is None or tracker.state != "value" else f"at {tracker.value}"
        return (
            f"the tracker is {said}, not at the checkpoint the fault first came after ({first}): the loop's "
            "no-progress is not shown"
        )
    return None


def _bound_words(exp: RunPlan) -> str:
    npc = exp.no_progress_cycles
    source = "max_no_progress_cycles" if exp.max_no_progress_cycles is not None else "NVRx's default"
    if exp.max_restarts is not None and exp.max_restarts < npc:
        return f"max_restarts {exp.max_restarts} + the first cycle"
    return f"{npc} no-progress cycles ({source}) + the first cycle"


def _exit_zero(snap: RunSnapshot, f: Findings) -> None:
    """A recurring fault's job that exited 0: a silent end, or a fault that did not recur; either fails."""
    f.values["outcome"] = "silent_end"
    if (end := endings.silent_end(snap)) is not None:
        f.problem(f"exit 0 claimed without the training reaching train_iters ({end.text})", *end.refs)
        return
    if not snap.ok("train_logs"):
        f.unknown(f"exit 0, and whether training reached train_iters is unknown: {snap.reason('train_logs')}")
        return
    f.values["outcome"] = "not_recurred"
    f.problem(
        f"the job finished (exit 0) although its fault comes back after every restart: the fault did not "
        f"recur ({len(snap.markers)} injection(s)), so no stop was shown",
        snap.meta.ref,
    )


def cycle_progress(snap: RunSnapshot) -> list[tuple[int, bool]]:
    """(cycle, made progress) for every cycle whose log is there: a checkpoint completed beyond the one it
    began from (cycle 0: the run's initial checkpoint, or what it loaded)."""
    out = []
    for log in snap.train_logs:
        start = endings.restored_iteration(log)
        if log.cycle == 0:
            start = max(start, snap.meta.initial_checkpoint_iteration)
        out.append((log.cycle, endings.made_progress(log, start)))
    return out


def _curable(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    cid = RECURRING_OUTCOME
    stop, bill = endings.job_stop(snap), endings.stop_bill(snap)
    if stop.by == "none":
        f = Findings(cid)
        f.values.update(role="curable", outcome="not_stopped", max_restarts=exp.max_restarts)
        _stop_values(f, stop, bill)
        if bill.cycles is not None and (gap := _logs_gap(snap, bill.cycles)) is not None:
            f.unknown(f"exit 0, but {gap}", stop.line)
            return f.result()
        f.fact(
            f"not stopped: exit 0 after {bill.cycles} cycle(s) (the recovery checks judge the rest)",
            stop.line,
        )
        return f.result()
    if not stop.stopped:
        if stop.by is None:
            return skip(cid, f"who stopped the job is unknown ({stop.why}): the recovery checks judge it")
        return skip(cid, f"{stop.why}, not NVRx's stop: the recovery checks judge it")
    f = Findings(cid)
    f.values.update(role="curable", outcome="curable_stopped", max_restarts=exp.max_restarts)
    _stop_values(f, stop, bill)
    if not snap.ok("train_logs"):
        f.unknown(f"{stop.why}; whether each cycle made progress is unknown: {snap.reason('train_logs')}")
        return f.result()
    progress = cycle_progress(snap)
    f.values["cycles_with_progress"] = [c for c, made in progress if made]
    idle = [c for c, made in progress if not made]
    count = bill.cycles if bill.cycles is not None else len(progress)
    if idle:
        return skip(
            cid,
            f"{stop.why} after cycle(s) {idle} made no progress: not a curable job's stop (the recovery "
            "checks judge it)",
        )
    if len(progress) < count:
        f.unknown(f"{stop.why}; {count - len(progress)} of {count} cycles left no log to show their progress")
        return f.result()
    gpu_s = f"{bill.gpu_s:g}" if bill.gpu_s is not None else "unknown"
    f.problem(
        f"{CURABLE_STOPPED}: {stop.why}; {slurm_words(stop.exit_code)}; after {count} cycle(s), each of "
        f"which completed a new checkpoint, {gpu_s} GPU-s from the first failure to the stop (keep "
        f"max_restarts above the faults a job meets between checkpoints, and --ft-max-no-progress-cycles "
        f"on the tracker)",
        stop.line,
        snap.meta.ref,
    )
    return f.result()


SPEC = CheckSpec(
    RECURRING_OUTCOME,
    "a fault that comes back after every restart: the job stopped non-zero within the no-progress bound, who"
    " stopped it and the GPU-seconds it burned named; a rank fault injected more than once (the curable"
    " control): never stopped by NVRx while each cycle made progress",
    plain(recurring_fault_outcome),
    # Only such reports carry it (and a rank fault injected more than once: the curable control).
    carried=lambda i: i.stop_role is not None,
    # Nothing resumes past a fault that comes back after every restart: this check judges the stop.
    waives=Waiver(RECURRING_STOPS, lambda i, _: i.stop_role == "loop"),
)
