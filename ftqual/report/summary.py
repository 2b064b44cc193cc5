"""Build the summary document `ftqual.summary/v1` from the verify reports and preflight.json (pure).

A scenario's verdict is the worst of the verifier's verdict and its checks' statuses (fail > inconclusive >
pass): a report that says pass next to a failed or inconclusive check never comes out green, and a fault
scenario lacking one of the contract's checks gets that check as inconclusive. That raw verdict is then
judged against the scenario's expectation (ftqual.verification.expectation): a negative control qualifies when
it failed
as expected. The overall verdict is pass only when every applicable scenario's outcome is pass. A scenario
the stack cannot run (verdict `not_applicable`: the preflight said why, nothing was launched) is listed apart
with its reason (`not_applicable`), never counted as a pass nor as a failure; where no applicable fault
scenario is left the verdict cannot be pass (no recovery was shown).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ftqual.contract import FAULTS, INJECTED_FAULTS, RANK_FAULTS, family_of
from ftqual.report import at_scale, at_scale_cli
from ftqual.report import budgets as budgets_mod
from ftqual.report import scope as scope_mod
from ftqual.report.campaign import build_campaign
from ftqual.report.checkpoints import build_checkpoints
from ftqual.report.exit_codes import build_exit_codes
from ftqual.report.faults_table import build_fault_table, held_sections
from ftqual.report.inputs import PreflightInput, ScenarioInput, evidence_text
from ftqual.report.recurring import build_recurring
from ftqual.report.restart_agent import build_restart_agent
from ftqual.report.timeline import build_timeline, iteration_time_s, marks_summary, save_blocking_s
from ftqual.report.timeouts import build_timeouts
from ftqual.stack import identity as stackid
from ftqual.verification import schema as verify_schema
from ftqual.verification import verdict as verdict_mod
from ftqual.verification.campaign import goodput as goodput_mod
from ftqual.verification.checks import CHECKS
from ftqual.verification.expectation import ExpectedOutcome

SCHEMA = "ftqual.summary/v1"
VERDICTS = ("pass", "fail", "inconclusive")
NOT_APPLICABLE = verdict_mod.NOT_APPLICABLE  # a scenario's verdict only, never the summary's
STATUSES = ("pass", "fail", "inconclusive", "skip")
SEVERITY = {"pass": 0, "skip": 0, "inconclusive": 1, "fail": 2}

# One line per check id: what a pass means, as each check declares it (ftqual.verification.checks.CHECKS), and
# the lines of ids no check declares: a check older reports carry, the overall verdict's row. Ids the verifier
# adds later fall back to their own detail.
CHECK_LEGEND = {
    **{spec.id: spec.legend for spec in CHECKS},
    "loss_continuity": "the loss after the restore continues where it was, no jump or NaN",
    "verdict": "the scenario's overall verdict: pass only if no check failed or was inconclusive",
}

STACK_FIELDS = (
    ("gpu_model", "GPU model"),
    ("gpu_count", "GPU count"),
    ("driver", "driver"),
    ("cuda", "CUDA"),
    ("nccl", "NCCL"),
    ("torch", "torch"),
    ("transformer_engine", "Transformer Engine"),
    ("apex", "Apex"),
    ("megatron", "Megatron-LM"),
    ("nvrx", "NVRx"),
    ("python", "Python"),
    ("host", "host"),
)
UNKNOWN = "unknown"


@dataclass(frozen=True)
class ReportOptions:
    # MTBF points given by hand (ftqual report --mtbf-hours); none: the failure prior's MTBF at the GPU counts
    # the published figures name (ftqual.report.at_scale PRIORS, PRIOR_TABLE_GPUS)
    mtbf: tuple[goodput_mod.MtbfPoint, ...] = ()
    prior: str = at_scale.DEFAULT_PRIOR  # the failure prior of every goodput in the report
    ckpt_interval_s: float | None = None
    ckpt_blocking_s: float | None = None
    baseline: str | None = None  # scenario name whose losses the others are compared with
    plots: dict[str, str] = field(default_factory=dict)  # plot name -> path relative to the summary
    attempts: dict[str, str] = field(default_factory=dict)  # scenario -> the workflow's attempt slot
    # what the timeouts the runs ran under were recommended for (the config's timeouts_for), or None
    timeouts_for: dict | None = None
    scale: tuple[int, float] | None = None  # (GPUs, days): the At your scale section (config scale)
    # the signal that interrupted the workflow before every verdict was reached (ftqual report
    # --interrupted, from the workflow's rebuild of the summary): said instead of "verify report missing"
    interrupted: str | None = None


worst = verdict_mod.worst  # the one ordering of verdicts (ftqual.verification.verdict)


def _check(raw: object) -> dict:
    raw = raw if isinstance(raw, dict) else {}
    status = raw.get("status")
    evidence = []
    for ev in raw.get("evidence") or []:
        if isinstance(ev, dict):
            item = {"path": ev.get("path"), "line": ev.get("line")}
            text = evidence_text(ev)
            if text:
                item["text"] = text
            evidence.append(item)
    return {
        "id": str(raw.get("id") or "unnamed"),
        "status": status if status in STATUSES else "inconclusive",
        "detail": str(raw.get("detail") or ("" if status in STATUSES else f"invalid status {status!r}")),
        "evidence": evidence,
        "gates": raw.get("gates") is not False,  # a check that does not say so gates
    }


def scenario_fault(name: str, doc: dict | None) -> str:
    doc = doc or {}
    for value in ((doc.get("expected") or {}).get("fault"), doc.get("fault")):
        if value in FAULTS:
            return value
    # no usable report: guess from the name (kill-rank0 -> kill, gpu_hang -> gpu_hang, not hang: the longest
    # fault named in it); the report says the scenario is inconclusive
    named = [f for f in INJECTED_FAULTS if f in name]
    return max(named, key=len) if named else "none"


# What the report can know of a scenario's run from its verify report (`run_state`): why a record a run
# writes (its job, its stack dumps) may be missing, said as what happened, never guessed as the run's age.
NO_REPORT = "no verify report"  # none was written (an interrupted workflow, a job that failed, not run yet)
NOT_LAUNCHED = "not launched"  # the attempt's record says nothing was launched (preflight, baseline, refusal)
NOT_VERIFIED = "not verified"  # launched, but its run directory could not be verified (no readable run.json)
INTERRUPTED = "interrupted"  # verified; the launcher was stopped from outside (run.json `interrupted_by`)
VERIFIED = "verified"
NOT_APPLICABLE_STATE = "not applicable"  # nothing launched: the stack cannot run it (its verdict says so)
RUN_STATES = (VERIFIED, INTERRUPTED, NOT_VERIFIED, NOT_LAUNCHED, NO_REPORT, NOT_APPLICABLE_STATE)


def run_state(doc: dict | None) -> str:
    """The scenario's `run_state` (RUN_STATES) from its verify report: the workflow's report of an attempt
    that was not launched fails its `launched` check, one whose run directory could not be verified fails
    `evidence_readable` (ftqual.workflow.verify_rule); a run stopped from outside is the verifier's cause
    of kind `interrupted`."""
    if doc is None:
        return NO_REPORT
    if doc.get("verdict") == NOT_APPLICABLE:
        return NOT_APPLICABLE_STATE
    attempt = doc.get("attempt") if isinstance(doc.get("attempt"), dict) else {}
    failed = {
        c.get("id") for c in doc.get("checks") or [] if isinstance(c, dict) and c.get("status") == "fail"
    }
    if attempt.get("launched") is False or "launched" in failed:
        return NOT_LAUNCHED
    if "evidence_readable" in failed:
        return NOT_VERIFIED
    found = doc.get("cause_evidence")
    if isinstance(found, dict) and found.get("kind") == "interrupted":
        return INTERRUPTED
    return VERIFIED


def build_scenario(item: ScenarioInput, options: ReportOptions) -> dict:
    doc = item.doc
    fault = scenario_fault(item.name, doc)
    if doc is None and options.interrupted:
        item = replace(item, error=f"interrupted ({options.interrupted}) before its verdict: {RESUME}")
    if doc is None:
        return {
            "name": item.name,
            "verdict": "inconclusive",
            "run_state": NO_REPORT,
            "reason": item.error,
            "cause": item.error,
            "cause_given": False,
            "attempt": {},
            "source": item.path,
            "run_id": None,
            "fault": fault,
            "verify_verdict": None,
            "raw_verdict": "inconclusive",
            "expect": "pass",
            "expect_failing": [],
            "expectation": "no verify report",
            "expected": {},
            "checks": [],
            "metrics": {},
            "derived": {},
            "budgets": [],
            "replay": None,
            "goodput": None,
            "stack": None,
            "excerpts_recorded": False,
        }
    # The verdict as every reader sees it (ftqual.verification.schema.judged): the verifier's, never better
    # than its
    # gating checks (a report that says pass next to a failed gating check is not trusted), a required
    # check it lacks counted as inconclusive; then judged against the scenario's expectation.
    seen = verify_schema.judged(doc)
    checks = [_check(c) for c in seen.checks]
    verify_verdict = doc.get("verdict")
    verdict = seen.raw
    reason = None
    if verify_verdict not in (*VERDICTS, NOT_APPLICABLE):
        reason = f"verify report has no valid verdict ({verify_verdict!r})"
    elif verdict != verify_verdict:
        reason = f"the verifier said {verify_verdict}, but its checks say {verdict}"
    # The verify report's own cause (the launcher's, the logs' root cause, nothing launched) comes first;
    # otherwise the first check with the scenario's verdict is the cause.
    given = doc.get("cause") if isinstance(doc.get("cause"), str) and doc.get("cause") else None
    cause = given if given is not None else (reason or seen.cause)
    expectation = ExpectedOutcome.from_json(doc.get("expectation"))
    outcome = seen.outcome
    raw_verdict, verdict = verdict, outcome.verdict
    if expectation.expect == "fail" and verdict != NOT_APPLICABLE:
        # A negative control's own failure is its point, not the cause of anything; an unmet one's cause
        # is that it did not fail as it should.
        cause, given = (None, None) if outcome.met else (outcome.detail, outcome.detail)
    metrics = doc.get("metrics") if isinstance(doc.get("metrics"), dict) else {}
    expected = doc.get("expected") if isinstance(doc.get("expected"), dict) else {}
    tl = build_timeline(doc)
    pace = iteration_time_s(tl)
    blocking = _number(metrics.get("checkpoint_blocking_s"))
    blocking_source = "measured by the verifier" if blocking is not None else ""
    if blocking is None:
        blocking = save_blocking_s(tl, _int(expected.get("save_interval")))
        blocking_source = (
            "estimated from the timeline: extra time of the step after a save" if blocking else ""
        )
    lost = _number(metrics.get("lost_iterations"))
    derived = {
        "iteration_time_s": _round(pace),
        "checkpoint_blocking_s": _round(blocking),
        "checkpoint_blocking_source": blocking_source or "not measured",
        "lost_work_s": _round(lost * pace) if lost is not None and pace is not None else None,
        "cycles": len(tl.cycles()),
        "marks": marks_summary(tl),
    }
    scenario = {
        "name": item.name,
        "verdict": verdict,
        "run_state": run_state(doc),
        "reason": reason,
        "cause": cause,
        "cause_given": given is not None,
        # what the cause rests on: the log line it names, or the evidence of the check it quotes
        "cause_cites": verdict_mod.cause_citations(cause, doc.get("cause_evidence"), checks),
        "attempt": doc.get("attempt") if isinstance(doc.get("attempt"), dict) else {},
        "source": item.path,
        "run_id": doc.get("run_id"),
        "fault": fault,
        "verify_verdict": verify_verdict,
        "raw_verdict": raw_verdict,
        "expect": expectation.expect,
        "expect_failing": list(expectation.failing),
        "expectation": outcome.detail,
        "expected": expected,
        "checks": checks,
        "metrics": metrics,
        "derived": derived,
        "budgets": [],
        "replay": None,
        "goodput": None,
        "stack": scenario_stack(doc),
        # the cited log lines are quoted from verify.json's `excerpts`; an older report has none to quote
        "excerpts_recorded": isinstance(doc.get("excerpts"), dict),
    }
    if verdict == NOT_APPLICABLE:  # why the stack cannot run it (attempt.json's, through verify.json)
        why = doc.get("not_applicable")
        scenario["not_applicable"] = why if isinstance(why, str) and why else cause
    held = held_sections(doc)
    if held:  # a live fault's section and the timeout that caught it, per injection (the fault table's)
        scenario["held"] = held
    if fault in RANK_FAULTS:  # a rank's fault, recovered from: its latency budgets, replay and goodput
        scenario["budgets"] = [b.to_dict() for b in budgets_mod.budgets_for(fault, metrics, expected)]
        scenario["replay"] = _replay(doc)
        scenario["goodput"] = _goodput(metrics, derived, options)
    return scenario


REPLAY_VALUES = (
    "classification",
    "restored_iteration",
    "tolerance",
    "covered",
    "uncovered",
    "sources",
    "compared_iterations",
    "transient_iterations",
    "max_rel_dev",
    "max_dev_iteration",
    "baseline_used",
    "baseline_compared",
    "baseline_max_rel_dev",
    "baseline_max_dev_iteration",
)


def _replay(doc: dict) -> dict | None:
    """The verifier's replay_consistency check as it stands in verify.json (status, detail, notes, values)."""
    raw = next(
        (c for c in doc.get("checks") or [] if isinstance(c, dict) and c.get("id") == "replay_consistency"),
        None,
    )
    if raw is None:
        return None
    values = raw.get("values") if isinstance(raw.get("values"), dict) else {}
    differences = [d for d in values.get("differences") or [] if isinstance(d, dict)]
    return {
        "status": raw.get("status"),
        "detail": str(raw.get("detail") or ""),
        "notes": [str(n) for n in raw.get("notes") or []],
        **{key: values.get(key) for key in REPLAY_VALUES},
        "differences": differences[:10],
        "exact": exact_recovery(doc),
    }


