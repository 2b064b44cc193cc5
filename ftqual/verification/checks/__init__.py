"""Checks: pure functions of (snapshot, expectations) -> CheckResult, run in a fixed order."""

from __future__ import annotations

import dataclasses

from ftqual.contract import family_of, is_fault
from ftqual.verification.checks import campaign
from ftqual.verification.checks.baseline import uninterrupted_completion
from ftqual.verification.checks.broken_checkpoint import (
    NOT_WHEN_STOPPED,
    STOPPED_LOUDLY,
    checkpoint_break_outcome,
)
from ftqual.verification.checks.calculated import calculated_timeouts
from ftqual.verification.checks.detection_bound import detected_within_timeout
from ftqual.verification.checks.fault import checkpoint_before_failure, failure_detected_and_restarted
from ftqual.verification.checks.leftovers import no_leftovers
from ftqual.verification.checks.node_loss import NOT_WITHOUT_SPARE, node_loss_outcome, not_applicable
from ftqual.verification.checks.recurring import NOT_WHEN_RECURRING, RECURRING_STOPS, recurring_fault_outcome
from ftqual.verification.checks.replay import replay_consistency
from ftqual.verification.checks.result import CheckResult, skip, verdict
from ftqual.verification.checks.resume import clean_finish, progress_after_resume, resumed_from_checkpoint
from ftqual.verification.checks.run_plan import RunPlan, run_plan_from
from ftqual.verification.checks.saves import interrupted_save_discarded, started_from_existing_checkpoint
from ftqual.verification.checks.section_times import timeouts_not_exceeded
from ftqual.verification.checks.storage import (
    NOT_WHEN_STORAGE_STOPPED,
    STORAGE_STOPPED,
    storage_fault_outcome,
)
from ftqual.verification.checks.timeouts import fixed_timeouts_in_force
from ftqual.verification.checks.world import active_world_unchanged
from ftqual.verification.evidence import endings
from ftqual.verification.evidence.snapshot import RunSnapshot

FAULT_CHECKS = (
    checkpoint_before_failure,
    failure_detected_and_restarted,
    resumed_from_checkpoint,
    progress_after_resume,
    clean_finish,
    active_world_unchanged,
    no_leftovers,
    interrupted_save_discarded,
)
BASELINE_CHECKS = (uninterrupted_completion,)
# The checks of each injection's own failure: for a fault that comes back, only its first one.
FIRST_ONLY = (checkpoint_before_failure, failure_detected_and_restarted)
COMMON_CHECKS = (fixed_timeouts_in_force, timeouts_not_exceeded, started_from_existing_checkpoint)


def run_checks(snap: RunSnapshot, exp: RunPlan, baseline: RunSnapshot | None = None) -> list[CheckResult]:
    """Every check, in report order; those that do not apply to the scenario say `skip`. The checks a fault's
    report must carry are its registry entry's (ftqual.contract.Fault.required_checks); the family's outcome
    check is added here for the families that have one."""
    family = family_of(exp.fault)
    if family == "campaign":
        return campaign_checks(snap, exp, baseline)
    results = [check(snap, exp) for check in (*BASELINE_CHECKS, *FAULT_CHECKS, *COMMON_CHECKS)]
    role = endings.stop_role(exp.fault, exp.injections)
    if role == "loop" and len(snap.markers) > 1:
        # A fault that comes back marks every cycle it strikes; the recurrences have no new checkpoint
        # before them and the last no replacement, by design: the first failure is judged as any fault's,
        # the ones after it by recurring_fault_outcome (the stop and its bill).
        once, one = (
            dataclasses.replace(snap, markers=snap.markers[:1]),
            dataclasses.replace(exp, injections=1),
        )
        first = {c.__name__: c(once, one) for c in FIRST_ONLY}
        results = [first.get(r.id, r) for r in results]
    results.append(replay_consistency(snap, exp, baseline))
    if exp.job_ends:
        results = [not_applicable(r.id) if r.id in NOT_WITHOUT_SPARE else r for r in results]
    if exp.node_loss:
        # Only node_loss reports carry its check (the others keep the checks they always listed).
        results.append(node_loss_outcome(snap, exp))
    if snap.meta.checkpoint_damage != "none":
        # Only a damaged checkpoint's report carries it; a loud stop (its pass) has no recovery to verify.
        broken = checkpoint_break_outcome(snap, exp)
        if broken.values.get("outcome") == "stopped_loudly":
            results = [skip(r.id, STOPPED_LOUDLY) if r.id in NOT_WHEN_STOPPED else r for r in results]
        results.append(broken)
    if family == "storage":
        # Only a storage fault's report carries it; a loud stop (a pass) has no recovery to verify either.
        storage = storage_fault_outcome(snap, exp)
        if storage.values.get("outcome") == "stopped_loudly":
            results = [
                skip(r.id, STORAGE_STOPPED) if r.id in NOT_WHEN_STORAGE_STOPPED else r for r in results
            ]
        results.append(storage)
    if role == "loop":
        # A fault that comes back after every restart: nothing resumes past it, so the recovery checks have
        # nothing to prove; its own check judges who stopped the job, when and at what cost.
        results = [skip(r.id, RECURRING_STOPS) if r.id in NOT_WHEN_RECURRING else r for r in results]
    if role is not None:
        # Only such reports carry it (and a rank fault injected more than once: the curable control, which
        # NVRx must never stop while each cycle makes progress).
        results.append(recurring_fault_outcome(snap, exp))
    if exp.calc_ft_timeouts:
        # Only calculated-timeout runs carry it: the values NVRx chose, and what they would have caught.
        results.append(calculated_timeouts(snap, exp))
    if is_fault(exp.fault, lambda f: f.lives_on):
        # Only a live fault's report carries it: a hang's detection bound (the timeouts' promise).
        results.append(detected_within_timeout(snap, exp))
    # Every check gates (`CheckResult.gates`, verify.json's `gates`): each proves a point of the recovery the
    # walkthrough promises (docs/checks.md), or a condition without which those points prove nothing. A check
    # added for information only says `gates=False` in its result.
    return results


def campaign_checks(snap: RunSnapshot, exp: RunPlan, baseline: RunSnapshot | None) -> list[CheckResult]:
    """A campaign: the single-fault checks per fault (ftqual.verification.checks.campaign), the whole-run ones
    on the run
    as it is, and the plan followed; in the report order of every other fault run."""
    cbf, fdr, rfc, par, replay = campaign.per_fault(snap, exp, baseline)
    whole = [check(snap, exp) for check in (clean_finish, active_world_unchanged, no_leftovers)]
    common = [check(snap, exp) for check in COMMON_CHECKS]
    saves = interrupted_save_discarded(snap, exp)
    base = uninterrupted_completion(snap, exp)
    return [
        base,
        cbf,
        fdr,
        rfc,
        par,
        *whole,
        saves,
        *common,
        replay,
        campaign.campaign_plan_followed(snap, exp),
    ]


__all__ = ["CheckResult", "RunPlan", "run_plan_from", "run_checks", "verdict"]
