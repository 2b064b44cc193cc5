"""The timeouts table and the recommended timeouts, from the verify reports' measured sections (pure).

Each verify report carries `sections.overall`: per FT section the largest duration measured over every
cycle of the run (`ftqual.evidence.sections` says how each is bounded), the injected hang's own section
left out. This module takes the largest over the scenarios' runs and sets it beside the configured timeout.

Per section:
- `headroom` = timeout / observed. Below `TOO_TIGHT_HEADROOM` (3x) the verdict is `too tight`: a section
  that already takes a third of its timeout on a tiny model under no load can meet it on a loaded node, a
  slower file system or a larger model (a false alarm: the launcher kills a healthy job).
- `detection_s` = timeout + the rank monitor's check interval (`budgets.RANK_MONITOR_INTERVAL_S`, or the
  report's `expected.rank_monitor_interval_s`): how long a hang in that section goes unseen.
- `loose` when detection_s / observed exceeds `LOOSE_MULTIPLE` (20x): a hang there costs more than twenty
  times what the section needs, time every GPU of the job spends idle.
- `ok` otherwise; `not measured` when no run bounded it.

Recommended timeouts. NVRx's own rule for calculated timeouts (`TimeoutsCalc.get_section_timeouts`,
nvidia_resiliency_ext 0.7.0 fault_tolerance/timeouts_calc.py) is timeout = `safety_factor` x the largest
interval observed in the section (`FaultToleranceConfig.safety_factor`, default 5.0), the out-of-section
timeout likewise. ftqual departs from it where its runs see more than one cycle of one process:
- the observed value is the largest over every cycle of every scenario, so `setup` covers a replacement
  cycle's checkpoint load, `checkpointing` the first save of each process (NVRx's persistent checkpoint
  worker starts on it, seconds where later saves take a fraction of one), `step` the first step after a
  load (NVRx computes from one process's own history, which misses the cycles after a restart);
- each result is raised to a floor (`FLOOR_S`): a tiny model's sections take seconds, and a timeout of a
  few seconds would fire on a garbage-collection pause, a slow rendezvous or a busy shared file system;
- it is rounded up to `ROUND_S` (10 s) so that the flags read as chosen, not computed;
- an unmeasured section keeps its configured timeout (never a guess).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from ftqual.report.budgets import RANK_MONITOR_INTERVAL_S

SECTIONS = ("setup", "step", "checkpointing", "out_of_section")
TOO_TIGHT_HEADROOM = 3.0  # timeout / observed below this: a false alarm is likely under load
LOOSE_MULTIPLE = 20.0  # detection / observed above this: a hang costs far more than the section needs
SAFETY_FACTOR = 5.0  # NVRx's FaultToleranceConfig.safety_factor default (TimeoutsCalc)
ROUND_S = 10.0
# The least timeout ftqual recommends per section, whatever a tiny model measured: setup holds imports,
# NCCL initialization and the replacement's checkpoint load on a cold file system; a step and an
# out-of-section stretch can meet a collective's straggler or a GC pause; a save a busy file system.
FLOOR_S = {"setup": 300.0, "step": 60.0, "checkpointing": 120.0, "out_of_section": 120.0}
RULE = (
    f"max({SAFETY_FACTOR:g} x largest observed over every cycle of every scenario, floor), rounded up to "
    f"{ROUND_S:g} s (NVRx's calculated-timeout rule, safety_factor {SAFETY_FACTOR:g}, with floors "
    + ", ".join(f"{k} {v:g} s" for k, v in FLOOR_S.items())
    + "); an unmeasured section keeps its configured timeout"
)
FLAG_NAMES = {"setup": "setup", "step": "step", "checkpointing": "checkpointing"}


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _observed(name: str, docs: Iterable[tuple[str, Mapping]]) -> tuple[float | None, str | None, list]:
    """(largest figure, its scenario, its evidence) over the reports' `sections.overall[name]`."""
    best: tuple[float, str, list] | None = None
    for scenario, doc in docs:
        sections = doc.get("sections")
        overall = sections.get("overall") if isinstance(sections, Mapping) else None
        figure = overall.get(name) if isinstance(overall, Mapping) else None
        value = _num(figure.get("s")) if isinstance(figure, Mapping) else None
        if value is None:
            continue
        if best is None or value > best[0]:
            evidence = figure.get("evidence") if isinstance(figure.get("evidence"), list) else []  # type: ignore[union-attr]
            best = (value, scenario, [e for e in evidence if isinstance(e, Mapping)])
    return best if best is not None else (None, None, [])


