"""How much of a finished workflow run's wall time was spent outside the training runs.

Sources, in order of preference:
- Snakemake's own log (`.snakemake/log/<start>.snakemake.log`): its name is the start time; every job start
  (`[<asctime>]` + `rule NAME:` / `localrule NAME:` + `jobid: N`) and end (`[<asctime>]` +
  `Finished jobid: N (Rule: NAME)`) is stamped to the second, in local time; the file's mtime is the end.
- `results/<scenario>/<attempt>/run.json`: `started_at` / `finished_at` (UTC) bound the training run of each
  scenario.
- Without a Snakemake log, the modification times of the files under results/ (less precise).

Overhead = wall time minus the union of the training intervals: preflight, verify, summary, the launcher's
own set-up around ft_launcher, and Snakemake's start-up and scheduling.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

_STAMP = re.compile(r"^\[(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(?:local)?(?:rule|checkpoint) (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_JOB_MSG = re.compile(r"^Job (\d+): ")
_FINISHED = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")
_LOGNAME = re.compile(r"^(\d{4}-\d\d-\d\dT\d{6}(?:\.\d+)?)\.snakemake\.log$")


def _local(text: str, fmt: str) -> float:
    return datetime.strptime(text, fmt).astimezone().timestamp()


def _utc(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def parse_snakemake_log(path: Path) -> tuple[float | None, float | None, dict[str, dict]]:
    """(start, end, jobs by id: {rule, start, end}) in epoch seconds."""
    start = end = None
    m = _LOGNAME.match(path.name)
    if m:
        stamp = m.group(1)
        start = _local(stamp, "%Y-%m-%dT%H%M%S.%f" if "." in stamp else "%Y-%m-%dT%H%M%S")
    jobs: dict[str, dict] = {}
    now: float | None = None
    pending_rule: str | None = None
    last_stamp = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        s = _STAMP.match(line)
        if s:
            now = last_stamp = _local(s.group(1), "%a %b %d %H:%M:%S %Y")
            pending_rule = None
            continue
        if now is None:
            continue
        if r := _RULE.match(line):
            pending_rule = r.group(1)
        elif (j := _JOBID.match(line)) and pending_rule:
            jobs.setdefault(j.group(1), {"rule": pending_rule, "start": now, "end": None})
            pending_rule = None
        elif f := _FINISHED.match(line):
            job = jobs.setdefault(f.group(1), {"rule": f.group(2), "start": None, "end": None})
            job["end"] = now
    if last_stamp is not None:
        end = last_stamp
    mtime = path.stat().st_mtime
    if end is None or 0 <= mtime - end < 120:
        end = mtime
    if start is None and jobs:
        start = min(j["start"] for j in jobs.values() if j["start"] is not None)
    return start, end, jobs


def _union(intervals: list[tuple[float, float]]) -> float:
    total = 0.0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def training_intervals(results: Path) -> dict[str, tuple[float, float]]:
    out = {}
    # results/<scenario>/<attempt slot>/run.json; the latest attempt of each scenario counts
    for run_json in sorted(results.glob("*/*/run.json"), key=lambda p: p.stat().st_mtime):
        try:
            data = json.loads(run_json.read_text())
            out[run_json.parent.parent.name] = (_utc(data["started_at"]), _utc(data["finished_at"]))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def overhead_report(results: Path, snakelog: Path | None = None, startup_s: float = 0.0) -> dict:
    """The overhead table. `startup_s`: Snakemake's start-up before it opens its log (imports, parsing the
    workflow), which the log cannot show; bench_verify passes its `snakemake -n` median as an estimate."""
    results = results.resolve()
    if snakelog is None:
        logs = sorted((results.parent / ".snakemake" / "log").glob("*.snakemake.log"))
        snakelog = logs[-1] if logs else None
    training = training_intervals(results)
    jobs: dict[str, dict] = {}
    source = "snakemake log"
    if snakelog is not None and snakelog.exists():
        start, end, jobs = parse_snakemake_log(snakelog)
    else:
        source = "file times under results/ (no Snakemake log)"
        times = [p.stat().st_mtime for p in results.rglob("*") if p.is_file()]
        starts = [s for s, _ in training.values()]
        start = min(times + starts) if times or starts else None
        end = max(times) if times else None
    if start is None or end is None or end <= start:
        return {"overhead_share": float("nan"), "markdown": "workflow overhead: no usable timestamps found"}
    wall = end - start + startup_s
    train = _union(list(training.values()))
    by_rule: dict[str, float] = {}
    job_spans = []
    for job in jobs.values():
        if job["start"] is None or job["end"] is None:
            continue
        by_rule[job["rule"]] = by_rule.get(job["rule"], 0.0) + job["end"] - job["start"]
        job_spans.append((job["start"], job["end"]))
    rows = [("training runs (run.json started_at..finished_at, union)", train)]
    for rule, secs in sorted(by_rule.items()):
        if rule == "run_scenario":
            rows.append(("run_scenario outside ft_launcher's training", max(0.0, secs - train)))
        elif rule != "all":
            rows.append((f"rule {rule}", secs))
    if startup_s:
        rows.append(("Snakemake start-up before its log (estimated: `snakemake -n` median)", startup_s))
    if job_spans:
        rows.append(("Snakemake scheduling, between jobs", max(0.0, wall - startup_s - _union(job_spans))))
    overhead = max(0.0, wall - train)
    lines = [
        f"Workflow overhead (from {source}; job times are stamped to the second):",
        "",
        "| component | seconds | share of wall |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {secs:.1f} | {secs / wall:.1%} |" for name, secs in rows]
    lines.append(f"| **outside training (overhead)** | **{overhead:.1f}** | **{overhead / wall:.1%}** |")
    lines.append(f"| wall time | {wall:.1f} | 100% |")
    return {
        "overhead_share": overhead / wall,
        "wall_s": wall,
        "training_s": train,
        "overhead_s": overhead,
        "by_rule_s": by_rule,
        "source": source,
        "markdown": "\n".join(lines),
    }
