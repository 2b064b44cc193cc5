"""A campaign's cycles: one row per fault, the accumulation check, and goodput measured from the timeline.

Per fault k (measured on its single-fault view, ftqual.verification.checks.campaign.fault_view, with
ftqual.verification.metrics):
detection, restart (the failed cycle's end to the new cycle's start), checkpoint load, failure to first step,
and at the start of the replacement cycle what earlier cycles left (processes alive, this user's /dev/shm
segments, the agent's open file descriptors).

The trend rule (`cycles_do_not_accumulate`): for each of restart_s, checkpoint_load_s and recovery_s
(failure_to_first_step_s minus detection_s: the part that does not depend on the fault kind; a hang's
detection waits a timeout) grows when every cycle of the last third exceeds the median of the first third by
more than TREND_TOLERANCE (relative) plus TREND_SLACK_S (absolute: noise on a shared CPU). Every one, not
their median: what accumulates makes each later cycle slower, while noise makes one slow, and with 8 faults
a third is 2 cycles, whose median is the mean of two (one CI run saw 5.2 s in the first third and one
replacement start of the last third slow enough to carry the median of two to 12.3 s). The agent's open
descriptors likewise, with a slack of RESOURCE_SLACK; no earlier process alive at any cycle start; every cycle
has its train log and cycle record, every replacement cycle its leftovers record; the tracker names the newest
finalized checkpoint at the end. /dev/shm is judged in bytes and entries against the room it eats
(ftqual.verification.campaign.shm): it fails only where it would be full within the horizon of faults, and a
smaller leak
is a finding (its trend is kept in `trends`, not judged).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from ftqual.scenario.campaign_plan import DEFAULT_HORIZON_FAULTS
from ftqual.verification.campaign import goodput, shm
from ftqual.verification.checks.campaign import fault_view
from ftqual.verification.checks.result import CheckResult, Findings, skip
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.sections import save_spans
from ftqual.verification.evidence.snapshot import RunSnapshot
from ftqual.verification.metrics import fault_metrics

ACCUMULATION = "cycles_do_not_accumulate"
TREND_TOLERANCE = 0.5
TREND_SLACK_S = 2.0
RESOURCE_SLACK = 4
TIMED = ("restart_s", "checkpoint_load_s", "recovery_s")
COUNTED = ("shm_segments", "agent_open_fds")


@dataclass(frozen=True)
class CycleRow:
    fault_index: int
    fault: str | None
    rank: int | None
    placement: str | None
    cycle: int | None
    checkpoint_iteration: int | None
    fault_iteration: int | None
    restored_iteration: int | None
    lost_iterations: int | None
    detected_by: str | None
    injected_at: str | None
    restarted_at: str | None  # the replacement cycle's start: the restart on the campaign's time axis
    detection_s: float | None
    restart_s: float | None
    checkpoint_load_s: float | None
    failure_to_first_step_s: float | None
    recovery_s: float | None
    alive_at_start: int | None
    shm_segments: int | None
    agent_open_fds: int | None
    shm_bytes: int | None = None  # this user's /dev/shm entries, allocated bytes (None: names only)
    shm_free_bytes: int | None = None  # /dev/shm's free bytes (statvfs), the lowest over the hosts
    shm_free_inodes: int | None = None


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def rows(snap: RunSnapshot) -> list[CycleRow]:
    out = []
    for marker in snap.markers:
        view = fault_view(snap, marker)
        m = fault_metrics(view)
        detect, first = _num(m.get("detection_s")), _num(m.get("failure_to_first_step_s"))
        new = (marker.cycle or 0) + 1
        records = [r for (_, c), r in (snap.leftovers.records.items() if snap.leftovers else ()) if c == new]
        points = [p for p in (shm.point(r) for r in records) if p is not None]
        counts = [p.count for p in points]
        used = [p.allocated_bytes for p in points if p.allocated_bytes is not None]
        free = [p.free_bytes for p in points if p.free_bytes is not None]
        inodes = [p.free_inodes for p in points if p.free_inodes is not None]
        fds = [r.agent_open_fds for r in records if r.agent_open_fds is not None]
        out.append(
            CycleRow(
                fault_index=marker.number,
                fault=view.meta.fault,
                rank=view.meta.fault_rank,
                placement=marker.placement,
                cycle=marker.cycle,
                checkpoint_iteration=marker.checkpoint_iteration,
                fault_iteration=m.get("fault_iteration"),
                restored_iteration=m.get("restored_iteration"),
                lost_iterations=m.get("lost_iterations"),
                detected_by=m.get("detected_by"),
                injected_at=marker.injected_at.isoformat() if marker.injected_at else None,
                restarted_at=_started(snap, new),
                detection_s=detect,
                restart_s=_num(m.get("restart_s")),
                checkpoint_load_s=_num(m.get("checkpoint_load_s")),
                failure_to_first_step_s=first,
                recovery_s=round(first - detect, 3) if first is not None and detect is not None else None,
                alive_at_start=sum(len(r.alive) for r in records if r.error is None) if records else None,
                shm_segments=max(counts) if counts else None,
                agent_open_fds=max(fds) if fds else None,
                shm_bytes=max(used) if used else None,
                shm_free_bytes=min(free) if free else None,
                shm_free_inodes=min(inodes) if inodes else None,
            )
        )
    return out


def _started(snap: RunSnapshot, cycle: int) -> str | None:
    info = snap.cycles.by_cycle(cycle) if snap.cycles else None
    return info.start.isoformat() if info is not None and info.start is not None else None


def trend(values: list[float], tolerance: float, slack: float) -> dict:
    """The first third's median and its limit; the series grows when every value of the last third is over
    that limit (the lowest of them says so)."""
    third = max(1, len(values) // 3)
    first, tail = statistics.median(values[:third]), values[-third:]
    limit = first * (1 + tolerance) + slack
    return {
        "first_third_median": round(first, 3),
        "last_third_median": round(statistics.median(tail), 3),
        "last_third_lowest": round(min(tail), 3),
        "limit": round(limit, 3),
        "grows": min(tail) > limit,
        "cycles": len(values),
    }


def horizon_of(snap: RunSnapshot) -> int:
    """The faults /dev/shm must have room for: the plan's `horizon_faults` (campaign.horizon_faults)."""
    return snap.campaign.horizon_faults if snap.campaign is not None else DEFAULT_HORIZON_FAULTS


