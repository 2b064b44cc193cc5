"""`ftqual at-scale [RESULTS_DIR] --gpus N --days D`: what faults will cost the run at that scale, and the
settings that cost least (ftqual.report.at_scale), from a qualification's results/summary.json; and the
report's "At your scale" section (config `scale: {gpus, days}`), rendered by the same function.

Bad input (no qualified results, the runs of several job shapes, a scale out of bounds) is one line each and
exit 2."""

from __future__ import annotations

import argparse
import json
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


class ArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2: no usage dump
        raise ArgumentError(message)


def report_argv(config: Mapping) -> list[str]:
    """`ftqual report`'s `--scale GPUS:DAYS` from the config's `scale` (none: no section)."""
    scale = config.get("scale")
    if not isinstance(scale, Mapping):
        return []
    return ["--scale", f"{scale.get('gpus')}:{scale.get('days')}"]


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


def section(summary: Mapping, scale: tuple[int, float]) -> dict:
    """summary.json's `at_scale`: the projection, or the problems that keep these results from one."""
    doc, problems = project_all(summary, scale[0], scale[1], model.Assumptions())
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


def project_all(
    summary: Mapping, gpus: int, days: float, a: model.Assumptions
) -> tuple[dict | None, list[str]]:
    """summary.json's `at_scale` (or the problems that keep the results from a projection)."""
    problems = scale_problems(gpus, days)
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
    return {
        "gpus": gpus,
        "days": days,
        "job": read.job,
        "inputs": {k: (asdict(v) if isinstance(v, model.Figure) else v) for k, v in vars(i).items()},
        "assumptions": {k: v for k, v in asdict(a).items()},
        "configured": _projection(configured),
        "best": _projection(best),
        "knobs": [asdict(k) for k in model.knobs(i, gpus, days, a)],
        "by_gpus": table,
        "one_point": model.gain_of_a_point(best),
        "snippet": snippet(best, i, gpus, days, a),
        "campaign_checks": campaigns,
    }, []


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


def snippet(best: model.Projection, i: model.Inputs, gpus: int, days: float, a: model.Assumptions) -> str:
    timeout = i.recommended_step_timeout_s or i.step_timeout.value
    return (
        f"save_interval: {best.interval_iters}   # Young/Daly at {gpus:,} GPUs "
        f"(MTBF {best.mtbf_s / 3600:.1f} h)\n"
        f"max_restarts: {model.enough_restarts(i, gpus, days, a)}   # the failures expected in "
        f"{days:g} days, "
        "with margin\n"
        f"timeouts: {{step: {timeout:g}}}   # the step timeout the qualification recommends"
    )


def pct(x: float) -> str:
    return f"{x:.2%}"


def section_lines(doc: Mapping | None, problems: list[str] | None = None) -> list[str]:
    """The "At your scale" section from summary.json's `at_scale`."""
    if not doc or doc.get("problems"):
        why = "; ".join(problems or (doc or {}).get("problems") or ["no projection"])
        return [f"No projection: {why}."]
    c, b = doc["configured"], doc["best"]
    a = doc["assumptions"]
    out = [
        f"**{doc['gpus']:,} GPUs for {doc['days']:g} days** ({doc.get('job') or 'this job'}): "
        "expected goodput "
        f"**{pct(c['goodput'])}** as configured (save every {c['interval_iters']} iterations), "
        f"**{pct(b['goodput'])}** saving every {b['interval_iters']} iterations (Young/Daly). About "
        f"{c['failures']:.0f} failures expected, one every {c['mtbf_s'] / 3600:.1f} h.",
        "",
        "| cost | as configured | best interval |",
        "|---|---|---|",
    ]
    for key in ("saves", "lost_work", "detection", "restart", "load", "node_replacement", "resubmission"):
        out.append(f"| {key.replace('_', ' ')} | {pct(c['breakdown'][key])} | {pct(b['breakdown'][key])} |")
    out += ["", "What each knob buys:", "", "| knob | setting | goodput | gain |", "|---|---|---|---|"]
    out += [
        f"| {k['name']} | {k['setting']} | {pct(k['goodput'])} | {k['gain'] * 100:+.2f} pt |"
        for k in doc["knobs"]
    ]
    out += ["", "| GPUs | as configured | best interval |", "|---|---|---|"]
    out += [f"| {row['gpus']:,} | {pct(row['configured'])} | {pct(row['best'])} |" for row in doc["by_gpus"]]
    out += ["", f"To gain a point beyond the best interval: {doc['one_point']}.", "", "The settings:", ""]
    out += ["```yaml", doc["snippet"], "```", "", "Measured (median over the runs):", ""]
    for name, value in doc["inputs"].items():
        if isinstance(value, dict):
            out.append(f"- {name}: {value['value']:g} ({value['source']})")
    out += ["", "Assumed (override with `ftqual at-scale` options):", ""]
    sources = a.get("sources") or {}
    out += [f"- {name}: {a.get(name)!r} — {why}" for name, why in sources.items()]
    for check in doc.get("campaign_checks") or []:
        mark = "within" if check["within"] else "**outside**"
        out += [
            "",
            f"Model check on campaign {check['campaign']}: modelled {pct(check['modelled'])} against "
            f"measured {pct(check['measured'])}, {mark} ±{check['tolerance'] * 100:g} points.",
        ]
    return out


def assumptions_from(args: argparse.Namespace) -> model.Assumptions:
    a = model.Assumptions()
    changes = {
        "failures_per_gpu_hour": args.failures_per_gpu_hour,
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
    p.add_argument("--failures-per-gpu-hour", type=float)
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
    problems = assumption_problems(a) + ([problem] if problem else [])
    doc = None
    if summary is not None:
        doc, more = project_all(summary, args.gpus, args.days, a)
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
