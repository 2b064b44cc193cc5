"""`RunPlan`: what a run was asked to do, from run.json, and the tolerances.

What a run was asked to do (its plan), from run.json, and the tolerances from the command line. Not the
scenario's expected outcome (ftqual.verification.expectation.ExpectedOutcome)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ftqual.contract import family_of
from ftqual.verification.evidence.run_meta import RunMeta

DEFAULT_REPLAY_TOLERANCE = 1e-3
DEFAULT_BASELINE_TOLERANCE = 2e-2
DEFAULT_JOIN_TIMEOUT_S = 600  # NVRx 0.7's rendezvous join_timeout when --rdzv-conf does not set one
# NVRx 0.7.0's --ft-max-no-progress-cycles default (ftqual leaves it unless run.json says otherwise)
NVRX_NO_PROGRESS_CYCLES = 3


@dataclass(frozen=True)
class RunPlan:
    fault: str
    fault_rank: int | None
    train_iters: int | None
    save_interval: int | None
    world_size: int | None
    global_batch_size: int | None
    max_restarts: int | None
    timeouts: dict[str, float] = field(default_factory=dict)
    replay_tolerance: float = DEFAULT_REPLAY_TOLERANCE
    baseline_tolerance: float = DEFAULT_BASELINE_TOLERANCE
    injections: int = 1  # run.json's `injections` (1 when absent); a baseline injects none
    join_timeout: int | None = None  # run.json's (None: NVRx's default)
    spare_nodes: int = 0  # run.json's: standbys NVRx promotes when a node is lost
    timeouts_from: dict[str, float] | None = None  # run.json's: the configured set a recommendation came from
    calc_ft_timeouts: bool = (
        False  # run.json's: NVRx calculated the timeouts; `timeouts` are the initial ones
    )
    max_no_progress_cycles: int | None = None  # run.json's (None: NVRx's default, 3)

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
        out: dict[str, object] = {
            "fault": self.fault,
            "fault_rank": self.fault_rank,
            "train_iters": self.train_iters,
            "save_interval": self.save_interval,
            "world_size": self.world_size,
            "global_batch_size": self.global_batch_size,
            "max_restarts": self.max_restarts,
            "timeouts": dict(self.timeouts),
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
    meta: RunMeta,
    replay_tolerance: float = DEFAULT_REPLAY_TOLERANCE,
    baseline_tolerance: float = DEFAULT_BASELINE_TOLERANCE,
) -> RunPlan:
    return RunPlan(
        fault=meta.fault,
        fault_rank=meta.fault_rank,
        train_iters=meta.train_iters,
        save_interval=meta.save_interval,
        world_size=meta.world_size,
        global_batch_size=meta.global_batch_size,
        max_restarts=meta.max_restarts,
        timeouts=dict(meta.timeouts),
        replay_tolerance=replay_tolerance,
        baseline_tolerance=baseline_tolerance,
        injections=meta.injections,
        join_timeout=meta.join_timeout,
        spare_nodes=meta.spare_nodes,
        timeouts_from=meta.timeouts_from,
        calc_ft_timeouts=meta.calc_ft_timeouts,
        max_no_progress_cycles=meta.max_no_progress_cycles,
    )