def exact_recovery(doc: dict) -> dict | None:
    """The "Exact recovery" line of a scenario (its exact_replay check, replay exact only): what it says
    (bitwise, bitwise but for the stack's finding, or the first difference) and its evidence; None where the
    run did not run exact."""
    raw = next(
        (c for c in doc.get("checks") or [] if isinstance(c, dict) and c.get("id") == "exact_replay"),
        None,
    )
    if raw is None:
        return None
    values = raw.get("values") if isinstance(raw.get("values"), dict) else {}
    first = values.get("first_difference") if isinstance(values.get("first_difference"), dict) else None
    finding = values.get("stack_finding") if isinstance(values.get("stack_finding"), dict) else None
    if raw.get("status") == "pass" and finding:
        line = f"bitwise, except a finding of the stack: {'; '.join(map(str, raw.get('notes') or []))}"
    elif raw.get("status") == "pass":
        line = "bitwise"
    elif first:
        line = f"first difference: {str(raw.get('detail') or '')}"
    else:
        line = f"{raw.get('status')}: {str(raw.get('detail') or '')}"
    return {
        "status": raw.get("status"),
        "line": line,
        "exact": values.get("exact"),
        "first_difference": first,
        "stack_finding": finding,
        "evidence": [e for e in raw.get("evidence") or [] if isinstance(e, dict)][:3],
    }


