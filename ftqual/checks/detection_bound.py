"""A live fault was detected within the bound its timeouts promise (a check beyond the contract's).

The bound a user reads off a set of timeouts: a hang in a section is seen no later than that section's
timeout plus the rank monitor's check interval after it began. `ftqual recommend-timeouts` proposes timeouts;
a run under them proves that bound only through this check (and a healthy run through
`timeouts_not_exceeded`).
"""

from __future__ import annotations

from ftqual.checks.result import CheckResult, Findings, Scoped, inconclusive, per_injection, skip
from ftqual.checks.run_plan import RunPlan
from ftqual.contract import LIVE_FAULTS, RANK_MONITOR_INTERVAL_S
from ftqual.evidence import derive
from ftqual.evidence.run_meta import FaultMarker
from ftqual.evidence.snapshot import RunSnapshot

DETECTED_WITHIN_TIMEOUT = "detected_within_timeout"
# Timestamps of the injection marker and the launcher's line, and the monitor's own work after its check.
TOLERANCE_S = 1.0
PLACEMENTS = ("step", "checkpointing", "out_of_section", "setup")


def detected_within_timeout(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: every injected live fault (hang, gil_lock, gpu_hang) was detected (the launcher's first
    timeout line after the injection) at most the timeout of the section the rank was in at the injection
    (the marker's `section`; out of every section: the out-of-section timeout) + the rank monitor's check
    interval + 1 s after the injection. With placement `immediate` (or none in the marker), the fired
    section's timeout bounds it. A peer's shorter timeout catching it first is within the bound as well."""
    cid = DETECTED_WITHIN_TIMEOUT
    if exp.fault not in LIVE_FAULTS:
        return skip(cid, "not a live fault (only a hang, gil_lock or gpu_hang is detected by a timeout)")
    needed = [n for n in ("marker", "launcher_log") if not snap.ok(n)]
    if needed:
        return inconclusive(cid, snap.reason(*needed))
    if snap.marker is None:
        return inconclusive(cid, "no fault_injected.json: nothing was injected to detect")
    f = Findings(cid)
    if len(snap.markers) <= 1:
        _bound(snap, exp, f, snap.marker)
        return f.result()
    each = []
    for item, g in per_injection(f, snap.markers):
        _bound(snap, exp, g, item)
        each.append({"injection": item.number, **g.values})
    f.values.update({k: v for k, v in each[0].items() if k != "injection"})
    f.values["injections"] = each
    return f.result()


def _bound(snap: RunSnapshot, exp: RunPlan, f: Findings | Scoped, marker: FaultMarker) -> None:
    found = derive.detection(snap, marker)
    if found is None or found.timeout is None or found.t is None:
        f.unknown("no timestamped timeout line after the injection (failure_detected_and_restarted says why)")
        return
    if marker.injected_at is None:
        f.unknown("fault_injected.json has no injected_at", marker.ref)
        return
    fired = found.timeout.section or "out_of_section"
    # A placed fault's section is known (the marker's); `immediate` lands wherever the rank is, and the
    # marker's section can be stale there: the fired section bounds it.
    placed = marker.placement in PLACEMENTS
    section = (marker.section or "out_of_section") if placed else fired
    timeout = exp.timeouts.get(section)
    if timeout is None:
        f.unknown(f"run.json has no timeout for {section}")
        return
    took = (found.t - marker.injected_at).total_seconds()
    bound = float(timeout) + RANK_MONITOR_INTERVAL_S
    f.values.update(
        section=section, fired=fired, detection_s=round(took, 3), bound_s=bound, timeout_s=float(timeout)
    )
    what = f"the {section} timeout {float(timeout):g} s + rank monitor interval {RANK_MONITOR_INTERVAL_S:g} s"
    if took > bound + TOLERANCE_S:
        f.problem(
            f"detected {took:.2f} s after the injection, beyond {what} = {bound:g} s: a hang in {section} "
            "costs more than these timeouts promise",
            marker.ref,
            found.ref,
        )
    else:
        f.fact(f"detected {took:.2f} s after the injection ({fired} fired), within {what}", found.ref)
