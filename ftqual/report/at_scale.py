"""At your scale: what faults cost a long run on N GPUs, from what one qualification measured.

The model (docs/at-scale.md) is first order, one failure at a time, in seconds; it is the product's one
goodput model (each scenario's projection in the report and the campaign's model check are Breakdowns of it):

    rate      lambda = failures per GPU-hour x N / 3600         (per second; MTBF = 1 / lambda; the rate is a
              published failure prior, PRIORS, named wherever it is used)
    a failure costs    detect + restart + lost
      detect  a crash: the measured exit detection; a hang: the step timeout in force + the monitor's interval
      restart worker stop + GPU memory reclaim + process start (+ rendezvous and NCCL at N: assumed) + init
              + checkpoint load (bytes / read rate at N) + first step (+ a node's replacement, for the share
              of failures that take a node out, unless a hot spare stands by)
      lost    the work since the last durable checkpoint: tau / 2 + the time a save takes to be durable
    saves cost blocked / tau of the time (each save blocks training `blocked` seconds, one every tau)
    waste     lambda x (detect + restart + lost) + blocked / tau
    goodput   1 - waste (productive time over wall time)

The save interval that costs least is Young/Daly's tau* = sqrt(2 x blocked x MTBF), never shorter than the
time a save takes to be durable (a save cannot start before the last one is). A job that runs out of
restarts stops and waits to be resubmitted: expected stops = failures over the run / (max restarts + 1).

Pure arithmetic over `Inputs` (each figure cited to its evidence by ftqual.report.at_scale_inputs) and
`Assumptions` (what one node cannot measure, each with its default's source).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

# Llama 3 405B's pre-training (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.4): 419 unexpected
# interruptions in a 54-day snapshot on 16,384 H100 GPUs, about 78 % of them hardware.
LLAMA3_INTERRUPTIONS = 419
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16384
FAILURES_PER_GPU_HOUR = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * 24 * LLAMA3_GPUS)  # ~1.97e-5
RATE_SOURCE = (
    "Llama 3 405B pre-training: 419 unexpected interruptions in 54 days on 16,384 H100 GPUs "
    "(Dubey et al. 2024, section 3.3.4)"
)
KOKOLIS = (
    "Kokolis et al., Revisiting Reliability in Large-Scale ML Research Clusters, HPCA 2025 (arXiv 2410.21680)"
)


@dataclass(frozen=True)
class Prior:
    """A published failure rate: the one input of the model no qualification measures. Each figure is turned
    into failures per GPU-hour (the model scales it linearly with N); `mtbf_h` at `gpus` is what it
    published."""

    name: str
    failures_per_gpu_hour: float
    mtbf_h: float
    gpus: int
    source: str


def _prior(name: str, mtbf_h: float, gpus: int, source: str) -> Prior:
    return Prior(name, 1.0 / (mtbf_h * gpus), mtbf_h, gpus, source)


# The one set of failure priors of the product: `ftqual at-scale --prior`, the config's `scale.prior` and
# `ftqual report --prior` pick among them. The default is Llama 3's because it is the closest to what ftqual
# qualifies: one synchronous LLM pre-training job on H100s, counted as the interruptions that job restarted
# from. Meta RSC's two figures (Kokolis et al.) are research clusters' jobs (A100, many users); they disagree
# with each other by 3.6x per GPU, so neither is one rate for every N: the report shows them as alternatives.
PRIORS: dict[str, Prior] = {
    "llama3": Prior(
        "llama3", FAILURES_PER_GPU_HOUR, 1.0 / (FAILURES_PER_GPU_HOUR * LLAMA3_GPUS), LLAMA3_GPUS, RATE_SOURCE
    ),
    "rsc-1024": _prior("rsc-1024", 7.9, 1024, f"Meta RSC: a 1,024-GPU job's MTTF is 7.9 h ({KOKOLIS})"),
    "rsc-16k": _prior("rsc-16k", 1.8, 16384, f"Meta RSC: a 16,384-GPU job's MTTF is 1.8 h ({KOKOLIS})"),
}
DEFAULT_PRIOR = "llama3"
GIVEN_PRIOR = "given"  # --failures-per-gpu-hour: the user's own rate
NODE_SHARE_SOURCE = (
    "Llama 3: about 78 % of unexpected interruptions were hardware (GPUs and their memory first)"
)


@dataclass(frozen=True)
class Figure:
    """A measured input: its value and where it was read (summary.json path and the run it came from)."""

    value: float
    source: str


@dataclass(frozen=True)
class Inputs:
    """What the qualification measured, seconds unless named otherwise."""

    crash_detect: Figure
    step_timeout: Figure  # in force: a hang is detected after it (+ the monitor's interval)
    monitor_interval_s: float
    worker_stop: Figure
    gpu_reclaim: Figure
    process_start: Figure
    init: Figure
    first_step: Figure
    load_gbps: Figure | None  # the measured load rate of one node (None: too small a load to rate)
    checkpoint_bytes: Figure  # one checkpoint of the job, every rank's part
    save_blocked: Figure
    save_durable: Figure
    step_s: Figure  # one training iteration
    save_interval_iters: int  # configured
    max_restarts: int
    recommended_step_timeout_s: float | None = None
    load_s: Figure | None = None  # the measured load time, used as it is where no rate was measured


@dataclass(frozen=True)
class Assumptions:
    """What one node cannot measure; each default says where it comes from (`sources`)."""

    failures_per_gpu_hour: float = FAILURES_PER_GPU_HOUR
    prior: str = DEFAULT_PRIOR  # the name of the prior failures_per_gpu_hour is (PRIORS, or "given")
    hang_share: float = 0.1  # of failures a live rank's timeout must detect
    node_share: float = 0.78  # of failures that take a node out (it must be replaced)
    fs_read_gbps: float | None = None  # the filesystem's aggregate read rate; None: the node's rate x nodes
    gpus_per_node: int = 8
    start_at_scale_s: float = 0.0  # rendezvous and NCCL start at N beyond one node's process start
    node_replace_s: float = 600.0  # waiting for a replacement node when no hot spare stands by
    resubmit_s: float = 1800.0  # a job out of restarts: queue and start again
    hot_spare: bool = False
    sources: dict[str, str] = field(
        default_factory=lambda: {
            "failures_per_gpu_hour": RATE_SOURCE,
            "hang_share": "assumed: no published mix of hangs and crashes; set --hang-share",
            "node_share": NODE_SHARE_SOURCE,
            "fs_read_gbps": "assumed: the node's measured load rate scales with the nodes; set --fs-gbps",
            "start_at_scale_s": (
                "not measured on one node (rendezvous and NCCL start at N); set --start-at-scale-s"
            ),
            "node_replace_s": "assumed: a scheduler's requeue and a new node; set --node-replace-s",
            "resubmit_s": "assumed: queue and start again; set --resubmit-s",
        }
    )


def with_prior(a: Assumptions, name: str) -> Assumptions:
    """The assumptions with the failure rate of a published prior (PRIORS), its source named."""
    prior = PRIORS[name]
    sources = {**a.sources, "failures_per_gpu_hour": prior.source}
    return replace(a, failures_per_gpu_hour=prior.failures_per_gpu_hour, prior=name, sources=sources)


def with_rate(a: Assumptions, failures_per_gpu_hour: float) -> Assumptions:
    """The assumptions with the user's own failure rate (--failures-per-gpu-hour)."""
    sources = {**a.sources, "failures_per_gpu_hour": "given (--failures-per-gpu-hour)"}
    return replace(a, failures_per_gpu_hour=failures_per_gpu_hour, prior=GIVEN_PRIOR, sources=sources)


