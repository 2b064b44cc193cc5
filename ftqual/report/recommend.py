"""`ftqual recommend-timeouts RESULTS`: a passed qualification's timeouts, as flags and config.

`ftqual recommend-timeouts [RESULTS]`: the timeouts a qualified set of runs recommends, as ft_launcher
flags and as a config snippet to rerun the scenarios under (`--configfile`); the rerun's report proves them.
RESULTS defaults to `results/`, where the workflow writes; it prints the command to run next.

It reads the summary the workflow's gate published (`RESULTS/summary.json`, or that file named directly):
its measured sections and the timeouts they ran under. It refuses, in one line and exit 2, a summary that is
missing, malformed or not a PASS (a recommendation is made only from runs that qualified), or one in which no
section was measured. The rule is `ftqual.report.timeouts`' (NVRx's safety factor, ftqual's floors).

A recommendation holds for the job shape, stack and storage it was measured on: the snippet records them as
`timeouts_for: {job, stack, storage}` (summary.json's `job.digest`, `stack_identity.digest`, `storage`;
null where the summary has none: "job shape unknown"), so that a run of another job shape under them is
refused before launch, or marked by the report (`ftqual.report.scope`). Each section says whether it rests on
the measurement or on ftqual's floor: a floor is no measurement of a larger job.

A job that evaluates (`--eval-interval`, `--eval-iters`) runs its eval steps in NVRx's `step` section: the
snippet says whether the step recommendation covers them (summary.json `timeouts.evaluation.note`: the
longest step was an eval step at iteration N, or no evaluation ran in the measured runs and the
recommendation does not cover one).

Where the runs measured stops (summary.json `recurring`: faults that come back, curable controls), the
snippet adds the restart policy they support as comments for the job's own flags (`max_no_progress_cycles`,
`max_restarts`, the restart agent's stop action): ftqual.report.recurring.restart_policy; nothing otherwise.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ftqual.report import recurring as recurring_mod
from ftqual.report import timeouts as tt

SNIPPET_NAME = "timeouts-recommended.yaml"
DEFAULT_RESULTS = Path("results")


class RecommendError(Exception):
    """Why no recommendation can be made, in one line."""


@dataclass(frozen=True)
class Recommendation:
    recommended: dict[str, float]
    measured_under: dict[str, float]
    observed: dict[str, tuple[float | None, str | None]]
    rule: str
    source: str  # the summary it was made from
    created_at: str | None
    stack: str | None
    job: str | None = None  # the job shape's digest (summary `job.digest`), None: unknown
    job_describe: str | None = None
    storage: str | None = None  # the storage floor measured, in words
    basis: dict[str, str] | None = None  # per section: measured | floor | configured
    evaluation: str | None = None  # what the step recommendation says of evaluation; None: the job has none
    restart_policy: tuple[str, ...] = ()  # the snippet's comment lines on restarts (none: nothing measured)


def _summary_path(target: Path) -> Path:
    return target / "summary.json" if target.is_dir() else target


def load_summary(target: Path) -> tuple[Path, dict]:
    path = _summary_path(target)
    if not path.is_file():
        raise RecommendError(f"no summary at {path}: run the workflow first (its gate writes summary.json)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise RecommendError(f"{path}: unreadable summary ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("timeouts"), dict):
        raise RecommendError(f"{path}: not an ftqual summary with a timeouts table (an older ftqual's?)")
    return path, doc


def recommendation(path: Path, doc: Mapping, floors: bool = True) -> Recommendation:
    """The recommendation of one summary (pure); RecommendError when it cannot be made from it."""
    if doc.get("verdict") != "pass":
        raise RecommendError(
            f"{path}: the verdict is {doc.get('verdict')!r}, not 'pass': timeouts are recommended only from "
            "runs that qualified"
        )
    rows = {row.get("section"): row for row in doc["timeouts"].get("rows", []) if isinstance(row, Mapping)}
    observed = {name: tt._num((rows.get(name) or {}).get("observed_s")) for name in tt.SECTIONS}
    if all(value is None for value in observed.values()):
        raise RecommendError(f"{path}: no section was measured in these runs: nothing to recommend from")
    under = {name: tt._num((rows.get(name) or {}).get("timeout_s")) for name in tt.SECTIONS}
    unknown = [name for name, value in under.items() if value is None]
    if unknown:
        raise RecommendError(f"{path}: the timeouts the runs ran under are unknown for {', '.join(unknown)}")
    recommended = {name: tt.recommend(observed[name], under[name], name, floors) for name in tt.SECTIONS}
    identity = doc.get("stack_identity") if isinstance(doc.get("stack_identity"), Mapping) else {}
    job = doc.get("job") if isinstance(doc.get("job"), Mapping) else {}
    return Recommendation(
        recommended={k: float(v) for k, v in recommended.items() if v is not None},
        measured_under={k: float(v) for k, v in under.items() if v is not None},
        observed={name: (observed[name], (rows.get(name) or {}).get("observed_in")) for name in tt.SECTIONS},
        rule=tt.RULE if floors else tt.RULE_NO_FLOORS,
        source=str(path),
        created_at=doc.get("created_at") if isinstance(doc.get("created_at"), str) else None,
        stack=identity.get("digest") if isinstance(identity.get("digest"), str) else None,  # type: ignore[union-attr]
        job=job.get("digest") if isinstance(job.get("digest"), str) else None,  # type: ignore[union-attr]
        job_describe=job.get("describe") if isinstance(job.get("describe"), str) else None,  # type: ignore[union-attr]
        storage=storage_words(doc.get("storage")),
        basis={name: tt.basis(observed[name], name, floors) for name in tt.SECTIONS},
        evaluation=evaluation_note(doc["timeouts"]),
        restart_policy=tuple(recurring_mod.restart_policy(doc.get("recurring"), doc.get("restart_agent"))),
    )


def evaluation_note(timeouts: Mapping) -> str | None:
    """summary.json's `timeouts.evaluation.note` (None: no report named an evaluation)."""
    record = timeouts.get("evaluation")
    note = record.get("note") if isinstance(record, Mapping) else None
    return note if isinstance(note, str) and note else None


