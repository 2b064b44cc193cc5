"""Failed checkpoint storage (disk_full, writer_stall): noticed, recovered or stopped loudly.

disk_full and writer_stall: the checkpoint storage failed under a live job; the stack must notice (a loud
failure, or the checkpointing timeout), keep every incomplete checkpoint from becoming the latest, and then
recover or stop loudly, never end in silence with its saves lost.

disk_full: the launcher mounted a size-capped filesystem at the checkpoint directory (run.json's `storage`);
once a checkpoint C completed, the fault rank filled it to less than half a checkpoint (the marker's
`storage`), so the next save S runs out of space midway, and so does every later one. writer_stall: the
fault rank stopped (SIGSTOP) the processes writing S's shards (the persistent asynchronous writer) while the
rank lived on; interrupted_save_discarded judges S's fate, this check the writers and the ending.

Pass: *recovered* (exit 0 at the last iteration, the tracker naming a completed checkpoint no older than the
last save begun, no replacement on S) or *stopped loudly* (non-zero within `loud_stop_bound` replacement
cycles). FAIL: a silent end, saves that failed silently (exit 0 with the tracker short of the last save
begun), a restart from scratch, a replacement that loaded the incomplete S, restarts past the bound.
"""

from __future__ import annotations

from ftqual.contract import STORAGE_FAULTS
from ftqual.contract import fault as fault_kind
from ftqual.verification.checks.broken_checkpoint import MITIGATIONS as BROKEN_MITIGATIONS
from ftqual.verification.checks.broken_checkpoint import loud_stop_bound
from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, Waiver, plain
from ftqual.verification.evidence import derive, endings
from ftqual.verification.evidence.run_meta import FaultMarker
from ftqual.verification.evidence.snapshot import RunSnapshot

STORAGE_OUTCOME = "storage_fault_outcome"
# What the recovery checks say after a loud stop (their specs name this check in `waived_by`); the world's
# sameness is still judged: every replacement trains, cycle after cycle.
STORAGE_STOPPED = (
    "the job stopped non-zero on the failed storage, so there is no recovery to verify "
    "(storage_fault_outcome judges the ending)"
)
MITIGATIONS = {
    "silent_end": BROKEN_MITIGATIONS["silent_end"],
    "restarted_from_scratch": BROKEN_MITIGATIONS["restarted_from_scratch"],
    "kept_restarting": BROKEN_MITIGATIONS["kept_restarting"],
    "saves_failed_silently": (
        "a save that failed must fail the job: have the job script fail an exit 0 whose tracker is short of "
        "the last save, and alert on free space of the checkpoint filesystem"
    ),
    "loaded_incomplete": (
        "the tracker must advance only after every shard and `.metadata` are on disk; --verify-integrity "
        "(torch_dist) re-hashes a checkpoint's files on load"
    ),
}


