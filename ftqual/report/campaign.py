"""A campaign's report in markdown, from its verify report alone: one timeline (every fault, its detection,
the restart and the resume on one time axis, seconds from cycle 0's start) and the per-cycle table, then
goodput measured next to the Young/Daly projection."""

from __future__ import annotations

from datetime import datetime


def _t(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _s(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


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
        "/dev/shm | agent fds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['fault_index']} | {r['fault']} | {_s(r['detection_s'])} | {_s(r['restart_s'])} | "
            f"{_s(r['checkpoint_load_s'])} | {_s(r['recovery_s'])} | {_s(r['failure_to_first_step_s'])} | "
            f"{r['lost_iterations']} | {r['alive_at_start']} | {r['shm_segments']} | {r['agent_open_fds']} |"
        )
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
