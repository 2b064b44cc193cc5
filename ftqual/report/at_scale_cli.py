"""`ftqual at-scale RESULTS --gpus N --days D` and the report's At your scale section.

`ftqual at-scale [RESULTS_DIR] --gpus N --days D`: what faults will cost the run at that scale, and the
settings that cost least (ftqual.report.at_scale), from a qualification's results/summary.json; and the
report's "At your scale" section (config `scale: {gpus, days}`), rendered by the same function.

Bad input (no qualified results, the runs of several job shapes, a scale out of bounds) is one line each and
exit 2."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path

from ftqual.report import at_scale as model
from ftqual.report.at_scale_inputs import read_inputs
from ftqual.report.inputs import load_summary

MAX_GPUS = 1_000_000
MAX_DAYS = 3650
TABLE_GPUS = (1024, 4096, 16384)
# The cost rows whose key alone would mislead: the model's restart is detection to the first step after the
# restore (t_recover), never ft_launcher's restart (detection to the new cycle) of the Faults table.
COST_LABELS = {"restart": "recovery (detection → first step)", "lost_work": "lost work"}


class ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2: no usage dump
        raise ArgumentError(message)


def report_argv(config: Mapping) -> list[str]:
    """`ftqual report`'s `--scale GPUS:DAYS` (and `--prior NAME`) from the config's `scale` (none: no
    section)."""
    scale = config.get("scale")
    if not isinstance(scale, Mapping):
        return []
    prior = scale.get("prior")
    return ["--scale", f"{scale.get('gpus')}:{scale.get('days')}", *(["--prior", prior] if prior else [])]


def prior_problems(name: object) -> list[str]:
    if name in model.PRIORS:
        return []
    return [f"--prior must be one of {', '.join(model.PRIORS)} (got {name!r})"]


def parse_scale(raw: str) -> tuple[int, float]:
    """`GPUS:DAYS`; ValueError with one line."""
    gpus, _, days = raw.partition(":")
    try:
        parsed = (int(gpus), float(days))
    except ValueError:
        raise ValueError(f"--scale must be GPUS:DAYS, e.g. 4096:30 (got {raw!r})") from None
    problems = scale_problems(*parsed)
    if problems:
        raise ValueError(problems[0].replace("--gpus", "--scale's GPUs").replace("--days", "--scale's days"))
    return parsed


def section(summary: Mapping, scale: tuple[int, float], prior: str = model.DEFAULT_PRIOR) -> dict:
    """summary.json's `at_scale`: the projection, or the problems that keep these results from one. The
    config asked for it, so a smoke workload's results are projected, with the warning first."""
    a = model.with_prior(model.Assumptions(), prior)
    doc, problems = project_all(summary, scale[0], scale[1], a, allow_smoke=True)
    if doc is not None:
        return doc
    return {
        "gpus": scale[0],
        "days": scale[1],
        "problems": problems,
        "campaign_checks": campaign_checks(summary),
    }


def scale_problems(gpus: object, days: object) -> list[str]:
    out = []
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
        out.append(f"--gpus must be a whole number of GPUs from 1 to {MAX_GPUS:,} (got {gpus!r})")
    if isinstance(days, bool) or not isinstance(days, int | float) or not 0 < days <= MAX_DAYS:
        out.append(f"--days must be more than 0 and at most {MAX_DAYS} (got {days!r})")
    return out


SMOKE_REFUSAL = (
    "these results are the smoke workload's (summary.json resolved.workload: smoke): it trains no model "
    "(sleeping steps, checkpoints of a few kB), so a projection would be of the stand-in, not of your job; "
    "qualify with workload: megatron, or pass --allow-smoke to project it anyway"
)
SMOKE_WARNING = (
    "⚠️ **SMOKE WORKLOAD: NOT YOUR JOB.** These results are the smoke workload's, which trains no model "
    "(sleeping steps, checkpoints of a few kB): every number below projects the stand-in, not a real job. "
    "Qualify with `workload: megatron` before deciding anything from it."
)


