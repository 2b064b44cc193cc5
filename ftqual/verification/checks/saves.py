"""A kill while a save is in flight, and a run resuming a copied checkpoint: the saves' checks.

Extended scenario kinds: a kill while a save is in flight (in_save), a run resuming an existing
checkpoint directory (initial_checkpoint_iteration K > 0)."""

from __future__ import annotations

from ftqual.rank.ids import IN_SAVE_TIMINGS, SAVE_PHASES
from ftqual.verification.checks import result as checks
from ftqual.verification.checks.checkpoint_folder import NOT_COMPLETED, completed_folder
from ftqual.verification.checks.result import CheckResult, Findings, Scoped
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, plain
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.clock import iso_z
from ftqual.verification.evidence.run_meta import FaultMarker
from ftqual.verification.evidence.snapshot import RunSnapshot
from ftqual.verification.evidence.train_log import SaveEvent

INTERRUPTED_SAVE = "interrupted_save_discarded"
EXISTING_CHECKPOINT = "started_from_existing_checkpoint"


def interrupted_save_discarded(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant (fault_timing in_save or a save phase): each injection struck while the save of iteration S
    was in flight and S was then discarded: the marker names save_iteration S > checkpoint_iteration C (and,
    for a save phase, what was on disk at the kill shows that phase); the fault cycle's log began the save
    of S before the injection and never finalized it in that cycle (no `successfully saved checkpoint from
    iteration S`); the replacement restored C, not S: never a partial or untracked checkpoint."""
    cid = INTERRUPTED_SAVE
    if not exp.faulty:
        return checks.skip(cid, "no fault in this scenario")
    if snap.meta.fault_timing not in IN_SAVE_TIMINGS:
        timing = snap.meta.fault_timing
        return checks.skip(cid, f"fault_timing is '{timing}': no save was in flight by design")
    if not snap.ok("marker"):
        return checks.inconclusive(cid, snap.reason("marker"))
    if not snap.markers:
        return checks.inconclusive(cid, "no fault_injected.json: no injection to relate a save to")
    if not snap.ok("train_logs"):
        return checks.inconclusive(cid, snap.reason("train_logs"))
    f = Findings(cid)
    each = []
    for marker, g in checks.per_injection(f, snap.markers):
        _discarded(snap, g, marker)
        each.append({"injection": marker.number, **g.values})
    f.values.update({k: v for k, v in each[0].items() if k != "injection"})
    if len(each) > 1:
        f.values["injections"] = each
    return f.result()


def _phase_on_disk(f: Findings | Scoped, marker: FaultMarker, phase: str) -> None:
    """The save in flight was in `phase` at the kill, by what the marker says was on disk then."""
    seen = marker.on_disk
    if not seen:
        f.problem(f"{marker.ref.path} records nothing of the save on disk at the kill", marker.ref)
        return
    shards, metadata = seen.get("shards"), seen.get("metadata") is True
    f.values["on_disk"] = dict(seen)
    wanted = {
        "save_staged": shards == 0 and not metadata,
        "save_shards_partial": isinstance(shards, int) and shards >= 1 and not metadata,
        "save_shards_complete": isinstance(shards, int) and shards >= 1 and not metadata,
        "save_finalized": metadata,
    }[phase]
    said = f"{shards} shard file(s), .metadata {'written' if metadata else 'absent'}"
    freeze = marker.freeze  # None: what the poll saw before the rank killed itself (older markers)
    if freeze is None:
        pass
    elif freeze.get("threads_stopped") is True:
        said += " (seen with the rank stopped, before its kill)"
    else:
        said += " (seen after the rank's stop, its threads not all shown stopped)"
    if wanted:
        f.fact(f"killed in {phase}: {said}", marker.ref)
    else:
        f.problem(f"the kill asked for {phase} found {said} on disk", marker.ref)


def _discarded(snap: RunSnapshot, f: Findings | Scoped, marker: FaultMarker) -> None:
    c, s = marker.checkpoint_iteration, marker.save_iteration
    f.values.update(checkpoint_iteration=c, save_iteration=s)
    timing = snap.meta.fault_timing
    if marker.timing is not None and marker.timing != timing:
        f.problem(f"{marker.ref.path} says timing {marker.timing!r}, not {timing!r}", marker.ref)
    if timing in SAVE_PHASES:
        _phase_on_disk(f, marker, timing)
    if s is None:
        f.problem(f"{marker.ref.path} names no save_iteration: no save in flight was recorded", marker.ref)
        return
    if c is None:
        f.unknown(f"{marker.ref.path} has no checkpoint_iteration", marker.ref)
        return
    if s <= c:
        f.problem(f"save_iteration {s} is not after the completed checkpoint {c}", marker.ref)
        return
    cycle = derive.fault_cycle(snap, marker)
    log = snap.train_log(cycle)
    if log is None:
        f.unknown(f"no logs/train_cycle{cycle}.log for the cycle that was hit")
        return
    started = [e for e in log.saves if e.kind in ("start", "scheduled") and e.iteration == s]
    if not started:
        f.missing_fact(f"{log.path} never began the save of iteration {s}", log.complete)
    elif started[0].t is None:
        f.unknown(f"the save of iteration {s} began on a line without timestamp", started[0].ref)
    elif marker.injected_at is not None and started[0].t > marker.injected_at:
        late = (started[0].t - marker.injected_at).total_seconds()
        f.problem(f"the save of iteration {s} began {late:.3f} s after the injection", started[0].ref)
    else:
        f.fact(
            f"the save of iteration {s} began at {iso_z(started[0].t)}, before the injection", started[0].ref
        )
    finalized = [e for e in log.saves_of("done") if e.iteration == s]
    if finalized:
        # The save ran to its end before the kill landed (the phase passed while the injection was being
        # made): the run says nothing of a kill in that phase, and the stack is not at fault for it.
        f.unknown(
            f"the save of iteration {s} was finalized in cycle {cycle}{_after_claim(finalized[0], marker)}: "
            "the kill landed after the save it was meant to interrupt; this run cannot show what such a "
            "kill does (run the scenario again)",
            finalized[0].ref,
        )
    elif started:
        f.fact(f"never finalized in cycle {cycle}")
    restored = derive.restore(snap, marker)
    replacement = derive.replacement_cycle(snap, marker)
    f.values["restored_iteration"] = restored.iteration if restored else None
    if restored is None:
        after = snap.train_log(replacement)
        if after is None:
            gone = f"no replacement cycle: logs/train_cycle{replacement}.log is absent"
            checks.absent_after_stop(snap, f, gone)
        else:
            f.missing_fact(f"{after.path} restored no checkpoint", after.complete)
    elif restored.iteration == s and finalized:
        f.fact(f"the replacement restored {s}, a save finalized before the kill", restored.ref)
    elif restored.iteration == s:
        f.problem(f"the replacement restored the interrupted save of iteration {s}, not {c}", restored.ref)
    elif restored.iteration != c:
        f.problem(
            f"the replacement restored iteration {restored.iteration}, not the last completed checkpoint {c}",
            restored.ref,
        )
    else:
        f.fact(f"the replacement restored {c}, not the interrupted {s}", restored.ref)


def _after_claim(done: SaveEvent, marker: FaultMarker) -> str:
    """When the save's `successfully saved` line came, relative to the injection's claim."""
    if done.t is None or marker.injected_at is None:
        return ""
    ms = (done.t - marker.injected_at).total_seconds() * 1000
    return f", {abs(ms):.1f} ms {'after' if ms >= 0 else 'before'} the injection was claimed"


def started_from_existing_checkpoint(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant (initial_checkpoint_iteration K > 0: the checkpoint directory held a completed run's
    checkpoints at launch): cycle 0 loaded iteration K (its folder a completed checkpoint) and trained on
    from K+1; in a fault scenario the first marker's baseline_iteration is K, its checkpoint_iteration is
    after K, and the recovery restored a checkpoint after K (one this run wrote)."""
    cid = EXISTING_CHECKPOINT
    k = snap.meta.initial_checkpoint_iteration
    if k <= 0:
        return checks.skip(
            cid, "the checkpoint directory held no checkpoint at launch (initial_checkpoint_iteration 0)"
        )
    if not snap.ok("train_logs"):
        return checks.inconclusive(cid, snap.reason("train_logs"))
    f = Findings(cid)
    f.values["initial_checkpoint_iteration"] = k
    _cycle0_loaded(snap, f, k)
    if exp.faulty:
        _after_existing(snap, f, k)
    return f.result()


def _cycle0_loaded(snap: RunSnapshot, f: Findings, k: int) -> None:
    log = snap.train_log(0)
    if log is None:
        f.unknown("no logs/train_cycle0.log: what the first cycle loaded is unknown")
        return
    for ref in log.fresh_starts[:1]:
        f.problem("cycle 0 started from scratch ('could not find the metadata file')", ref)
    dones = log.loads_of("done")
    if not dones:
        f.missing_fact(f"{log.path} has no 'successfully loaded checkpoint' line", log.complete)
    elif dones[0].iteration != k:
        f.problem(
            f"cycle 0 loaded iteration {dones[0].iteration}, the existing checkpoint is {k}", dones[0].ref
        )
    else:
        f.fact(f"cycle 0 loaded the existing checkpoint {k}", dones[0].ref)
        first = derive.first_step_after(log, dones[0].ref.line)
        if first is None:
            f.missing_fact(f"no iteration line after the load in {log.path}", log.complete)
        elif first.iteration != k + 1:
            f.problem(f"cycle 0's first iteration is {first.iteration}, expected {k + 1}", first.ref)
        else:
            f.fact(f"and trained on from iteration {k + 1}", first.ref)
    completed_folder(
        snap,
        f,
        k,
        absent="iter_{k:07d} is not a completed checkpoint (no such folder)",
        unfinished=NOT_COMPLETED,
    )


def _after_existing(snap: RunSnapshot, f: Findings, k: int) -> None:
    if not snap.ok("marker"):
        f.unknown(snap.reason("marker"))
        return
    marker = snap.marker
    if marker is None:
        f.unknown("no fault_injected.json: no injection to relate the existing checkpoint to")
        return
    if marker.baseline_iteration is None:
        f.unknown("fault_injected.json has no baseline_iteration", marker.ref)
    elif marker.baseline_iteration != k:
        f.problem(
            f"the injection armed with baseline {marker.baseline_iteration}, not the existing checkpoint {k}",
            marker.ref,
        )
    if marker.checkpoint_iteration is None:
        f.unknown("fault_injected.json has no checkpoint_iteration", marker.ref)
    elif marker.checkpoint_iteration <= k:
        f.problem(
            f"the injection followed checkpoint {marker.checkpoint_iteration}, not one after the "
            f"existing {k}",
            marker.ref,
        )
    else:
        f.fact(
            f"the injection followed checkpoint {marker.checkpoint_iteration}, written after {k}", marker.ref
        )
    restored = derive.restore(snap)
    if restored is None:
        f.unknown(
            f"no restore in cycle {derive.replacement_cycle(snap)}: the recovery's checkpoint is unknown"
        )
    elif restored.iteration <= k:
        f.problem(
            f"the recovery restored iteration {restored.iteration}, not a checkpoint after the existing {k}",
            restored.ref,
        )
    else:
        f.fact(f"the recovery restored {restored.iteration}", restored.ref)


DISCARDED_SPEC = CheckSpec(
    "interrupted_save_discarded",
    "the save in flight at the kill was never finalized, and the replacement restored the checkpoint"
    " completed before it",
    plain(interrupted_save_discarded),
    waived_by=("node_loss_outcome",),
)
EXISTING_SPEC = CheckSpec(
    "started_from_existing_checkpoint",
    "the run started from the copied checkpoint K, the fault came after a newer one, and the recovery"
    " restored a checkpoint after K",
    plain(started_from_existing_checkpoint),
)
