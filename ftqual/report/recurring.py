"""The report's "Faults that come back": who stopped each such job, and what it cost.

Faults that come back: for every scenario whose verify report judged a stop (`recurring_fault_outcome`,
ftqual.verification.checks.recurring: a fault that comes back after every restart, or a curable one injected
more than once), who stopped the job, its exit and what that means to the scheduler, the cycles against the
bound, the cycles and GPU-seconds burned from the first failure to the end, and the check's verdict.
summary.json's `recurring` (pure), its summary.md section and junit.xml's properties; and the restart policy
the measured stops support (`restart_policy`, the snippet of `ftqual recommend-timeouts`)."""

from __future__ import annotations

from collections.abc import Mapping

from ftqual.report.inputs import ScenarioInput

CHECK_ID = "recurring_fault_outcome"  # ftqual.verification.checks.recurring.RECURRING_OUTCOME
STOPPED_BY = {
    "progress_tracker": "NVRx's progress tracker",
    "max_restarts": "max restarts",
    "restart_agent": "NVRx's restart agent",
    "workload": "the workload itself",
    "none": "not stopped (exit 0)",
    None: "unknown",
}
ROLES = {"loop": "comes back every cycle", "curable": "curable control"}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _judged(doc: Mapping) -> dict | None:
    """The report's recurring_fault_outcome where it judged something (skip: it had nothing to judge)."""
    for check in doc.get("checks") or []:
        if isinstance(check, Mapping) and check.get("id") == CHECK_ID and check.get("status") != "skip":
            return dict(check)
    return None


def build_recurring(inputs: list[ScenarioInput]) -> list[dict]:
    """One row per scenario whose verify report judged a stop (others, and older reports: left out)."""
    rows = []
    for item in inputs:
        check = _judged(item.doc or {})
        if check is None:
            continue
        values = check.get("values") if isinstance(check.get("values"), Mapping) else {}
        expected = (item.doc or {}).get("expected")
        expected = expected if isinstance(expected, Mapping) else {}
        rows.append({
            "scenario": item.name,
            "fault": (item.doc or {}).get("fault"),
            "role": values.get("role"),
            "stopped_by": values.get("stopped_by"),
            "stop_exit_code": _int(values.get("stop_exit_code")),
            "scheduler": values.get("scheduler"),
            "cycles": _int(values.get("cycles")),
            "bound_cycles": _int(values.get("bound_cycles")),
            "burned_cycles": _int(values.get("burned_cycles")),
            "burned_wall_s": _num(values.get("burned_wall_s")),
            "burned_gpu_s": _num(values.get("burned_gpu_s")),
            "max_no_progress_cycles": _int(values.get("max_no_progress_cycles")),
            "max_restarts": _int(values.get("max_restarts", expected.get("max_restarts"))),
            "injections": _int(expected.get("injections")),
            "verdict": check.get("status"),
            "detail": check.get("detail"),
        })  # fmt: skip
    return rows


def _cell(value: object) -> str:
    return "—" if value is None else str(value).replace("|", "\\|")


def markdown_lines(rows: list[dict], unit: str = "GPU-s") -> list[str]:
    """The table; `unit` is GPU-s, or rank-s where the ranks held no GPU (ftqual.report.ran)."""
    out = [
        "| scenario | fault | stopped by | exit | scheduler | cycles (bound) | without progress "
        f"| {unit} burned | verdict |",
        "|---|---|---|---:|---|---|---:|---:|---|",
    ]
    for r in rows:
        bound = f" ({r['bound_cycles']})" if r.get("bound_cycles") is not None else ""
        gpu_s = f"{r['burned_gpu_s']:g}" if r.get("burned_gpu_s") is not None else "—"
        fault = f"{_cell(r.get('fault'))} ({ROLES.get(str(r.get('role')), _cell(r.get('role')))})"
        stopper = STOPPED_BY.get(r.get("stopped_by"), _cell(r.get("stopped_by")))
        cells = [
            _cell(r["scenario"]),
            fault,
            stopper,
            _cell(r.get("stop_exit_code")),
            _cell(r.get("scheduler")),
            f"{_cell(r.get('cycles'))}{bound}",
            _cell(r.get("burned_cycles")),
            gpu_s,
            _cell(r.get("verdict")),
        ]
        out.append("| " + " | ".join(cells) + " |")
    out += [
        "",
        "Bound: the configured no-progress cycles (`max_no_progress_cycles`, else NVRx's 3), or "
        f"`max_restarts` where lower, plus the first cycle. {unit} burned: world size x the wall time from "
        "the first failure to the end. A fault that comes back passes when the job stopped non-zero within "
        "the bound; a curable control fails when it was stopped although each cycle made progress.",
    ]
    return out


