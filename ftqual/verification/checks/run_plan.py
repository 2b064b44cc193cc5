"""`RunPlan`: what a run was asked to do (its run.json record) and what the verifier derives from it.

The plan holds the run's `RunRecord` (ftqual.launch.run_schema) as read, never a copy of its fields: a
run.json key read through the plan (`plan.fault`) is the record's. Beside it, only what the verifier adds:
the tolerances from the command line and the properties derived from the record. Not the scenario's
expected outcome (ftqual.verification.expectation.ExpectedOutcome)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ftqual.contract import family_of
from ftqual.launch.run_schema import RunRecord

DEFAULT_REPLAY_TOLERANCE = 1e-3
DEFAULT_BASELINE_TOLERANCE = 2e-2
DEFAULT_JOIN_TIMEOUT_S = 600  # NVRx 0.7's rendezvous join_timeout when --rdzv-conf does not set one
# NVRx 0.7.0's --ft-max-no-progress-cycles default (ftqual leaves it unless run.json says otherwise)
NVRX_NO_PROGRESS_CYCLES = 3
_KEYS = frozenset(RunRecord.keys())
# run.json's keys the verify report's plan repeats (`as_dict`), in the report's order
REPORTED_KEYS = ("fault", "fault_rank", "train_iters", "save_interval", "world_size", "global_batch_size",
                 "max_restarts", "timeouts")  # fmt: skip


@dataclass(frozen=True, init=False)
class RunPlan:
    run: RunRecord  # run.json, as the verifier read it
    replay_tolerance: float = DEFAULT_REPLAY_TOLERANCE
    baseline_tolerance: float = DEFAULT_BASELINE_TOLERANCE

    def __init__(
        self,
        run: RunRecord,
        replay_tolerance: float = DEFAULT_REPLAY_TOLERANCE,
        baseline_tolerance: float = DEFAULT_BASELINE_TOLERANCE,
        **changes: Any,
    ) -> None:
        """`changes`: run.json keys given other values, so that `dataclasses.replace(plan, injections=1)`
        is the plan of the record so changed (a TypeError for a name that is no key)."""
        object.__setattr__(self, "run", dataclasses.replace(run, **changes) if changes else run)
        object.__setattr__(self, "replay_tolerance", replay_tolerance)
        object.__setattr__(self, "baseline_tolerance", baseline_tolerance)

    def __getattr__(self, name: str) -> Any:
        # Only for names the plan itself lacks: run.json's keys, read from the one record (not copied).
        if name in _KEYS:
            return getattr(self.run, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def node_loss(self) -> bool:
        return family_of(self.fault) == "node"

    @property
    def job_ends(self) -> bool:
        """A node is lost with no spare: NVRx must end the job (no recovery, no second cycle)."""
        return self.node_loss and not self.spare_nodes

    @property
    def join_timeout_s(self) -> int:
        return self.join_timeout if self.join_timeout is not None else DEFAULT_JOIN_TIMEOUT_S

    @property
    def recurring(self) -> bool:
        """A fault that comes back after every restart: NVRx must stop the job (no recovery)."""
        return family_of(self.fault) == "recurring"

    @property
    def no_progress_cycles(self) -> int:
        """The cycles without progress after which NVRx's progress tracker stops the job."""
        return (
            self.max_no_progress_cycles
            if self.max_no_progress_cycles is not None
            else NVRX_NO_PROGRESS_CYCLES
        )

    @property
    def stop_bound(self) -> int:
        """The cycles a job whose fault comes back may run in all: the no-progress cycles (or max_restarts
        where lower), plus the first cycle, which made progress before the fault first came. NVRx's tracker
        counts a cycle without progress at its end: a job it stops at the threshold ran exactly this many."""
        allowed = self.no_progress_cycles
        if self.max_restarts is not None:
            allowed = min(allowed, self.max_restarts)
        return max(1, allowed) + 1

    @property
    def faulty(self) -> bool:
        return family_of(self.fault) != "none"

    @property
    def expected_cycles(self) -> int:
        """One cycle for a baseline; each injection costs exactly one more."""
        return 1 + self.injections if self.faulty and not self.job_ends else 1

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {key: getattr(self.run, key) for key in REPORTED_KEYS}
        out["timeouts"] = dict(self.timeouts)
        out |= {
            "cycles": self.expected_cycles,
            "injections": self.injections if self.faulty else 0,
            "exit_code": 0,
            "replay_tolerance": self.replay_tolerance,
            "baseline_tolerance": self.baseline_tolerance,
        }
        if self.calc_ft_timeouts:
            out["calc_ft_timeouts"] = True
        if self.timeouts_from is not None:
            # Only runs under recommended timeouts say so (other reports keep their keys).
            out.update(timeouts_source="recommended", timeouts_from=dict(self.timeouts_from))
        if self.job_ends:
            # The documented outcome without a spare node: every survivor ends, non-zero, once the
            # rendezvous has waited join_timeout for the lost node.
            out.update(exit_code="non-zero", outcome="job_ends", join_timeout=self.join_timeout_s)
        elif self.recurring:
            # The fault comes back after every restart: NVRx must stop the job, non-zero, within the bound.
            out.update(exit_code="non-zero", outcome="stopped", bound_cycles=self.stop_bound)
        elif self.node_loss:
            # With a spare: NVRx promotes a standby into the lost node's place and training goes on.
            out.update(outcome="spare_promoted", spare_nodes=self.spare_nodes)
        return out


def run_plan_from(
    meta: RunRecord,
    replay_tolerance: float = DEFAULT_REPLAY_TOLERANCE,
    baseline_tolerance: float = DEFAULT_BASELINE_TOLERANCE,
) -> RunPlan:
    """The plan of a run read into `meta`: the record itself, and the tolerances."""
    return RunPlan(meta, replay_tolerance, baseline_tolerance)
