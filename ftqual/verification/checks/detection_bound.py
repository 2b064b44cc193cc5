"""A live fault was detected within the bound its timeouts promise (a check beyond the contract's).

The bound a user reads off a set of timeouts: a hang in a section is seen no later than that section's
timeout plus the rank monitor's check interval after it began. `ftqual recommend-timeouts` proposes timeouts;
a run under them proves that bound only through this check (and a healthy run through
`timeouts_not_exceeded`).
"""

from __future__ import annotations

from ftqual.contract import LIVE_FAULTS, is_fault
from ftqual.verification.checks.result import CheckResult, Findings, Scoped, inconclusive, per_injection, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, plain
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.in_force import in_force, injection_line
from ftqual.verification.evidence.run_meta import FaultMarker
from ftqual.verification.evidence.sections import RANK_MONITOR_INTERVAL_S
from ftqual.verification.evidence.snapshot import RunSnapshot

DETECTED_WITHIN_TIMEOUT = "detected_within_timeout"
# Timestamps of the injection marker and the launcher's line, and the monitor's own work after its check.
TOLERANCE_S = 1.0
PLACEMENTS = ("step", "checkpointing", "out_of_section", "setup")


def detected_within_timeout(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: every injected live fault (hang, gil_lock, gpu_hang) was detected (the launcher's first
    timeout line after the injection) at most the timeout of the section the rank was in at the injection
    (the marker's `section`; out of every section: the out-of-section timeout) + the rank monitor's check
    interval + 1 s after the injection. With placement `immediate` (or none in the marker), the fired
    section's timeout bounds it. A peer's shorter timeout catching it first is within the bound as well.
    Under calc_ft_timeouts the timeout is the one in force in the fault's cycle at the injection (the
    values the calculated_timeouts check reads), not run.json's initial one; the detail says which."""
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


def _timeout_of(
    snap: RunSnapshot, exp: RunPlan, marker: FaultMarker, section: str
) -> tuple[float | None, str]:
    """The section's timeout at the injection and where it comes from: run.json's fixed one, or under
    calc_ft_timeouts the one in force in the fault's cycle before its `[ftqual-inject]` line (the cycle's
    start updated by every calculation printed before it; without that line, the cycle's last values)."""
    if not exp.calc_ft_timeouts:
        value = exp.timeouts.get(section)
        return (None if value is None else float(value)), "run.json"
    log = snap.train_log(derive.fault_cycle(snap, marker))
    found = in_force(log, injection_line(log, marker.number))
    if found is None:
        value = exp.timeouts.get(section)
        source = "run.json's initial value (no 'FT: initialized' line in the fault's cycle)"
        return (None if value is None else float(value)), source
    return found.values.get(section), found.source


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
    timeout, source = _timeout_of(snap, exp, marker, section)
    if timeout is None:
        f.unknown(f"{source} has no timeout for {section}")
        return
    took = (found.t - marker.injected_at).total_seconds()
    bound = float(timeout) + RANK_MONITOR_INTERVAL_S
    f.values.update(
        section=section, fired=fired, detection_s=round(took, 3), bound_s=bound, timeout_s=float(timeout)
    )
    what = f"the {section} timeout {float(timeout):g} s + rank monitor interval {RANK_MONITOR_INTERVAL_S:g} s"
    if exp.calc_ft_timeouts:
        what += f" (in force at the injection: {source})"
        f.values["timeout_source"] = source
    if took > bound + TOLERANCE_S:
        f.problem(
            f"detected {took:.2f} s after the injection, beyond {what} = {bound:g} s: a hang in {section} "
            "costs more than these timeouts promise",
            marker.ref,
            found.ref,
        )
    else:
        f.fact(f"detected {took:.2f} s after the injection ({fired} fired), within {what}", found.ref)


SPEC = CheckSpec(
    "detected_within_timeout",
    "the hang was detected within its section's timeout + the rank monitor's check interval (the bound the"
    " timeouts promise)",
    plain(detected_within_timeout),
    # Only a live fault's report carries it: a hang's detection bound.
    carried=lambda i: is_fault(i.exp.fault, lambda f: f.lives_on),
)