def storage_fault_outcome(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant (disk_full, writer_stall): the marker records the fault made as run.json asked (the filler
    leaving less room than a checkpoint; the stopped writers, none of them the rank); the save it broke never
    became the tracker's nor a replacement's checkpoint; the job recovered or stopped non-zero within
    `loud_stop_bound` cycles. It fails on a silent end, saves lost under an exit 0, a restart from scratch, a
    load of the incomplete save, or a loop past the bound."""
    cid = STORAGE_OUTCOME
    if exp.fault not in STORAGE_FAULTS:
        return skip(cid, "no storage fault in this scenario")
    if not snap.ok("marker"):
        return inconclusive(cid, snap.reason("marker"))
    f = Findings(cid)
    f.values.update(fault=exp.fault, outcome=None)
    marker = snap.marker
    if marker is None:
        f.problem(f"no fault_injected.json: the {exp.fault} fault was never made")
        return f.result()
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    f.cite(marker.ref)
    record = marker.storage or {}
    if record.get("kind") != exp.fault:
        f.problem(
            f"the marker records storage fault {record.get('kind')!r}, run.json asked for {exp.fault!r}",
            marker.ref,
        )
        return f.result()
    if fault_kind(exp.fault).rank_prepares == "fill_filesystem":
        _filled(snap, f, marker, record)
    else:
        _stalled(f, marker, record)
    failed = _failed_save(snap, f, marker)
    _judge(snap, exp, f, marker, failed)
    return f.result()


def _filled(snap: RunSnapshot, f: Findings, marker: FaultMarker, record: dict) -> None:
    mount = snap.meta.storage
    if mount is None:
        f.problem(
            "run.json records no capped filesystem (`storage`): disk_full filled a real one", snap.meta.ref
        )
    else:
        f.values["cap_bytes"] = mount.get("cap_bytes")
        f.fact(f"the checkpoint directory was a capped filesystem of {mount.get('cap_bytes')} bytes")
        if mount.get("problem"):
            f.problem(f"its unmount: {mount['problem']}", snap.meta.ref)
    after = record.get("filesystem_after") if isinstance(record.get("filesystem_after"), dict) else {}
    free, needed = after.get("free_bytes"), record.get("checkpoint_bytes")
    f.values.update(
        free_bytes_after_fill=free, checkpoint_bytes=needed, filler_bytes=record.get("filler_bytes")
    )
    if not isinstance(free, int) or not isinstance(needed, int):
        f.problem("the marker does not say how much room the filler left", marker.ref)
    elif free >= needed:
        f.problem(
            f"the filler left {free} bytes free, room for a whole checkpoint of {needed} bytes: the disk was "
            "not full",
            marker.ref,
        )
    else:
        f.fact(
            f"after iteration {record.get('iteration')} the filler left {free} bytes free, less than a "
            f"checkpoint ({needed} bytes)",
            marker.ref,
        )


def _stalled(f: Findings, marker: FaultMarker, record: dict) -> None:
    writers = record.get("writers") if isinstance(record.get("writers"), list) else []
    writers = [w for w in writers if isinstance(w, dict)]
    f.values["writers"] = [{"pid": w.get("pid"), "command": w.get("command")} for w in writers]
    if not writers:
        f.problem("the marker names no stopped writer: the rank had no writer process to stall", marker.ref)
        return
    if marker.pid is not None and any(w.get("pid") == marker.pid for w in writers):
        f.problem(
            "a stopped writer is the rank itself: that is a hang of the rank, not of its writer", marker.ref
        )
        return
    names = ", ".join(f"pid {w.get('pid')} ({len(w.get('files') or [])} file(s) open)" for w in writers)
    f.fact(f"stopped the writer(s) of iteration {record.get('iteration')}: {names}", marker.ref)


def _failed_save(snap: RunSnapshot, f: Findings, marker: FaultMarker) -> int | None:
    """The save the fault broke: the writer_stall's (the marker's save_iteration), or disk_full's first save
    the fault cycle began after the fill; None (a problem said) when there was none."""
    if marker.save_iteration is not None:
        failed = marker.save_iteration
    else:
        cycle = derive.fault_cycle(snap, marker)
        log = snap.train_log(cycle)
        c = marker.checkpoint_iteration or 0
        begun = [
            e.iteration
            for e in (log.saves if log is not None else ())
            if e.kind in ("start", "scheduled") and e.iteration > c
        ]
        if not begun:
            f.problem(
                f"no save began in cycle {cycle} after the fault: it was never met (train_iters must leave a "
                "save after the checkpoint that arms it)"
            )
            return None
        failed = min(begun)
    f.values["failed_save"] = failed
    cycle = derive.fault_cycle(snap, marker)
    log = snap.train_log(cycle)
    done = [e for e in (log.saves_of("done") if log is not None else ()) if e.iteration == failed]
    if done:
        f.problem(
            f"the save of iteration {failed} completed in cycle {cycle}: the fault did not break it",
            done[0].ref,
        )
    else:
        f.fact(f"the save of iteration {failed} never completed in cycle {cycle}")
    return failed


def _judge(snap: RunSnapshot, exp: RunPlan, f: Findings, marker: FaultMarker, failed: int | None) -> None:
    after, code, burned = endings.after_the_fault(snap, marker.cycle)
    f.values.update(
        exit_code=code,
        cycles_after_fault=len(after),
        gpu_s_without_progress=burned.gpu_s if burned is not None else None,
        bound_cycles=loud_stop_bound(exp),
    )
    tracker = _final_tracker(snap, f)
    name, text, refs = _ending(snap, after, code, burned, failed, tracker)
    if name == "stopped_loudly" and len(after) > loud_stop_bound(exp):
        name = "kept_restarting"
        text = f"{text}: {len(after)} replacement cycles, more than the {loud_stop_bound(exp)} allowed"
    cut = _cut_short(snap, after) if name in ("stopped_loudly", "recovered") else None
    if cut is not None:  # a pass rests on the whole record of the ending, never on part of it
        name, text = None, f"{text}, but {cut}: the ending cannot be shown whole"
    f.values["outcome"] = name
    if name in MITIGATIONS:
        f.values["mitigation"] = MITIGATIONS[name]
        f.problem(f"{text} (mitigation: {MITIGATIONS[name]})", *refs)
    elif name is None:
        f.unknown(text, *refs)
    else:
        f.fact(text, *refs)
    if burned is not None and burned.gpu_s is None:
        f.unknown(
            f"the cost of cycles {list(burned.cycles)} is unknown: a record of theirs (cycle_infos) is "
            "missing or has no start and end"
        )


def _final_tracker(snap: RunSnapshot, f: Findings) -> int | None:
    """The tracker at the end, when it names a completed checkpoint (else a problem, or unknown, said)."""
    if snap.checkpoints is None:
        f.unknown(snap.reason("checkpoints"))
        return None
    tracker = snap.checkpoints.tracker
    f.values["final_tracker"] = tracker.value
    if tracker.value is None:
        f.problem(f"the tracker at the end is {tracker.state}, naming no checkpoint", tracker.ref)
        return None
    folder = snap.checkpoints.dir_for(tracker.value)
    if folder is None or not folder.complete:
        why = "absent" if folder is None else folder.why_incomplete or "no .metadata"
        f.problem(
            f"the tracker names iteration {tracker.value}, not a completed checkpoint ({why})", tracker.ref
        )
        return None
    f.fact(f"the tracker names iteration {tracker.value}, a completed checkpoint", tracker.ref)
    return tracker.value


def _last_begun(snap: RunSnapshot) -> int | None:
    """The newest save any cycle began."""
    begun = [e.iteration for log in snap.train_logs for e in log.saves if e.kind in ("start", "scheduled")]
    return max(begun) if begun else None


def _cut_short(snap: RunSnapshot, after: list) -> str | None:
    """What of the ending's record is cut short (a log whose last line has no end): the launcher's log, or a
    cycle's after the fault; None when whole."""
    launcher = snap.sources.get("launcher_log")
    if launcher is not None and not launcher.complete:
        return "launcher.log is cut short (its last line has no end)"
    cut = [log.cycle for log in after if not log.complete]
    return f"the log of cycle(s) {cut} is cut short" if cut else None


