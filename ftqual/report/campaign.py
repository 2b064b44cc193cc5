"""A campaign's report from its verify report: timeline, per-cycle table, goodput, junit cases.

A campaign's report, from its verify report alone (whose `campaign` section ftqual.verification.schema has
checked): one timeline (every fault, its detection, the restart and the resume on one time axis, seconds
from the first fault), the per-cycle table, each fault's verdict, goodput measured next to the check of the
goodput model (ftqual.report.at_scale, fed the campaign's own means) and the accumulation verdict, with what
the faults left in /dev/shm (`shm_leaks`: per host the
entries and bytes per fault, the families and the dead ranks that made them, the faults until full against
the horizon; a finding where it fits, the reason of a FAIL where it does not).

`build_campaign` makes the summary's entry (summary.json
`campaigns.<scenario>`), `summary_markdown` renders it in summary.md and `fault_cases` gives junit.xml one
testcase per fault. The verify report's own campaign text (`campaign_markdown`, `shm_leaks`, `leak_lines`,
`human_bytes`) is ftqual.verification.campaign.text's, reused here.
"""

from __future__ import annotations

from datetime import datetime

from ftqual.report.at_scale import campaign_check
from ftqual.verification.campaign.text import (
    ACCUMULATION,
    _accumulation_values,
    _s,
    _t,
    human_bytes,
    leak_lines,
    shm_leaks,
)
from ftqual.verification.verdict import worst

# The checks ftqual.verification.checks.campaign runs per fault (each carries `values.faults`) and its
# whole-campaign
# ones; named here so that reading a report does not import the verifier (a test ties the two).
PER_FAULT_IDS = (
    "checkpoint_before_failure",
    "failure_detected_and_restarted",
    "resumed_from_checkpoint",
    "progress_after_resume",
    "replay_consistency",
)
PLAN_FOLLOWED = "campaign_plan_followed"
STATUSES = ("pass", "fail", "inconclusive", "skip")


def _check(doc: dict, cid: str) -> dict:
    found = next((c for c in doc.get("checks") or [] if isinstance(c, dict) and c.get("id") == cid), None)
    if found is None:
        return {"status": "inconclusive", "detail": f"the report has no {cid} check"}
    status = found.get("status") if found.get("status") in STATUSES else "inconclusive"
    return {"status": status, "detail": str(found.get("detail") or "")}


def _per_fault(doc: dict) -> dict[int, dict[str, dict]]:
    """fault index -> check id -> {status, detail}, from the per-fault checks' `values.faults`."""
    out: dict[int, dict[str, dict]] = {}
    for check in doc.get("checks") or []:
        if not isinstance(check, dict) or check.get("id") not in PER_FAULT_IDS:
            continue
        values = check.get("values") if isinstance(check.get("values"), dict) else {}
        faults = values.get("faults") if isinstance(values.get("faults"), list) else []
        for item in faults:
            index = item.get("fault_index") if isinstance(item, dict) else None
            if isinstance(index, int) and not isinstance(index, bool):
                status = item.get("status") if item.get("status") in STATUSES else "inconclusive"
                out.setdefault(index, {})[check["id"]] = {"status": status, "detail": str(item.get("detail"))}
    return out


def _fault_verdict(judged: dict[str, dict]) -> tuple[str, str]:
    """The worst of a fault's per-fault checks (a check that did not judge it: inconclusive) and why."""
    unjudged = {"status": "inconclusive", "detail": "not judged"}
    results = {cid: judged.get(cid, unjudged) for cid in PER_FAULT_IDS}
    verdict = worst([r["status"] if r["status"] != "skip" else "pass" for r in results.values()])
    bad = [(cid, r) for cid, r in results.items() if r["status"] == verdict != "pass"]
    detail = f"{bad[0][0]}: {bad[0][1]['detail']}" if bad else "every per-fault check passes"
    return verdict, detail


def _since(zero: datetime | None, value: object) -> float | None:
    t = _t(value)
    return round((t - zero).total_seconds(), 3) if t and zero else None


def _plus(at: float | None, seconds: object) -> float | None:
    ok = isinstance(seconds, int | float) and not isinstance(seconds, bool)
    return round(at + seconds, 3) if at is not None and ok else None