def _goodput(metrics: dict, derived: dict, options: ReportOptions) -> dict:
    blocking = (
        options.ckpt_blocking_s if options.ckpt_blocking_s is not None else derived["checkpoint_blocking_s"]
    )
    source = "given" if options.ckpt_blocking_s is not None else derived["checkpoint_blocking_source"]
    inputs, why = goodput_mod.inputs_from_metrics(
        metrics, blocking, source, options.ckpt_interval_s, derived["lost_work_s"]
    )
    if inputs is None:
        return {"computed": False, "reason": why, "points": []}
    # the one goodput model (ftqual.report.at_scale), with only the terms one scenario measures
    points = [
        at_scale.scenario_point(inputs.t_detect_s, inputs.t_restart_s, inputs.ckpt_blocking_s,
                                p.hours * 3600.0, p.gpus, inputs.ckpt_interval_s)
        for p in mtbf_points(options)
    ]  # fmt: skip
    return {
        "computed": True,
        "reason": None,
        "t_detect_s": _round(inputs.t_detect_s),
        "t_restart_s": _round(inputs.t_restart_s),
        "ckpt_blocking_s": _round(inputs.ckpt_blocking_s),
        "ckpt_blocking_source": inputs.ckpt_blocking_source,
        "lost_work_measured_s": inputs.lost_work_measured_s,
        "points": [
            {
                "mtbf_hours": round(p.mtbf_s / 3600.0, 4),
                "gpus": p.gpus,
                "mtbf_s": p.mtbf_s,
                "ckpt_interval_s": _round(p.interval_s),
                "ckpt_interval_source": p.interval_source,
                "t_detect_s": _round(p.t_detect_s),
                "t_restart_s": _round(p.t_restart_s),
                "t_lost_s": _round(p.t_lost_s),
                "t_ckpt_s": _round(p.t_ckpt_s),
                "waste_s": _round(p.waste_s),
                "goodput": round(p.goodput, 5),
            }
            for p in points
        ],
    }