def storage_words(storage: object) -> str | None:
    """The preflight's storage floor in one phrase (path, filesystem, bandwidths), None without one."""
    if not isinstance(storage, Mapping):
        return None
    parts = [str(storage[k]) for k in ("path", "filesystem") if isinstance(storage.get(k), str)]
    for key, label in (("write_gbps", "write"), ("read_gbps", "read")):
        value = tt._num(storage.get(key))
        if value is not None:
            parts.append(f"{label} {value:g} GB/s")
    return ", ".join(parts) or None


def _mapping(values: Mapping[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {values[k]:g}" for k in tt.SECTIONS) + "}"


def _for(rec: Recommendation) -> str:
    """The snippet's `timeouts_for` as a YAML flow mapping (JSON strings are valid YAML)."""
    return (
        "{"
        + ", ".join(
            f"{k}: {json.dumps(v)}"
            for k, v in (("job", rec.job), ("stack", rec.stack), ("storage", rec.storage))
        )
        + "}"
    )


def snippet(rec: Recommendation) -> str:
    """The config snippet: `timeouts` (the recommendation), `timeouts_from` (what it was measured under)."""
    seen = ", ".join(
        f"{name} {value:.2f} s ({where})" if value is not None else f"{name} not measured (kept)"
        for name, (value, where) in rec.observed.items()
    )
    made = f"made {rec.created_at}" if rec.created_at else "no creation time"
    stack = f", stack {rec.stack}" if rec.stack else ""
    job = (
        f"job shape {rec.job}" + (f" ({rec.job_describe})" if rec.job_describe else "")
        if rec.job
        else "job shape unknown (the runs' reports carry no job: a recommendation for no job in particular)"
    )
    basis = rec.basis or {}
    floored = [name for name in tt.SECTIONS if basis.get(name) == "floor"]
    floor_lines = (
        [
            f"# Rests on ftqual's floor, not the measurement: {', '.join(floored)} (5 x observed is",
            "# below the floor). A floor is a lower bound for a job too small to measure, not a figure",
            "# for a larger one: a job whose save or load takes longer must be qualified itself",
            "# (docs/checks.md, Why the floors).",
        ]
        if floored
        else []
    )
    return "\n".join(
        [
            f"# Timeouts recommended by `ftqual recommend-timeouts` from {rec.source} ({made}{stack}).",
            f"# Rule: {rec.rule}.",
            f"# Largest observed: {seen}.",
            f"# Holds for: {job}; stack {rec.stack or 'unknown'}; storage {rec.storage or 'not measured'}.",
            "# A run of another job shape under them is refused before launch unless",
            "# allow_timeouts_for_other_job: true (the report then marks them 'recommended for another",
            "# job shape').",
            *floor_lines,
            *([f"# Evaluation: {rec.evaluation}."] if rec.evaluation else []),
            *rec.restart_policy,
            "# Rerun the scenarios under them: add this file last to the --configfile list. The report's",
            "# Timeouts section then proves them (no healthy section reaches one, each hang is caught",
            "# within its section's timeout + the rank monitor interval) or shows the run disproving them.",
            f"timeouts: {_mapping(rec.recommended)}",
            f"timeouts_from: {_mapping(rec.measured_under)}",
            f"timeouts_for: {_for(rec)}",
            "",
        ]
    )


def _slurm_jobs(doc: Mapping) -> set[str]:
    """The Slurm jobs the summary's attempts ran in (verify.json `attempt.machine.slurm_job_id`)."""
    jobs = set()
    for sc in doc.get("scenarios") or []:
        attempt = sc.get("attempt") if isinstance(sc, Mapping) else None
        machine = attempt.get("machine") if isinstance(attempt, Mapping) else None
        job = machine.get("slurm_job_id") if isinstance(machine, Mapping) else None
        if isinstance(job, str | int) and str(job):
            jobs.add(str(job))
    return jobs


def next_command(doc: Mapping, snippet_path: Path) -> str:
    """The workflow command that reruns the scenarios under the snippet: the Slurm profile where the attempts
    ran as Slurm jobs of their own (each its own job, as only that profile runs them), else the local one.
    The summary records no config files, so the snippet is the one `--configfile` named."""
    profile = "profiles/slurm" if len(_slurm_jobs(doc)) > 1 else "profiles/local"
    return f"snakemake --profile {profile} --configfile {shlex.quote(str(snippet_path))}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ftqual recommend-timeouts",
        description="Recommend timeouts from a passed workflow's summary; write them as a config snippet.",
    )
    parser.add_argument(
        "results",
        type=Path,
        nargs="?",
        default=DEFAULT_RESULTS,
        help=f"the workflow's results/ (or a summary.json); default {DEFAULT_RESULTS}/",
    )
    parser.add_argument(
        "--output",
        "-o",
        type=Path,
        help=f"the snippet's file (default RESULTS/{SNIPPET_NAME}; -: stdout)",
    )
    parser.add_argument(
        "--no-floors", action="store_true", help="NVRx's rule alone (5 x observed), without ftqual's floors"
    )
    args = parser.parse_args(argv)
    try:
        path, doc = load_summary(args.results)
        rec = recommendation(path, doc, floors=not args.no_floors)
    except RecommendError as exc:
        print(f"ftqual recommend-timeouts: {exc}", file=sys.stderr)
        return 2
    text = snippet(rec)
    print(tt.flags(rec.recommended))
    if rec.evaluation:
        print(f"evaluation: {rec.evaluation}")
    out = args.output if args.output is not None else path.parent / SNIPPET_NAME
    if str(out) != "-":
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"ftqual recommend-timeouts: cannot write {out}: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {out}; prove it by rerunning the scenarios under it:")
        print(f"  {next_command(doc, out)}")
        print(
            "  (the summary does not record the config files the qualified run was given: if it had "
            "--configfile FILES, give them first and this file last)"
        )
    else:
        print(text, end="")
    return 0
