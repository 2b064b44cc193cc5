"""Render the summary document as Markdown (pure: summary dict in, text out).

Line 1 is the verdict; the lines right after it list every failed or inconclusive check with its evidence,
so a reader sees what failed without scrolling. Tables, the latency budgets, replay, goodput and the
legend follow.
"""

from __future__ import annotations

from ftqual.contract import RANK_FAULTS
from ftqual.report import at_scale_cli
from ftqual.report.campaign import summary_markdown as campaign_part
from ftqual.report.checkpoints import markdown_lines as checkpoints_lines
from ftqual.report.exit_codes import markdown_lines as exit_code_lines
from ftqual.report.faults_table import fault_table_section
from ftqual.report.ran import Ran, what_ran
from ftqual.report.recurring import markdown_lines as recurring_lines
from ftqual.report.restart_agent import markdown_lines as restart_agent_lines
from ftqual.report.summary import CHECK_LEGEND, STACK_FIELDS, UNKNOWN
from ftqual.verification.campaign.text import human_bytes

STATUS_CELL = {
    "pass": "✅ pass",
    "fail": "❌ FAIL",
    "inconclusive": "⚠️ inconclusive",
    "skip": "⏭ skip",
    "not_applicable": "⏭ not applicable",  # a scenario's verdict: the stack cannot run it
}
ATTENTION_EVIDENCE = 2  # evidence lines per item in the first screen, at most; all of them are in the details
ATTENTION_LINES = 19  # the section's lines: with the 6 header lines, line 25 is the last one it uses
EXCERPT_CHARS = 200


def code(text: str) -> str:
    text = " ".join(str(text).split())
    if "`" not in text:
        return f"`{text}`"
    return f"`` {text} ``"


def cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) < 0.1:
        return f"{value * 1000:.0f} ms"
    if abs(value) < 10:
        return f"{value:.2f} s"
    if abs(value) < 1000:
        return f"{value:.1f} s"
    return f"{value:,.0f} s"


def measured(value: float | None, unit: str) -> str:
    if value is None:
        return "not measured"
    return seconds(value) if unit == "s" else f"{value:g} {unit}"


def evidence_line(ev: dict, want_text: bool = True) -> str:
    where = ev.get("path") or "?"
    if ev.get("line"):  # 0 or None: the file as a whole (run.json, a marker, a directory)
        where = f"{where}:{ev['line']}"
    text = ev.get("text") if isinstance(ev.get("text"), str) else None  # a malformed report's excerpt
    if text and len(text) > EXCERPT_CHARS:
        text = text[: EXCERPT_CHARS - 1] + "…"
    if text:
        return f"{code(where)} — {code(text)}"
    return f"{code(where)} (no excerpt)" if want_text else code(where)


def _gpus(count: object, model: object) -> str:
    """The header's GPUs: `2 × NVIDIA H200`; `no GPU` once where there is none (never `0 × no GPU`)."""
    count = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else None
    model = model if isinstance(model, str) and model and model != UNKNOWN else None
    if model is None:
        return "no GPU" if count is None else f"{count} × GPU (model unknown)"
    return model if count is None else f"{count} × {model}"


def _stack_line(stack: dict) -> str:
    if all(v == UNKNOWN for v in stack.values()):
        return "stack unknown (no preflight report)"
    parts = [_gpus(stack.get("gpu_count"), stack.get("gpu_model"))] + [
        f"{label} {stack[key]}"
        for key, label in (("torch", "torch"), ("nvrx", "NVRx"), ("megatron", "Megatron"))
        if stack.get(key)
    ]
    return ", ".join(parts)


def _evidence_quota(items: list[dict], budget: int) -> list[int]:
    """Evidence lines per item so that the items and their evidence fit in `budget` lines."""
    quota = [0] * len(items)
    spare = budget - len(items)
    for rnd in range(ATTENTION_EVIDENCE):
        for k, item in enumerate(items):
            if spare > 0 and len(item["evidence"]) > rnd:
                quota[k] += 1
                spare -= 1
    return quota


