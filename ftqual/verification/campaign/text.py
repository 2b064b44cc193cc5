"""One verify report's campaign section as text, for `ftqual verify`'s terminal report and the summary.

`campaign_markdown` renders the campaign part of a verify report (the timeline from the first fault, the
per-cycle table, the /dev/shm leaks, goodput measured next to the Young/Daly projection); `shm_leaks` reads
the accumulation check's /dev/shm projection (ftqual.verification.campaign.shm) into one entry per host and
`leak_lines` says each in one bullet; `human_bytes` is how every byte count is shown. The report
(ftqual.report.campaign) reuses them: they live here, below it, because the verifier renders its own report.
"""

from __future__ import annotations

from datetime import datetime

ACCUMULATION = "cycles_do_not_accumulate"


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
