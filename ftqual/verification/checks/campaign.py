"""A campaign run's checks: every planned fault judged as a single-fault run is, and the plan followed.

Each fault k is judged by the same checks a one-fault run gets (checkpoint_before_failure,
failure_detected_and_restarted, resumed_from_checkpoint, progress_after_resume, replay_consistency), on a
view of the run in which marker k is the only injection and run.json asked for its plan entry's fault and
rank (`fault_view`): its own cycle, its own detection path, its own restore. The campaign's check of each id
is the worst of the K results (fail > inconclusive > pass), with every fault's status and detail in its
`values.faults`. clean_finish, active_world_unchanged and no_leftovers judge the whole run as they do for
several injections; campaign_plan_followed ties the markers to the plan written before the launch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ftqual.verification.checks.fault import checkpoint_before_failure, failure_detected_and_restarted
from ftqual.verification.checks.replay import replay_consistency
from ftqual.verification.checks.result import CheckResult, Findings, inconclusive
from ftqual.verification.checks.resume import progress_after_resume, resumed_from_checkpoint
from ftqual.verification.checks.run_plan import RunPlan, run_plan_from
from ftqual.verification.checks.spec import CheckInputs, CheckSpec, plain
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.run_meta import FaultMarker
from ftqual.verification.evidence.snapshot import RunSnapshot

PLAN_FOLLOWED = "campaign_plan_followed"
SEVERITY = {"fail": 3, "inconclusive": 2, "pass": 1, "skip": 0}
PER_FAULT: tuple[Callable[[RunSnapshot, RunPlan], CheckResult], ...] = (
    checkpoint_before_failure,
    failure_detected_and_restarted,
    resumed_from_checkpoint,
    progress_after_resume,
)


def fault_view(snap: RunSnapshot, marker: FaultMarker) -> RunSnapshot:
    """The run as a single-fault run of marker k: the one injection, asked for as the plan planned it."""
    entry = snap.campaign_entry(marker.number)
    one = dataclasses.replace(marker, number=1, injection=1, injections=1)
    meta = dataclasses.replace(
        snap.meta,
        fault=entry.fault if entry is not None else "campaign",
        fault_rank=entry.rank if entry is not None else None,
        injections=1,
    )
    return dataclasses.replace(snap, meta=meta, marker=one, markers=(one,))


def per_fault(snap: RunSnapshot, exp: RunPlan, baseline: RunSnapshot | None = None) -> list[CheckResult]:
    """The per-fault checks, each the worst over the campaign's faults (module docstring)."""
    views = [(m, fault_view(snap, m)) for m in snap.markers]
    results = []
    for check in (*PER_FAULT, None):
        each = []
        for marker, view in views:
            plan = run_plan_from(view.meta, exp.replay_tolerance, exp.baseline_tolerance)
            got = check(view, plan) if check else replay_consistency(view, plan, baseline)
            each.append((marker, view, got))
        results.append(_combined(each, exp))
    return results


def _combined(each: list[tuple[FaultMarker, RunSnapshot, CheckResult]], exp: RunPlan) -> CheckResult:
    if not each:
        cid = "replay_consistency"
        return inconclusive(cid, "no injection marker: no fault of the campaign to judge")
    cid = each[0][2].id
    worst = max(each, key=lambda item: SEVERITY[item[2].status])[2].status
    faults = [
        {
            "fault_index": m.number,
            "fault": v.meta.fault,
            "rank": v.meta.fault_rank,
            "cycle": m.cycle,
            "status": r.status,
            "detail": r.detail,
        }
        for m, v, r in each
    ]
    bad = [f for f in faults if f["status"] == worst] if worst != "pass" else []
    if bad:
        first = bad[0]
        detail = (
            f"{len(bad)} of {len(faults)} faults {worst}; fault {first['fault_index']} ({first['fault']} of "
            f"rank {first['rank']}, cycle {first['cycle']}): {first['detail']}"
        )
    else:
        detail = (
            f"every one of the {len(faults)} faults passes ({', '.join(str(f['fault']) for f in faults)})"
        )
    if len(faults) < exp.injections and worst in ("pass", "skip"):
        worst, detail = "fail", f"{len(faults)} of {exp.injections} planned faults were injected; " + detail
    evidence: list[Ref] = []
    for _, _, r in each:
        for ref in r.evidence[:2]:
            if ref not in evidence:
                evidence.append(ref)
    return CheckResult(cid, worst, detail, tuple(evidence), values={"faults": faults})