def mtbf_points(options: ReportOptions) -> tuple[goodput_mod.MtbfPoint, ...]:
    """The MTBF points of each scenario's projection: given by hand, or the prior's at its table's GPUs."""
    if options.mtbf:
        return options.mtbf
    rate = at_scale.PRIORS[options.prior].failures_per_gpu_hour
    return tuple(goodput_mod.MtbfPoint(round(1.0 / (rate * n), 4), n) for n in at_scale.PRIOR_TABLE_GPUS)


def scenario_stack(doc: dict) -> dict | None:
    """The stack a verdict was earned on (the verify report's `stack`, ftqual.stack.identity), and why its
    attempt
    was made (a stack change names the parts that changed); None for a report that records no stack."""
    ident = stackid.from_json(doc.get("stack"))
    if ident is None:
        return None
    attempt = doc.get("attempt") if isinstance(doc.get("attempt"), dict) else {}
    reason = attempt.get("slot_reason")
    return {
        "digest": ident.digest,
        "parts": ident.parts,
        "reason": reason if isinstance(reason, str) else None,
    }


def build_stack_identity(scenarios: list[dict]) -> dict:
    """Which stacks the reported verdicts were earned on: one identity when they share it (the workflow's
    own attempts always do), each scenario's digest, and the requalifications a stack change caused."""
    by_scenario = {sc["name"]: (sc["stack"] or {}).get("digest") for sc in scenarios}
    digests = sorted({d for d in by_scenario.values() if d})
    first = next((sc["stack"] for sc in scenarios if sc["stack"]), None)
    requalified = {
        sc["name"]: sc["stack"]["reason"]
        for sc in scenarios
        if sc["stack"]
        and (sc["stack"]["reason"] or "").startswith(("the stack changed", "the stack of attempt"))
    }
    return {
        "digest": digests[0] if len(digests) == 1 and all(by_scenario.values()) else None,
        "parts": first["parts"] if first and len(digests) == 1 else {},
        "labels": {key: stackid.label(key) for key in (first["parts"] if first else {})},
        "by_scenario": by_scenario,
        "requalified": requalified,
    }