def _configured(name: str, docs: Iterable[tuple[str, Mapping]]) -> tuple[float | None, float]:
    """The configured timeout (the largest where scenarios differ) and the rank monitor interval."""
    timeouts, intervals = [], []
    for _, doc in docs:
        expected = doc.get("expected") if isinstance(doc.get("expected"), Mapping) else {}
        given = expected.get("timeouts") if isinstance(expected.get("timeouts"), Mapping) else {}  # type: ignore[union-attr]
        if (value := _num(given.get(name))) is not None:  # type: ignore[union-attr]
            timeouts.append(value)
        if (value := _num(expected.get("rank_monitor_interval_s"))) is not None:  # type: ignore[union-attr]
            intervals.append(value)
    return (max(timeouts) if timeouts else None), (max(intervals) if intervals else RANK_MONITOR_INTERVAL_S)


def verdict(timeout: float | None, observed: float | None, detection: float | None) -> str:
    if observed is None or timeout is None:
        return "not measured" if observed is None else "no timeout"
    if observed <= 0 or timeout / observed < TOO_TIGHT_HEADROOM:
        return "too tight" if observed > 0 else "ok"
    if detection is not None and detection / observed > LOOSE_MULTIPLE:
        return "loose"
    return "ok"


def recommend(observed: float | None, configured: float | None, name: str) -> float | None:
    if observed is None:
        return configured
    value = max(SAFETY_FACTOR * observed, FLOOR_S[name])
    return math.ceil(value / ROUND_S - 1e-9) * ROUND_S


def build_timeouts(docs: list[tuple[str, Mapping]]) -> dict:
    """summary.json's `timeouts`: the table's rows and the recommendation (pure)."""
    docs = [(name, doc) for name, doc in docs if isinstance(doc, Mapping)]
    rows, recommended = [], {}
    for name in SECTIONS:
        timeout, interval = _configured(name, docs)
        observed, scenario, evidence = _observed(name, docs)
        detection = None if timeout is None else timeout + interval
        rec = recommend(observed, timeout, name)
        recommended[name] = rec
        rows.append(
            {
                "section": name,
                "timeout_s": timeout,
                "observed_s": observed,
                "observed_in": scenario,
                "evidence": evidence[:4],
                "headroom": None if not observed or timeout is None else round(timeout / observed, 2),
                "detection_s": detection,
                "verdict": verdict(timeout, observed, detection),
                "recommended_s": rec,
                "recommended_detection_s": None if rec is None else rec + interval,
            }
        )
    return {
        "rows": rows,
        "margins": {"too_tight_headroom": TOO_TIGHT_HEADROOM, "loose_multiple": LOOSE_MULTIPLE},
        "rule": RULE,
        "recommended": recommended,
        "flags": flags(recommended),
        "config": config_snippet(recommended),
    }


def _g(value: float | None) -> str:
    return "null" if value is None else f"{value:g}"


def flags(recommended: Mapping[str, float | None]) -> str:
    """The ft_launcher flags of a recommendation; a section without a value is left to its default."""
    sections = ",".join(f"{k}:{_g(recommended.get(k))}" for k in FLAG_NAMES if recommended.get(k) is not None)
    out = [f"--ft-rank-section-timeouts={sections}"] if sections else []
    if recommended.get("out_of_section") is not None:
        out.append(f"--ft-rank-out-of-section-timeout={_g(recommended['out_of_section'])}")
    return " ".join(out)


def config_snippet(recommended: Mapping[str, float | None]) -> str:
    """The same as config/config.yaml's `timeouts:` mapping."""
    inner = ", ".join(f"{k}: {_g(recommended.get(k))}" for k in SECTIONS)
    return f"timeouts: {{{inner}}}"