def project_all(
    summary: Mapping, gpus: int, days: float, a: model.Assumptions, allow_smoke: bool = False
) -> tuple[dict | None, list[str]]:
    """summary.json's `at_scale` (or the problems that keep the results from a projection)."""
    problems = scale_problems(gpus, days)
    smoke = workload_of(summary) == "smoke"
    if smoke and not allow_smoke:
        problems.append(SMOKE_REFUSAL)
    read = read_inputs(summary)
    problems += list(read.problems)
    if problems or read.inputs is None:
        return None, problems
    i = read.inputs
    configured = model.project(i, gpus, days, a)
    best = model.project(i, gpus, days, a, interval_iters=0)
    campaigns = campaign_checks(summary)
    table = [
        {"gpus": n, "configured": model.project(i, n, days, a).goodput,
         "best": model.project(i, n, days, a, interval_iters=0).goodput}
        for n in sorted({*TABLE_GPUS, gpus})
    ]  # fmt: skip
    knobs = model.knobs(i, gpus, days, a)
    return {
        "gpus": gpus,
        "days": days,
        "job": read.job,
        "workload": workload_of(summary),
        "smoke": smoke,
        "prior": a.prior,
        "priors": [asdict(row) for row in model.prior_table(i, gpus, days, a)],
        "inputs": {k: (asdict(v) if isinstance(v, model.Figure) else v) for k, v in vars(i).items()},
        "assumptions": {k: v for k, v in asdict(a).items()},
        "configured": _projection(configured),
        "best": _projection(best),
        "knobs": [asdict(k) for k in knobs],
        "by_gpus": table,
        "one_point": model.gain_of_a_point(best),
        "snippet": snippet(knobs, best, gpus),
        "campaign_checks": campaigns,
    }, []


def workload_of(summary: Mapping) -> str | None:
    """The workload the runs trained (summary.json `resolved.workload`, from the preflight)."""
    resolved = summary.get("resolved")
    workload = resolved.get("workload") if isinstance(resolved, Mapping) else None
    return workload if isinstance(workload, str) else None


def campaign_checks(summary: Mapping) -> list[dict]:
    """The model against each campaign's measured goodput (ftqual.report.at_scale.campaign_check)."""
    out = []
    for name, part in (summary.get("campaigns") or {}).items():
        check = model.campaign_check((part or {}).get("goodput") or {})
        if check is not None:
            out.append({"campaign": name, **asdict(check), "within": check.within})
    return out


def _projection(p: model.Projection) -> dict:
    return {**{k: v for k, v in asdict(p).items() if k != "breakdown"}, "breakdown": asdict(p.breakdown),
            "goodput": p.goodput}  # fmt: skip


def snippet(knobs: list[model.Knob], best: model.Projection, gpus: int) -> str:
    """The settings the knob table shows gain goodput (model.settings: the same rows), each with its gain;
    none where the configured settings already cost least."""
    lines = []
    for k in model.settings(knobs):
        why = f"+{k.gain * 100:.2f} pt: {k.name}, {k.setting}"
        if k.key == "save_interval":
            why += f" at {gpus:,} GPUs (MTBF {hours(best.mtbf_s)})"
        if k.key == "timeouts.step":
            lines.append(f"timeouts: {{step: {k.value:g}}}   # {why}")
        else:
            lines.append(f"{k.key}: {k.value}   # {why}")
    return "\n".join(lines) or "# the configured settings cost least here: nothing to change"


def sig(x: float, digits: int = 3) -> str:
    """A number for a reader: `digits` significant digits, thousands separated (6334.6 -> 6,330)."""
    if not math.isfinite(x):
        return "∞"
    if x == 0:
        return "0"
    decimals = digits - 1 - math.floor(math.log10(abs(x)))
    return f"{round(x, decimals):,.{max(0, decimals)}f}"


def hours(seconds: float) -> str:
    return f"{sig(seconds / 3600)} h"


def human_bytes(n: float) -> str:
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{sig(n / size)} {unit}"
    return f"{sig(n)} bytes"


def failures_line(p: Mapping, days: float) -> str:
    """The failures expected over the run, in words: fewer than one is said so, never "about 0"."""
    every = f"one every ~{hours(p['mtbf_s'])}"
    if p["failures"] < 1:
        return f"Fewer than one failure expected in {days:g} days ({every})."
    count = sig(p["failures"]) if p["failures"] < 10 else f"{round(p['failures']):,}"
    return f"About {count} failures expected in {days:g} days, {every}."


INPUT_LABELS = {  # name in summary.json at_scale.inputs -> (what it is, its unit)
    "crash_detect": ("a crash's detection", "s"),
    "step_timeout": ("the step timeout in force", "s"),
    "monitor_interval_s": ("the rank monitor's interval", "s"),
    "worker_stop": ("worker stop", "s"),
    "gpu_reclaim": ("GPU memory reclaim", "s"),
    "process_start": ("process start", "s"),
    "init": ("initialisation", "s"),
    "first_step": ("first step", "s"),
    "load_gbps": ("checkpoint load rate of one node", "GB/s"),
    "checkpoint_bytes": ("one checkpoint", "bytes"),
    "save_blocked": ("a save's blocked time", "s"),
    "save_durable": ("a save's time to durable", "s"),
    "step_s": ("one training step", "s"),
    "save_interval_iters": ("the configured save interval", "iterations"),
    "max_restarts": ("the configured max restarts", ""),
    "recommended_step_timeout_s": ("the recommended step timeout", "s"),
    "load_s": ("a checkpoint load", "s"),
}