def _timeline(rows: list[dict]) -> list[dict]:
    """Per fault: injected, detected, restarted (the replacement cycle's start), resumed (its first step),
    in seconds from the first fault."""
    zero = min((t for t in (_t(r.get("injected_at")) for r in rows) if t), default=None)
    out = []
    for r in rows:
        at = _since(zero, r.get("injected_at"))
        out.append(
            {
                "fault_index": r["fault_index"],
                "fault": r.get("fault"),
                "rank": r.get("rank"),
                "injected_s": at,
                "detected_s": _plus(at, r.get("detection_s")),
                "detected_by": r.get("detected_by"),
                "restarted_s": _since(zero, r.get("restarted_at")),
                "resumed_s": _plus(at, r.get("failure_to_first_step_s")),
                "restored_iteration": r.get("restored_iteration"),
            }
        )
    return out


def _goodput(good: dict) -> dict:
    measured = good.get("goodput_measured")
    projected = (good.get("projected") or {}).get("goodput")
    both = measured is not None and projected is not None
    return {
        "measured": measured,
        "projected": projected,
        "gap": round(projected - measured, 4) if both else None,
        "wall_s": good.get("wall_s"),
        "productive_s": good.get("productive_s"),
        "mtbf_s": good.get("mtbf_s"),
        "gap_parts_s": dict(good.get("gap_parts_s") or {}),
        "projection": dict(good.get("projected") or {}),
        "why": good.get("why") if measured is None else None,
    }


def build_campaign(doc: dict) -> dict | None:
    """The summary's entry for a campaign scenario's verify report; None for a report without a campaign."""
    section = doc.get("campaign")
    if not isinstance(section, dict):
        return None
    rows = list(section.get("cycles") or [])
    by_index = {r["fault_index"]: r for r in rows}
    judged = _per_fault(doc)
    plan = list(section.get("plan") or [])
    indices = sorted({*by_index, *(e["index"] for e in plan)})
    planned = {e["index"]: e for e in plan}
    faults = []
    for k in indices:
        row, entry = by_index.get(k), planned.get(k, {})
        if row is None:
            verdict, detail = "fail", "planned, never injected"
        else:
            verdict, detail = _fault_verdict(judged.get(k, {}))
        source = row or entry
        faults.append(
            {
                "fault_index": k,
                "fault": source.get("fault"),
                "rank": source.get("rank"),
                "placement": source.get("placement"),
                "arm_iteration": entry.get("arm_iteration"),
                "cycle": (row or {}).get("cycle"),
                "checkpoint_iteration": (row or {}).get("checkpoint_iteration"),
                "verdict": verdict,
                "detail": detail,
                "checks": {cid: r["status"] for cid, r in judged.get(k, {}).items()},
            }
        )
    accumulation = _check(doc, ACCUMULATION)
    trends = next(
        (
            (c.get("values") or {}).get("trends")
            for c in doc.get("checks") or []
            if isinstance(c, dict) and c.get("id") == ACCUMULATION and isinstance(c.get("values"), dict)
        ),
        None,
    )
    return {
        "run_id": doc.get("run_id"),
        "seed": section.get("seed"),
        "planned": section.get("planned"),
        "injected": len(rows),
        "mtti_iterations": section.get("mtti_iterations"),
        "plan": plan,
        "plan_followed": _check(doc, PLAN_FOLLOWED),
        "faults": faults,
        "cycles": rows,
        "timeline": _timeline(rows),
        "goodput": _goodput(section.get("goodput") if isinstance(section.get("goodput"), dict) else {}),
        "accumulation": {**accumulation, "trends": trends if isinstance(trends, dict) else {}},
        "shm_leaks": shm_leaks(_accumulation_values(doc)),
        "trend_rule": section.get("trend_rule") if isinstance(section.get("trend_rule"), dict) else {},
    }


SECONDS = ("detection_s", "restart_s", "checkpoint_load_s", "recovery_s", "failure_to_first_step_s")
COUNTS = ("lost_iterations", "alive_at_start", "shm_segments")
BYTES = ("shm_bytes", "shm_free_bytes")
MARK = {"pass": "✅", "fail": "❌ FAIL", "inconclusive": "⚠️ inconclusive", "skip": "⏭ skip"}


