"""What every preflight check is built from: the result type and verdict, the context, shared helpers.

Checks are pure functions of a Context (facts probed on this node + the config + the resolution of
`auto`) returning CheckResult(s); nothing here touches the machine, so tests feed made-up facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftqual.preflight.probes import Facts
from ftqual.scenario.model import Scenario, WorkflowConfig
from ftqual.stack.resolve import StackChoice

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"


@dataclass(frozen=True)
class CheckResult:
    """One preflight check's outcome and, when it is not a pass, the `fix` to apply.

    Deliberately not the verifier's result (ftqual.verification.checks.result.CheckResult): a preflight judges
    a node
    before anything runs, so it says pass|warn|fail|skip (warn: it can run, but fix this) and cites no
    evidence; the verifier judges a finished run from its files, so it says inconclusive where evidence is
    missing, cites file lines and marks which checks gate. preflight.json and verify.json each keep the
    shape their readers know; one type would carry fields that mean nothing on one side, and would make the
    login-node preflight import the verifier's evidence model.
    """

    id: str
    status: str  # pass | warn | fail | skip
    detail: str
    fix: str = ""

    def to_json(self) -> dict:
        return {"id": self.id, "status": self.status, "detail": self.detail, "fix": self.fix}


def verdict(results: list[CheckResult]) -> str:
    """Any check failed: fail; else any warned: warn; else pass. Every preflight check counts (the
    verifier's verdict, ftqual.verification.checks.result.verdict, counts only its gating checks)."""
    statuses = {r.status for r in results}
    return FAIL if FAIL in statuses else WARN if WARN in statuses else PASS


@dataclass(frozen=True)
class Context:
    facts: Facts
    cfg: WorkflowConfig
    resolved: StackChoice

    @property
    def megatron(self) -> bool:
        return self.cfg.workload == "megatron"

    @property
    def runs(self) -> tuple[Scenario, ...]:
        """What will run: the scenarios, or the top-level settings when none is configured."""
        return self.cfg.scenarios or (self.cfg.defaults,)

    @property
    def max_nnodes(self) -> int:
        return max(s.allocated_nodes for s in self.runs)

    @property
    def max_gpus_per_node(self) -> int:
        return max(s.gpus_per_node for s in self.runs)


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


def skip_smoke(check_id: str, ctx: Context) -> CheckResult | None:
    if not ctx.megatron:
        return CheckResult(check_id, SKIP, f"not needed by the {ctx.cfg.workload} workload")
    return None
