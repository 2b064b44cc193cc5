"""`ftqual verify RUN_DIR [--baseline RUN_DIR] [--json PATH] [--replay-tolerance X]`.

snapshot (read every source once) -> checks (pure) -> metrics + timeline -> report. The report goes where
--json says (`-` for stdout) and nowhere else: run directories may be read-only evidence. A terminal summary,
one line per check, goes to stdout (stderr when the JSON does). Exit 0 pass, 1 fail, 3 inconclusive, 2 usage
or unreadable input. Each check in the report carries `gates` (whether its status enters the verdict); the
invariant each check proves is tabulated in docs/checks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ftqual import __version__
from ftqual.contract import family_of
from ftqual.verification import fastjson
from ftqual.verification import verdict as verdict_mod
from ftqual.verification.campaign.text import campaign_markdown
from ftqual.verification.causes import root_cause
from ftqual.verification.checkpoint_account import account
from ftqual.verification.checks import CheckResult, run_checks, run_plan_from
from ftqual.verification.checks.held import dumps_listing, held_metrics
from ftqual.verification.checks.run_plan import DEFAULT_BASELINE_TOLERANCE, DEFAULT_REPLAY_TOLERANCE
from ftqual.verification.evidence import RunMetaError, RunSnapshot, build_snapshot, restart_agent
from ftqual.verification.evidence.clock import iso_z
from ftqual.verification.evidence.excerpts import excerpts
from ftqual.verification.evidence.sections import run_sections
from ftqual.verification.evidence.spill import SpillError
from ftqual.verification.metrics import compute_metrics, timeline

SCHEMA = "ftqual.verify/v1"
# `not_applicable` has no code: only the workflow's verify rule writes it, for an attempt the stack cannot run
# (nothing launched, no run directory); `ftqual verify RUN_DIR` judges a run that ran, so it never yields it.
EXIT_CODES = {"pass": 0, "fail": 1, "inconclusive": 3}
USAGE_ERROR = 2
SUMMARY_METRICS = (
    "checkpoint_iteration",
    "fault_iteration",
    "restored_iteration",
    "lost_iterations",
    "detected_by",
    "detection_s",
    "teardown_s",
    "restart_s",
    "checkpoint_load_s",
    "failure_to_first_step_s",
    "wall_time_s",
    "iterations_per_s",
    "checkpoint_save_s_max",
)


def build_report(
    run_dir: Path | str,
    baseline_dir: Path | str | None = None,
    replay_tolerance: float = DEFAULT_REPLAY_TOLERANCE,
    baseline_tolerance: float = DEFAULT_BASELINE_TOLERANCE,
    attempt: Mapping[str, Any] | None = None,
) -> dict[str, object]:
    """Verify one run directory and return its report. Raises RunMetaError if a run.json is unusable.
    `attempt`: the workflow's record of the attempt (attempt.json: its launch job's exit and cause), which
    the verdict is composed with, once (ftqual.verification.verdict)."""
    snap = build_snapshot(Path(run_dir))
    baseline = build_snapshot(Path(baseline_dir)) if baseline_dir is not None else None
    exp = run_plan_from(snap.meta, replay_tolerance, baseline_tolerance)
    section = _campaign_section(snap)  # a campaign's cycles table and its accumulation check
    # Every check, in its declared order (what_held_the_rank and the campaign's accumulation check included).
    results = run_checks(snap, exp, baseline, None if section is None else lambda _: section)
    notes = [snap.clock.describe()] if snap.clock.assumed else []
    if baseline is not None and family_of(baseline.meta.fault) != "none":
        notes.append(
            f"baseline {baseline.meta.run_id} is a '{baseline.meta.fault}' run, not a no-fault baseline"
        )
    campaign_report = section[0] if section is not None else None
    # the ranks had sentinels: what held the rank, from their stack dumps
    held: dict[str, object] = held_metrics(snap) if snap.meta.dumps_recorded else {}
    checks = [r.as_dict() for r in results]
    # The verdict and its one-line cause, composed once, where every other reader reads them
    # (ftqual.verification.verdict): from the run directory and, in the workflow, the attempt's record.
    record = _run_record(snap)
    outcome = _launcher_outcome(snap, record)
    if attempt is not None:
        outcome = verdict_mod.with_attempt(outcome, attempt)

    def classify() -> dict | None:
        found = root_cause(snap.run_dir, record, snap.meta.exit_code, snap)
        if (found is None or not found.get("text")) and attempt is not None and outcome.job is not None:
            # the attempt's record may know a failed exit the run's own run.json does not (a killed launch)
            found = root_cause(snap.run_dir, dict(attempt), outcome.job.exit_code, snap)
        return found

    decision = verdict_mod.decide(checks, outcome, classify)
    decision = verdict_mod.with_holder(decision, held.get("held_by"))  # type: ignore[arg-type]
    report = {
        "schema": SCHEMA,
        "run_id": snap.meta.run_id,
        "scenario": snap.meta.scenario,
        "fault": snap.meta.fault,
        "verdict": decision.verdict,
        "checks": checks,
        "metrics": {**compute_metrics(snap), **held},
        "sections": run_sections(snap).as_dict(),
        "checkpoint_account": account(snap),
        "timeline": timeline(snap),
        "expected": exp.as_dict(),
        "sources": {name: status.as_dict() for name, status in snap.sources.items()},
        "clock": snap.clock.as_dict(),
        "baseline": _baseline_info(baseline),
        "notes": notes,
        "verifier": {"version": __version__, "generated_at": iso_z(datetime.now(UTC))},
    }
    if campaign_report is not None:
        report["campaign"] = campaign_report
    if snap.meta.job is not None:  # the job shape that ran: the report says which one its timeouts hold for
        report["job"] = snap.meta.job
    if snap.meta.dumps_recorded:
        report["stack_dumps"] = dumps_listing(snap)
    if (agent_mode := record.get("restart_agent")) in ("log", "stop"):  # NVRx's verdicts per failed cycle
        report["restart_agent"] = restart_agent.record(snap, agent_mode)
    report = verdict_mod.apply(report, decision)
    # the log lines the non-passing checks cite, quoted here so that the report never reopens the logs
    report["excerpts"] = excerpts(snap.run_dir, report["checks"])
    return report


def _campaign_section(snap: RunSnapshot) -> tuple[dict, CheckResult] | None:
    """A campaign's cycles table (goodput measured) and its accumulation check; None for any other run."""
    if family_of(snap.meta.fault) != "campaign":
        return None
    from ftqual.verification.campaign.cycles import campaign_section

    return campaign_section(snap)