def build_stack(preflight: PreflightInput) -> dict:
    stack = (preflight.doc or {}).get("stack")
    if not isinstance(stack, dict):
        return {key: UNKNOWN for key, _ in STACK_FIELDS}
    return {key: stack.get(key) for key, _ in STACK_FIELDS}


def attention(scenarios: list[dict], preflight: dict | None = None) -> list[dict]:
    """What a reader must see first: a failed preflight, each failed scenario's cause, failed and
    inconclusive checks, unusable reports, budgets exceeded."""
    items = []
    if preflight and preflight.get("verdict") == "fail":
        for check in preflight.get("checks") or []:
            if isinstance(check, dict) and check.get("status") == "fail":
                fix = f" (fix: {check['fix']})" if check.get("fix") else ""
                items.append(
                    {
                        "scenario": "preflight",
                        "check": str(check.get("id")),
                        "status": "fail",
                        "detail": f"{check.get('detail')}{fix}",
                        "evidence": [],
                    }
                )
    scenarios = applicable(scenarios)  # listed apart (not_applicable), never a problem to attend to
    for sc in scenarios:
        if sc["verdict"] != "pass" and sc.get("cause_given") and sc["checks"]:
            items.append(
                {
                    "scenario": sc["name"],
                    "check": None,
                    "status": sc["verdict"],
                    "detail": f"cause: {sc['cause']}",
                    "evidence": list(sc.get("cause_cites") or []),
                }
            )
    for rank in ("fail", "inconclusive"):
        for sc in scenarios:
            if rank == "inconclusive" and sc["reason"] and not sc["checks"]:
                items.append(
                    {
                        "scenario": sc["name"],
                        "check": None,
                        "status": "inconclusive",
                        "detail": sc["reason"],
                        "evidence": [],
                    }
                )
            if sc.get("expect") == "fail" and sc["verdict"] == "pass":
                continue  # a negative control's checks failed as they should
            for check in sc["checks"]:
                if check["status"] == rank:
                    items.append(
                        {
                            "scenario": sc["name"],
                            "check": check["id"],
                            "status": rank,
                            "detail": check["detail"],
                            "evidence": check["evidence"],
                        }
                    )
    for sc in scenarios:
        for b in sc["budgets"]:
            if b["within"] is False:
                items.append(
                    {
                        "scenario": sc["name"],
                        "check": f"budget:{b['measure']}",
                        "status": "over_budget",
                        "detail": f"{b['label']}: {b['measured']:g} {b['unit']}"
                        f" > budget {b['budget']:g} {b['unit']} ({b['formula']})",
                        "evidence": [],
                    }
                )
    return items