def cycles_do_not_accumulate(snap: RunSnapshot, table: list[CycleRow]) -> CheckResult:
    """Invariant: the module docstring's trend rule, the records of every cycle, the end state consistent,
    and room in /dev/shm for the horizon's faults at the rate the campaign leaked
    (ftqual.verification.campaign.shm)."""
    cid = ACCUMULATION
    if len(table) < 3:
        return skip(cid, f"{len(table)} faults: a trend needs at least 3 cycles")
    f = Findings(cid)
    trends = {}
    for key, tol, slack in [
        *((k, TREND_TOLERANCE, TREND_SLACK_S) for k in TIMED),
        *((k, 0.0, RESOURCE_SLACK) for k in COUNTED),
    ]:
        series = [getattr(r, key) for r in table]
        known = [float(v) for v in series if v is not None]
        if not known:
            f.note(f"{key}: not measured in any cycle (the workload does not log it)")
        elif len(known) < len(series):
            f.unknown(f"{key} not measured in {len(series) - len(known)} of {len(series)} cycles")
        if len(known) < 3:
            continue
        t = trends[key] = trend(known, tol, slack)
        if t["grows"] and key != "shm_segments":  # /dev/shm: judged against its room below
            f.problem(
                f"{key} grows over the campaign: every cycle of the last third above the limit "
                f"{t['limit']} (their lowest {t['last_third_lowest']}, first-third median "
                f"{t['first_third_median']})"
            )
    f.values["trends"] = trends
    leaks = _shm_room(snap, f, horizon_of(snap))
    for r in table:
        new = (r.cycle or 0) + 1
        if r.alive_at_start:
            f.problem(
                f"{r.alive_at_start} process(es) of earlier cycles alive at the start of cycle {new}",
                Ref(f"leftovers/*.cycle{new}.json"),
            )
    _records(snap, f, len(table))
    if not f.problems and not f.unknowns:
        what = "process or descriptor count" if leaks else "leftover"
        f.fact(
            f"over {len(table)} cycles no restart, load or recovery time and no {what} grows "
            f"(no last third entirely over the first third's median + {TREND_TOLERANCE:.0%} + "
            f"{TREND_SLACK_S:g} s)"
        )
        for text, ref in leaks:
            f.fact(text, ref)
    return f.result()


