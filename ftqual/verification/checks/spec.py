"""CheckSpec: what a check declares of itself (its id, legend line, when a report carries it, what skips it).

Each check module declares its `SPEC` (or `SPECS`); `ftqual.verification.checks.CHECKS` lists them once, in
report order, and `run_checks` runs them. A check's function stays a pure `(snap, exp) -> CheckResult`; the
spec says how the runner calls it (`plain`, `first_failure_only`, `judged_per_fault`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from ftqual.contract import family_of
from ftqual.verification.checks.result import CheckResult
from ftqual.verification.checks.run_plan import RunPlan, run_plan_from
from ftqual.verification.evidence import endings
from ftqual.verification.evidence.snapshot import RunSnapshot

# The outcome checks whose finding means there was no recovery (a node lost with no spare, a loud stop, a
# fault that comes back): every check that proves a recovery is waived by them.
NO_RECOVERY = (
    "node_loss_outcome",
    "checkpoint_break_outcome",
    "storage_fault_outcome",
    "recurring_fault_outcome",
)

Check = Callable[[RunSnapshot, RunPlan], CheckResult]


@dataclass
class CheckInputs:
    """What every check may read: the run, its plan, the baseline run, and the judgements of layers above
    the checks that a check's result is taken from (handed in, since the checks may not import them)."""

    snap: RunSnapshot
    exp: RunPlan
    baseline: RunSnapshot | None = None
    # A campaign's single-fault checks, each the worst over its faults (checks.campaign.per_fault).
    per_fault: Callable[[CheckInputs], list[CheckResult]] | None = None
    # A campaign's cycles table and its accumulation check (ftqual.verification.campaign.cycles).
    campaign_section: Callable[[RunSnapshot], tuple[dict, CheckResult]] | None = None
    _memo: dict[str, object] = field(default_factory=dict, repr=False)

    def once(self, key: str, make: Callable[[], object]) -> object:
        """`make()` the first time `key` is asked for, its value after: each judgement is made once."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    @property
    def family(self) -> str | None:
        return family_of(self.exp.fault)

    @property
    def campaign(self) -> bool:
        return self.family == "campaign"

    @property
    def stop_role(self) -> str | None:
        """Whose stop is judged (endings.stop_role): "loop", "curable" or None."""
        return endings.stop_role(self.exp.fault, self.exp.injections)


@dataclass(frozen=True)
class Waiver:
    """What a scenario's outcome check declares: when its finding leaves the recovery checks nothing to prove
    (`holds`, of the inputs and that check's own result), and the reason they say skip with."""

    reason: str
    holds: Callable[[CheckInputs, CheckResult], bool]


def always(_: CheckInputs) -> bool:
    return True


@dataclass(frozen=True)
class CheckSpec:
    """One check, as it declares itself. `carried`: whether the scenario's report carries it at all (a check
    added for some scenarios only, so that older reports keep the checks they listed); a check that is
    carried but does not apply says skip from its own function. `waived_by`: the ids of the outcome checks
    whose `waives` (when it holds) makes this one say skip with that waiver's reason. `legend`: the report's
    one line of what a pass means (ftqual.report.summary.CHECK_LEGEND)."""

    id: str
    legend: str
    run: Callable[[CheckInputs], CheckResult]
    carried: Callable[[CheckInputs], bool] = always
    waived_by: tuple[str, ...] = ()
    waives: Waiver | None = None


def plain(check: Check) -> Callable[[CheckInputs], CheckResult]:
    """The check run on the run as it is."""
    return lambda inputs: check(inputs.snap, inputs.exp)


def first_failure_only(check: Check) -> Callable[[CheckInputs], CheckResult]:
    """The check of each injection's own failure: for a fault that comes back, its first one only (the
    recurrences have no new checkpoint before them and the last no replacement, by design; the ones after the
    first are judged by recurring_fault_outcome)."""

    def run(inputs: CheckInputs) -> CheckResult:
        snap, exp = inputs.snap, inputs.exp
        if inputs.stop_role == "loop" and len(snap.markers) > 1:
            # The plan of one injection, made as every plan is (from run.json's record), and the first marker.
            one = dataclasses.replace(snap.meta, injections=1)
            exp = run_plan_from(one, exp.replay_tolerance, exp.baseline_tolerance)
            snap = dataclasses.replace(snap, markers=snap.markers[:1])
        return check(snap, exp)

    return run


def judged_per_fault(
    check_id: str, run: Callable[[CheckInputs], CheckResult]
) -> Callable[[CheckInputs], CheckResult]:
    """In a campaign, the worst over its faults of each fault judged alone (checks.campaign.per_fault);
    in any other run, `run`."""

    def judged(inputs: CheckInputs) -> CheckResult:
        if not inputs.campaign or inputs.per_fault is None:
            return run(inputs)
        each = inputs.once("per_fault", lambda: {r.id: r for r in inputs.per_fault(inputs)})  # type: ignore[misc]
        return each[check_id]  # type: ignore[index]

    return judged
