"""The timeouts table and the recommended timeouts, from the verify reports' measured sections (pure).

Each verify report carries `sections.overall`: per FT section the largest duration measured over every
cycle of the run (`ftqual.verification.evidence.sections` says how each is bounded), the injected hang's own
section
left out. This module takes the largest over the scenarios' runs and sets it beside the configured timeout.

Per section:
- `headroom` = timeout / observed. Below `TOO_TIGHT_HEADROOM` (3x) the verdict is `too tight`: a section
  that already takes a third of its timeout on a tiny model under no load can meet it on a loaded node, a
  slower file system or a larger model (a false alarm: the launcher kills a healthy job).
- `detection_s` = timeout + the rank monitor's check interval (`budgets.RANK_MONITOR_INTERVAL_S`, or the
  report's `expected.rank_monitor_interval_s`): how long a hang in that section goes unseen.
- `loose` when detection_s / observed exceeds `LOOSE_MULTIPLE` (20x) and the recommended timeout (below) is
  tighter than the one in force: a hang there costs more than twenty times what the section needs, time
  every GPU of the job spends idle, and the recommendation would cut it. A section whose recommendation is
  the same or larger (ftqual's floor raises it) is never `loose`: the table never calls a timeout too long
  and then recommends a longer one.
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
`ftqual recommend-timeouts` writes the recommendation as a config snippet (with `timeouts_from`, the set it
was measured under); scenarios rerun under it record `timeouts_source: recommended`.

Calculated timeouts (`calculated`, built by `ftqual.report.calculated`): per scenario that ran with
`calc_ft_timeouts`, the values NVRx started each cycle with and calculated, and per section whether the final
value catches a hang and whether it would fire on the healthy run.

Evaluation (`evaluation`, present where a report names the job's evaluation: verify.json
`sections.evaluation`): eval steps are `step` sections (Megatron's ft_integration.on_eval_step_start/end), so
the step figure each report carries is the longest of its training and eval steps (`what` names an eval
step), and the out-of-section figure holds the stretches around each evaluation. `note` says which step
decided the step recommendation, or that no evaluation ran although the job evaluates (then the
recommendation does not cover one).

Proof of a recommendation (`proof`), when runs ran under one: each run's `timeouts_not_exceeded` (no healthy
section met a recommended timeout: no false alarm) and each hang's `detected_within_timeout` (detected within
its section's recommended timeout + the rank monitor interval). Any of them failed: `disproved`; every one
passed and a baseline and a hang among them: `proven`; else `unproven`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from ftqual.contract import family_of
from ftqual.report.budgets import RANK_MONITOR_INTERVAL_S
from ftqual.report.calculated import build_calculated

SECTIONS = ("setup", "step", "checkpointing", "out_of_section")
TOO_TIGHT_HEADROOM = 3.0  # timeout / observed below this: a false alarm is likely under load
LOOSE_MULTIPLE = 20.0  # detection / observed above this: a hang costs far more than the section needs
SAFETY_FACTOR = 5.0  # NVRx's FaultToleranceConfig.safety_factor default (TimeoutsCalc)
ROUND_S = 10.0
# The least timeout ftqual recommends per section, whatever a tiny model measured (docs/checks.md, "Why the
# floors"): setup holds imports, NCCL initialization and the replacement's checkpoint load on a cold file
# system; a step and an out-of-section stretch can meet a collective's straggler or a GC pause; a save a
# busy file system. A floor is a lower bound for a job too small to measure, never a figure for a large one:
# where it decides a section (`basis` "floor") the recommendation says so, and a larger job's measurement,
# not the floor, must make its timeouts.
FLOOR_S = {"setup": 300.0, "step": 60.0, "checkpointing": 120.0, "out_of_section": 120.0}
RULE = (
    f"max({SAFETY_FACTOR:g} x largest observed over every cycle of every scenario, floor), rounded up to "
    f"{ROUND_S:g} s (NVRx's calculated-timeout rule, safety_factor {SAFETY_FACTOR:g}, with floors "
    + ", ".join(f"{k} {v:g} s" for k, v in FLOOR_S.items())
    + "); an unmeasured section keeps its configured timeout"
)
RULE_NO_FLOORS = (
    f"{SAFETY_FACTOR:g} x largest observed over every cycle of every scenario, rounded up to {ROUND_S:g} s "
    f"(NVRx's calculated-timeout rule, safety_factor {SAFETY_FACTOR:g}, without ftqual's floors); an "
    "unmeasured section keeps its configured timeout"
)
FLAG_NAMES = {"setup": "setup", "step": "step", "checkpointing": "checkpointing"}


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _observed_figure(name: str, docs: Iterable[tuple[str, Mapping]]) -> Mapping:
    """The largest figure of `name` over the reports' `sections.overall` ({} where none)."""
    best: tuple[float, Mapping] | None = None
    for _, doc in docs:
        sections = doc.get("sections")
        overall = sections.get("overall") if isinstance(sections, Mapping) else None
        figure = overall.get(name) if isinstance(overall, Mapping) else None
        value = _num(figure.get("s")) if isinstance(figure, Mapping) else None
        if value is not None and (best is None or value > best[0]):
            best = (value, figure)  # type: ignore[assignment]
    return best[1] if best is not None else {}


