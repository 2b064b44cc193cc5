"""Checks: pure functions of (snapshot, expectations) -> CheckResult, each declared by its module, in order.

Each check module declares its `CheckSpec` (spec.py): its id, its legend line, when a report carries it and
which outcome checks make it say skip, and why. `CHECKS` lists them once, in report order; `run_checks` runs
those a run's report carries. Adding a check: its module's function and SPEC, its place in `CHECKS`, its tests
(docs/architecture.md, "Add a check").
"""

from __future__ import annotations

from collections.abc import Callable

from ftqual.verification.checks import (
    baseline,
    broken_checkpoint,
    calculated,
    campaign,
    checkpoint_equal,
    detection_bound,
    exact,
    fault,
    held,
    leftovers,
    node_loss,
    recurring,
    replay,
    resume,
    saves,
    section_times,
    storage,
    timeouts,
    world,
)
from ftqual.verification.checks.result import CheckResult, skip, verdict
from ftqual.verification.checks.run_plan import RunPlan, run_plan_from
from ftqual.verification.checks.spec import CheckInputs, CheckSpec
from ftqual.verification.evidence.snapshot import RunSnapshot

# Every check, in report order (stated here only). Those a scenario's report does not carry are left out of
# it; a check every fault's report must carry is named by the fault registry (ftqual.contract.Fault.checks,
# RECOVERY_CHECKS), which verification/schema.py requires of every reader's report.
CHECKS: tuple[CheckSpec, ...] = (
    baseline.SPEC,
    *fault.SPECS,  # checkpoint_before_failure, failure_detected_and_restarted
    *resume.SPECS,  # resumed_from_checkpoint, progress_after_resume, clean_finish
    world.SPEC,
    leftovers.SPEC,
    saves.DISCARDED_SPEC,
    timeouts.SPEC,
    section_times.SPEC,
    saves.EXISTING_SPEC,
    replay.SPEC,
    exact.SPEC,  # carried by replay-exact fault runs only
    checkpoint_equal.SPEC,  # carried by the exactness faults, and fault runs whose record holds digests
    # the scenarios' own outcome checks: only their scenarios' reports carry them
    node_loss.SPEC,
    broken_checkpoint.SPEC,
    storage.SPEC,
    recurring.SPEC,
    calculated.SPEC,
    detection_bound.SPEC,
    *campaign.SPECS,  # campaign_plan_followed, cycles_do_not_accumulate
    held.SPEC,
)
# Every check gates (`CheckResult.gates`, verify.json's `gates`): each proves a point of the recovery the
# walkthrough promises (docs/checks.md), or a condition without which those points prove nothing. A check
# added for information only says `gates=False` in its result.


def run_checks(
    snap: RunSnapshot,
    exp: RunPlan,
    baseline: RunSnapshot | None = None,
    campaign_section: Callable[[RunSnapshot], tuple[dict, CheckResult]] | None = None,
    checks: tuple[CheckSpec, ...] = CHECKS,
) -> list[CheckResult]:
    """The checks the run's report carries, in `checks`' order; one that an outcome check waives says skip
    with that waiver's reason. `campaign_section`: a campaign's cycles judgement (a layer above the
    checks)."""
    return run_declared(CheckInputs(snap, exp, baseline, _per_fault, campaign_section), checks)


def run_declared(inputs: CheckInputs, checks: tuple[CheckSpec, ...]) -> list[CheckResult]:
    """Each carried check of `checks`, in order: its result, or skip where a waiver of its holds."""
    by_id = {spec.id: spec for spec in checks}
    out = []
    for spec in checks:
        if not spec.carried(inputs):
            continue
        why = waived(spec, inputs, by_id)
        out.append(skip(spec.id, why) if why is not None else result_of(spec, inputs))
    return out


def result_of(spec: CheckSpec, inputs: CheckInputs) -> CheckResult:
    """The check's result, made once (an outcome check's result also decides what it waives)."""
    return inputs.once(f"check:{spec.id}", lambda: spec.run(inputs))  # type: ignore[return-value]


def waived(spec: CheckSpec, inputs: CheckInputs, by_id: dict[str, CheckSpec]) -> str | None:
    """The reason the check says skip: of the outcome checks it names, the waiver that holds, the last in
    report order where several do; None where none does."""
    why = None
    for outcome in by_id.values():
        waiver = outcome.waives
        if outcome.id not in spec.waived_by or waiver is None or not outcome.carried(inputs):
            continue
        if waiver.holds(inputs, result_of(outcome, inputs)):
            why = waiver.reason
    return why


def waived_by(outcome_id: str, checks: tuple[CheckSpec, ...] = CHECKS) -> tuple[str, ...]:
    """The checks that the outcome check's waiver makes say skip, in report order."""
    return tuple(spec.id for spec in checks if outcome_id in spec.waived_by)


def _per_fault(inputs: CheckInputs) -> list[CheckResult]:
    return campaign.per_fault(inputs.snap, inputs.exp, inputs.baseline)


__all__ = ["CHECKS", "CheckResult", "CheckSpec", "RunPlan", "run_plan_from", "run_checks", "verdict"]