def attention_section(summary: dict) -> list[str]:
    """Failed, then inconclusive checks, then latencies over budget, with evidence: ATTENTION_LINES lines."""
    items = summary["attention"]
    if not items:
        which = "applicable scenario" if summary.get("not_applicable") else "scenario"
        return [f"Every check of every {which} passed, and every measured latency is within its budget."]
    overflow = len(items) > ATTENTION_LINES
    shown = items[: ATTENTION_LINES - 1] if overflow else items
    quota = _evidence_quota(shown, ATTENTION_LINES - overflow)
    out = []
    for item, n in zip(shown, quota, strict=True):
        status = {"over_budget": "⏱ OVER BUDGET"}.get(item["status"], STATUS_CELL.get(item["status"], "?"))
        what = f"{item['scenario']} / {code(item['check'])}" if item["check"] else item["scenario"]
        line = f"- {status} **{what}** — {cell(item['detail'])}"
        evidence = sorted(item["evidence"], key=lambda ev: not ev.get("text"))  # excerpts first
        if evidence and n == 0:
            line += f" — {evidence_line(evidence[0])}"
        elif not evidence and item["status"] != "over_budget":
            line += " — no evidence cited"
        out.append(line)
        for k, ev in enumerate(evidence[:n]):
            more = len(evidence) - n
            tail = f" (+{more} more in the details below)" if more and k == n - 1 else ""
            out.append(f"  - {evidence_line(ev)}{tail}")
    if overflow:
        out.append(f"- … {len(items) - len(shown)} more findings in the scenario details below")
    return out


def stack_section(summary: dict) -> list[str]:
    stack, pf = summary["stack"], summary["preflight"]
    out = ["| component | version |", "|---|---|"]
    out += [
        f"| {label} | {cell('—' if stack.get(key) is None else stack.get(key))} |"
        for key, label in STACK_FIELDS
    ]
    if pf.get("error"):
        out += ["", f"Stack fields are {UNKNOWN}: {cell(pf['error'])}."]
    else:
        verdict = f"preflight verdict **{pf['verdict']}**, " if pf.get("verdict") else ""
        out += ["", f"From {code(pf['source'])} ({verdict}— = not installed or not found)."]
    return out


def identity_section(summary: dict) -> list[str]:
    """The stack identity the verdicts were earned on (ftqual.stack.identity); what a stack change
    requalified."""
    ident = summary.get("stack_identity") or {}
    by_scenario = ident.get("by_scenario") or {}
    if not ident.get("parts"):
        if any(by_scenario.values()):
            mixed = ", ".join(f"{name} {digest or 'unrecorded'}" for name, digest in by_scenario.items())
            return [f"The verdicts were earned on different stacks: {cell(mixed)}."]
        return ["No verify report records the stack it was earned on."]
    labels = ident.get("labels") or {}
    digest = ident.get("digest")
    head = (
        f"Every verdict above was earned on stack {code(digest)}:"
        if digest
        else "Some verdicts record no stack; the others were earned on:"
    )
    out = [head, "", "| part | value |", "|---|---|"]
    out += [f"| {cell(labels.get(k, k))} | {cell(v)} |" for k, v in ident["parts"].items()]
    unrecorded = [name for name, d in by_scenario.items() if not d]
    if unrecorded:
        out += ["", f"No stack recorded by: {cell(', '.join(unrecorded))}."]
    for name, reason in (ident.get("requalified") or {}).items():
        out += ["", f"Requalified **{cell(name)}**: {cell(reason)}."]
    return out


# Why a scenario's verify report carries no job (its run_state, ftqual.report.summary.run_state): what the
# report knows, never a guess at the run's age.
NO_JOB_WHY = {
    "not applicable": "not applicable on this stack",
    "not launched": "not launched",
    "no verify report": "no verify report",
    "not verified": "run not verified",
    "interrupted": "interrupted run, none recorded",
    "verified": "none recorded",
}


def _no_job_why(scenarios: list[dict]) -> str:
    """`kill, hang: not launched; baseline: no verify report`: the scenarios by why they carry no job."""
    groups: dict[str, list[str]] = {}
    for sc in scenarios:
        why = NO_JOB_WHY.get(sc.get("run_state") or "", "none recorded")
        groups.setdefault(why, []).append(str(sc.get("name")))
    return "; ".join(f"{cell(', '.join(names))}: {why}" for why, names in groups.items())


