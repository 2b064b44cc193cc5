"""`ftqual report`: summary.json/.md/.html, junit.xml and plots from the scenarios' verify reports.

Reads verify reports (and preflight.json), builds one summary document (summary.py, pure), renders it
(markdown.py, junit.py, plots.py) and only then writes files. Exit 0 once the report is written, whatever
the verdict (the report's job is to report); 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from ftqual.contract import family_of
from ftqual.report import at_scale, at_scale_cli
from ftqual.report.inputs import ScenarioInput, discover_results, load_preflight, load_verify
from ftqual.report.summary import ReportOptions, build_summary, scenario_fault
from ftqual.verification.campaign.goodput import MtbfPoint

__all__ = ["main", "write_report"]


class UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ftqual report",
        description="Build summary.json, summary.md, summary.html, junit.xml and plots/ from verify reports.",
    )
    p.add_argument(
        "--verify",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a scenario's verify report (repeat per scenario)",
    )
    p.add_argument(
        "--attempt",
        action="append",
        default=[],
        metavar="NAME=SLOT",
        help="the workflow's attempt slot of a scenario, recorded in summary.json (repeat per scenario)",
    )
    p.add_argument(
        "--results",
        type=Path,
        metavar="DIR",
        help="find DIR/<scenario>/verify.json and DIR/preflight.json; --out defaults to DIR",
    )
    p.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="NAME",
        help="with --results: a scenario that must be there (inconclusive if its report is missing)",
    )
    p.add_argument(
        "--preflight", type=Path, metavar="PATH", help="preflight.json (stack and resolved settings)"
    )
    p.add_argument("--out", type=Path, metavar="DIR", help="output directory (default: results)")
    p.add_argument(
        "--baseline", metavar="NAME", help="the scenario to compare losses with (default: fault none)"
    )
    p.add_argument(
        "--mtbf-hours",
        action="append",
        type=float,
        default=[],
        metavar="H",
        help="mean time between failures for each scenario's goodput projection, instead of the prior's "
        "(repeat)",
    )
    p.add_argument(
        "--gpus-for-mtbf",
        action="append",
        type=int,
        default=[],
        metavar="N",
        help="the GPU count each --mtbf-hours stands for (repeat, same order)",
    )
    p.add_argument(
        "--ckpt-interval-s",
        type=float,
        metavar="S",
        help="checkpoint interval for the projection (default: Young's optimum per MTBF)",
    )
    p.add_argument(
        "--scale",
        metavar="GPUS:DAYS",
        help="add the At your scale section: the projection at GPUS for DAYS (ftqual at-scale)",
    )
    p.add_argument(
        "--prior",
        default=at_scale.DEFAULT_PRIOR,
        metavar="NAME",
        help=f"the failure prior of every goodput in the report: {', '.join(at_scale.PRIORS)} "
        f"(default {at_scale.DEFAULT_PRIOR}; the config's scale.prior)",
    )
    p.add_argument(
        "--timeouts-for",
        metavar="JSON",
        help="what the timeouts the runs ran under were recommended for (the config's timeouts_for)",
    )
    p.add_argument(
        "--interrupted",
        metavar="SIGNAL",
        help="the workflow was interrupted by SIGNAL: missing verdicts are said so, with what to run",
    )
    p.add_argument(
        "--ckpt-blocking-s",
        type=float,
        metavar="S",
        help="training time one checkpoint save blocks (default: measured from the timeline)",
    )
    return p


def _timeouts_for(raw: str | None) -> dict | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise UsageError(f"--timeouts-for must be a JSON object (job, stack, storage), got {raw[:60]!r}")
    return value


def _mtbf(hours: list[float], gpus: list[int]) -> tuple[MtbfPoint, ...]:
    if gpus and len(gpus) != len(hours):
        raise UsageError("--gpus-for-mtbf must be given once per --mtbf-hours, in the same order")
    if any(h <= 0 for h in hours) or any(g <= 0 for g in gpus):
        raise UsageError("--mtbf-hours and --gpus-for-mtbf must be positive")
    if not hours:
        return ()  # the failure prior's MTBF (ftqual.report.summary.mtbf_points)
    return tuple(MtbfPoint(h, gpus[i] if gpus else None) for i, h in enumerate(hours))


def _verify_pairs(specs: list[str]) -> list[tuple[str, Path]]:
    pairs, seen = [], set()
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path or "/" in name:
            raise UsageError(f"--verify expects NAME=PATH, got {spec!r}")
        if name in seen:
            raise UsageError(f"scenario {name!r} given twice")
        seen.add(name)
        pairs.append((name, Path(path)))
    return pairs


def write_report(
    inputs: list[ScenarioInput], preflight_path: Path | None, out: Path, options: ReportOptions
) -> dict:
    """Build the summary, render it, write every file under `out`; returns the summary document."""
    from ftqual.report import html, plots
    from ftqual.report.junit import render_junit
    from ftqual.report.markdown import render_markdown

    docs = {i.name: i.doc for i in inputs}
    timelines = [
        i
        for i in inputs
        if family_of(scenario_fault(i.name, i.doc)) != "none"
        or (i.doc is None and i.name not in (options.baseline, "baseline"))
    ]
    plot_paths = {f"timeline_{i.name}": f"plots/timeline_{i.name}.png" for i in timelines}
    plot_paths["loss_comparison"] = "plots/loss_comparison.png"
    campaigns = [i.name for i in inputs if isinstance((i.doc or {}).get("campaign"), dict)]
    plot_paths.update({f"campaign_{name}": f"plots/campaign_{name}.png" for name in campaigns})
    if any(isinstance((i.doc or {}).get("checkpoint_account"), dict) for i in inputs):
        plot_paths["checkpoints"] = "plots/checkpoints.png"
    if options.scale is not None:
        plot_paths["at_scale"] = "plots/at_scale.png"
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    options = replace(options, plots=plot_paths)
    summary = build_summary(inputs, load_preflight(preflight_path), options, created)

    out.mkdir(parents=True, exist_ok=True)
    by_name = {sc["name"]: sc for sc in summary["scenarios"]}
    for item in timelines:
        sc, target = by_name[item.name], out / plot_paths[f"timeline_{item.name}"]
        if item.doc is None:
            plots.render_placeholder(
                target, f"Recovery timeline — {item.name}: INCONCLUSIVE", sc["reason"] or ""
            )
        else:
            plots.render_timeline(item.doc, target, item.name, sc["verdict"])
    plots.render_losses(plots.loss_series(docs), out / plot_paths["loss_comparison"], summary["baseline"])
    if "checkpoints" in plot_paths:
        plots.render_checkpoints(summary["checkpoints"], out / plot_paths["checkpoints"])
    else:  # the workflow declares every plot (Snakemake's report lists them): this one says why it is empty
        plots.render_placeholder(
            out / "plots/checkpoints.png",
            "Checkpoints and restarts",
            "no verify report has a checkpoint account",
        )
    if "at_scale" in plot_paths:
        plots.render_at_scale(summary.get("at_scale") or {}, out / plot_paths["at_scale"])
    for name, entry in summary["campaigns"].items():
        plots.render_campaign(entry, out / plot_paths[f"campaign_{name}"], name, by_name[name]["verdict"])
    for item in inputs:  # a campaign without its campaign section (no verify report): declared all the same
        if (
            family_of(scenario_fault(item.name, item.doc)) == "campaign"
            and item.name not in summary["campaigns"]
        ):
            sc = by_name[item.name]
            plots.render_placeholder(
                out / f"plots/campaign_{item.name}.png",
                f"Campaign — {item.name}: {sc['verdict'].upper()}",
                sc.get("reason") or "no campaign section in its verify report",
            )
    (out / "summary.json").write_text(
        json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    markdown = render_markdown(summary)
    (out / "summary.md").write_text(markdown, encoding="utf-8")
    # the same markdown, so the page and summary.md cannot disagree; after the plots, which it inlines
    (out / "summary.html").write_text(html.render_html(summary, markdown, out), encoding="utf-8")
    (out / html.LANDING).write_text(html.landing_fragment(summary, markdown), encoding="utf-8")
    (out / "junit.xml").write_text(render_junit(summary), encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    except SystemExit as exc:  # argparse: --help exits 0, errors 2
        return int(exc.code or 0)
    try:
        pairs = _verify_pairs(args.verify)
        if args.results is not None:
            known = {name for name, _ in pairs}
            pairs += [(n, p) for n, p in discover_results(args.results, args.expect) if n not in known]
        elif args.expect:
            raise UsageError("--expect needs --results")
        if not pairs and args.results is not None:
            raise UsageError(f"no scenario under {args.results} (no <scenario>/verify.json or attempt.json)")
        if not pairs:
            raise UsageError("give --verify NAME=PATH (repeatable) or --results DIR")
        mtbf = _mtbf(args.mtbf_hours, args.gpus_for_mtbf)
        attempts = dict(_verify_pairs(args.attempt))  # the same NAME=VALUE form
        attempts = {name: str(value) for name, value in attempts.items()}
        for flag, value in (
            ("--ckpt-interval-s", args.ckpt_interval_s),
            ("--ckpt-blocking-s", args.ckpt_blocking_s),
        ):
            if value is not None and value < 0 or (flag == "--ckpt-interval-s" and value == 0):
                raise UsageError(f"{flag} must be positive")
        timeouts_for = _timeouts_for(args.timeouts_for)
        if problems := at_scale_cli.prior_problems(args.prior):
            raise UsageError(problems[0])
        try:
            scale = at_scale_cli.parse_scale(args.scale) if args.scale else None
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
    except UsageError as exc:
        print(f"ftqual report: {exc}", file=sys.stderr)
        return 2
    preflight = args.preflight
    if preflight is None and args.results is not None:
        preflight = args.results / "preflight.json"
    out = args.out or args.results or Path("results")
    inputs = [load_verify(name, path) for name, path in pairs]
    options = ReportOptions(
        mtbf=mtbf,
        ckpt_interval_s=args.ckpt_interval_s,
        ckpt_blocking_s=args.ckpt_blocking_s,
        baseline=args.baseline,
        attempts=attempts,
        timeouts_for=timeouts_for,
        scale=scale,
        prior=args.prior,
        interrupted=args.interrupted,
    )
    summary = write_report(inputs, preflight, out, options)
    print(f"{summary['headline']}\nwrote {out}/summary.md, summary.html, summary.json, junit.xml, plots/")
    return 0
