"""Which job, stack and storage a timeouts recommendation holds for, and whether a run is another (pure).

A recommendation is measured on one job shape (run.json `job`: the model, its parallel layout, its
checkpoint's size; `job.digest` names it), one stack (the stack identity's digest) and one storage (the
preflight's `storage` floor). `ftqual recommend-timeouts` writes them as `timeouts_for` beside the timeouts.
Used with another job shape, the timeouts are another job's: a save that takes 4 minutes there meets a
checkpointing timeout made from a 15-second one. So:
- before launch (`launch_problem`, the run_scenario rule): a scenario whose job shape differs is refused in
  one line, unless the config's `allow_timeouts_for_other_job` is true (a deliberate choice: the report then
  proves or disproves them as for any timeouts);
- in the report (`scope`): the timeouts are "recommended for another job shape" (or "job shape unknown"
  where the runs' verify reports carry no `job`, e.g. recorded before it existed).
The stack and the storage are said, not refused: a stack or storage change is re-proven by the rerun itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

SAME = "same job shape"
OTHER = "recommended for another job shape"
UNKNOWN = "job shape unknown"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def job_digest(doc: Mapping | None) -> str | None:
    """The job shape's digest a record carries (`job.digest`: run.json, verify.json, summary.json,
    preflight.json), None when it carries none."""
    job = (doc or {}).get("job")
    return _text(job.get("digest")) if isinstance(job, Mapping) else None


def jobs_of(docs: Iterable[tuple[str, Mapping]]) -> dict | None:
    """summary.json's `job`: the job shape the verify reports ran (their shared `job` record), with
    `by_scenario` digests; `digest` null when they differ or one carries none; None when none carries one."""
    by_scenario, first = {}, None
    for name, doc in docs:
        job = doc.get("job") if isinstance(doc, Mapping) else None
        by_scenario[name] = job_digest(doc)
        if first is None and isinstance(job, Mapping):
            first = dict(job)
    if first is None:
        return None
    digests = set(by_scenario.values())
    shared = next(iter(digests)) if len(digests) == 1 else None
    keys = (
        "model",
        "describe",
        "params",
        "checkpoint_bytes_estimate",
        "gpu_memory_bytes_estimate",
        "megatron_args",
        "batch",
        "evaluation",
        "replaced",
    )
    out = {key: first.get(key) for key in keys}
    return {"digest": shared, **out, "by_scenario": by_scenario}


def scope(timeouts_for: Mapping | None, job: Mapping | None, stack: str | None) -> dict | None:
    """summary.json's `timeouts.scope`: what the timeouts the runs ran under were recommended for, against
    what ran. None when the runs ran under no recommendation's `timeouts_for`."""
    if not isinstance(timeouts_for, Mapping):
        return None
    wanted = _text(timeouts_for.get("job"))
    ran = _text((job or {}).get("digest"))
    if wanted is None or ran is None:
        status, line = (
            UNKNOWN,
            "job shape unknown: "
            + ("the recommendation names none" if wanted is None else "the runs' reports carry no job shape"),
        )
    elif wanted == ran:
        status, line = SAME, f"recommended for this job shape ({ran})"
    else:
        status, line = OTHER, f"recommended for another job shape ({wanted}), not the one that ran ({ran})"
    stack_for = _text(timeouts_for.get("stack"))
    if stack_for and stack and stack_for != stack:
        line += f"; measured on stack {stack_for}, run on {stack}"
    return {
        "status": status,
        "line": line,
        "timeouts_for": {k: timeouts_for.get(k) for k in ("job", "stack", "storage")},
        "job": ran,
        "stack": stack,
    }


def scope_problem(timeouts_for: Mapping | None, job: str | None, allow: bool) -> str | None:
    """The one-line refusal of a launch under timeouts recommended for another job shape; None when the
    shapes agree, either is unknown, or the config allows it."""
    wanted = _text((timeouts_for or {}).get("job"))
    if allow or wanted is None or job is None or wanted == job:
        return None
    return (
        f"the timeouts were recommended for job shape {wanted}, this job is {job}: recommend timeouts for "
        "this job (ftqual recommend-timeouts on its own qualification) or set "
        "allow_timeouts_for_other_job: true"
    )


def _read(path: str | Path | None) -> Mapping | None:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, Mapping) else None


def launch_problem(config: Mapping, preflight: str | Path | None, baseline: str | Path | None) -> str | None:
    """Before a scenario launches: its job shape, as the preflight (its `job`) or the baseline's verify
    report (its run's `job`) names it, against the config's `timeouts_for.job`."""
    timeouts_for = config.get("timeouts_for")
    if not isinstance(timeouts_for, Mapping) or _text(timeouts_for.get("job")) is None:
        return None
    job = job_digest(_read(preflight)) or job_digest(_read(baseline))
    return scope_problem(timeouts_for, job, bool(config.get("allow_timeouts_for_other_job")))


def report_argv(config: Mapping) -> list[str]:
    """`ftqual report`'s `--timeouts-for` (the config's), so that the report can say what they hold for."""
    timeouts_for = config.get("timeouts_for")
    if not isinstance(timeouts_for, Mapping):
        return []
    return ["--timeouts-for", json.dumps(dict(timeouts_for), sort_keys=True, separators=(",", ":"))]