def _shm_room(snap: RunSnapshot, f: Findings, horizon: int) -> list[tuple[str, Ref]]:
    """/dev/shm per host (ftqual.verification.campaign.shm): a problem where it would be full within `horizon`
    faults,
    an unknown where a leak's bytes or room are not recorded; the leaks that fit, as findings (a note each,
    returned to be said in a passing detail)."""
    found, gaps = shm.projections(snap, horizon)
    hosts = [p.as_dict() for p in found]
    f.values["shm"] = {"horizon_faults": horizon, "hosts": hosts, "unsampled": gaps[:20]}
    findings = []
    for p in found:
        ref, text = Ref(p.ref), shm.describe(p)
        if not p.leaks:
            if not p.known:
                f.note(
                    f"/dev/shm on {p.host}: its entries did not grow from cycle {p.from_cycle} to "
                    f"{p.to_cycle}; their sizes and the room left were not recorded (names only)",
                    ref,
                )
            continue
        if p.within_horizon:
            f.problem(
                f"{text}: /dev/shm would be full within the horizon of {horizon:,} faults "
                "(campaign.horizon_faults)",
                ref,
            )
        elif p.within_horizon is None:
            why = "the records keep names only" if p.bytes_per_fault is None else "statvfs was not recorded"
            f.unknown(
                f"{text}; bytes per fault or the room left unknown ({why}): whether /dev/shm fills within "
                f"the horizon of {horizon:,} faults cannot be told",
                ref,
            )
        else:
            finding = f"a leak, not a failure: {text}, beyond the horizon of {horizon:,} faults"
            f.note(finding, ref)
            findings.append((finding, ref))
    return findings


def _records(snap: RunSnapshot, f: Findings, faults: int) -> None:
    for cycle in range(faults + 1):
        if snap.train_log(cycle) is None:
            f.problem(f"no logs/train_cycle{cycle}.log")
        if snap.cycles is None or snap.cycles.by_cycle(cycle) is None:
            f.problem(f"no cycle_infos record of cycle {cycle}")
        if cycle and (snap.leftovers is None or not any(c == cycle for _, c in snap.leftovers.records)):
            f.problem(f"no leftovers record at the start of cycle {cycle}")
    ckpt = snap.checkpoints
    if ckpt is None or ckpt.tracker.value is None:
        f.unknown("no readable checkpoint tracker at the end")
        return
    done = [d.iteration for d in ckpt.dirs if d.has_metadata]
    if not done or ckpt.tracker.value != max(done):
        newest = max(done) if done else None
        f.problem(
            f"the tracker says {ckpt.tracker.value}, the newest finalized checkpoint is {newest}",
            ckpt.tracker.ref,
        )


