"""What every preflight check is built from: the result type, the context, shared helpers.

Checks are pure functions of a Context (facts probed on this node + the config + the resolution of
`auto`) returning CheckResult(s); nothing here touches the machine, so tests feed made-up facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftqual.preflight.probes import Facts
from ftqual.scenarios import Scenario, WorkflowConfig
from ftqual.stackinfo import Resolution

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"


@dataclass(frozen=True)
class CheckResult:
    id: str
    status: str
    detail: str
    fix: str = ""

    def to_json(self) -> dict:
        return {"id": self.id, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class Context:
    facts: Facts
    cfg: WorkflowConfig
    resolved: Resolution

    @property
    def megatron(self) -> bool:
        return self.cfg.workload == "megatron"

    @property
    def runs(self) -> tuple[Scenario, ...]:
        """What will run: the scenarios, or the top-level settings when none is configured."""
        return self.cfg.scenarios or (self.cfg.defaults,)

    @property
    def max_nnodes(self) -> int:
        return max(s.nnodes for s in self.runs)

    @property
    def max_gpus_per_node(self) -> int:
        return max(s.gpus_per_node for s in self.runs)


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


def skip_smoke(check_id: str, ctx: Context) -> CheckResult | None:
    if not ctx.megatron:
        return CheckResult(check_id, SKIP, f"not needed by the {ctx.cfg.workload} workload")
    return None