def _ending(snap, after, code, burned, failed, tracker) -> tuple[str | None, str, tuple]:
    """(outcome, what the logs show, refs) of the job once the storage failed."""
    if (first := endings.first_ending(snap, "after the storage fault")) is not None:
        return first
    for log in after:
        restored = endings.restored_iteration(log)
        if failed is not None and restored == failed:
            done = log.loads_of("done")
            text = f"cycle {log.cycle} loaded iteration {failed}, the save the storage fault broke"
            return "loaded_incomplete", text, (done[0].ref,) if done else ()
    if code == 0:
        last = _last_begun(snap)
        if tracker is not None and last is not None and tracker < last:
            return (
                "saves_failed_silently",
                f"exit 0 with the tracker at {tracker}, short of the last save begun ({last}): saves were "
                "lost and nothing failed",
                (snap.meta.ref,),
            )
        if not after:
            return (
                "recovered",
                "the job finished (exit 0) without a restart, every save it began completed",
                (),
            )
        loaded = sorted({endings.restored_iteration(log) for log in after})
        return "recovered", f"recovered: exit 0 at the last iteration, replacements loaded {loaded}", ()
    if code is None:
        return None, "run.json records no exit code", (snap.meta.ref,)
    cost = f"; {burned.text}" if burned is not None else ""
    return (
        "stopped_loudly",
        f"stopped loudly: exit {code} after {len(after)} replacement cycle(s){cost}",
        (snap.meta.ref,),
    )


SPEC = CheckSpec(
    STORAGE_OUTCOME,
    "the checkpoint storage failed (a full filesystem, a stopped writer), the save it broke never became the"
    " latest nor was loaded, and the job recovered or stopped non-zero within NVRx's bound: never a silent"
    " exit 0 or saves lost under an exit 0",
    plain(storage_fault_outcome),
    carried=lambda i: i.family == "storage",  # only a storage fault's report carries it
    # A loud stop (a pass) has no recovery to verify either.
    waives=Waiver(STORAGE_STOPPED, lambda _, r: r.values.get("outcome") == "stopped_loudly"),
)