def job_section(summary: dict) -> list[str]:
    """The job the runs trained (summary.json `job`, from run.json's through the verify reports): its shape,
    the estimates the preflight judged, and every Megatron argument of the model, data and training that ran
    (the flags ftqual owns are in each run's command.txt)."""
    job = summary.get("job")
    if not isinstance(job, dict):
        why = _no_job_why(summary.get("scenarios") or [])
        return [f"No job record in the verify reports{': ' + why if why else ''}."]
    digest = job.get("digest")
    ran = what_ran(summary)
    lines = [f"**{cell(job.get('describe') or job.get('model'))}**, job shape `{digest or 'differs'}`."]
    # Estimates of a model that ran: none where the workload runs no model (the smoke workload's describe
    # says so), no GPU memory where the ranks had no GPU.
    estimates = [
        f"{label} {human_bytes(value)}"
        for label, value in (
            ("checkpoint (with its optimizer state)", job.get("checkpoint_bytes_estimate")),
            ("GPU memory per GPU", None if ran.no_gpu else job.get("gpu_memory_bytes_estimate")),
        )
        if isinstance(value, int) and not ran.no_model
    ]
    if estimates:
        lines += ["", "Estimated from the arguments: " + "; ".join(estimates) + "."]
    by_scenario = job.get("by_scenario") or {}
    if digest is None and by_scenario:
        states = {sc.get("name"): sc.get("run_state") for sc in summary.get("scenarios") or []}
        shapes = [
            f"{k} `{v}`" if v else f"{k} none ({NO_JOB_WHY.get(states.get(k) or '', 'none recorded')})"
            for k, v in sorted(by_scenario.items())
        ]
        lines += ["", "Job shape by scenario: " + ", ".join(shapes)]
    lines += batch_lines(job, ran)
    args = job.get("megatron_args")
    if isinstance(args, list):
        shown = " ".join(str(a) for a in args) or "(none: the workload runs no Megatron model)"
        lines += ["", "The model, data and training arguments that ran:", "", "```", shown, "```"]
    replaced = [r for r in job.get("replaced") or [] if isinstance(r, dict)]
    if replaced:
        lines += ["", "The team's flags ftqual replaced (what ran instead, and why):", ""]
        lines += ["| where | the team's | ran as | why |", "|---|---|---|---|"]
        lines += [
            f"| {cell(r.get('where'))} | {code(r.get('given'))} | {code(r.get('runs_as'))} "
            f"| {cell(r.get('why'))} |"
            for r in replaced
        ]
    return lines


def at_scale_section(doc: object) -> list[str]:
    """The config's `scale`: what faults will cost the run there (ftqual.report.at_scale_cli)."""
    if not isinstance(doc, dict):
        return []
    return ["## At your scale", "", *at_scale_cli.section_lines(doc, doc.get("problems"), checks=False), ""]


def batch_lines(job: dict, ran: Ran | None = None) -> list[str]:
    """The job's batch and evaluation as they ran (run.json's `job.batch`, `job.evaluation`); the ranks are
    GPUs unless the run had none (then CPU ranks)."""
    batch = job.get("batch")
    if not isinstance(batch, dict):
        return []
    where = "CPU rank(s)" if ran is not None and ran.no_gpu else "GPU(s)"
    out = [
        "",
        f"Batch: global {batch.get('global_batch_size')} = micro {batch.get('micro_batch_size')} x "
        f"data-parallel {batch.get('data_parallel_size')} x {batch.get('accumulation_steps')} accumulation "
        f"step(s), on {batch.get('world_size')} {where}.",
    ]
    evaluation = job.get("evaluation")
    if isinstance(evaluation, dict):
        out[-1] += (
            f" Evaluation: {evaluation.get('iters')} step(s) every {evaluation.get('interval')} iterations."
        )
    else:
        out[-1] += " Evaluation: none."
    return out


def check_table(summary: dict) -> list[str]:
    scenarios = summary["scenarios"]
    ids = list(summary["legend"])
    head = "| check | " + " | ".join(f"{sc['name']}" for sc in scenarios) + " |"
    out = [head, "|---|" + "---|" * len(scenarios)]
    for cid in ids:
        cells = []
        for sc in scenarios:
            status = next((c["status"] for c in sc["checks"] if c["id"] == cid), None)
            cells.append(STATUS_CELL.get(status, "·"))
        out.append(f"| {code(cid)} | " + " | ".join(cells) + " |")
    if any(sc.get("expect") == "fail" for sc in scenarios):
        out.append(
            "| expected outcome | "
            + " | ".join(
                "fail: " + ", ".join(code(c) for c in sc.get("expect_failing", []))
                if sc.get("expect") == "fail"
                else "pass"
                for sc in scenarios
            )
            + " |"
        )
        out.append(
            "| verifier's verdict | "
            + " | ".join(STATUS_CELL.get(sc.get("raw_verdict"), "·") for sc in scenarios)
            + " |"
        )
    out.append(
        "| **scenario verdict** | "
        + " | ".join(f"**{STATUS_CELL[sc['verdict']]}**" for sc in scenarios)
        + " |"
    )
    if any("| ·" in line for line in out):
        out += ["", "· = the scenario's verify report has no such check."]
    return out


