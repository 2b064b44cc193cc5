"""The exit-code table: every scenario's final exits and what each means for a scheduler.

The exit-code table: for every scenario, the launcher's and the ranks' final exit codes (verify
reports' metrics `launcher_exit_code`, `rank_exit_codes`, `silent_end`: ftqual.verification.metrics) and what
each means for a scheduler (evidence.endings.EXIT_MEANINGS); an exit 0 that did not reach the last iteration
is a silent end, and one after a restart from scratch, or after a replacement loaded a damaged or incomplete
checkpoint or saves failed unseen (a scenario's outcome check, its `values.outcome`), says so.
summary.json's `exit_codes` (pure) and its summary.md section."""

from __future__ import annotations

from ftqual.report.inputs import ScenarioInput
from ftqual.verification.evidence.endings import SILENT_END_MEANING, exit_meaning
from ftqual.verification.verdict import SCENARIO_OUTCOME_CHECKS


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# A scenario's outcome check (SCENARIO_OUTCOME_CHECKS) found an ending that an
# exit 0 hides: what the row adds after "finished", and the requeue it calls for.
HIDDEN_BY_EXIT_0 = {
    "loaded_damaged": (
        "a replacement loaded the damaged checkpoint",
        "no: investigate, it trained on from it",
    ),
    "loaded_incomplete": (
        "a replacement loaded an incomplete save",
        "no: investigate, it trained on from it",
    ),
    "saves_failed_silently": ("saves failed unseen", "no: investigate, the checkpoints are not there"),
}


def _hidden_outcome(doc: dict) -> str | None:
    """The outcome an outcome check of `doc` (a verify report) found that HIDDEN_BY_EXIT_0 names, or None."""
    for check in doc.get("checks") or []:
        if not isinstance(check, dict) or check.get("id") not in SCENARIO_OUTCOME_CHECKS:
            continue
        values = check.get("values") if isinstance(check.get("values"), dict) else {}
        if values.get("outcome") in HIDDEN_BY_EXIT_0:
            return values["outcome"]
    return None


def _rank_meaning(code: int, silent: bool) -> str:
    # a rank's exit 0 in a silent end is Megatron's `sys.exit()` before the last iteration, not a finish
    return "exited before the last iteration" if silent and code == 0 else exit_meaning(code)[0]


def build_exit_codes(inputs: list[ScenarioInput]) -> list[dict]:
    """One row per scenario whose verify report records its launcher's exit (older reports: left out)."""
    rows = []
    for item in inputs:
        metrics = (item.doc or {}).get("metrics")
        if not isinstance(metrics, dict) or "launcher_exit_code" not in metrics:
            continue
        code = _int(metrics.get("launcher_exit_code"))
        ranks = [c for c in metrics.get("rank_exit_codes") or [] if _int(c) is not None]
        silent = metrics.get("silent_end") if isinstance(metrics.get("silent_end"), dict) else None
        meaning, requeue = SILENT_END_MEANING if silent is not None and code == 0 else exit_meaning(code)
        if silent is not None and code == 0:
            meaning = f"{meaning} (iteration {silent.get('iteration')} of {silent.get('train_iters')})"
        scratch = metrics.get("scratch_restarts")
        if isinstance(scratch, list) and scratch and isinstance(scratch[0], dict):
            # an exit 0 after training again from iteration 0 finished a different run than the one asked for
            first = scratch[0]
            meaning = f"{meaning}, but cycle {first.get('cycle')} restarted from scratch"
            requeue = "no: investigate, the checkpoint was not loaded" if code == 0 else requeue
        hidden = _hidden_outcome(item.doc or {}) if code == 0 and silent is None else None
        if hidden is not None:
            said, requeue = HIDDEN_BY_EXIT_0[hidden]
            meaning = f"{meaning}, but {said}"
        rows.append({
            "scenario": item.name,
            "launcher_exit_code": code,
            "rank_exit_codes": ranks,
            "meaning": meaning,
            "requeue": requeue,
            "ranks_meaning": [f"{c}: {_rank_meaning(c, silent is not None)}" for c in ranks],
            "silent_end": silent is not None,
        })  # fmt: skip
    return rows


def markdown_lines(rows: list[dict]) -> list[str]:
    if not rows:
        return ["No verify report records its exit codes."]
    out = ["| scenario | launcher exit | ranks' final exits | meaning | requeue |", "|---|---:|---|---|---|"]
    for r in rows:
        code = "—" if r["launcher_exit_code"] is None else str(r["launcher_exit_code"])
        ranks = "; ".join(r["ranks_meaning"]) or "—"
        out.append(f"| {r['scenario']} | {code} | {ranks} | {r['meaning']} | {r['requeue']} |")
    out += [
        "",
        "requeue: what a scheduler should do with the job; 93 is a loop NVRx stopped, a rerun repeats it.",
    ]
    return out