# How the workflow's refusal names these two causes (ftqual.workflow.run_scenario.refusal: "the preflight
# failed (...)", "the baseline's attempt (...) is fail: ..."); a refusal for a reason of its own (timeouts the
# baseline's measurements rule out, a job shape) is a problem of its own.
PREFLIGHT_REFUSAL = "not launched: the preflight "
BASELINE_REFUSAL = "not launched: the baseline's attempt "


def not_launched_by(scenarios: list[dict], preflight_failed: bool, baseline: str | None) -> dict[str, str]:
    """Scenarios not launched as a consequence of another problem the report shows, by name: `preflight`
    (it failed: nothing launches) or `baseline` (it did not pass: no fault scenario launches after it), as
    the workflow refuses them (ftqual.workflow.run_scenario.refusal) and as their cause says."""
    base = next((sc for sc in scenarios if sc["name"] == baseline), None)
    baseline_failed = base is not None and base["verdict"] != "pass"
    out = {}
    for sc in scenarios:
        if sc.get("run_state") != NOT_LAUNCHED:
            continue
        # the `launched` check says why (the scenario's cause, unless a negative control's expectation)
        said = [c["detail"] for c in sc.get("checks") or [] if c.get("id") == "launched"]
        cause = " ".join(said) or sc.get("cause") or ""
        if preflight_failed and PREFLIGHT_REFUSAL in cause:
            out[sc["name"]] = "preflight"
        elif baseline_failed and sc["name"] != baseline and BASELINE_REFUSAL in cause:
            out[sc["name"]] = "baseline"
    return out


def independent(blocking: list[dict], consequences: dict[str, str]) -> list[dict]:
    """The items that are problems of their own: not those of a scenario not launched because of another
    problem, nor a failed check that a scenario's cause item already quotes (`<id>: <detail>`)."""
    causes = {i["scenario"]: i["detail"].removeprefix("cause: ") for i in blocking if i["check"] is None}
    out = []
    for item in blocking:
        if item["scenario"] in consequences:
            continue
        cause = causes.get(item["scenario"]) if item["check"] is not None else None
        if cause is not None and (cause == item["detail"] or f"{item['check']}: {item['detail']}" in cause):
            continue  # the cause item of its scenario says it (a not-launched one: its `launched` check)
        out.append(item)
    return out


def headline(
    verdict: str,
    scenarios: list[dict],
    items: list[dict],
    preflight_failed: bool = False,  # failed, or missing: the scenarios it refused are its consequences
    baseline: str | None = None,
) -> str:
    if not scenarios:
        return "ftqual: INCONCLUSIVE — no scenario to report"
    skipped = not_applicable_of(scenarios)
    word = "applicable " if skipped else ""  # "5/5 applicable scenarios" where some are left out
    line = _headline(verdict, applicable(scenarios), items, preflight_failed, baseline, word)
    if not skipped:
        return line
    # The scenarios this stack cannot run are named in the headline itself: a PASS that leaves some out says
    # which (their reasons: summary.md's "Not applicable on this stack", the gate's lines).
    names = ", ".join(skipped)
    return f"{line}; {len(skipped)} not applicable on this stack: {names}"