def with_unit(value: object, unit: str) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "not measured"
    if unit == "bytes":
        return human_bytes(float(value))
    if unit in ("iterations", ""):
        return f"{value:,}" + (f" {unit}" if unit else "")
    return f"{sig(float(value))} {unit}"


def input_lines(inputs: Mapping) -> list[str]:
    out = []
    for name, (label, unit) in INPUT_LABELS.items():
        if name not in inputs:
            continue
        value = inputs[name]
        figure = value if isinstance(value, Mapping) else {"value": value, "source": None}
        source = f" ({figure['source']})" if figure.get("source") else ""
        out.append(f"- {label}: {with_unit(figure.get('value'), unit)}{source}")
    return out


def assumption_value(name: str, a: Mapping) -> str:
    value = a.get(name)
    if name == "failures_per_gpu_hour":
        return f"{value:.2e} failures per GPU-hour (prior {a.get('prior')}; pick another with --prior)"
    if name in ("hang_share", "node_share"):
        return f"{value * 100:.0f} % of failures"
    if name == "fs_read_gbps":
        return "not set: the node's measured rate x nodes" if value is None else f"{sig(value)} GB/s"
    return with_unit(value, "s")


def pct(x: float) -> str:
    return f"{x:.2%}"


def section_lines(doc: Mapping | None, problems: list[str] | None = None, checks: bool = True) -> list[str]:
    """The "At your scale" section from summary.json's `at_scale`: the report's one goodput answer. `checks`
    False: without the campaigns' model checks (the report prints each in its campaign's part)."""
    if not doc or doc.get("problems"):
        why = "; ".join(problems or (doc or {}).get("problems") or ["no projection"])
        return [f"No projection: {why}."]
    c, b = doc["configured"], doc["best"]
    a = doc["assumptions"]
    out = [SMOKE_WARNING, ""] if doc.get("smoke") else []
    out += [
        f"**{doc['gpus']:,} GPUs for {doc['days']:g} days** ({doc.get('job') or 'this job'}): "
        "expected goodput "
        f"**{pct(c['goodput'])}** as configured (save every {c['interval_iters']:,} iterations), "
        f"**{pct(b['goodput'])}** saving every {b['interval_iters']:,} iterations (Young/Daly). "
        + failures_line(c, doc["days"]),
        "",
        f"Failure prior: **{doc.get('prior')}**, {a['sources']['failures_per_gpu_hour']}. How the answer "
        "moves with the published priors (pick one with `--prior`, or the config's `scale: {prior: ...}`):",
        "",
        f"| prior | failures per GPU-hour | MTBF at {doc['gpus']:,} GPUs | as configured | best interval |",
        "|---|---|---|---|---|",
    ]
    for row in doc.get("priors") or []:
        name = f"**{row['prior']}** (in use)" if row["prior"] == doc.get("prior") else row["prior"]
        out.append(
            f"| {name} | {row['failures_per_gpu_hour']:.2e} | {hours(row['mtbf_s'])} | "
            f"{pct(row['configured'])} | {pct(row['best'])} |"
        )
    out += ["", "| cost | as configured | best interval |", "|---|---|---|"]
    for key in ("saves", "lost_work", "detection", "restart", "load", "node_replacement", "resubmission"):
        label = COST_LABELS.get(key, key.replace("_", " "))
        out.append(f"| {label} | {pct(c['breakdown'][key])} | {pct(b['breakdown'][key])} |")
    out += ["", "What each knob buys:", "", "| knob | setting | goodput | gain |", "|---|---|---|---|"]
    out += [
        f"| {k['name']} | {k['setting']} | {pct(k['goodput'])} | {k['gain'] * 100:+.2f} pt |"
        for k in doc["knobs"]
    ]
    out += ["", "| GPUs | as configured | best interval |", "|---|---|---|"]
    out += [f"| {row['gpus']:,} | {pct(row['configured'])} | {pct(row['best'])} |" for row in doc["by_gpus"]]
    out += ["", f"To gain a point beyond the best interval: {doc['one_point']}.", ""]
    out += ["The settings the knob table shows gain goodput:", "", "```yaml", doc["snippet"], "```", ""]
    out += ["Measured (median over the runs):", "", *input_lines(doc["inputs"])]
    out += ["", "Assumed (override with `ftqual at-scale` options):", ""]
    sources = a.get("sources") or {}
    out += [f"- {name}: {assumption_value(name, a)} — {why}" for name, why in sources.items()]
    for check in doc.get("campaign_checks") or [] if checks else []:
        mark = "within" if check["within"] else "**outside**"
        out += [
            "",
            f"Model check on campaign {check['campaign']}: modelled {pct(check['modelled'])} against "
            f"measured {pct(check['measured'])}, {mark} ±{check['tolerance'] * 100:g} points.",
        ]
    return out