@dataclass(frozen=True)
class Breakdown:
    """The share of wall time each cost takes (fractions) and the goodput."""

    saves: float
    lost_work: float
    detection: float
    restart: float
    load: float
    node_replacement: float
    resubmission: float

    @property
    def waste(self) -> float:
        return (
            self.saves + self.lost_work + self.detection + self.restart + self.load + self.node_replacement
            + self.resubmission
        )  # fmt: skip

    @property
    def goodput(self) -> float:
        """The product's one goodput: productive time over wall time, 1 - the shares every cost takes.
        Every goodput ftqual reports (At your scale, each scenario's projection, the campaign's model check)
        is this property of a Breakdown."""
        return max(0.0, 1.0 - self.waste)


@dataclass(frozen=True)
class Projection:
    gpus: int
    days: float
    mtbf_s: float
    failures: float  # expected over the run
    interval_s: float
    interval_iters: int
    detect_s: float  # mean over crashes and hangs
    restart_s: float  # without the load
    load_s: float
    lost_s: float
    breakdown: Breakdown

    @property
    def goodput(self) -> float:
        return self.breakdown.goodput


def failure_rate_s(gpus: int, a: Assumptions) -> float:
    """Failures per second of the whole job."""
    return a.failures_per_gpu_hour * gpus / 3600.0


