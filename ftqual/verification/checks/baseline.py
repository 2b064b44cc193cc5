"""The no-fault baseline: one cycle straight to the final iteration, every checkpoint completed."""

from __future__ import annotations

from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.resume import (
    cycles,
    exit_code,
    launcher_outcome,
    scratch_restarts,
    stopped_from_outside,
    tracker_matches,
)
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, plain
from ftqual.verification.evidence import derive, endings
from ftqual.verification.evidence.snapshot import RunSnapshot

UNINTERRUPTED = "uninterrupted_completion"
MAX_WANTED_SAVES = 10_000_000
LISTED = 20  # iterations named in a detail; a long baseline saves thousands of times


def _iterations(numbers: list[int]) -> str:
    """`numbers` as a list, the middle left out beyond LISTED (a detail stays one readable line)."""
    if len(numbers) <= LISTED:
        return str(numbers)
    head, tail = ", ".join(map(str, numbers[:10])), ", ".join(map(str, numbers[-3:]))
    return f"[{head}, ..., {tail}] ({len(numbers)} in all)"


def uninterrupted_completion(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: the no-fault run ran one cycle to its final iteration with exit 0, no injection, no
    launcher failure or restart, every loss finite, a completed checkpoint (`.metadata` real) at every save
    interval and at the end, and the tracker naming the final iteration's completed checkpoint."""
    cid = UNINTERRUPTED
    if exp.faulty:
        return skip(cid, f"fault scenario ({exp.fault}): see the recovery checks")
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    f = Findings(cid)
    exit_code(snap, f)
    if snap.marker is not None:
        f.problem("fault_injected.json exists in a no-fault run", snap.marker.ref)
    for item in snap.injections[:2]:
        f.problem("an injection line in a no-fault run", item.ref)
    cycles(snap, f, 1)
    scratch_restarts(snap, f)
    launcher_outcome(snap, f)
    stopped = stopped_from_outside(snap)
    if snap.launcher is not None:
        for item in [*snap.launcher.exits, *snap.launcher.timeouts, *snap.launcher.restarts][:3]:
            if stopped:  # what the stop made the launcher log is not the stack's failure
                f.unknown(f"the launcher reported a failure or restart: {stopped}", item.ref)
            else:
                f.problem("the launcher reported a failure or restart", item.ref)
    # Every cycle counts: a baseline that restarted already fails above, and its details must still say
    # truly how far it got (a run that trained to the end and then crashed reached its final iteration).
    logs = snap.train_logs
    tables = [log.iterations for log in logs]
    complete = all(log.complete for log in logs)
    bad = derive.first_row(tables, derive.bad_loss)
    if bad:
        f.problem(f"iteration {bad.iteration} reports loss {bad.loss!r}", bad.ref)
    total = derive.train_iters(snap)
    if total is None:
        f.unknown("train_iters unknown")
        return f.result()
    final = derive.first_row(tables, lambda rows: rows["iteration"] == total)
    if final:
        f.fact(f"iteration {total}/{total} reached", final.ref)
    else:
        last = derive.max_iteration(tables)
        if stopped:
            f.unknown(f"final iteration {total} not reached (last seen: {last}): {stopped}")
        elif (end := endings.silent_end(snap)) is not None:  # exit 0 with whole logs proves the end
            f.problem(f"{end.text}: final iteration {total} not reached (last seen: {last})", *end.refs)
        else:
            f.missing_fact(f"final iteration {total} not reached (last seen: {last})", complete)
    _all_saves(snap, f, logs, complete and not stopped, total, exp.save_interval)
    tracker_matches(snap, f, total)
    return f.result()


def _all_saves(
    snap: RunSnapshot, f: Findings, logs, complete: bool, total: int, interval: int | None
) -> None:
    if not interval:
        f.note("save_interval unknown: checkpoints at each interval not checked")
        return
    initial = snap.meta.initial_checkpoint_iteration  # saves up to it were an earlier run's
    if (total - initial) // interval > MAX_WANTED_SAVES:  # a forged train_iters, never a real run
        f.unknown(f"{(total - initial) // interval} checkpoints wanted: more than this verifier checks")
        return
    wanted = sorted(k for k in {*range(interval, total + 1, interval), total} if k > initial)
    if not wanted:
        return
    done = {}
    for log in logs:
        for e in log.saves_of("done"):
            done.setdefault(e.iteration, e)
    lacking = [k for k in wanted if k not in done]
    if lacking:
        f.missing_fact(
            f"no 'successfully saved checkpoint' line for iteration(s) {_iterations(lacking)}", complete
        )
    if snap.checkpoints is None:
        f.unknown(snap.reason("checkpoints"))
        return
    unfinished = [k for k in wanted if not (d := snap.checkpoints.dir_for(k)) or not d.has_metadata]
    if unfinished:
        f.problem(f"iter folder or .metadata missing for iteration(s) {_iterations(unfinished)}")
    if not lacking and not unfinished:
        f.fact(
            f"checkpoints {_iterations(wanted)} completed",
            *(done[k].ref for k in wanted[:1]),
            done[wanted[-1]].ref,
        )


SPEC = CheckSpec(
    "uninterrupted_completion",
    "the baseline reached its final iteration in one cycle, exit 0, no injection",
    plain(uninterrupted_completion),
)