def junit_properties(row: Mapping) -> list[tuple[str, str]]:
    """(name, value) of a scenario's stop for its junit.xml suite."""
    keys = ("stopped_by", "stop_exit_code", "scheduler", "cycles", "bound_cycles", "burned_cycles")
    out = [(f"recurring.{key}", "" if row.get(key) is None else str(row.get(key))) for key in keys]
    gpu_s = row.get("burned_gpu_s")
    out.append(("recurring.burned_gpu_s", "" if gpu_s is None else f"{gpu_s:g}"))
    return out


def restart_policy(rows: object, agent_rows: object = None) -> list[str]:
    """The restart policy the measured stops support, as comment lines for the recommendation's snippet: a
    `max_no_progress_cycles` where the loops were stopped by NVRx's progress tracker within the bound, a
    `max_restarts` where a curable control finished, and a line on the restart agent from its scorecard
    (summary.json `restart_agent`: `agent_line`); nothing where no scenario measured them."""
    if not isinstance(rows, list):
        return []
    good = [r for r in rows if isinstance(r, Mapping) and r.get("verdict") == "pass"]
    loops = [r for r in good if r.get("role") == "loop" and r.get("stopped_by") == "progress_tracker"]
    curable = [r for r in good if r.get("role") == "curable" and r.get("stopped_by") == "none"]
    lines: list[str] = []
    cycles = sorted({n for r in loops if (n := _int(r.get("max_no_progress_cycles"))) is not None})
    if len(cycles) == 1:
        costs = ", ".join(
            f"{r['scenario']} {r.get('cycles')} cycles, "
            + (f"{r['burned_gpu_s']:g} GPU-s" if r.get("burned_gpu_s") is not None else "GPU-s unknown")
            for r in loops
        )
        lines.append(
            f"#   max_no_progress_cycles: {cycles[0]} (--ft-max-no-progress-cycles={cycles[0]}): the faults "
            f"that come back were stopped by NVRx's progress tracker after {cycles[0]} cycles without "
            f"progress ({costs}, from the first failure to the stop)"
        )
    needed = [(r, c - 1) for r in curable if (c := _int(r.get("cycles"))) is not None]
    under = sorted({m for r, _ in needed if (m := _int(r.get("max_restarts"))) is not None})
    if needed and len(under) == 1:
        most = max(n for _, n in needed)
        said = ", ".join(f"{r['scenario']} needed {n}" for r, n in needed)
        lines.append(
            f"#   max_restarts: {under[0]} (--max-restarts={under[0]}): the curable control(s) finished "
            f"under it ({said} restart(s), each after a new checkpoint); keep it above the faults a job "
            f"meets between checkpoints, at least {most}"
        )
    if not lines:
        return []
    return [
        "# Restart policy measured (for the job's own ft_launcher flags; the rerun above keeps its own):",
        *lines,
        agent_line(agent_rows),
    ]


def agent_line(agent_rows: object) -> str:
    """The snippet's line on the restart agent's stop action: `stop` only where its scorecard shows a STOP on
    every fault that came back and never a wrong STOP, with at least one curable fault scored; `log`
    otherwise, saying what it got wrong."""
    rows = [r for r in agent_rows if isinstance(r, Mapping)] if isinstance(agent_rows, list) else []
    loops = [r for r in rows if r.get("truth") == "STOP"]
    curable = [r for r in rows if r.get("truth") == "RESTART"]
    if not loops or not curable:
        scored = "faults that come back" if not loops else "curable faults"
        return (
            "#   restart agent: keep its stop action `log` (NVRX_RESTART_AGENT=log): its decisions were not "
            f"scored on {scored} here"
        )
    killed = [str(r["scenario"]) for r in rows if (_int(r.get("wrong_stop")) or 0) > 0]
    missed = [r for r in loops if not (_int(r.get("right_stop")) or 0)]
    if killed:
        return (
            "#   restart agent: keep its stop action `log` (NVRX_RESTART_AGENT=log): it said STOP on a "
            f"curable fault ({', '.join(killed)}), which its stop action would have killed"
        )
    if missed:
        said = ", ".join(f"{r['scenario']}{_said(r)}" for r in missed)
        return (
            f"#   restart agent: keep its stop action `log` (NVRX_RESTART_AGENT=log): it said STOP on "
            f"{len(loops) - len(missed)} of {len(loops)} faults that come back ({said}); NVRx's progress "
            "tracker stops those"
        )
    return (
        "#   restart agent: its stop action may stop jobs (NVRX_RESTART_AGENT=stop): it said STOP on each "
        f"of the {len(loops)} faults that come back and never on the {len(curable)} curable one(s) scored"
    )


def _said(row: Mapping) -> str:
    counts = [(row.get(key), word) for key, word in (("wrong_restart", "RESTART"), ("unknown", "UNKNOWN"))]
    said = [f"{n} x {word}" for n, word in counts if isinstance(n, int) and n > 0]
    return ": " + ", ".join(said) if said else ": no verdict"
