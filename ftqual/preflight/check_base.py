"""What every preflight check is built from: the result type, the context, shared helpers.

Checks are pure functions of a Context (facts probed on this node + the config + the resolution of
`auto`) returning CheckResult(s); nothing here touches the machine, so tests feed made-up facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftqual.preflight.config import PreflightConfig, Scenario
from ftqual.preflight.facts import Facts
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
    cfg: PreflightConfig
    resolved: Resolution

    @property
    def megatron(self) -> bool:
        return self.cfg.workload == "megatron"

    @property
    def runs(self) -> tuple[Scenario, ...]:
        """What will run: the scenarios, or the top-level settings when none is configured."""
        return self.cfg.scenarios or (_top_level_scenario(self.cfg),)

    @property
    def max_nnodes(self) -> int:
        return max(s.nnodes for s in self.runs)

    @property
    def max_gpus_per_node(self) -> int:
        return max(s.gpus_per_node for s in self.runs)


def _top_level_scenario(c: PreflightConfig) -> Scenario:
    return Scenario(
        name="(top level)",
        fault="none",
        rank=None,
        nnodes=c.nnodes,
        gpus_per_node=c.gpus_per_node,
        tp=c.tp,
        pp=c.pp,
        train_iters=c.train_iters,
        save_interval=c.save_interval,
        timeouts=c.timeouts,
        max_restarts=c.max_restarts,
        term_timeout=c.term_timeout,
        transformer_impl=c.transformer_impl,
        dist_optimizer=c.dist_optimizer,
        hang_placement=c.hang_placement,
        checkpoint_dir=c.checkpoint_dir,
    )


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**28 else f"{n / 2**20:.1f} MiB"


def skip_smoke(check_id: str, ctx: Context) -> CheckResult | None:
    if not ctx.megatron:
        return CheckResult(check_id, SKIP, f"not needed by the {ctx.cfg.workload} workload")
    return None