def young_daly(blocked_s: float, mtbf_s: float, durable_s: float) -> float:
    """sqrt(2 x blocked x MTBF), never below the time a save takes to be durable."""
    return max(math.sqrt(2.0 * max(blocked_s, 0.0) * mtbf_s), durable_s)


def load_seconds(i: Inputs, gpus: int, a: Assumptions) -> float:
    """The checkpoint's bytes at the filesystem's aggregate read rate (assumed: the node's rate x nodes)."""
    nodes = max(1, math.ceil(gpus / a.gpus_per_node))
    if i.load_gbps is None and a.fs_read_gbps is None:
        return i.load_s.value if i.load_s is not None else 0.0
    rate = a.fs_read_gbps if a.fs_read_gbps is not None else i.load_gbps.value * nodes  # type: ignore[union-attr]
    return i.checkpoint_bytes.value / (rate * 1e9) if rate > 0 else math.inf


def detect_seconds(i: Inputs, a: Assumptions, step_timeout_s: float | None = None) -> float:
    hang = (step_timeout_s if step_timeout_s is not None else i.step_timeout.value) + i.monitor_interval_s
    return (1.0 - a.hang_share) * i.crash_detect.value + a.hang_share * hang


def project(
    i: Inputs,
    gpus: int,
    days: float,
    a: Assumptions = Assumptions(),
    interval_iters: int | None = None,
    step_timeout_s: float | None = None,
    max_restarts: int | None = None,
) -> Projection:
    """The goodput of this job on `gpus` GPUs for `days`: at the configured save interval unless one is
    given (0: Young/Daly's)."""
    lam = failure_rate_s(gpus, a)
    mtbf = 1.0 / lam
    if interval_iters is None:
        interval_iters = i.save_interval_iters
    if interval_iters == 0:
        interval_s = young_daly(i.save_blocked.value, mtbf, i.save_durable.value)
        interval_iters = max(1, math.ceil(interval_s / i.step_s.value))
    interval_s = interval_iters * i.step_s.value
    detect = detect_seconds(i, a, step_timeout_s)
    restart = (
        i.worker_stop.value + i.gpu_reclaim.value + i.process_start.value + i.init.value + i.first_step.value
        + a.start_at_scale_s
    )  # fmt: skip
    load = load_seconds(i, gpus, a)
    lost = interval_s / 2.0 + i.save_durable.value
    failures = lam * days * 86400.0
    restarts = i.max_restarts if max_restarts is None else max_restarts
    stops = failures / (restarts + 1) if restarts >= 0 else failures
    wall = days * 86400.0
    replace_s = 0.0 if a.hot_spare else a.node_replace_s
    breakdown = Breakdown(
        saves=i.save_blocked.value / interval_s,
        lost_work=lam * lost,
        detection=lam * detect,
        restart=lam * restart,
        load=lam * load,
        node_replacement=lam * a.node_share * replace_s,
        resubmission=stops * a.resubmit_s / wall,
    )
    return Projection(gpus, days, mtbf, failures, interval_s, interval_iters, detect, restart, load, lost,
                      breakdown)  # fmt: skip


@dataclass(frozen=True)
class Knob:
    name: str
    setting: str
    goodput: float
    gain: float  # over the configured settings, in goodput (fraction)
    key: str | None = None  # the config setting this row sets (None: not a setting of the config)
    value: float | int | None = None  # its value there


