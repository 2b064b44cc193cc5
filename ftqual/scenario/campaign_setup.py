"""The launcher's campaign settings (NVRX_CAMPAIGN_*), the plan they draw and the length it needs.

    NVRX_DEMO_FAULT=campaign NVRX_CAMPAIGN_FAULTS=10 NVRX_CAMPAIGN_SEED=0 NVRX_CAMPAIGN_MTTI=<iterations>
    NVRX_CAMPAIGN_KINDS=kill,hang,... NVRX_CAMPAIGN_PLACEMENTS=step,... NVRX_CAMPAIGN_HORIZON=<faults>

NVRX_CAMPAIGN_HORIZON (default 1000) draws nothing: the plan keeps it for the verifier, which fails the
campaign when /dev/shm would be full within that many faults at the rate the campaign leaked.

`max_restarts` follows from K: one restart per fault (NVRX_MAX_RESTARTS, when set, must be at least K).
The run must be long enough for the plan's last fault to arm with a step after its checkpoint and for its
recovery to reach a later checkpoint: ftqual.scenario.sizing's model with the plan's save intervals as
injections.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ftqual.contract import GPU_ONLY_FAULTS, RANK_FAULTS
from ftqual.scenario import sizing
from ftqual.scenario.campaign_plan import (
    DEFAULT_HORIZON_FAULTS,
    PLACEMENTS,
    SMOKE_KINDS,
    CampaignPlan,
    PlanError,
    draw,
)

DEFAULT_FAULTS = 10
MAX_FAULTS = 1000
VARIABLES = (
    "NVRX_CAMPAIGN_FAULTS",
    "NVRX_CAMPAIGN_SEED",
    "NVRX_CAMPAIGN_MTTI",
    "NVRX_CAMPAIGN_KINDS",
    "NVRX_CAMPAIGN_PLACEMENTS",
    "NVRX_CAMPAIGN_HORIZON",
)
MAX_HORIZON = 10**9


def _int(env: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = env.get(name) or str(default)
    if not raw.isascii() or not raw.isdigit() or not low <= int(raw) <= high:
        raise PlanError(f"{name} must be an integer from {low} to {high} (got {raw[:40]!r})")
    return int(raw)


def _names(env: Mapping[str, str], name: str, default: tuple[str, ...], allowed: tuple[str, ...]) -> tuple:
    raw = env.get(name) or ",".join(default)
    items = tuple(part.strip() for part in raw.split(",") if part.strip())
    bad = [item for item in items if item not in allowed]
    if bad or not items:
        raise PlanError(f"{name} must list some of {', '.join(allowed)} (got {raw[:80]!r})")
    return tuple(dict.fromkeys(items))


def default_kinds(workload: str) -> tuple[str, ...]:
    return SMOKE_KINDS if workload == "smoke" else RANK_FAULTS


def plan_from_env(
    env: Mapping[str, str], workload: str, world_size: int, save_interval: int, start_iteration: int = 0
) -> CampaignPlan:
    """The plan NVRX_CAMPAIGN_* draw; PlanError (one line) on a bad value or a GPU-only kind on smoke."""
    count = _int(env, "NVRX_CAMPAIGN_FAULTS", DEFAULT_FAULTS, 1, MAX_FAULTS)
    seed = _int(env, "NVRX_CAMPAIGN_SEED", 0, 0, 2**63 - 1)
    mtti = _int(env, "NVRX_CAMPAIGN_MTTI", 2 * save_interval, 1, 10**9)
    kinds = _names(env, "NVRX_CAMPAIGN_KINDS", default_kinds(workload), RANK_FAULTS)
    gpu = [k for k in kinds if k in GPU_ONLY_FAULTS]
    if gpu and workload == "smoke":
        raise PlanError(
            f"NVRX_CAMPAIGN_KINDS names {', '.join(gpu)}, GPU-only: the smoke workload runs on CPU and has "
            "no "
            "CUDA context to break; use the megatron workload on GPUs"
        )
    placements = _names(env, "NVRX_CAMPAIGN_PLACEMENTS", ("step",), PLACEMENTS)
    horizon = _int(env, "NVRX_CAMPAIGN_HORIZON", DEFAULT_HORIZON_FAULTS, 1, MAX_HORIZON)
    plan = draw(seed, count, kinds, world_size, save_interval, mtti, placements, start_iteration)
    return dataclasses.replace(plan, horizon_faults=horizon)


def needed_train_iters(plan: CampaignPlan, lag: int = 0) -> int:
    """The shortest run in which every planned fault arms and the last recovery reaches a checkpoint."""
    return sizing.needed_train_iters(
        plan.start_iteration, plan.save_interval, plan.checkpoints_spanned, "checkpoint", lag
    )


def sizing_problem(
    plan: CampaignPlan, train_iters: int, name: str = "TRAIN_ITERS", lag: int = 0
) -> str | None:
    want = needed_train_iters(plan, lag)
    if train_iters >= want:
        return None
    return (
        f"{name}={train_iters} is too short for the campaign: seed {plan.seed} plans {plan.count} faults, "
        f"the last armed by the checkpoint of iteration {plan.last_arm}, and its recovery needs a later "
        f"checkpoint: set {name}={want} (or more), or fewer faults or a shorter MTTI"
    )


def restarts_problem(count: int, max_restarts: int | None, name: str = "NVRX_MAX_RESTARTS") -> str | None:
    if max_restarts is None or max_restarts >= count:
        return None
    return f"{name}={max_restarts} is below the campaign's {count} faults: each fault costs one restart"
