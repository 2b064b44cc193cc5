"""summary.json's `timeouts.calculated`: the timeouts NVRx calculated per scenario, section by section.

summary.json's `timeouts.calculated`: per scenario that ran under calculated timeouts (`calc_ft_timeouts`),
the values NVRx started each cycle with and each value it calculated, and per section whether the final
value catches a hang and whether it would fire on the healthy run (pure).

Read from the verify report: the `calculated_timeouts` check's `values.cycles` (what the logs printed), its
`sections.overall` (the healthy run's largest measured section, the injected hang's own section left out),
`expected.rank_monitor_interval_s` and, for a hang, `detected_within_timeout`'s measured detection.

Per section, the final value is the last cycle's start updated by each of its calculations (the rule of
`ftqual.verification.evidence.in_force`):
- `hang_caught_within_s` = final + the rank monitor interval: the latest a hang there is seen. `catches_hang`
  is true when a final value is set, false when the run's own hang there was detected after that bound.
- `fires_on_healthy` is true when the final value is at or below the healthy section's largest measured
  duration (NVRx would kill a healthy job), false when above it, null when not measured or when the figure
  is an upper bound at or above the value that can exceed by far more than noise (out of section: a step
  included; setup from the worker start: the imports included): the logs cannot tell.
Descriptive only: the scenario's verdict stays the verifier's (its `calculated_timeouts` check). A missing
or malformed part of the verify report leaves its fields null with a reason, never an exception.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from ftqual.report.budgets import RANK_MONITOR_INTERVAL_S
from ftqual.verification.checks.section_times import CANNOT_TELL

SECTIONS = ("setup", "step", "checkpointing", "out_of_section")
CHECK = "calculated_timeouts"
DETECTION_CHECK = "detected_within_timeout"
DETECTION_TOLERANCE_S = 1.0  # the verifier's own (timestamps of the marker and the launcher's line)
MALFORMED = "the verify report's calculated_timeouts values are missing or malformed"


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _map(value: object) -> Mapping:
    return value if isinstance(value, Mapping) else {}


def _check(doc: Mapping, cid: str) -> Mapping | None:
    checks = doc.get("checks") if isinstance(doc.get("checks"), list) else []
    return next((c for c in checks if isinstance(c, Mapping) and c.get("id") == cid), None)  # type: ignore[union-attr]


def _values(raw: object) -> dict[str, float | None] | None:
    """One set of timeouts (seconds per section); None when it is not a mapping."""
    if not isinstance(raw, Mapping):
        return None
    return {k: _num(raw.get(k)) for k in SECTIONS}


def _cycle(raw: object) -> dict | None:
    """One cycle of the check's values, sanitized; None when malformed (it is then left out, and said)."""
    if not isinstance(raw, Mapping):
        return None
    number, start, updates = raw.get("cycle"), _values(raw.get("start")), raw.get("updates")
    if isinstance(number, bool) or not isinstance(number, int):
        return None
    if start is None or not isinstance(updates, list):
        return None
    calculated = [_values(u) for u in updates]
    if any(u is None for u in calculated):
        return None
    return {
        "cycle": number,
        "source": "loaded from ft_state.json" if raw.get("loaded") is True else "initial",
        "start": start,
        "calculated": calculated,
    }


def _final(cycle: Mapping) -> dict[str, tuple[float, str]]:
    """Per section, the value in force at the end of `cycle` and what set it. NVRx prints every section at
    each update, the ones it did not calculate unchanged: only a changed value is credited to an update."""
    out = {k: (v, f"cycle {cycle['cycle']}'s start") for k, v in cycle["start"].items() if v is not None}
    for number, values in enumerate(cycle["calculated"], 1):
        for key, value in values.items():
            if value is not None and (key not in out or out[key][0] != value):
                out[key] = (value, f"cycle {cycle['cycle']}'s calculation {number}")
    return out


def _healthy(doc: Mapping, key: str) -> tuple[float | None, str | None]:
    figure = _map(_map(_map(doc.get("sections")).get("overall")).get(key))
    bound = figure.get("bound")
    return _num(figure.get("s")), bound if isinstance(bound, str) else None


def _detected(doc: Mapping, key: str) -> float | None:
    """The run's own hang detection in section `key` (seconds after the injection), if it had one there."""
    check = _check(doc, DETECTION_CHECK)
    values = _map(check.get("values")) if check is not None else {}
    return _num(values.get("detection_s")) if values.get("section") == key else None


def fires_on_healthy(key: str, final: float | None, healthy: float | None, bound: str | None) -> bool | None:
    """At or below the healthy section's largest duration: it would fire on a healthy run. An upper-bound
    figure of out of section (a step included) or setup (from the worker start) at or above the value says
    nothing, as the verifier's calculated_timeouts check rules
    (ftqual.verification.checks.section_times.CANNOT_TELL)."""
    if final is None or healthy is None:
        return None
    if healthy >= final:
        return None if key in CANNOT_TELL and bound == "upper" else True
    return False


def section_row(key: str, final: tuple[float, str] | None, doc: Mapping, interval: float) -> dict:
    value, set_by = final if final is not None else (None, None)
    within = None if value is None else value + interval
    healthy, bound = _healthy(doc, key)
    detected = _detected(doc, key)
    catches = None if within is None else True
    if within is not None and detected is not None:
        catches = detected <= within + DETECTION_TOLERANCE_S
    fires = fires_on_healthy(key, value, healthy, bound)
    return {
        "section": key,
        "final_s": value,
        "set_by": set_by,
        "hang_caught_within_s": within,
        "hang_detected_s": detected,
        "catches_hang": catches,
        "healthy_max_s": healthy,
        "healthy_bound": bound,
        "fires_on_healthy": fires,
        "verdict": verdict(value, healthy, fires, catches),
    }


def verdict(value: float | None, healthy: float | None, fires: bool | None, catches: bool | None) -> str:
    if value is None:
        return "no value"
    if fires:
        return "would fire"
    if catches is False:
        return "missed its bound"
    if healthy is None:
        return "not measured"
    return "cannot tell" if fires is None else "ok"


def scenario_part(scenario: str, doc: Mapping) -> dict | None:
    """The calculated part of one scenario; None when it ran under fixed timeouts."""
    expected = _map(doc.get("expected"))
    check = _check(doc, CHECK)
    status = check.get("status") if check is not None else None
    if expected.get("calc_ft_timeouts") is not True and (check is None or status == "skip"):
        return None
    interval = _num(expected.get("rank_monitor_interval_s")) or RANK_MONITOR_INTERVAL_S
    raw = _map(check.get("values")).get("cycles") if check is not None else None
    cycles = [_cycle(c) for c in raw] if isinstance(raw, list) else []
    kept = [c for c in cycles if c is not None]
    reason = None
    if check is None:
        reason = "the verify report has no calculated_timeouts check"
    elif not isinstance(raw, list) or len(kept) < len(cycles) or not kept:
        reason = MALFORMED
    final = _final(kept[-1]) if kept else {}
    return {
        "scenario": scenario,
        "status": status if isinstance(status, str) else None,
        "reason": reason,
        "rank_monitor_interval_s": interval,
        "cycles": kept,
        "sections": [section_row(k, final.get(k), doc, interval) for k in SECTIONS],
    }


def build_calculated(docs: list[tuple[str, Mapping]]) -> dict:
    """summary.json's `timeouts.calculated`: one entry per scenario that ran under calculated timeouts."""
    parts = [scenario_part(name, doc) for name, doc in docs if isinstance(doc, Mapping)]
    return {"scenarios": [p for p in parts if p is not None]}