def _headline(
    verdict: str,
    scenarios: list[dict],
    items: list[dict],
    preflight_failed: bool,
    baseline: str | None,
    word: str,
) -> str:
    passed = sum(sc["verdict"] == "pass" for sc in scenarios)
    if not scenarios:
        return "ftqual: INCONCLUSIVE — no scenario this stack can run"
    if not any(sc["fault"] in INJECTED_FAULTS for sc in scenarios) and verdict != "fail":
        return (
            f"ftqual: INCONCLUSIVE — no fault scenario ran ({passed}/{len(scenarios)} "
            f"{word}scenarios pass): recovery not qualified"
        )
    if verdict == "pass":
        over = sum(i["status"] == "over_budget" for i in items)
        note = f"; {over} latenc{'y' if over == 1 else 'ies'} over budget" if over else ""
        return f"ftqual: PASS — recovery qualified ({passed}/{len(scenarios)} {word}scenarios){note}"
    blocking = [i for i in items if i["status"] == verdict]
    if blocking:
        # "+N more" counts problems, not their consequences: the scenarios a failed preflight or baseline
        # kept from launching are said as such, once
        held = not_launched_by(scenarios, preflight_failed, baseline) if verdict == "fail" else {}
        problems = independent(blocking, held)
        first = problems[0] if problems else blocking[0]
        what = (
            f"{first['check']} {'failed' if verdict == 'fail' else 'inconclusive'}"
            if first["check"]
            else (first["detail"])
        )
        notes = [f"+{len(problems) - 1} more"] if len(problems) > 1 else []
        unlaunched = len([name for name in held if name != first["scenario"]])
        if unlaunched:
            notes.append(f"{unlaunched} scenario{'s' if unlaunched != 1 else ''} not launched")
        more = f" ({'; '.join(notes)})" if notes else ""
        return f"ftqual: {verdict.upper()} — {first['scenario']}: {what}{more}"
    bad = next(sc for sc in scenarios if sc["verdict"] == verdict)
    return f"ftqual: {verdict.upper()} — {bad['name']}: {bad['reason'] or 'verdict ' + verdict}"


def applicable(scenarios: list[dict]) -> list[dict]:
    """The scenarios this stack can run: every one but those whose verdict is not_applicable."""
    return [sc for sc in scenarios if sc["verdict"] != NOT_APPLICABLE]


def not_applicable_of(scenarios: list[dict]) -> dict[str, str]:
    """{scenario: why this stack cannot run it}, in the report's order."""
    return {sc["name"]: sc.get("not_applicable") or "" for sc in scenarios if sc["verdict"] == NOT_APPLICABLE}