def campaign_plan_followed(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: campaign_plan.json (written before the launch) is a plan of K faults, and the run followed
    it: exactly K markers, marker k naming plan entry k (`plan_index`), its fault, rank and placement, armed
    by a checkpoint at or after the entry's `arm_iteration`; the plan was written before the first cycle
    started."""
    cid = PLAN_FOLLOWED
    if not snap.ok("campaign_plan") or snap.campaign is None:
        return inconclusive(cid, snap.reason("campaign_plan"))
    plan = snap.campaign
    f = Findings(cid)
    f.values.update(seed=plan.seed, planned=plan.count, injected=len(snap.markers))
    ref = Ref("campaign_plan.json")
    if plan.count != exp.injections:
        f.problem(
            f"the plan holds {plan.count} faults, run.json asked for {exp.injections}", ref, snap.meta.ref
        )
    if len(snap.markers) != plan.count:
        f.problem(f"{len(snap.markers)} faults were injected, the plan holds {plan.count}", ref)
    for marker in snap.markers:
        entry = snap.campaign_entry(marker.number)
        if entry is None:
            f.problem(f"{marker.ref.path} has no entry {marker.number} in the plan", marker.ref, ref)
            continue
        said = {
            "plan_index": (marker.plan_index, entry.index),
            "fault": (marker.fault, entry.fault),
            "rank": (marker.rank, entry.rank),
            "placement": (marker.placement, entry.placement),
        }
        for key, (got, want) in said.items():
            if got != want:
                f.problem(
                    f"{marker.ref.path} says {key} {got!r}, the plan's entry {entry.index} {want!r}",
                    marker.ref,
                    ref,
                )
        k = marker.checkpoint_iteration
        if k is None or k < entry.arm_iteration:
            f.problem(
                f"{marker.ref.path} was armed by checkpoint {k}, before the plan's iteration "
                f"{entry.arm_iteration}",
                marker.ref,
                ref,
            )
    written = plan.written_at
    first = snap.cycles.by_cycle(0) if snap.cycles else None
    if written is None or first is None or first.start is None:
        f.unknown("when the plan was written, or when cycle 0 started, is unknown", ref)
    elif written > first.start:
        f.problem(f"the plan was written at {written.isoformat()}, after cycle 0 started", ref)
    if not f.problems and not f.unknowns:
        f.fact(f"the {plan.count} faults of seed {plan.seed} were injected as planned, in order", ref)
    return f.result()


def _accumulation(inputs: CheckInputs) -> CheckResult:
    section = inputs.once("campaign_section", lambda: inputs.campaign_section(inputs.snap))  # type: ignore[misc]
    return section[1]  # type: ignore[index]


SPECS = (
    CheckSpec(
        PLAN_FOLLOWED,
        "campaign_plan.json, written before the launch, planned K faults and the run injected exactly those,"
        " in order (fault, rank, placement), each armed at or after its planned checkpoint",
        plain(campaign_plan_followed),
        carried=lambda i: i.campaign,
    ),
    CheckSpec(
        "cycles_do_not_accumulate",
        "over the campaign's cycles no restart, load or recovery time and no leftover process or open"
        " descriptor grows (no last third entirely over the first third's median by the trend rule), and"
        " /dev/shm would not be full within the horizon of faults at the rate the campaign leaked it (a"
        " smaller leak is a finding)",
        _accumulation,
        # Judged by ftqual.verification.campaign.cycles, which the verifier hands in (a layer above).
        carried=lambda i: i.campaign and i.campaign_section is not None,
    ),
)