def knobs(i: Inputs, gpus: int, days: float, a: Assumptions = Assumptions()) -> list[Knob]:
    """What each knob buys against the configured settings."""
    base = project(i, gpus, days, a).goodput
    best = project(i, gpus, days, a, interval_iters=0)
    restarts = enough_restarts(i, gpus, days, a)
    covers = "as configured: covers every expected failure" if restarts == i.max_restarts else (
        "every expected failure"
    )  # fmt: skip
    rows = [
        (
            "as configured",
            f"save every {i.save_interval_iters} iterations, step timeout "
            f"{i.step_timeout.value:g} s, max restarts {i.max_restarts}",
            base,
            None,
            None,
        ),  # fmt: skip
        (
            "save interval",
            f"every {best.interval_iters:,} iterations (Young/Daly)",
            best.goodput,
            "save_interval",
            best.interval_iters,
        ),  # fmt: skip
        (
            "hot spare",
            "a standby node takes a lost node's place",
            project(i, gpus, days, replace(a, hot_spare=True)).goodput,
            None,
            None,
        ),  # fmt: skip
        (
            "max restarts",
            f"{restarts} ({covers})",
            project(i, gpus, days, a, max_restarts=restarts).goodput,
            "max_restarts",
            restarts,
        ),  # fmt: skip
    ]
    # the step timeouts worth comparing: 60 and 120 s and the recommended one, less the one in force
    timeouts = {60.0: "60 s", 120.0: "120 s"}
    if i.recommended_step_timeout_s is not None:
        timeouts[float(i.recommended_step_timeout_s)] = f"{i.recommended_step_timeout_s:g} s (recommended)"
    timeouts.pop(float(i.step_timeout.value), None)
    for seconds, label in sorted(timeouts.items()):
        g = project(i, gpus, days, a, step_timeout_s=seconds).goodput
        rows.insert(2, ("step timeout", label, g, "timeouts.step", seconds))
    return [Knob(name, setting, g, g - base, key, value) for name, setting, g, key, value in rows]


GAIN_FLOOR = 5e-5  # below half a hundredth of a point (the table's precision), a knob buys nothing


def settings(rows: list[Knob]) -> list[Knob]:
    """The settings worth changing, read off the knob table itself: per config setting, its row that gains
    most, only where that gain shows in the table (a row that costs goodput is never a setting to take)."""
    best: dict[str, Knob] = {}
    for k in rows:
        if k.key is not None and k.gain > GAIN_FLOOR and (k.key not in best or k.gain > best[k.key].gain):
            best[k.key] = k
    return list(best.values())


def enough_restarts(i: Inputs, gpus: int, days: float, a: Assumptions = Assumptions()) -> int:
    """Restarts that cover the failures expected over the run (their mean plus three standard deviations:
    Poisson), never fewer than the configured ones (fewer would only stop the job sooner)."""
    mean = failure_rate_s(gpus, a) * days * 86400.0
    return max(i.max_restarts, 1, math.ceil(mean + 3.0 * math.sqrt(mean)))


PRIOR_TABLE_GPUS = (1024, 16384)  # each scenario's projection: the GPU counts the published figures name


@dataclass(frozen=True)
class PriorRow:
    """How the answer moves with the failure prior: the same job and settings, each published rate."""

    prior: str
    source: str
    failures_per_gpu_hour: float
    mtbf_s: float  # at the projection's GPUs
    failures: float  # over the run
    configured: float
    best: float


def prior_table(i: Inputs, gpus: int, days: float, a: Assumptions = Assumptions()) -> list[PriorRow]:
    """The projection under every published prior (and the user's own rate, where given)."""
    chosen = [a] if a.prior == GIVEN_PRIOR else []
    out = []
    for each in [*chosen, *(with_prior(a, name) for name in PRIORS)]:
        configured = project(i, gpus, days, each)
        best = project(i, gpus, days, each, interval_iters=0)
        out.append(
            PriorRow(each.prior, each.sources["failures_per_gpu_hour"], each.failures_per_gpu_hour,
                     configured.mtbf_s, configured.failures, configured.goodput, best.goodput)
        )  # fmt: skip
    return out


@dataclass(frozen=True)
class ScenarioPoint:
    """One fault scenario's measured recovery at one MTBF: the same Breakdown as a projection, with only the
    terms one scenario measures (its detection, its fault-to-first-step, its saves' blocked time)."""

    mtbf_s: float
    gpus: int | None
    interval_s: float
    interval_source: str
    t_detect_s: float
    t_restart_s: float
    t_lost_s: float
    t_ckpt_s: float
    waste_s: float
    goodput: float


