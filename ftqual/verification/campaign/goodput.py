"""Goodput projection: the share of wall time that is useful training, at a given mean time between failures.

First-order checkpoint/restart model (Young 1974, Daly 2006). Over one mean time between failures M, a job
checkpointing every tau seconds, each save blocking training for delta seconds, loses

    t_detect + t_recover         once per failure (measured: fault -> detection -> first committed step)
    t_lost  = tau / 2            on average half a checkpoint interval of work is redone
    t_ckpt  = (M / tau) * delta  checkpoint saves that block training, M / tau of them per failure

    goodput ~= 1 - (t_detect + t_recover + t_lost + t_ckpt) / M

Young's interval tau* = sqrt(2 * delta * M) minimises t_lost + t_ckpt (they are equal there); we use it
when no interval is given. First order means: at most one failure per interval, failures independent of
the checkpoint phase, M much larger than the recovery time. Everything here is pure arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Kokolis et al., "Revisiting Reliability in Large-Scale ML Research Clusters", HPCA 2025 (arXiv 2410.21680):
# cluster mean time to failure on Meta's RSC clusters.
MTBF_SOURCE = (
    "Kokolis et al., Revisiting Reliability in Large-Scale ML Research Clusters, HPCA 2025 (arXiv 2410.21680)"
)
# Used when no save blocking time was measured and no interval was given (stated as an assumption).
FALLBACK_INTERVAL_S = 1800.0

# t_recover, never "restart": the report's restart is ft_launcher's, detection to the new cycle (shorter).
FORMULA = "goodput ≈ 1 − (t_detect + t_recover + t_lost + t_ckpt) / MTBF"
FORMULA_TERMS = (
    "t_detect: fault to detection (measured)",
    "t_recover: detection to first committed step after the restart: teardown, rendezvous, startup, "
    "checkpoint load (measured)",
    "t_lost = τ/2: work redone after a failure, half a checkpoint interval τ on average",
    "t_ckpt = (MTBF/τ)·δ: time training is blocked by the MTBF/τ checkpoint saves between two failures "
    "(δ = blocking time of one save)",
    "τ = √(2·δ·MTBF) (Young's optimum, where t_lost = t_ckpt) unless an interval is given",
)
ASSUMPTIONS = (
    "Measured on a tiny GPT on few GPUs: a production job's restart (rendezvous, NCCL setup, data loader)"
    " and checkpoint load and save times are larger; rerun at the target scale before relying on them.",
    "First order: failures are independent and at most one falls in a checkpoint interval;"
    " MTBF ≫ recovery time.",
    "Only failures this scenario stands for are counted; hangs detected by a section timeout cost that "
    "timeout each time.",
    "MTBF figures are cluster-wide failure rates at the GPU counts given;"
    " jobs on fewer GPUs fail less often.",
)


@dataclass(frozen=True)
class MtbfPoint:
    hours: float
    gpus: int | None = None

    @property
    def label(self) -> str:
        return f"{self.hours:g} h" + (f" @ {self.gpus:,} GPUs" if self.gpus else "")


DEFAULT_MTBF: tuple[MtbfPoint, ...] = (MtbfPoint(7.9, 1024), MtbfPoint(1.8, 16384))


@dataclass(frozen=True)
class GoodputInputs:
    """What one fault scenario measured (seconds). `ckpt_blocking_s` None: not measured."""

    t_detect_s: float
    t_restart_s: float
    ckpt_blocking_s: float | None
    ckpt_blocking_source: str
    ckpt_interval_s: float | None = None  # given by the user; None: Young's optimum
    lost_work_measured_s: float | None = None


@dataclass(frozen=True)
class GoodputPoint:
    mtbf_hours: float
    gpus: int | None
    mtbf_s: float
    interval_s: float
    interval_source: str
    t_detect_s: float
    t_restart_s: float
    t_lost_s: float
    t_ckpt_s: float
    waste_s: float
    goodput: float


def young_interval(blocking_s: float, mtbf_s: float) -> float:
    """Young's first-order optimal checkpoint interval sqrt(2 * delta * M)."""
    return math.sqrt(2.0 * blocking_s * mtbf_s)


def project(inputs: GoodputInputs, point: MtbfPoint) -> GoodputPoint:
    mtbf_s = point.hours * 3600.0
    blocking = inputs.ckpt_blocking_s if inputs.ckpt_blocking_s is not None else 0.0
    if inputs.ckpt_interval_s is not None:
        interval, source = inputs.ckpt_interval_s, "given"
    elif blocking > 0:
        interval, source = young_interval(blocking, mtbf_s), "Young optimum √(2·δ·MTBF)"
    else:
        interval, source = FALLBACK_INTERVAL_S, "assumed (no save blocking time measured)"
    t_lost = interval / 2.0
    t_ckpt = mtbf_s / interval * blocking
    waste = inputs.t_detect_s + inputs.t_restart_s + t_lost + t_ckpt
    return GoodputPoint(
        mtbf_hours=point.hours,
        gpus=point.gpus,
        mtbf_s=mtbf_s,
        interval_s=interval,
        interval_source=source,
        t_detect_s=inputs.t_detect_s,
        t_restart_s=inputs.t_restart_s,
        t_lost_s=t_lost,
        t_ckpt_s=t_ckpt,
        waste_s=waste,
        goodput=max(0.0, 1.0 - waste / mtbf_s),
    )


def inputs_from_metrics(
    metrics: dict,
    ckpt_blocking_s: float | None,
    ckpt_blocking_source: str,
    ckpt_interval_s: float | None,
    lost_work_measured_s: float | None,
) -> tuple[GoodputInputs | None, str | None]:
    """GoodputInputs from a verify report's metrics, or (None, why not)."""
    detect = _number(metrics.get("detection_s"))
    to_first = _number(metrics.get("failure_to_first_step_s"))
    if detect is None or to_first is None:
        missing = [
            k for k, v in (("detection_s", detect), ("failure_to_first_step_s", to_first)) if v is None
        ]
        return None, "not measured: " + ", ".join(missing)
    return (
        GoodputInputs(
            t_detect_s=detect,
            t_restart_s=max(0.0, to_first - detect),
            ckpt_blocking_s=ckpt_blocking_s,
            ckpt_blocking_source=ckpt_blocking_source,
            ckpt_interval_s=ckpt_interval_s,
            lost_work_measured_s=lost_work_measured_s,
        ),
        None,
    )


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)
