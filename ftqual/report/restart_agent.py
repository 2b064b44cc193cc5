"""The restart agent's scorecard: its verdicts against the fault's truth, and what the wrong ones cost.

The restart agent's scorecard: for every scenario run with NVRx's restart agent on (verify.json
`restart_agent`, ftqual.verification.evidence.restart_agent), its verdict on each failed cycle against the
truth of the fault. A transient fault (the catalog's kill, exception, segfault ..., a node loss, a storage
fault, a campaign's: progress is kept, a restart cures it) wants RESTART; a recurring fault (family
`recurring`: it comes back in every cycle) wants STOP. So each verdict is a right STOP, a right RESTART, a
wrong STOP (a curable job killed) or a wrong RESTART (a loop paid for). An UNKNOWN (the service found no
failure signature in the cycle's log) is counted apart: the launcher restarts on it, so on a fault that
comes back it pays for the loop's next cycle as a wrong RESTART does (its cost is its own figure), and on a
transient one it does what is right by default. A failed cycle the agent never answered (deferred, or the
job ended first) is counted apart too, neither right nor wrong.

What a wrong verdict cost, in GPU-seconds (world size x wall time, from the cycles' records):
- a wrong STOP on cycle N: the cycles after N, which the stop cut short (stop-action no-restart) or, with
  `log`, would have: their work is thrown away with the job;
- a wrong RESTART (or an UNKNOWN on a loop) on cycle N: cycle N+1, the loop's next turn it let happen.
summary.json's `restart_agent` (pure) and its summary.md section."""

from __future__ import annotations

from ftqual.contract import family_of
from ftqual.report.inputs import ScenarioInput

OUTCOMES = ("right_stop", "right_restart", "wrong_stop", "wrong_restart")


def truth_of(fault: str) -> str | None:
    """The right verdict for a fault's failures (None: a baseline has no failure to judge)."""
    family = family_of(fault)
    if family == "none":
        return None
    return "STOP" if family == "recurring" else "RESTART"


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def score_scenario(name: str, fault: str, agent: dict) -> dict:
    truth = truth_of(fault)
    world = agent.get("world_size") if isinstance(agent.get("world_size"), int) else None
    walls = {
        c["cycle"]: _num(c.get("wall_s"))
        for c in agent.get("cycles") or []
        if isinstance(c, dict) and isinstance(c.get("cycle"), int)
    }
    counts = dict.fromkeys(OUTCOMES, 0)
    cost = dict.fromkeys(("wrong_stop", "wrong_restart"), 0.0)
    unknown_cost = False
    decisions = []
    undecided = 0
    unknown = 0
    unknown_gpu_s = 0.0

    def next_cycle_gpu_s(n: int) -> float | None:
        nxt = walls[n + 1] if n + 1 in walls else 0.0  # no next cycle: the loop ended there
        return None if world is None or nxt is None else world * nxt

    for row in agent.get("failed_cycles") or []:
        if not isinstance(row, dict) or not isinstance(row.get("cycle"), int):
            continue
        n, decision = row["cycle"], row.get("decision")
        if decision == "UNKNOWN" and truth is not None:
            unknown += 1
            gpu_s = next_cycle_gpu_s(n) if truth == "STOP" else 0.0
            if gpu_s is None:
                unknown_cost = True
            else:
                unknown_gpu_s += gpu_s
            decisions.append(
                {
                    "cycle": n,
                    "decision": decision,
                    "basis": row.get("basis"),
                    "after_cycle_end_s": _num(row.get("after_cycle_end_s")),
                    "outcome": "unknown",
                    "gpu_s": None if gpu_s is None else round(gpu_s, 1),
                }
            )
            continue
        if decision not in ("STOP", "RESTART") or truth is None:
            undecided += 1
            decisions.append({"cycle": n, "decision": None, "outcome": "no verdict", "gpu_s": None})
            continue
        outcome = f"{'right' if decision == truth else 'wrong'}_{decision.lower()}"
        counts[outcome] += 1
        gpu_s = None
        if outcome == "wrong_stop":
            cut = [w for c, w in walls.items() if c > n]
            gpu_s = None if world is None or None in cut else world * sum(cut)  # type: ignore[operator]
        elif outcome == "wrong_restart":
            gpu_s = next_cycle_gpu_s(n)
        if outcome in cost:
            if gpu_s is None:
                unknown_cost = True
            else:
                cost[outcome] += gpu_s
        decisions.append(
            {
                "cycle": n,
                "decision": decision,
                "basis": row.get("basis"),
                "after_cycle_end_s": _num(row.get("after_cycle_end_s")),
                "outcome": outcome,
                "gpu_s": None if gpu_s is None else round(gpu_s, 1),
            }
        )
    return {
        "scenario": name,
        "fault": fault,
        "mode": agent.get("mode"),
        "truth": truth,
        **counts,
        "unknown": unknown,
        "no_verdict": undecided,
        "wrong_stop_gpu_s": round(cost["wrong_stop"], 1),
        "wrong_restart_gpu_s": round(cost["wrong_restart"], 1),
        "unknown_gpu_s": round(unknown_gpu_s, 1),
        "cost_incomplete": unknown_cost,
        "enforced_stop": agent.get("enforced_stop_line") is not None,
        "decisions": decisions,
    }


def build_restart_agent(inputs: list[ScenarioInput]) -> list[dict]:
    """One row per scenario whose verify report carries the agent's record (the agent was on)."""
    rows = []
    for item in inputs:
        doc = item.doc or {}
        agent = doc.get("restart_agent")
        if not isinstance(agent, dict) or agent.get("mode") not in ("log", "stop"):
            continue
        rows.append(score_scenario(item.name, str(doc.get("fault")), agent))
    return rows


def markdown_lines(rows: list[dict], unit: str = "GPU-s") -> list[str]:
    """The scorecard; `unit` is GPU-s, or rank-s where the ranks held no GPU (ftqual.report.ran)."""
    out = [
        "| scenario | fault | mode | right | right STOP | right RESTART | wrong STOP | wrong RESTART | "
        f"UNKNOWN | no verdict | cost of the wrong ones ({unit}) | cost of the UNKNOWNs ({unit}) |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        spent = r["wrong_stop_gpu_s"] + r["wrong_restart_gpu_s"]
        cost = f"{spent:.1f}" + (" (incomplete)" if r["cost_incomplete"] else "")
        unknown = r.get("unknown", 0)
        out.append(
            f"| {r['scenario']} | {r['fault']} | {r['mode']} | {r['truth'] or '—'} | {r['right_stop']} | "
            f"{r['right_restart']} | {r['wrong_stop']} | {r['wrong_restart']} | {unknown} | "
            f"{r['no_verdict']} | {cost} | {r.get('unknown_gpu_s', 0.0):.1f} |"
        )
    out += [
        "",
        "right: the verdict a fault wants (a transient fault RESTART, a recurring one STOP). A wrong STOP "
        "kills a curable job (cost: the cycles after it); a wrong RESTART pays for the loop's next cycle. "
        "UNKNOWN: the agent found no failure signature in the cycle's log and the launcher restarted, which "
        "on a fault that comes back pays for the loop's next cycle too. no verdict: the agent had not "
        "answered (it takes about 15 s after a cycle ends) or deferred it.",
    ]
    return out