FALLBACK_INTERVAL_S = 1800.0  # no save blocking time measured and no interval given: stated as assumed


def scenario_point(
    detect_s: float, restart_s: float, blocked_s: float | None, mtbf_s: float, gpus: int | None = None,
    interval_s: float | None = None,
) -> ScenarioPoint:  # fmt: skip
    blocked = blocked_s or 0.0
    if interval_s is not None:
        source = "given"
    elif blocked > 0:
        interval_s, source = young_daly(blocked, mtbf_s, 0.0), "Young optimum √(2·δ·MTBF)"
    else:
        interval_s, source = FALLBACK_INTERVAL_S, "assumed (no save blocking time measured)"
    lost = interval_s / 2.0
    b = Breakdown(saves=blocked / interval_s, lost_work=lost / mtbf_s, detection=detect_s / mtbf_s,
                  restart=restart_s / mtbf_s, load=0.0, node_replacement=0.0, resubmission=0.0)  # fmt: skip
    t_ckpt = mtbf_s / interval_s * blocked
    return ScenarioPoint(mtbf_s, gpus, interval_s, source, detect_s, restart_s, lost, t_ckpt,
                         detect_s + restart_s + lost + t_ckpt, b.goodput)  # fmt: skip


def gain_of_a_point(p: Projection) -> str:
    """What it would take to gain one point of goodput: the largest cost, and by how much it must shrink."""
    parts = {
        "saves (blocked time)": p.breakdown.saves,
        "lost work": p.breakdown.lost_work,
        "detection": p.breakdown.detection,
        "restart": p.breakdown.restart,
        "checkpoint load": p.breakdown.load,
        "node replacement": p.breakdown.node_replacement,
        "resubmission": p.breakdown.resubmission,
    }
    name, share = max(parts.items(), key=lambda kv: kv[1])
    if share <= 0.01:
        return f"no single cost reaches a point of goodput (the largest, {name}, is {share:.2%})"
    return f"{name} ({share:.2%} of the wall time) would have to shrink by {0.01 / share:.0%}"


@dataclass(frozen=True)
class CampaignCheck:
    """The model applied to a campaign's own inputs, against its measured goodput."""

    measured: float
    modelled: float
    tolerance: float

    @property
    def within(self) -> bool:
        return abs(self.modelled - self.measured) <= self.tolerance


CAMPAIGN_TOLERANCE = 0.05  # absolute goodput: the model's means against one campaign's own account


def campaign_check(goodput: dict, tolerance: float = CAMPAIGN_TOLERANCE) -> CampaignCheck | None:
    """summary.json's `campaigns.<name>.goodput`: the model's terms with the campaign's own measured means
    (its `projection`: MTBF = wall / faults, the mean detection, restart and lost work per failure, the saves'
    blocked time) plus the one initial start-up, against the goodput the campaign measured (productive
    iterations' time over wall time). None when the campaign has no such account."""
    projection, parts = goodput.get("projection"), goodput.get("gap_parts_s")
    measured, wall = goodput.get("measured"), goodput.get("wall_s")
    if not isinstance(projection, dict) or not isinstance(parts, dict) or measured is None or not wall:
        return None
    mtbf = float(projection.get("mtbf_s") or 0.0)
    if mtbf <= 0:
        return None
    t = {k: float(projection.get(k) or 0.0) for k in ("t_detect_s", "t_restart_s", "t_lost_s", "t_ckpt_s")}
    startup = float(parts.get("initial_startup_s") or 0.0)
    # the campaign's one start-up takes the place of a resubmission: a share of its wall time
    b = Breakdown(
        saves=t["t_ckpt_s"] / mtbf, lost_work=t["t_lost_s"] / mtbf, detection=t["t_detect_s"] / mtbf,
        restart=t["t_restart_s"] / mtbf, load=0.0, node_replacement=0.0, resubmission=startup / float(wall),
    )  # fmt: skip
    return CampaignCheck(float(measured), round(b.goodput, 4), tolerance)