def latency_section(summary: dict) -> list[str]:
    out: list[str] = []
    faults = [sc for sc in summary["scenarios"] if sc["budgets"]]
    if not faults:
        return ["No fault scenario with measurements."]
    for sc in faults:
        metrics, derived = sc["metrics"], sc["derived"]
        title = f"{sc['name']}: {STATUS_CELL[sc['verdict']]} — fault {code(sc['fault'])}"
        out += [f"### {title}, run {code(sc['run_id'])}", ""]
        out += ["| measure | measured | budget | within | budget formula |", "|---|---|---|---|---|"]
        for b in sc["budgets"]:
            budget = "no budget" if b["budget"] is None else f"≤ {measured(b['budget'], b['unit'])}"
            mark = {True: "✅ within", False: "❌ OVER", None: "—"}[b["within"]]
            out.append(
                f"| {b['label']} | {measured(b['measured'], b['unit'])} | {budget} | {mark} | "
                f"{cell(b['formula'])} |"
            )
        facts = [f"detected by {code(metrics.get('detected_by') or 'unknown')}"]
        if metrics.get("checkpoint_iteration") is not None:
            facts.append(f"restored checkpoint iteration {metrics['checkpoint_iteration']}")
        if metrics.get("fault_iteration") is not None:
            facts.append(f"last iteration before the fault {metrics['fault_iteration']}")
        if derived.get("iteration_time_s") is not None:
            facts.append(f"median iteration time {seconds(derived['iteration_time_s'])}")
        if derived.get("lost_work_s") is not None:
            facts.append(f"lost work ≈ {seconds(derived['lost_work_s'])}")
        out += ["", "; ".join(facts) + ".", ""]
    return out


REPLAY_MEANING = {
    "identical": "every loss after the restore agrees with every source that covers it",
    "transient": "a difference confined to the first iterations after the restore, agreement after it",
    "uncovered_after": "a difference, and no source covers the iterations after it",
    "divergent": "a lasting divergence after the restore",
    "uncovered": "no source covers the iterations after the restore",
}


def timeouts_section(summary: dict) -> list[str]:
    """The configured timeouts against the largest measured section, and the recommended ones."""
    table = summary.get("timeouts")
    if not isinstance(table, dict) or not table.get("rows"):
        return ["No measured sections (the verify reports predate them)."]
    return fixed_timeouts_lines(table) + calculated_lines(table.get("calculated"))


def scope_lines(scope: object) -> list[str]:
    """What the timeouts the runs ran under were recommended for (ftqual.report.scope), first."""
    if not isinstance(scope, dict):
        return []
    mark = (
        "**Timeouts recommended for another job shape**: "
        if scope.get("status") == "recommended for another job shape"
        else ""
    )
    return [f"{mark}{cell(scope.get('line') or '')}.", ""]