def build_evaluation(docs: Iterable[tuple[str, Mapping]]) -> dict | None:
    """summary.json's `timeouts.evaluation`: the job's evaluation as the reports name it, how many ran, the
    longest eval step (scenario, iteration, seconds) and the sentence the report prints; None where no report
    names an evaluation (a job without one, or reports from before evaluation was modelled)."""
    docs = list(docs)
    named, ran, longest = [], 0, None
    for scenario, doc in docs:
        sections = doc.get("sections")
        record = sections.get("evaluation") if isinstance(sections, Mapping) else None
        if not isinstance(record, Mapping):
            continue
        named.append(record)
        count = record.get("count")
        ran += count if isinstance(count, int) and not isinstance(count, bool) else 0
        step = record.get("longest_step")
        value = _num(step.get("s")) if isinstance(step, Mapping) else None
        if value is not None and (longest is None or value > longest["s"]):
            longest = {"scenario": scenario, "s": value, "what": step.get("what"), "bound": step.get("bound")}  # type: ignore[union-attr]
    if not named:
        return None
    intervals = sorted({r.get("interval") for r in named if isinstance(r.get("interval"), int)})
    iters = sorted({r.get("iters") for r in named if isinstance(r.get("iters"), int)})
    every = ", ".join(str(i) for i in intervals) or "?"
    step = _observed_figure("step", docs)
    if not ran:
        note = (
            f"no evaluation ran in the measured runs: the job evaluates every {every} iterations — the "
            "recommendation does not cover it; run a scenario long enough to evaluate"
        )
    elif isinstance(step.get("what"), str) and step.get("what"):
        note = f"the longest step: an {step['what']}, {_num(step.get('s')):.2f} s"
    else:
        seen = f"; the longest eval step {longest['s']:.2f} s ({longest['what']})" if longest else ""
        note = f"the longest step: a training step, {_num(step.get('s')) or 0:.2f} s{seen}"
    return {"interval": intervals, "iters": iters, "count": ran, "longest_step": longest, "note": note}


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


def verdict(
    timeout: float | None, observed: float | None, detection: float | None, recommended: float | None
) -> str:
    """The section's verdict (module docstring): `loose` only where the recommendation is below the timeout
    in force, so that a `loose` section is always one the recommendation tightens."""
    if observed is None or timeout is None:
        return "not measured" if observed is None else "no timeout"
    if observed <= 0 or timeout / observed < TOO_TIGHT_HEADROOM:
        return "too tight" if observed > 0 else "ok"
    tighter = recommended is not None and recommended < timeout
    if tighter and detection is not None and detection / observed > LOOSE_MULTIPLE:
        return "loose"
    return "ok"


def recommend(
    observed: float | None, configured: float | None, name: str, floors: bool = True
) -> float | None:
    """NVRx's rule (safety factor x observed), raised to ftqual's floor unless `floors` is off, rounded up."""
    if observed is None:
        return configured
    value = max(SAFETY_FACTOR * observed, FLOOR_S[name] if floors else 0.0)
    return math.ceil(value / ROUND_S - 1e-9) * ROUND_S


def basis(observed: float | None, name: str, floors: bool = True) -> str:
    """What decides a section's recommendation: `measured` (safety factor x observed), `floor` (ftqual's
    floor is larger: the measurement is too small to recommend from) or `configured` (not measured)."""
    if observed is None:
        return "configured"
    return "floor" if floors and FLOOR_S[name] > SAFETY_FACTOR * observed else "measured"


def _expected(doc: Mapping) -> Mapping:
    expected = doc.get("expected")
    return expected if isinstance(expected, Mapping) else {}