def assumptions_from(args: argparse.Namespace) -> model.Assumptions:
    a = model.Assumptions()
    if args.prior in model.PRIORS:
        a = model.with_prior(a, args.prior)
    if args.failures_per_gpu_hour is not None:
        a = model.with_rate(a, args.failures_per_gpu_hour)
    changes = {
        "hang_share": args.hang_share,
        "fs_read_gbps": args.fs_gbps,
        "start_at_scale_s": args.start_at_scale_s,
        "node_replace_s": args.node_replace_s,
        "resubmit_s": args.resubmit_s,
        "gpus_per_node": args.gpus_per_node,
    }
    return replace(a, **{k: v for k, v in changes.items() if v is not None})


def assumption_problems(a: model.Assumptions) -> list[str]:
    out = []
    if not 0 < a.failures_per_gpu_hour < 1:
        out.append(f"--failures-per-gpu-hour must be between 0 and 1 (got {a.failures_per_gpu_hour:g})")
    if not 0 <= a.hang_share <= 1:
        out.append(f"--hang-share must be between 0 and 1 (got {a.hang_share:g})")
    for name in ("start_at_scale_s", "node_replace_s", "resubmit_s"):
        if getattr(a, name) < 0:
            out.append(f"--{name.replace('_', '-')} must not be negative (got {getattr(a, name):g})")
    if a.fs_read_gbps is not None and a.fs_read_gbps <= 0:
        out.append(f"--fs-gbps must be positive (got {a.fs_read_gbps:g})")
    if not 1 <= a.gpus_per_node <= 64:
        out.append(f"--gpus-per-node must be from 1 to 64 (got {a.gpus_per_node})")
    return out


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ftqual at-scale", description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="?", default="results", help="a results directory or its summary.json")
    p.add_argument("--gpus", type=int, required=True)
    p.add_argument("--days", type=float, required=True)
    p.add_argument(
        "--prior",
        default=model.DEFAULT_PRIOR,
        help=f"the published failure rate to project with: {', '.join(model.PRIORS)} "
        f"(default {model.DEFAULT_PRIOR})",
    )
    p.add_argument("--failures-per-gpu-hour", type=float, help="your own failure rate (instead of a prior)")
    p.add_argument(
        "--allow-smoke",
        action="store_true",
        help="project the smoke workload's results anyway (they train no model; the output says so first)",
    )
    p.add_argument("--hang-share", type=float)
    p.add_argument("--fs-gbps", type=float, help="the filesystem's aggregate read rate, GB/s")
    p.add_argument("--start-at-scale-s", type=float)
    p.add_argument("--node-replace-s", type=float)
    p.add_argument("--resubmit-s", type=float)
    p.add_argument("--gpus-per-node", type=int)
    p.add_argument("--json", help="write the projection here as JSON")
    p.add_argument("--plot", help="draw goodput against GPUs and what each knob buys here (PNG)")
    return p


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except ArgumentError as exc:
        print(f"ftqual at-scale: {exc}", file=sys.stderr)
        return 2
    a = assumptions_from(args)
    missing = "no qualified results: {target} does not exist (run the workflow first)"
    summary, problem = load_summary(args.results, missing)
    problems = prior_problems(args.prior) + assumption_problems(a) + ([problem] if problem else [])
    doc = None
    if summary is not None:
        doc, more = project_all(summary, args.gpus, args.days, a, allow_smoke=args.allow_smoke)
        problems += more
    else:
        problems += scale_problems(args.gpus, args.days)
    if problems or doc is None:
        for line in problems:
            print(f"ftqual at-scale: {line}", file=sys.stderr)
        return 2
    print("\n".join(section_lines(doc)))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1, default=str) + "\n")
    if args.plot:
        from ftqual.report import plots  # matplotlib only when a plot is asked for

        plots.render_at_scale(doc, Path(args.plot))
    return 0