def build_summary(
    inputs: list[ScenarioInput], preflight: PreflightInput, options: ReportOptions, created_at: str
) -> dict:
    baseline_name = options.baseline or next(
        (i.name for i in inputs if family_of(scenario_fault(i.name, i.doc)) == "none" and i.doc is not None),
        None,
    )
    scenarios = [build_scenario(i, options) for i in inputs]
    campaigns = _campaigns(inputs)
    for sc in scenarios:
        _faults_gate(sc, campaigns.get(sc["name"]))
    pf = preflight.doc or {}
    # Only the scenarios this stack can run decide the verdict; those it cannot are neither pass nor fail.
    runnable = applicable(scenarios)
    verdict = worst([sc["verdict"] for sc in runnable]) if runnable else "inconclusive"
    if pf.get("verdict") == "fail":
        verdict = "fail"
    if verdict == "pass" and not any(sc["fault"] in INJECTED_FAULTS for sc in runnable):
        verdict = "inconclusive"  # a baseline alone qualifies no recovery (every fault scenario left out)
    items = attention(scenarios, pf)
    docs = [(i.name, i.doc) for i in inputs if i.doc is not None]
    stack_identity = build_stack_identity(scenarios)
    job = scope_mod.jobs_of(docs)
    timeouts = build_timeouts(docs)
    timeouts["scope"] = scope_mod.scope(options.timeouts_for, job, stack_identity.get("digest"))
    summary = {
        "schema": SCHEMA,
        "created_at": created_at,
        "verdict": verdict,
        "headline": interrupted_headline(
            headline(verdict, scenarios, items, pf.get("verdict") not in ("pass", "warn"), baseline_name),
            verdict,
            scenarios,
            options.interrupted,
        ),
        "scenario_counts": {
            v: sum(sc["verdict"] == v for sc in scenarios) for v in (*VERDICTS, NOT_APPLICABLE)
        },
        # the scenarios this stack cannot run, with why (preflight.json's `not_applicable`, through their
        # verify reports): listed apart, never counted as passed or failed
        "not_applicable": not_applicable_of(scenarios),
        "stack": build_stack(preflight),
        "stack_identity": stack_identity,
        "preflight": {"source": preflight.path, "verdict": pf.get("verdict"), "error": preflight.error},
        "resolved": pf.get("resolved") if isinstance(pf.get("resolved"), dict) else {},
        "baseline": baseline_name,
        "attempts": dict(options.attempts),
        "scenarios": scenarios,
        "attention": items,
        "goodput": {
            "formula": goodput_mod.FORMULA,
            "terms": list(goodput_mod.FORMULA_TERMS),
            "assumptions": list(goodput_mod.ASSUMPTIONS),
            "mtbf_source": (
                "given (--mtbf-hours)" if options.mtbf else at_scale.PRIORS[options.prior].source
            ),
            "prior": None if options.mtbf else options.prior,
            "mtbf": [{"hours": p.hours, "gpus": p.gpus} for p in mtbf_points(options)],
            "by_scenario": {sc["name"]: sc["goodput"] for sc in scenarios if sc["goodput"] is not None},
        },
        "legend": {cid: CHECK_LEGEND.get(cid, "") for cid in _check_ids(scenarios)},
        "plots": dict(options.plots),
        "timeouts": timeouts,
        "faults": build_fault_table(scenarios, campaigns),
        "campaigns": campaigns,
        "checkpoints": build_checkpoints(inputs, pf),
    }
    if exit_codes := build_exit_codes(inputs):  # verify reports that record their exits
        summary["exit_codes"] = exit_codes
    if recurring := build_recurring(inputs):  # verify reports that judged a stop (faults that come back)
        summary["recurring"] = recurring
    if agent := build_restart_agent(inputs):  # NVRx's restart agent's verdicts scored (scenarios with it on)
        summary["restart_agent"] = agent
    if job is not None:  # the job shape the runs ran (run.json `job`, through the verify reports)
        summary["job"] = job
    if isinstance(pf.get("storage"), dict):  # the storage floor the preflight measured
        summary["storage"] = pf["storage"]
    if options.scale is not None:  # the config's scale: what faults will cost the run there
        summary["at_scale"] = at_scale_cli.section(summary, options.scale, options.prior)
    return summary


RESUME = (
    "run the same command again to resume (verdicts reached are kept; the interrupted scenario is redone)"
)


def interrupted_headline(line: str, verdict: str, scenarios: list[dict], signal: str | None) -> str:
    """The headline of a workflow interrupted before every verdict: that it was, and what to run. A FAIL
    found before the interrupt stays the headline's news."""
    if not signal:
        return line
    if verdict == "fail":
        return f"{line}; interrupted ({signal}): {RESUME}"
    missing = [sc["name"] for sc in scenarios if sc.get("run_state") == NO_REPORT]
    before = f" before {', '.join(missing)} had a verdict" if missing else ""
    return f"ftqual: INCONCLUSIVE — interrupted ({signal}){before}: {RESUME}"


def _campaigns(inputs: list[ScenarioInput]) -> dict[str, dict]:
    """Each campaign scenario's part (ftqual.report.campaign), by scenario name."""
    built = {i.name: build_campaign(i.doc) for i in inputs if i.doc is not None}
    return {name: entry for name, entry in built.items() if entry is not None}


def _faults_gate(sc: dict, campaign: dict | None) -> None:
    """A campaign passes only when each of its faults does: a fault its checks' per-fault values do not
    judge (a report cut short, edited) leaves the campaign inconclusive, whatever its combined checks say."""
    if campaign is None or sc["verdict"] != "pass" or sc["expect"] != "pass":
        return
    bad = [f for f in campaign["faults"] if f["verdict"] != "pass"]
    if bad:
        first = bad[0]
        sc["verdict"] = sc["raw_verdict"] = worst([f["verdict"] for f in bad])
        sc["reason"] = sc["cause"] = (
            f"campaign fault {first['fault_index']} ({first['fault']} of rank {first['rank']}) is "
            f"{first['verdict']}: {first['detail']}"
        )


def _check_ids(scenarios: list[dict]) -> list[str]:
    ids: list[str] = []
    for sc in scenarios:
        for check in sc["checks"]:
            if check["id"] not in ids:
                ids.append(check["id"])
    return ids


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
