"""Fault scenarios: no process of an earlier cycle outlived it (leftovers/<host>.cycle<c>.json)."""

from __future__ import annotations

from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, plain
from ftqual.verification.evidence.snapshot import RunSnapshot

NO_LEFTOVERS = "no_leftovers"
PREDATES = "not recorded (run predates leftovers sampling)"
MAX_NAMED = 10  # leftover processes named in the detail


def _cycles(snap: RunSnapshot) -> set[int] | None:
    """The cycles that ran: cycle_infos' records and the per-cycle logs; None when neither is known."""
    found: set[int] = set()
    known = False
    if snap.ok("cycle_infos") and snap.cycles is not None:
        found.update(snap.cycles.cycle_numbers)
        known = True
    if snap.ok("train_logs"):
        found.update(log.cycle for log in snap.train_logs)
        known = True
    return found if known else None


def no_leftovers(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: when each cycle c >= 1 started, no process of an earlier cycle on the same host was still
    running (same pid, same start time) and none held GPU memory: every host that ran c wrote
    `leftovers/<host>.cycle<c>.json` listing every earlier worker of its pids/ records, none `alive`, none
    in `gpu.held_by_earlier`. A GPU not sampled (no nvidia-smi) is said in the detail, not a failure."""
    cid = NO_LEFTOVERS
    if not exp.faulty:
        return skip(cid, "no fault in this scenario")
    if not snap.meta.leftovers_recorded:
        return skip(cid, PREDATES)
    leftovers = snap.leftovers
    if leftovers is None or not snap.ok("leftovers"):
        return inconclusive(cid, snap.reason("leftovers"))
    ran = _cycles(snap)
    if ran is None:
        return inconclusive(cid, f"which cycles ran is unknown: {snap.reason('cycle_infos', 'train_logs')}")
    wanted = sorted(c for c in ran if c >= 1)
    if not wanted:
        return inconclusive(cid, "no cycle after the first ran: no leftovers were sampled")
    f = Findings(cid)
    leftover: list[str] = []
    sampled: list[str] = []
    unsampled: dict[str, list[str]] = {}
    for cycle in wanted:
        hosts = leftovers.hosts_of(cycle)
        if not hosts and (snap.meta.nnodes or 1) == 1 and snap.meta.host:
            hosts = {snap.meta.host}
        if not hosts:
            f.unknown(f"which hosts ran cycle {cycle} is unknown (no pids/<host>.cycle{cycle}.rank<r>.json)")
            continue
        for host in sorted(hosts):
            record = leftovers.records.get((host, cycle))
            if record is None:
                f.unknown(
                    f"no leftovers/{host}.cycle{cycle}.json: what cycle {cycle} found on {host} is unknown"
                )
                continue
            if record.error:
                f.unknown(record.error, record.ref)
                continue
            where = f"{host} cycle {cycle}"
            for proc in record.alive:
                leftover.append(f"{proc.describe()} still running on {host} when cycle {cycle} started")
                f.cite(record.ref)
            for proc in record.held_by_earlier:
                leftover.append(f"{proc.describe()} held GPU memory on {host} when cycle {cycle} started")
                f.cite(record.ref)
            listed = {proc.pid for proc in record.earlier}
            unlisted = [
                p for p in leftovers.pids if p.host == host and p.cycle < cycle and p.pid not in listed
            ]
            if unlisted:
                f.unknown(
                    f"leftovers/{host}.cycle{cycle}.json does not list {len(unlisted)} earlier worker(s) of "
                    f"pids/ (first: {unlisted[0].ref.path}): not all were looked for",
                    record.ref,
                    unlisted[0].ref,
                )
            if record.unreadable_pid_records:
                f.unknown(
                    f"leftovers/{host}.cycle{cycle}.json: the sampler could not read pid record(s) "
                    f"{', '.join(record.unreadable_pid_records[:3])}",
                    record.ref,
                )
            if not record.gpu_sampled:
                unsampled.setdefault(record.gpu_error or "no reason given", []).append(where)
            sampled.append(where)
            f.cite(record.ref)
    if leftover:
        more = f" (and {len(leftover) - MAX_NAMED} more)" if len(leftover) > MAX_NAMED else ""
        f.problem("leftovers of earlier cycles: " + "; ".join(leftover[:MAX_NAMED]) + more)
    f.values.update(records=len(sampled), leftovers=len(leftover))
    if sampled:
        f.fact(
            f"{len(sampled)} leftovers record(s) ({', '.join(sampled[:8])}"
            f"{', ...' if len(sampled) > 8 else ''}): no earlier worker alive, none holding GPU memory"
        )
    _gpu_reclaims(snap, f)
    for why, where in unsampled.items():
        text = f"GPU not sampled ({why}) on {', '.join(where[:8])}: GPU memory not checked"
        f.fact(text)
        f.note(text)
    return f.result()


def _gpu_reclaims(snap: RunSnapshot, f: Findings) -> None:
    """NVRx's own GPU-memory check before each replacement (launcher.log): how long it waited, and a note
    where it gave up. Runs whose log has no such line (no GPU, an NVRx without the check) say nothing."""
    launcher = snap.launcher if snap.ok("launcher_log") else None
    reclaims = launcher.gpu_reclaims if launcher is not None else ()
    if not reclaims:
        return
    f.values["gpu_reclaim_s_max"] = max(r.waited_s for r in reclaims)
    for item in reclaims:
        if not item.reclaimed:
            # Not a failure by itself: NVRx cannot tell whose memory it was (another job on a shared GPU
            # holds some too); the leftovers records above say whether an earlier worker held it.
            f.note(
                f"NVRx gave up waiting for GPU memory after {item.waited_s:g} s and started the replacement "
                "anyway (the restart includes that wait; see the leftovers records for who held it)",
                item.ref,
            )
    done = [r for r in reclaims if r.reclaimed]
    if done:
        slowest = max(done, key=lambda r: r.waited_s)
        f.fact(
            f"NVRx's GPU-memory check before {len(done)} replacement(s): reclaimed, at most "
            f"{slowest.waited_s:g} s of waiting (GPU {slowest.gpu})",
            slowest.ref,
        )


SPEC = CheckSpec(
    "no_leftovers",
    "no process of a failed cycle was alive when the next cycle started, and (where nvidia-smi could be"
    " asked) none held GPU memory, on every node",
    plain(no_leftovers),
    waived_by=("node_loss_outcome",),
)