def measured_goodput(snap: RunSnapshot, table: list[CycleRow]) -> dict:
    """Productive training time over wall time, from the run's own timeline, with the gap's parts, and the
    Young/Daly projection for the MTBF the campaign ran at."""
    by_cycle: dict[int, list] = {}
    for line in snap.iterations:
        if line.t is not None:
            by_cycle.setdefault(line.cycle, []).append(line)
    steps = []  # (cycle, iteration, seconds, of them blocked in a save) of every step after its cycle's first
    for cycle, lines in by_cycle.items():
        lines.sort(key=lambda x: x.ref.line)
        log = snap.train_log(cycle)
        spans = [(a.t, b.t) for a, b in save_spans(log)] if log is not None else []
        for a, b in zip(lines, lines[1:], strict=False):
            # a save's synchronous part between two iteration lines blocked training: not productive
            blocked = sum((end - start).total_seconds() for start, end in spans if a.t <= start < b.t)
            steps.append((cycle, b.iteration, (b.t - a.t).total_seconds(), blocked))
    last_cycle = {}
    for cycle, iteration, *_ in steps:
        last_cycle[iteration] = max(cycle, last_cycle.get(iteration, -1))
    productive = sum(s - blocked for c, i, s, blocked in steps if last_cycle[i] == c)
    saves = sum(blocked for c, i, _, blocked in steps if last_cycle[i] == c)
    lost = sum(s for c, i, s, _ in steps if last_cycle[i] != c)
    starts = [info.start for info in (snap.cycles.records if snap.cycles else ()) if info.start]
    ends = [line.t for lines in by_cycle.values() for line in lines]
    if not starts or not ends:
        return {"measured": None, "why": "no timed cycles or iterations"}
    wall = (max(ends) - min(starts)).total_seconds()
    detect = sum(r.detection_s or 0.0 for r in table)
    restart = sum((r.failure_to_first_step_s or 0.0) - (r.detection_s or 0.0) for r in table)
    first_info = snap.cycles.by_cycle(0) if snap.cycles else None
    first_step = min((x.t for x in by_cycle.get(0, [])), default=None)
    initial = (
        (first_step - first_info.start).total_seconds()
        if first_info and first_info.start and first_step
        else 0.0
    )
    parts = {
        "initial_startup_s": initial,
        "detection_s": detect,
        "restart_and_startup_s": restart,
        "lost_work_s": lost,
        "saves_s": saves,
    }
    parts["other_s"] = wall - productive - sum(parts.values())
    mtbf_s = wall / len(table) if table else None
    out = {
        "wall_s": round(wall, 3),
        "productive_s": round(productive, 3),
        "goodput_measured": round(productive / wall, 4) if wall > 0 else None,
        "gap_parts_s": {k: round(v, 3) for k, v in parts.items()},
        "mtbf_s": round(mtbf_s, 3) if mtbf_s else None,
    }
    if mtbf_s and table:
        interval = (
            statistics.median([s - b for *_, s, b in steps]) * (snap.meta.save_interval or 1)
            if steps
            else None
        )
        inputs = goodput.GoodputInputs(
            t_detect_s=detect / len(table),
            t_restart_s=restart / len(table),
            ckpt_blocking_s=None,
            ckpt_blocking_source="not measured (asynchronous saves)",
            ckpt_interval_s=interval,
        )
        point = goodput.project(inputs, goodput.MtbfPoint(mtbf_s / 3600.0))
        out["projected"] = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(point).items()}
    return out


def campaign_section(snap: RunSnapshot) -> tuple[dict, CheckResult]:
    """verify.json's `campaign` section and the accumulation check."""
    table = rows(snap)
    plan = snap.campaign
    section = {
        "seed": plan.seed if plan else None,
        "planned": plan.count if plan else None,
        "mtti_iterations": plan.mtti_iterations if plan else None,
        "plan": [asdict(f) for f in plan.faults] if plan else [],  # every planned fault, injected or not
        "cycles": [asdict(r) for r in table],
        "goodput": measured_goodput(snap, table),
        "trend_rule": {
            "tolerance": TREND_TOLERANCE,
            "slack_s": TREND_SLACK_S,
            "resource_slack": RESOURCE_SLACK,
        },
    }
    return section, cycles_do_not_accumulate(snap, table)
