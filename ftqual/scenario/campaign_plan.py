"""A campaign's plan: K faults drawn from a seed over kinds, ranks, placements and time.

The campaign plan: K faults drawn from a seed over fault kinds, ranks, placements and time, written to
`campaign_plan.json` in the run directory before ft_launcher starts.

Time: the gap between two faults is drawn from an exponential law of mean MTTI iterations (a memoryless
failure process, as Young/Daly assume), rounded up to whole save intervals (a fault arms only once a
checkpoint completed in its cycle): fault k arms after the checkpoint of iteration
`arm_iteration_k = arm_iteration_{k-1} + gap_k * save_interval`, the first after `start + gap_1 *
save_interval`. Cycle k restores `arm_iteration_{k-1}` (no finalize lag), so every fault has at least one
save interval of progress before it. The worker wrapper reads the same file (stdlib only) and follows it.
`horizon_faults` (absent in older plans: DEFAULT_HORIZON_FAULTS) is not drawn: it is the number of faults the
verifier asks /dev/shm to have room for at the rate the campaign leaked (ftqual.verification.campaign.shm).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from ftqual.contract import GPU_ONLY_FAULTS, RANK_FAULTS
from ftqual.rank.ids import CAMPAIGN_PLAN_SCHEMA

PLAN_JSON = "campaign_plan.json"
SCHEMA = CAMPAIGN_PLAN_SCHEMA  # the rank reads the plan (ftqual.rank.worker)
# The faults a CPU workload can suffer (the GPU-only two need a CUDA device).
SMOKE_KINDS = tuple(f for f in RANK_FAULTS if f not in GPU_ONLY_FAULTS)
PLACEMENTS = ("step", "out_of_section", "immediate")
DEFAULT_HORIZON_FAULTS = 1000  # a month-long job at scale meets tens to hundreds of faults


class PlanError(ValueError):
    """A plan that cannot be drawn or read; the message is one line."""


@dataclass(frozen=True)
class PlannedFault:
    index: int  # 1-based: marker k (fault_injected.json, fault_injected.<k>.json) claims entry k
    fault: str
    rank: int
    placement: str
    gap_checkpoints: int  # save intervals after the previous fault's checkpoint
    arm_iteration: int  # armed once the tracker reaches this checkpoint (and passed the cycle's start)


@dataclass(frozen=True)
class CampaignPlan:
    seed: int
    faults: tuple[PlannedFault, ...]
    kinds: tuple[str, ...]
    placements: tuple[str, ...]
    mtti_iterations: int
    save_interval: int
    world_size: int
    start_iteration: int = 0
    written_at: datetime | None = None  # when the launcher wrote it (before ft_launcher started)
    horizon_faults: int = DEFAULT_HORIZON_FAULTS  # the faults /dev/shm must have room for

    @property
    def count(self) -> int:
        return len(self.faults)

    @property
    def last_arm(self) -> int:
        return self.faults[-1].arm_iteration if self.faults else self.start_iteration

    @property
    def checkpoints_spanned(self) -> int:
        """Save intervals from the start to the last fault's checkpoint (ftqual.scenario.sizing's
        `injections`)."""
        return sum(f.gap_checkpoints for f in self.faults)

    def as_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "seed": self.seed,
            "count": self.count,
            "kinds": list(self.kinds),
            "placements": list(self.placements),
            "mtti_iterations": self.mtti_iterations,
            "save_interval": self.save_interval,
            "world_size": self.world_size,
            "start_iteration": self.start_iteration,
            "written_at": self.written_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if self.written_at else None,
            "horizon_faults": self.horizon_faults,
            "faults": [asdict(f) for f in self.faults],
        }


def draw(
    seed: int,
    count: int,
    kinds: tuple[str, ...],
    world_size: int,
    save_interval: int,
    mtti_iterations: int,
    placements: tuple[str, ...] = ("step",),
    start_iteration: int = 0,
) -> CampaignPlan:
    """The plan a seed gives: the same arguments always draw the same faults."""
    if count < 1:
        raise PlanError(f"a campaign needs at least one fault (got {count})")
    if not kinds:
        raise PlanError("a campaign needs at least one fault kind")
    rng = random.Random(seed)
    faults, at = [], start_iteration
    for index in range(1, count + 1):
        gap = max(1, math.ceil(rng.expovariate(1.0 / mtti_iterations) / save_interval))
        at += gap * save_interval
        faults.append(
            PlannedFault(
                index=index,
                fault=rng.choice(kinds),
                rank=rng.randrange(world_size),
                placement=rng.choice(placements),
                gap_checkpoints=gap,
                arm_iteration=at,
            )
        )
    return CampaignPlan(
        seed,
        tuple(faults),
        tuple(kinds),
        tuple(placements),
        mtti_iterations,
        save_interval,
        world_size,
        start_iteration,
    )


def write(plan: CampaignPlan, run_dir: Path) -> Path:
    path = run_dir / PLAN_JSON
    tmp = path.with_name(f".{PLAN_JSON}.tmp")
    stamped = dataclasses.replace(plan, written_at=datetime.now(UTC))
    tmp.write_text(json.dumps(stamped.as_dict(), indent=2) + "\n")
    tmp.replace(path)
    return path


def _int(data: dict, key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PlanError(f"{PLAN_JSON}: {key} is not an integer")
    return value


def read(run_dir: Path) -> CampaignPlan:
    """campaign_plan.json of a run; PlanError (one line) when absent or malformed."""
    path = Path(run_dir) / PLAN_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PlanError(f"no {PLAN_JSON} in the run directory") from exc
    except (OSError, ValueError) as exc:
        raise PlanError(f"{PLAN_JSON} is unreadable: {exc}") from exc
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("faults"), list):
        raise PlanError(f"{PLAN_JSON} is not a {SCHEMA} plan")
    faults = []
    for item in data["faults"]:
        if not isinstance(item, dict) or not isinstance(item.get("fault"), str):
            raise PlanError(f"{PLAN_JSON}: a fault entry is malformed")
        faults.append(
            PlannedFault(
                index=_int(item, "index"),
                fault=item["fault"],
                rank=_int(item, "rank"),
                placement=str(item.get("placement", "step")),
                gap_checkpoints=_int(item, "gap_checkpoints"),
                arm_iteration=_int(item, "arm_iteration"),
            )
        )
    return CampaignPlan(
        seed=_int(data, "seed"),
        faults=tuple(faults),
        kinds=tuple(data.get("kinds") or ()),
        placements=tuple(data.get("placements") or ()),
        mtti_iterations=_int(data, "mtti_iterations"),
        save_interval=_int(data, "save_interval"),
        world_size=_int(data, "world_size"),
        start_iteration=_int(data, "start_iteration"),
        written_at=_when(data.get("written_at")),
        horizon_faults=_horizon(data.get("horizon_faults")),
    )


def _horizon(value: object) -> int:
    if value is None:
        return DEFAULT_HORIZON_FAULTS  # a plan written before the horizon was kept
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise PlanError(f"{PLAN_JSON}: horizon_faults is not a positive integer")
    return value


def _when(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
