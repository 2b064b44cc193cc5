"""A campaign's report, from its verify report alone (whose `campaign` section ftqual.verification.schema has
checked): one timeline (every fault, its detection, the restart and the resume on one time axis, seconds
from the first fault), the per-cycle table, each fault's verdict, goodput measured next to the Young/Daly
projection and the accumulation verdict, with what the faults left in /dev/shm (`shm_leaks`: per host the
entries and bytes per fault, the families and the dead ranks that made them, the faults until full against
the horizon; a finding where it fits, the reason of a FAIL where it does not).

`campaign_markdown` renders verify.md's part; `build_campaign` makes the summary's entry (summary.json
`campaigns.<scenario>`), `summary_markdown` renders it in summary.md and `fault_cases` gives junit.xml one
testcase per fault.
"""

from __future__ import annotations

from datetime import datetime

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
ACCUMULATION = "cycles_do_not_accumulate"
STATUSES = ("pass", "fail", "inconclusive", "skip")


def _t(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _s(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def human_bytes(value: object) -> str:
    """1536 -> "1.5 KiB"; "-" for what is not a number."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    size, unit = float(value), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{size:.0f} B" if unit == "B" else f"{size:.1f} {unit}"


def campaign_markdown(report: dict) -> str:
    section = report.get("campaign")
    if not isinstance(section, dict):
        return ""
    rows = section.get("cycles") or []
    times = [_t(r.get("injected_at")) for r in rows]
    zero = min((t for t in times if t), default=None)
    out = [
        f"## Campaign {report.get('run_id')}: seed {section.get('seed')}, {len(rows)} of "
        f"{section.get('planned')} faults, MTTI {section.get('mtti_iterations')} iterations",
        "",
        "Timeline (s from the first fault): fault -> detected -> first step after the resume",
        "",
        "| # | fault | rank | cycle | armed by ckpt | injected | detected (by) | first step | restored |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r, t in zip(rows, times, strict=False):
        at = (t - zero).total_seconds() if t and zero else None
        det = at + r["detection_s"] if at is not None and r.get("detection_s") is not None else None
        step = r.get("failure_to_first_step_s")
        first = at + step if at is not None and step is not None else None
        out.append(
            f"| {r['fault_index']} | {r['fault']} | {r['rank']} | {r['cycle']} | "
            f"{r['checkpoint_iteration']} | "
            f"{_s(at)} | {_s(det)} ({r.get('detected_by') or '-'}) | {_s(first)} | "
            f"{r.get('restored_iteration')} |"
        )
    out += [
        "",
        "Per cycle: times in seconds; leftovers seen at the start of the replacement cycle",
        "",
        "| # | fault | detection | restart | load | recovery | failure to first step | lost iters | alive | "
        "/dev/shm | /dev/shm bytes | /dev/shm free | agent fds |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['fault_index']} | {r['fault']} | {_s(r['detection_s'])} | {_s(r['restart_s'])} | "
            f"{_s(r['checkpoint_load_s'])} | {_s(r['recovery_s'])} | {_s(r['failure_to_first_step_s'])} | "
            f"{r['lost_iterations']} | {r['alive_at_start']} | {r['shm_segments']} | "
            f"{human_bytes(r.get('shm_bytes'))} | {human_bytes(r.get('shm_free_bytes'))} | "
            f"{r['agent_open_fds']} |"
        )
    leaks = shm_leaks(_accumulation_values(report))
    if leaks:
        out += ["", *leak_lines(leaks)]
    good = section.get("goodput") or {}
    if good.get("goodput_measured") is not None:
        parts = ", ".join(f"{k[:-2].replace('_', ' ')} {_s(v)} s" for k, v in good["gap_parts_s"].items())
        projected = (good.get("projected") or {}).get("goodput")
        out += [
            "",
            f"Goodput measured {good['goodput_measured']:.1%} ({_s(good['productive_s'])} s of training in "
            f"{_s(good['wall_s'])} s); Young/Daly projected {projected:.1%} at the campaign's MTBF of "
            f"{_s(good['mtbf_s'])} s. The gap: {parts}.",
        ]
    return "\n".join(out) + "\n"


def _accumulation_values(doc: dict) -> dict:
    found = next(
        (c for c in doc.get("checks") or [] if isinstance(c, dict) and c.get("id") == ACCUMULATION), None
    )
    values = found.get("values") if isinstance(found, dict) else None
    return values if isinstance(values, dict) else {}


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def shm_leaks(values: dict) -> list[dict]:
    """The accumulation check's /dev/shm projection (`values.shm.hosts`, ftqual.verification.campaign.shm),
    one entry per
    host whose /dev/shm grew: what it leaked per fault, its families, and the faults until full against the
    horizon. `judged`: "fits" (a finding), "full" (within the horizon: the FAIL), "unknown" (sizes or room
    not recorded)."""
    shm = values.get("shm") if isinstance(values.get("shm"), dict) else {}
    out = []
    for host in shm.get("hosts") or []:
        if not isinstance(host, dict) or not host.get("leaks"):
            continue
        within = host.get("within_horizon")
        families = [f for f in host.get("families") or [] if isinstance(f, dict)]
        out.append(
            {
                "host": str(host.get("host")),
                "from_cycle": host.get("from_cycle"),
                "to_cycle": host.get("to_cycle"),
                "entries_per_fault": _num(host.get("entries_per_fault")),
                "bytes_per_fault": _num(host.get("bytes_per_fault")),
                "free_bytes": _num(host.get("free_bytes")),
                "faults_until_full": _num(host.get("faults_until_full")),
                "full_by": host.get("full_by"),
                "horizon_faults": _num(host.get("horizon_faults")),
                "judged": "full" if within is True else "fits" if within is False else "unknown",
                "families": [
                    {
                        "family": str(f.get("family")),
                        "entries": f.get("entries"),
                        "allocated_bytes": f.get("allocated_bytes"),
                        "ranks": list(f.get("ranks") or []),
                        "pids": f.get("pids"),
                    }
                    for f in families
                ],
            }
        )
    return out


LEAK_JUDGED = {
    "full": "❌ FAIL: within",
    "fits": "a finding, not a failure: beyond",
    "unknown": "⚠️ cannot be judged against",
}


def _family(f: dict) -> str:
    said = f"{f['family']} {f['entries']}"
    if f["allocated_bytes"] is not None:
        said += f" ({human_bytes(f['allocated_bytes'])})"
    if f["ranks"]:
        said += f", from {f['pids']} dead process(es) of rank {', '.join(map(str, f['ranks']))}"
    return said


def leak_lines(leaks: list[dict]) -> list[str]:
    """One markdown bullet per host whose /dev/shm grew."""
    out = []
    for leak in leaks:
        fams = "; ".join(_family(f) for f in leak["families"][:6])
        per = f"{leak['entries_per_fault']:g} entries" if leak["entries_per_fault"] is not None else "entries"
        if leak["bytes_per_fault"] is not None:
            per += f" and {human_bytes(leak['bytes_per_fault'])}"
        horizon = f"{leak['horizon_faults']:,.0f}" if leak["horizon_faults"] is not None else "?"
        if leak["faults_until_full"] is not None:
            until = f"faults until full {leak['faults_until_full']:,.0f} (by {leak['full_by']})"
        elif leak["judged"] == "fits":
            until = "never full at this rate"
        else:
            until = "bytes or room not recorded: faults until full unknown"
        where = f"{leak['host']} (cycles {leak['from_cycle']} to {leak['to_cycle']})"
        out.append(
            f"- /dev/shm leak on {where}: {per} per fault ({fams}); {until}; "
            f"{LEAK_JUDGED[leak['judged']]} the horizon of {horizon} faults"
        )
    return out


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
    goodput measured vs projected with the gap by parts, the accumulation and plan verdicts."""
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
            f"{_s(good['wall_s'])} s), Young/Daly projected **{_pct(good['projected'])}** at the campaign's "
            f"MTBF of {_s(good['mtbf_s'])} s (gap {_pct(good['gap'])}). Where the wall time went besides "
            f"training: {parts}."
        )
    if plot:
        out += ["", f"![campaign timeline of {name}]({plot})"]
    return out


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