def _pct(value: object) -> str:
    return f"{value:.1%}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def summary_markdown(name: str, entry: dict, plot: str | None = None) -> list[str]:
    """summary.md's part for one campaign: plan, timeline with each fault's verdict, per-cycle table,
    goodput measured with the gap by parts and the goodput model's check, the accumulation and plan
    verdicts."""
    out = [
        f"### {name}: seed {entry['seed']}, {entry['injected']} of {entry['planned']} faults injected, "
        f"MTTI {entry['mtti_iterations']} iterations (run `{entry['run_id']}`)",
        "",
        f"- plan followed (`{PLAN_FOLLOWED}`): {MARK[entry['plan_followed']['status']]} "
        f"{entry['plan_followed']['detail']}",
        f"- cycles do not accumulate (`{ACCUMULATION}`): {MARK[entry['accumulation']['status']]} "
        f"{entry['accumulation']['detail']}",
        *leak_lines(entry.get("shm_leaks") or []),
        "",
        "Timeline, seconds from the first fault: injected -> detected -> restarted (new cycle) -> resumed "
        "(first step after the restore)",
        "",
        "| # | fault | rank | armed at | ckpt | injected | detected (by) | restarted | resumed | restored | "
        "verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    times = {t["fault_index"]: t for t in entry["timeline"]}
    for f in entry["faults"]:
        t = times.get(f["fault_index"], {})
        verdict = MARK[f["verdict"]] + ("" if f["verdict"] == "pass" else f" {f['detail']}")
        out.append(
            f"| {f['fault_index']} | {f['fault']} | {f['rank']} | {f['arm_iteration']} | "
            f"{f['checkpoint_iteration']} | {_s(t.get('injected_s'))} | {_s(t.get('detected_s'))} "
            f"({t.get('detected_by') or '-'}) | {_s(t.get('restarted_s'))} | {_s(t.get('resumed_s'))} | "
            f"{t.get('restored_iteration')} | {verdict.replace('|', '/')} |"
        )
    out += [
        "",
        "Per cycle (seconds; leftovers as seen at the start of the replacement cycle):",
        "",
        "| # | fault | detection | restart | load | recovery | failure to first step | lost iters | alive | "
        "/dev/shm | /dev/shm bytes | /dev/shm free | agent fds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in entry["cycles"]:
        out.append(
            f"| {r['fault_index']} | {r.get('fault')} | "
            + " | ".join(_s(r.get(k)) for k in SECONDS)
            + " | "
            + " | ".join(str(r.get(k)) for k in COUNTS)
            + " | "
            + " | ".join(human_bytes(r.get(k)) for k in BYTES)
            + f" | {r.get('agent_open_fds')} |"
        )
    good = entry["goodput"]
    out.append("")
    if good["measured"] is None:
        out.append(f"Goodput not measured: {good.get('why') or 'no timed iterations'}.")
    else:
        parts = ", ".join(f"{k[:-2].replace('_', ' ')} {_s(v)} s" for k, v in good["gap_parts_s"].items())
        out.append(
            f"Goodput measured **{_pct(good['measured'])}** ({_s(good['productive_s'])} s of training in "
            f"{_s(good['wall_s'])} s). Where the wall time went besides training: {parts}."
        )
        out += model_check_lines(good)
    if plot:
        out += ["", f"![campaign timeline of {name}]({plot})"]
    return out


def model_check_lines(good: dict) -> list[str]:
    """The goodput model (ftqual.report.at_scale, the report's one) fed this campaign's own means, against
    what it measured: a check of the model, not a second projection."""
    check = campaign_check(good)
    if check is None:
        return []
    mark = "within" if check.within else "**outside**"
    return [
        "",
        f"Check of the goodput model (docs/at-scale.md) on this campaign's own means (MTBF "
        f"{_s(good['mtbf_s'])} s): modelled {_pct(check.modelled)} against measured {_pct(check.measured)}, "
        f"{mark} ±{check.tolerance * 100:g} points.",
    ]


def fault_cases(entry: dict) -> list[tuple[str, str, str]]:
    """junit.xml's testcases of a campaign: (name, status, detail) per fault, named by its kind and rank."""
    return [
        (
            f"fault_{f['fault_index']}_{f['fault']}_rank{f['rank']}",
            f["verdict"],
            f"fault {f['fault_index']} ({f['fault']} of rank {f['rank']}, cycle {f['cycle']}, armed at "
            f"iteration {f['arm_iteration']}): {f['detail']}",
        )
        for f in entry["faults"]
    ]