def fixed_timeouts_lines(table: dict) -> list[str]:
    """The timeouts table, its proof and the recommendation."""
    margins = table["margins"]
    out = scope_lines(table.get("scope"))
    out += [
        f"The runs ran under the **{table.get('ran_under', 'configured')}** timeouts. Configured: the set the"
        " config gave (under a recommendation, the set it was recommended from); ran under: what ft_launcher"
        " was given; recommended: what these runs recommend.",
        "",
        "| section | configured | ran under | largest observed | in | headroom | hang detected after |"
        " verdict | recommended | detected after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table["rows"]:
        headroom = "—" if row["headroom"] is None else f"{row['headroom']:g}×"
        configured = row.get("configured_s", row["timeout_s"])
        out.append(
            f"| {row['section']} | {seconds(configured)} | {seconds(row['timeout_s'])} | "
            f"{seconds(row['observed_s'])} | "
            f"{cell(row.get('observed_in') or '—')} | {headroom} | {seconds(row['detection_s'])} | "
            f"**{row['verdict']}** | {seconds(row.get('recommended_s'))} | "
            f"{seconds(row.get('recommended_detection_s'))} |"
        )
    out += proof_lines(table.get("proof"))
    out += [
        "",
        f"`too tight`: headroom (timeout / observed) below {margins['too_tight_headroom']:g}×, a false alarm"
        f" is likely under load; `loose`: a hang is detected after more than {margins['loose_multiple']:g}×"
        " what the section needs and the recommended timeout is tighter (a section whose recommendation is"
        " the same or larger is `ok`). Detection = timeout + rank monitor check interval. Observed figures"
        " are the verifier's bounds from the logs (verify.json `sections`), the injected hang's section"
        " left out.",
        "",
        f"Recommended ({cell(table['rule'])}):",
        "",
        f"    {table['flags']}",
        f"    {table['config']}",
    ]
    evaluation = table.get("evaluation")
    if isinstance(evaluation, dict) and evaluation.get("note"):
        out += ["", f"**Evaluation**: {cell(evaluation['note'])}."]
    floored = [row["section"] for row in table["rows"] if row.get("recommended_basis") == "floor"]
    if floored:
        out += [
            "",
            f"**Rests on ftqual's floor, not the measurement**: {', '.join(floored)} (5 x observed is"
            " below the floor). The floor is a lower bound for a job too small to measure, not a figure"
            " for a larger one: qualify the job itself and recommend from its runs"
            ' (docs/checks.md, "Why the floors").',
        ]
    for row in table["rows"]:
        for ev in row.get("evidence", [])[:2]:
            out.append(f"- {row['section']} ({cell(row.get('observed_in'))}): {evidence_line(ev, False)}")
    return out


CALC_SECTIONS = ("setup", "step", "checkpointing", "out_of_section")
FIRES_CELL = {True: "**yes**", False: "no", None: "cannot tell"}


def timeout_cell(value: float | None) -> str:
    """A timeout as NVRx printed it (10.98 s, not rounded to 11.0 s)."""
    return "n/a" if value is None else f"{value:g} s"


def calculated_lines(part: object) -> list[str]:
    """Per scenario under calculated timeouts: each cycle's starting and calculated values, and per section
    the final value, the latest a hang there is caught and whether it would fire on the healthy run."""
    scenarios = part.get("scenarios") if isinstance(part, dict) else None
    if not scenarios:
        return []
    out = [
        "",
        "### Calculated timeouts",
        "",
        "These scenarios ran with `calc_ft_timeouts`: NVRx calculated the section timeouts from the"
        " sections it saw. Per cycle, the values in force at its start and each calculation; per section,"
        " the final value (the last cycle's start updated by each calculation), the latest a hang there is"
        " caught (final + rank monitor interval) and whether it would fire on the healthy run (at or below"
        " the largest healthy section the verifier measured). The verdict stays the `calculated_timeouts`"
        " check's.",
    ]
    for sc in scenarios:
        out += ["", f"**{cell(sc['scenario'])}** (`calculated_timeouts` {sc.get('status') or 'missing'})"]
        if sc.get("reason"):
            out += ["", f"Cannot be read in full: {cell(sc['reason'])}."]
        out += ["", "| cycle | values | " + " | ".join(CALC_SECTIONS) + " |", "|---|---|---|---|---|---|"]
        for cyc in sc["cycles"]:
            rows = [(f"start ({cyc['source']})", cyc["start"])]
            rows += [(f"calculation {n}", v) for n, v in enumerate(cyc["calculated"], 1)]
            for label, values in rows:
                cells = " | ".join(timeout_cell(values.get(k)) for k in CALC_SECTIONS)
                out.append(f"| {cyc['cycle']} | {label} | {cells} |")
        out += [
            "",
            "| section | final | set by | hang caught within | healthy largest | fires on the healthy run |"
            " verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in sc["sections"]:
            caught = timeout_cell(row["hang_caught_within_s"])
            if row.get("hang_detected_s") is not None:
                caught += f" (this run's hang: {seconds(row['hang_detected_s'])})"
            healthy = seconds(row["healthy_max_s"])
            if row.get("healthy_bound") and row["healthy_max_s"] is not None:
                healthy += f" ({row['healthy_bound']} bound)"
            fires = "n/a" if row["healthy_max_s"] is None else FIRES_CELL[row["fires_on_healthy"]]
            out.append(
                f"| {row['section']} | {timeout_cell(row['final_s'])} | {cell(row['set_by'] or '—')} |"
                f" {caught} | {healthy} | {fires} | **{row['verdict']}** |"
            )
    return out


PROOF_MEANING = {
    "proven": "every run under the recommended timeouts had no timeout firing on a healthy section, and each"
    " hang was detected within its section's recommended timeout + the rank monitor interval",
    "disproved": "a run under the recommended timeouts disproves them (see the failed check)",
    "unproven": "the runs under the recommended timeouts do not prove them yet (a baseline and a hang are"
    " needed, each check passed)",
}


def proof_lines(proof: object) -> list[str]:
    """The proof of the recommendation the runs ran under, one line per scenario."""
    if not isinstance(proof, dict) or proof.get("verdict") is None:
        return []
    out = ["", f"Recommended timeouts **{proof['verdict']}**: {PROOF_MEANING[proof['verdict']]}.", ""]
    for row in proof.get("scenarios", []):
        if row.get("ran_under") != "recommended":
            out.append(f"- {cell(row['scenario'])}: ran under its own timeouts (not part of the proof)")
            continue
        text = f"- {cell(row['scenario'])}: no false alarm `{row.get('no_false_alarm')}`"
        det = row.get("detection")
        if det:
            text += (
                f"; {det.get('section')} hang detected after {seconds(det.get('detection_s'))}"
                f" (bound {seconds(det.get('bound_s'))}) `{det.get('status')}`"
            )
        out.append(text)
    return out


def replay_section(summary: dict) -> list[str]:
    """The verifier's replay_consistency check as verify.json holds it: nothing is compared again here."""
    out: list[str] = []
    for sc in summary["scenarios"]:
        rp = sc.get("replay")
        if sc["fault"] not in RANK_FAULTS:
            continue
        if rp is None:
            out.append(f"- **{sc['name']}**: the verify report has no `replay_consistency` check.")
            continue
        meaning = REPLAY_MEANING.get(rp.get("classification") or "", rp.get("classification") or "")
        line = f"- **{sc['name']}**: {STATUS_CELL.get(rp['status'], rp['status'])} — {cell(rp['detail'])}" + (
            f" ({meaning})" if meaning else ""
        )
        out.append(line)
        exact = rp.get("exact")
        if exact:  # replay exact: the bitwise comparison with the deterministic baseline
            mark = STATUS_CELL.get(exact["status"], exact["status"])
            out.append(f"  - Exact recovery: {mark} — {cell(exact['line'])}")
        facts = []
        if rp.get("covered") is not None:
            facts.append(f"covered {rp['covered']}, uncovered {rp.get('uncovered')}")
        if rp.get("sources"):
            facts.append("sources: " + ", ".join(map(str, rp["sources"])))
        if rp.get("tolerance") is not None:
            facts.append(f"relative tolerance {rp['tolerance']:g}")
        if rp.get("transient_iterations"):
            facts.append("transient at iteration(s) " + ", ".join(map(str, rp["transient_iterations"])))
        if facts:
            out.append("  - " + "; ".join(facts))
        for d in rp.get("differences", [])[:5]:
            rel = d.get("rel")
            out.append(
                f"  - iteration {d.get('iteration')}: {d.get('loss')} vs {d.get('reference')} in the "
                f"{cell(d.get('source'))}"
                + (f" (relative {rel:.2e})" if isinstance(rel, int | float) else "")
            )
        for note in rp.get("notes", [])[:3]:
            out.append(f"  - note: {cell(note)}")
    return out or ["No fault scenario to compare."]


def goodput_answer(summary: dict) -> list[str]:
    """The report's one goodput answer: with the config's `scale`, At your scale (the same model and prior as
    each scenario's projection, at the job's own scale); without it, each scenario's projection."""
    if isinstance(summary.get("at_scale"), dict):
        return at_scale_section(summary["at_scale"])
    return ["## Goodput projection", "", *goodput_section(summary), ""]


def goodput_section(summary: dict) -> list[str]:
    gp = summary["goodput"]
    out = [
        "An **estimate**, not a measurement: the measured recovery costs of each fault scenario, fed into a "
        "first-order checkpoint/restart model (Young/Daly).",
        "",
        f"    {gp['formula']}",
        "",
    ]
    out += [f"- {term}" for term in gp["terms"]]
    out += [
        "",
        "| scenario | MTBF | τ (checkpoint interval) | t_detect | t_recover | t_lost | t_ckpt | goodput |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name, g in gp["by_scenario"].items():
        if not g["computed"]:
            out.append(f"| {name} | — | — | — | — | — | — | not computed: {cell(g['reason'])} |")
            continue
        for p in g["points"]:
            mtbf = at_scale_cli.hours(p["mtbf_s"]) + (f" @ {p['gpus']:,} GPUs" if p["gpus"] else "")
            out.append(
                f"| {name} | {mtbf} | {seconds(p['ckpt_interval_s'])} ({cell(p['ckpt_interval_source'])}) | "
                f"{seconds(p['t_detect_s'])} | {seconds(p['t_restart_s'])} | {seconds(p['t_lost_s'])} | "
                f"{seconds(p['t_ckpt_s'])} | **{p['goodput'] * 100:.2f} %** |"
            )
        blocking = (
            "not measured, taken as 0" if g["ckpt_blocking_s"] is None else seconds(g["ckpt_blocking_s"])
        )
        notes.append(
            f"- {name}: δ (one save's blocking time) = {blocking} ({g['ckpt_blocking_source']}); "
            f"lost work measured in this run: {seconds(g['lost_work_measured_s'])}."
        )
    out += ["", *notes, "", "Assumptions:"]
    out += [f"- {a}" for a in gp["assumptions"]]
    prior = gp.get("prior")
    named = f"failure prior **{prior}**: " if prior else ""
    out += ["", f"MTBF source: {named}{gp['mtbf_source']}."]
    if prior:
        out.append(
            "The same model and prior as `ftqual at-scale`, at your scale: set the config's "
            "`scale: {gpus, days}` (and `prior`) for the job's own answer."
        )
    return out


def resolved_section(summary: dict) -> list[str]:
    resolved = summary["resolved"]
    if not resolved:
        return ["No resolved settings (no preflight report)."]
    out = ["| setting | value |", "|---|---|"]
    for key, value in resolved.items():
        if key in ("reasons", "adaptations"):
            continue
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        out.append(f"| {code(key)} | {cell(value)} |")
    reasons = resolved.get("reasons") or {}
    if reasons:
        out.append("")
    for key, why in reasons.items():
        out.append(f"- why {code(key)}: {cell(why)}")
    # Flags the launcher changed for this Megatron version (ftqual.launch.compat), with the reason.
    adaptations = [a for a in resolved.get("adaptations") or [] if isinstance(a, dict)]
    if adaptations and not reasons:
        out.append("")
    for a in adaptations:
        out.append(f"- adapted {code(str(a.get('flag')))} ({cell(a.get('action'))}): {cell(a.get('reason'))}")
    return out


def details_section(summary: dict) -> list[str]:
    out: list[str] = []
    for sc in summary["scenarios"]:
        out += [f"### {sc['name']}: {STATUS_CELL[sc['verdict']]}", ""]
        out.append(
            f"- verify report: {code(sc['source'])}; run {code(sc['run_id'] or 'unknown')}; "
            f"fault {code(sc['fault'])}"
        )
        if sc["reason"]:
            out.append(f"- note: {cell(sc['reason'])}")
        unquoted = any(
            not all(ev.get("text") for ev in check["evidence"])
            for check in sc["checks"]
            if check["status"] in ("fail", "inconclusive")
        )
        if unquoted and not sc.get("excerpts_recorded", True):
            out.append(
                "- note: this verify report was written before `ftqual verify` quoted the log lines its "
                "checks cite (`excerpts`): none is quoted here, and the report reads no log; verify the run "
                "again to quote them"
            )
        if sc.get("expect") == "fail":
            out.append(
                f"- negative control (expects {', '.join(code(c) for c in sc['expect_failing'])} to fail): "
                f"verifier said {sc['raw_verdict']}; {cell(sc['expectation'])}"
            )
        for check in sc["checks"]:
            out.append(f"- {STATUS_CELL[check['status']]} {code(check['id'])} — {cell(check['detail'])}")
            want_text = check["status"] in ("fail", "inconclusive")
            out += [f"  - {evidence_line(ev, want_text)}" for ev in check["evidence"]]
        out.append("")
    return out


def campaign_section(summary: dict) -> list[str]:
    """One part per campaign scenario (ftqual.report.campaign); nothing when no campaign ran."""
    campaigns = summary.get("campaigns") or {}
    if not campaigns:
        return []
    out = ["## Campaign", ""]
    for name, entry in campaigns.items():
        out += [*campaign_part(name, entry, summary["plots"].get(f"campaign_{name}")), ""]
    return out


def plots_section(summary: dict) -> list[str]:
    plots = summary["plots"]
    if not plots:
        return ["No plots."]
    return [f"![{name}]({path})" for name, path in plots.items()]


def legend_section(summary: dict) -> list[str]:
    out = []
    for cid in summary["legend"]:
        meaning = (
            summary["legend"][cid] or CHECK_LEGEND.get(cid) or "defined by the verifier (see its detail)"
        )
        out.append(f"- {code(cid)}: {meaning}")
    out += [
        "",
        "Statuses: ✅ pass; ❌ FAIL (the evidence contradicts recovery); ⚠️ inconclusive (evidence missing or "
        "unreadable: never counted as a pass); ⏭ skip (not applicable, e.g. a disabled option).",
    ]
    return out


def exit_codes_section(rows: object) -> list[str]:
    """The exit-code table where summary.json has one (an optional key: older summaries have none)."""
    if not isinstance(rows, list) or not rows:
        return []
    return ["## Exit codes", "", *exit_code_lines(rows), ""]


def restart_agent_section(rows: object, ran: Ran | None = None) -> list[str]:
    """NVRx's restart agent scored, where any scenario ran with it (an optional key)."""
    if not isinstance(rows, list) or not rows:
        return []
    unit = ran.busy_seconds if ran else "GPU-s"
    return ["## The restart agent's verdicts", "", *restart_agent_lines(rows, unit), ""]


def recurring_section(rows: object, ran: Ran | None = None) -> list[str]:
    """Faults that come back, where summary.json has them (an optional key: older summaries have none)."""
    if not isinstance(rows, list) or not rows:
        return []
    return ["## Faults that come back", "", *recurring_lines(rows, ran.busy_seconds if ran else "GPU-s"), ""]


def not_applicable_section(summary: dict) -> list[str]:
    """The scenarios this stack cannot run, each with why: apart from the verdict, neither passed nor
    failed (summary.json `not_applicable`; none in summaries written before it)."""
    skipped = summary.get("not_applicable") or {}
    if not skipped:
        return []
    faults = {sc["name"]: sc.get("fault") for sc in summary["scenarios"]}
    out = [
        "## Not applicable on this stack",
        "",
        "Not run: the preflight found this stack cannot run them (nothing was launched). They count neither "
        "as passed nor as failed; the verdict is that of the others.",
        "",
    ]
    for name, why in skipped.items():
        out.append(f"- **{cell(name)}** (fault {code(str(faults.get(name)))}): {cell(why)}")
    return [*out, ""]


def render_markdown(summary: dict) -> str:
    counts = summary["scenario_counts"]
    skipped = counts.get("not_applicable", 0)
    total = sum(counts.values()) - skipped
    tally = (
        f"{counts['pass']}/{total} applicable scenarios pass, {skipped} not applicable"
        if skipped
        else (f"{counts['pass']}/{total} scenarios pass")
    )
    lines = [
        f"# {summary['headline']}",
        "",
        f"{tally} · {summary['created_at']} · " + _stack_line(summary["stack"]),
        "",
        "## What needs attention",
        "",
        *attention_section(summary),
        "",
        *not_applicable_section(summary),
        "## Stack",
        "",
        *stack_section(summary),
        "",
        "### Stack identity",
        "",
        *identity_section(summary),
        "",
        "## Job",
        "",
        *job_section(summary),
        "",
        "## Checks",
        "",
        *check_table(summary),
        "",
        "## Faults",
        "",
        *fault_table_section(summary.get("faults") or []),
        "",
        *exit_codes_section(summary.get("exit_codes")),
        *recurring_section(summary.get("recurring"), what_ran(summary)),
        *restart_agent_section(summary.get("restart_agent"), what_ran(summary)),
        *campaign_section(summary),
        "## Recovery latency against budgets",
        "",
        *latency_section(summary),
        "## Checkpoints and restarts",
        "",
        *checkpoints_lines(
            summary.get("checkpoints"), summary["plots"].get("checkpoints"), what_ran(summary)
        ),
        "",
        "## Timeouts",
        "",
        *timeouts_section(summary),
        "",
        "## Replay consistency",
        "",
        *replay_section(summary),
        "",
        *goodput_answer(summary),
        "## Plots",
        "",
        *plots_section(summary),
        "",
        "## Resolved settings",
        "",
        *resolved_section(summary),
        "",
        "## Scenario details",
        "",
        *details_section(summary),
        "## Legend",
        "",
        *legend_section(summary),
    ]
    return "\n".join(lines).rstrip() + "\n"