def _run_record(snap: RunSnapshot) -> dict:
    try:
        data = json.loads((snap.run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _launcher_outcome(snap: RunSnapshot, record: dict) -> verdict_mod.LauncherOutcome:
    """ft_launcher's exit and the launcher's own finding, as the run directory's run.json records them."""
    error = record.get("launcher_error")
    return verdict_mod.LauncherOutcome(
        exit_code=snap.meta.exit_code,
        error=error if isinstance(error, str) and error else None,
        fault=snap.meta.fault,
        interrupted_by=snap.meta.interrupted_by,
        checkpoint_damage=snap.meta.checkpoint_damage,
    )


def _baseline_info(baseline: RunSnapshot | None) -> dict[str, object] | None:
    if baseline is None:
        return None
    return {"run_id": baseline.meta.run_id, "scenario": baseline.meta.scenario, "fault": baseline.meta.fault}


def check_by_id(report: dict[str, object], check_id: str) -> dict[str, object]:
    """The report's entry for one check (KeyError if the report has none)."""
    for item in report["checks"]:  # type: ignore[union-attr]
        if item["id"] == check_id:
            return item
    raise KeyError(check_id)


def exit_code_for(report: dict[str, object]) -> int:
    return EXIT_CODES.get(str(report.get("verdict")), USAGE_ERROR)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def summary_lines(report: dict[str, object]) -> list[str]:
    """The human summary: a header, one line per check (status, id, detail, first evidence), key metrics."""
    lines = [
        f"ftqual verify {report['run_id']} (scenario {report['scenario']}, fault {report['fault']}): "
        f"{str(report['verdict']).upper()}"
    ]
    for check in report["checks"]:  # type: ignore[union-attr]
        where = ""
        if check["evidence"]:
            first = check["evidence"][0]
            where = f" [{first['path']}:{first['line']}]" if first["line"] else f" [{first['path']}]"
        lines.append(f"  {check['status'].upper():<12} {check['id']:<31} {_cut(check['detail'], 150)}{where}")
    if report.get("cause"):
        lines.append(f"  cause: {report['cause']}")
    metrics = report.get("metrics") or {}
    shown = [f"{k}={metrics[k]}" for k in SUMMARY_METRICS if metrics.get(k) is not None]  # type: ignore[union-attr]
    if shown:
        lines.append("  metrics: " + " ".join(shown))
    for note in report.get("notes") or []:  # type: ignore[union-attr]
        lines.append(f"  note: {note}")
    if report.get("campaign"):  # the campaign's timeline and per-cycle table
        lines.append(campaign_markdown(report).rstrip("\n"))
    return lines


def report_text(report: dict[str, object]) -> str:
    """`json.dumps(report, indent=2) + "\n"`, byte for byte, without json's pure-Python indenting encoder."""
    return fastjson.dumps_indent2(report) + "\n"


def write_json(report: dict[str, object], target: str) -> None:
    text = report_text(report)
    if target == "-":
        sys.stdout.write(text)
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; a report is for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from exc
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ftqual verify",
        description=__doc__.splitlines()[0],
        epilog="exit codes: 0 pass, 1 fail, 3 inconclusive (evidence missing: never a pass), "
        "2 bad usage or unreadable input",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run directory to verify (read only)")
    p.add_argument(
        "--baseline",
        metavar="RUN_DIR",
        help="a no-fault run; with the same settings (run.json) its losses judge every iteration after "
        "the restore, otherwise it is compared for information",
    )
    p.add_argument("--json", metavar="PATH", help="write the JSON report here ('-' for stdout)")
    p.add_argument(
        "--replay-tolerance",
        type=_tolerance,
        default=DEFAULT_REPLAY_TOLERANCE,
        metavar="X",
        help=f"relative loss tolerance of replayed iterations (default {DEFAULT_REPLAY_TOLERANCE:g})",
    )
    p.add_argument(
        "--baseline-tolerance",
        type=_tolerance,
        default=DEFAULT_BASELINE_TOLERANCE,
        metavar="X",
        help="relative tolerance of the informative whole-run comparison with --baseline "
        f"(default {DEFAULT_BASELINE_TOLERANCE:g}; a same-settings baseline is judged at --replay-tolerance)",
    )
    return p


def verify_or_why(
    run_dir: Path | str, baseline_dir: Path | str | None = None, **options: Any
) -> tuple[dict[str, object] | None, str | None]:
    """`build_report(run_dir, baseline_dir, **options)`, or None and the one line saying why the input
    cannot be verified (`ftqual verify`'s usage-error line: the CLI prints it, the verify rule cites it)."""
    try:
        return build_report(run_dir, baseline_dir, **options), None
    except (RunMetaError, SpillError) as exc:  # the run's run.json, or this machine's temporary directory
        return None, f"ftqual verify: {exc}"
    except (OSError, ValueError, RecursionError, MemoryError) as exc:
        # Every known malformed input is a source marked missing or a RunMetaError; this is the last line,
        # so that input we did not foresee still gives one clear line and exit 2, never a traceback.
        return None, f"ftqual verify: cannot verify {run_dir}: {type(exc).__name__}: {exc}"


def main(argv: list[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code or 0)
    report, why = verify_or_why(
        args.run_dir,
        args.baseline,
        replay_tolerance=args.replay_tolerance,
        baseline_tolerance=args.baseline_tolerance,
    )
    if report is None:
        print(why, file=sys.stderr)
        return USAGE_ERROR
    out: TextIO = sys.stderr if args.json == "-" else sys.stdout
    try:
        print("\n".join(summary_lines(report)), file=out, flush=True)
    except BrokenPipeError:  # `ftqual verify ... | head`: the summary is a courtesy, the report still counts
        os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
    if args.json:
        try:
            write_json(report, args.json)
        except OSError as exc:
            print(f"ftqual verify: cannot write {args.json}: {exc}", file=sys.stderr)
            return USAGE_ERROR
    return exit_code_for(report)


if __name__ == "__main__":
    sys.exit(main())