def _configured_from(name: str, docs: Iterable[tuple[str, Mapping]]) -> float | None:
    """The configured timeout a recommendation the runs ran under was made from (None: none ran under one)."""
    values = []
    for _, doc in docs:
        given = _expected(doc).get("timeouts_from")
        if isinstance(given, Mapping) and (value := _num(given.get(name))) is not None:
            values.append(value)
    return max(values) if values else None


def _check(doc: Mapping, cid: str) -> Mapping | None:
    checks = doc.get("checks") if isinstance(doc.get("checks"), list) else []
    return next((c for c in checks if isinstance(c, Mapping) and c.get("id") == cid), None)  # type: ignore[union-attr]


def build_proof(docs: list[tuple[str, Mapping]]) -> dict:
    """Per scenario, whether its run proves the timeouts it ran under: no false alarm
    (`timeouts_not_exceeded`), and for a hang the detection within its bound (`detected_within_timeout`)."""
    rows = []
    for scenario, doc in docs:
        expected = _expected(doc)
        quiet = _check(doc, "timeouts_not_exceeded")
        bound = _check(doc, "detected_within_timeout")
        values = bound.get("values") if bound is not None and isinstance(bound.get("values"), Mapping) else {}
        rows.append(
            {
                "scenario": scenario,
                "fault": expected.get("fault"),
                "ran_under": expected.get("timeouts_source") or "configured",
                "no_false_alarm": quiet.get("status") if quiet is not None else None,
                "detection": None
                if bound is None
                else {
                    "status": bound.get("status"),
                    "section": values.get("section"),  # type: ignore[union-attr]
                    "detection_s": _num(values.get("detection_s")),  # type: ignore[union-attr]
                    "bound_s": _num(values.get("bound_s")),  # type: ignore[union-attr]
                    "detail": bound.get("detail"),
                },
            }
        )
    under = [r for r in rows if r["ran_under"] == "recommended"]
    statuses = [r["no_false_alarm"] for r in under] + [
        r["detection"]["status"] for r in under if r["detection"]
    ]
    if not under:
        verdict = None
    elif "fail" in statuses:
        verdict = "disproved"
    elif (
        all(s == "pass" for s in statuses)
        and any(family_of(r["fault"]) == "none" for r in under)
        and any(r["detection"] for r in under)
    ):
        verdict = "proven"
    else:
        verdict = "unproven"
    return {"verdict": verdict, "scenarios": rows}


def build_timeouts(docs: list[tuple[str, Mapping]], floors: bool = True) -> dict:
    """summary.json's `timeouts`: the table's rows, the recommendation and its proof (pure)."""
    docs = [(name, doc) for name, doc in docs if isinstance(doc, Mapping)]
    sources = {_expected(doc).get("timeouts_source") or "configured" for _, doc in docs}
    rows, recommended = [], {}
    for name in SECTIONS:
        timeout, interval = _configured(name, docs)
        observed, scenario, evidence = _observed(name, docs)
        detection = None if timeout is None else timeout + interval
        rec = recommend(observed, timeout, name, floors)
        recommended[name] = rec
        previous = _configured_from(name, docs)
        rows.append(
            {
                "section": name,
                "configured_s": previous if previous is not None else timeout,
                "ran_under_s": timeout,
                "timeout_s": timeout,
                "observed_s": observed,
                "observed_in": scenario,
                "evidence": evidence[:4],
                "headroom": None if not observed or timeout is None else round(timeout / observed, 2),
                "detection_s": detection,
                "verdict": verdict(timeout, observed, detection, rec),
                "recommended_s": rec,
                "recommended_basis": basis(observed, name, floors),
                "recommended_detection_s": None if rec is None else rec + interval,
            }
        )
    out = {
        "rows": rows,
        "ran_under": "mixed" if len(sources) > 1 else (next(iter(sources)) if sources else "configured"),
        "proof": build_proof(docs),
        "margins": {"too_tight_headroom": TOO_TIGHT_HEADROOM, "loose_multiple": LOOSE_MULTIPLE},
        "rule": RULE if floors else RULE_NO_FLOORS,
        "recommended": recommended,
        "flags": flags(recommended),
        "config": config_snippet(recommended),
        "calculated": build_calculated(docs),
    }
    evaluation = build_evaluation(docs)
    if evaluation is not None:  # only where a report names one: summaries of other jobs keep their keys
        out["evaluation"] = evaluation
    return out


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
