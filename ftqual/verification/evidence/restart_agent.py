"""The restart agent's verdict per failed cycle, timed against the cycles (verify.json's `restart_agent`).

NVRx's restart agent's verdicts in a run: per failed cycle STOP or RESTART, when it came, whether the
launcher acted on it; read once from logs/launcher.log (patterns/restart_agent.py), timed against the
cycles' records (cycle_infos/), for verify.json's `restart_agent` and the report's scoring of it
(ftqual/report/restart_agent.py). A run with the agent off (run.json `restart_agent` off or absent) has none.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.patterns import launcher as launcher_patterns
from ftqual.verification.evidence.patterns import restart_agent as P
from ftqual.verification.evidence.safeio import open_regular

LOG = "logs/launcher.log"
MAX_LOG_BYTES = 256 << 20  # a launcher log is megabytes at most; beyond this the reader stops


@dataclass(frozen=True)
class Verdict:
    cycle: int  # the failed cycle whose log was analysed (train_cycle<N>.log)
    decision: str  # STOP | RESTART | UNKNOWN (no failure signature found: the launcher restarts)
    basis: str | None  # its policy basis: general_retry_available, retry_budget_exhausted, ...
    at: datetime | None  # when the launcher logged it
    line: int


@dataclass(frozen=True)
class AgentLog:
    verdicts: tuple[Verdict, ...] = ()
    deferred: tuple[tuple[int, int, int], ...] = ()  # (cycle left unanalysed, cycle awaited, line)
    enforced_stop_line: int | None = None  # the launcher acted on a STOP (stop-action no-restart)
    service_ready: bool = False
    service_error: str | None = None
    readable: bool = True
    problems: list[str] = field(default_factory=list)


def read_agent_log(run_dir: Path, clock: Clock | None = None) -> AgentLog:
    path = Path(run_dir) / LOG
    clock = clock or Clock()
    try:  # a FIFO or a link out of the run is refused, never waited on (safeio)
        with open_regular(path, Path(run_dir)) as handle:
            data = handle.read(MAX_LOG_BYTES)
    except OSError as exc:
        return AgentLog(readable=False, problems=[f"{LOG} unreadable: {exc.strerror or exc}"])
    verdicts: list[Verdict] = []
    deferred: list[tuple[int, int, int]] = []
    enforced = None
    ready = False
    error = None
    for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if not any(needle in raw for needle in P.NEEDLES):
            continue
        if (m := P.VERDICT.search(raw)) is not None:
            if m["status"] != "completed":
                continue  # still analysing: not a verdict (an UNKNOWN that completed is one: no signature)
            basis = P.BASIS.search(m["reason"])
            verdicts.append(
                Verdict(
                    int(m["cycle"]), m["decision"], basis[1] if basis else None, _time(raw, clock), number
                )
            )
        elif P.ENFORCED_STOP.search(raw):
            enforced = enforced or number
        elif (m := P.DEFERRED.search(raw)) is not None:
            deferred.append((int(m[1]), int(m[2]), number))
        elif P.SERVICE_READY.search(raw):
            ready = True
        elif error is None and (m := P.SERVICE_FAILED.search(raw)) is not None and "ready" not in raw:
            if "Starting managed" not in raw and "PID=" not in raw:
                error = m[1].strip()
    return AgentLog(tuple(verdicts), tuple(deferred), enforced, ready, error)


def _time(raw: str, clock: Clock) -> datetime | None:
    m = launcher_patterns.NVRX_PREFIX.match(raw)
    return clock.parse_local(m["ts"]) if m else None


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat().replace("+00:00", "Z")


def record(snap, mode: str) -> dict:
    """verify.json's `restart_agent`: the mode, each failed cycle's wall time and verdict (none where the
    service did not answer before the job ended, or deferred it), the launcher's stop, the world size.
    `snap` is the run's evidence snapshot (ftqual.verification.evidence.snapshot.RunSnapshot)."""
    log = read_agent_log(snap.run_dir, snap.clock)
    cycles = snap.cycles.records if snap.cycles is not None else ()
    numbers = sorted({c.cycle for c in cycles})
    first: dict[int, Verdict] = {}
    for v in log.verdicts:
        first.setdefault(v.cycle, v)
    rows = []
    for n in numbers:
        info = snap.cycles.by_cycle(n)
        last = n == numbers[-1]
        failed = not last or (snap.meta.exit_code not in (0, None))
        if not failed:
            continue
        wall = (info.end - info.start).total_seconds() if info and info.start and info.end else None
        verdict = first.get(n)
        rows.append(
            {
                "cycle": n,
                "start": _iso(info.start if info else None),
                "end": _iso(info.end if info else None),
                "wall_s": None if wall is None else round(wall, 3),
                "decision": verdict.decision if verdict else None,
                "basis": verdict.basis if verdict else None,
                "at": _iso(verdict.at) if verdict else None,
                "after_cycle_end_s": (
                    round((verdict.at - info.end).total_seconds(), 3)
                    if verdict and verdict.at and info and info.end
                    else None
                ),
                "line": verdict.line if verdict else None,
                "path": LOG if verdict else None,
            }
        )
    return {
        "mode": mode,
        "world_size": snap.meta.world_size,
        "service_ready": log.service_ready,
        "service_error": log.service_error,
        "failed_cycles": rows,
        "cycles": [{"cycle": n, "wall_s": _wall(snap.cycles.by_cycle(n))} for n in numbers],
        "deferred": [{"cycle": c, "awaiting": a, "line": line} for c, a, line in log.deferred],
        "enforced_stop_line": log.enforced_stop_line,
        "verdicts": [asdict(v) | {"at": _iso(v.at)} for v in log.verdicts],
        "problems": log.problems,
    }


def _wall(info) -> float | None:
    if info is None or info.start is None or info.end is None:
        return None
    return round((info.end - info.start).total_seconds(), 3)
