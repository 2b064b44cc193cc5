"""Fault scenarios, up to the restart: a checkpoint had completed; the launcher detected and restarted."""

from __future__ import annotations

from pathlib import Path

from ftqual.contract import CATALOG_FAULTS, detection_path, family_of, is_fault
from ftqual.contract import fault as fault_kind
from ftqual.verification.checks import linger as linger_mod
from ftqual.verification.checks.checkpoint_folder import completed_folder
from ftqual.verification.checks.result import (
    CheckResult,
    Findings,
    Scoped,
    absent_after_stop,
    inconclusive,
    per_injection,
    skip,
)
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, first_failure_only, judged_per_fault
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.clock import iso_z
from ftqual.verification.evidence.launcher_log import TimeoutFired, WorkerExit
from ftqual.verification.evidence.run_meta import FaultMarker
from ftqual.verification.evidence.snapshot import RunSnapshot

CHECKPOINT_BEFORE_FAILURE = "checkpoint_before_failure"
FAILURE_DETECTED = "failure_detected_and_restarted"
# The walkthrough's faults keep their texts (recorded runs' reports compare equal); the fault catalog's
# (ftqual.contract.CATALOG_FAULTS) are judged by the path each must be detected by (contract.detection_path).
SIGTERM_EXIT = "exiting program after receiving SIGTERM."  # Megatron's (and the smoke workload's) milestone


def checkpoint_before_failure(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: for every injection, the checkpoint K its marker names (K >= 1, past its baseline)
    completed before the injection: a `successfully saved checkpoint from iteration K` line in the
    injection's cycle or earlier, timestamped before `injected_at`, and `iter_K/.metadata` a non-empty
    regular file inside the run."""
    cid = CHECKPOINT_BEFORE_FAILURE
    if not exp.faulty:
        return skip(cid, "no fault in this scenario")
    if not snap.ok("marker"):
        return inconclusive(cid, snap.reason("marker"))
    marker = snap.marker
    if marker is None:
        return inconclusive(cid, "no fault_injected.json: no injection to relate a checkpoint to")
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    f = Findings(cid)
    if len(snap.markers) <= 1:
        if marker.checkpoint_iteration is None:
            f.values.update(checkpoint_iteration=None, injected_at=iso_z(marker.injected_at))
            return inconclusive(cid, "fault_injected.json has no checkpoint_iteration")
        _checkpoint_of(snap, f, marker)
        return f.result()
    each = []
    for item, g in per_injection(f, snap.markers):
        _checkpoint_of(snap, g, item)
        each.append({"injection": item.number, **g.values})
    f.values.update({k: v for k, v in each[0].items() if k != "injection"})
    f.values["injections"] = each
    return f.result()


def _checkpoint_of(snap: RunSnapshot, f: Findings | Scoped, marker: FaultMarker) -> None:
    k = marker.checkpoint_iteration
    f.values.update(checkpoint_iteration=k, injected_at=iso_z(marker.injected_at))
    if k is None:
        f.unknown(f"{marker.ref.path} has no checkpoint_iteration", marker.ref)
        return
    if k < 1:
        f.problem(
            f"marker checkpoint_iteration is {k}: the injection did not wait for a checkpoint", marker.ref
        )
        return
    if marker.placement == "setup":
        # A replacement stopped in its setup: the checkpoint before the fault is the one it loaded (its
        # baseline), completed in an earlier cycle.
        if marker.baseline_iteration is not None and k != marker.baseline_iteration:
            f.problem(
                f"marker checkpoint_iteration {k} is not the checkpoint the replacement started from "
                f"({marker.baseline_iteration})",
                marker.ref,
            )
    elif marker.baseline_iteration is not None and k <= marker.baseline_iteration:
        f.problem(
            f"marker checkpoint_iteration {k} did not advance past its baseline {marker.baseline_iteration}",
            marker.ref,
        )
    cycle = derive.fault_cycle(snap, marker)
    fault_log = snap.train_log(cycle)
    done = [
        e for log in snap.train_logs if log.cycle <= cycle for e in log.saves_of("done") if e.iteration == k
    ]
    if not done and fault_log is None:
        f.unknown(f"no logs/train_cycle{cycle}.log for the cycle that was hit")
    elif not done:
        f.missing_fact(
            f"no 'successfully saved checkpoint from iteration {k}' line before the failure",
            fault_log.complete,
        )
    else:
        first = done[0]
        if first.t is not None and marker.injected_at is not None and first.t > marker.injected_at:
            late = (first.t - marker.injected_at).total_seconds()
            f.problem(f"checkpoint {k} completed {late:.3f} s after the injection", first.ref)
        elif first.t is None:
            f.unknown(f"the save line of checkpoint {k} carries no timestamp", first.ref)
        else:
            lead = (marker.injected_at - first.t).total_seconds()
            f.fact(
                f"checkpoint {k} completed at {iso_z(first.t)}, {lead:.3f} s before the injection", first.ref
            )
    _iter_dir(snap, f, k, marker)
    f.cite(marker.ref)
    _tracker_progress(snap, f, k, cycle)


def _moved_by_damage(snap: RunSnapshot, k: int, marker: FaultMarker | None):
    """iter_<k>'s folder as the marker's damage moved it aside (its `moved_to`), else None."""
    damage = marker.damage if marker is not None else None
    if not damage or snap.checkpoints is None or snap.checkpoints.dir_for(k) is not None:
        return None
    moved = snap.checkpoints.moved_dir_for(k)
    if moved is None or damage.get("iteration") != k:
        return None
    return moved if str(damage.get("moved_to") or "").endswith(Path(moved.ref.path).name) else None


def _iter_dir(snap: RunSnapshot, f: Findings | Scoped, k: int, marker: FaultMarker | None = None) -> None:
    moved = _moved_by_damage(snap, k, marker)
    if moved is not None:
        # tracker_missing_iteration moved the folder aside after it completed: judge it where it lies now
        if moved.has_metadata:
            f.fact(
                f"{moved.ref.path}/.metadata present (moved aside by the run's checkpoint damage)", moved.ref
            )
        else:
            f.problem(f"{moved.ref.path}: {moved.why_incomplete} (checkpoint never finalized)", moved.ref)
        return
    folder = completed_folder(
        snap,
        f,
        k,
        absent="no iter_{k:07d} folder in {root}",
        unfinished="{path}: {why} (checkpoint never finalized)",
    )
    if folder is not None:
        f.fact(f"{folder.ref.path}/.metadata present", folder.ref)
        if folder.payload_files == 0:
            f.note(f"{folder.ref.path} holds no payload files (*.distcp, *.pt): payload not verified")
        elif folder.payload_files_dropped:
            f.fact(
                f"{folder.payload_files_dropped} payload files dropped after verification "
                "(payloads_dropped.json lists them)"
            )


def _tracker_progress(snap: RunSnapshot, f: Findings | Scoped, k: int, cycle: int) -> None:
    if snap.launcher is None:
        return
    reports = [p for p in snap.launcher.progress if p.cycle == cycle]
    if reports:
        report = reports[0]
        f.cite(report.ref)
        if report.end != k:
            f.note(f"launcher's progress tracker read iteration {report.end} at the failure, marker says {k}")


def failure_detected_and_restarted(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: the requested fault was injected (fault_injected.json exists) and the launcher detected
    *that* failure: after the injection and in its cycle, a kill by the killed local rank's exit, a hang by
    a timestamped section or out-of-section timeout (`detected_by` in the metrics is the same fact); each
    fault of the catalog by its own path: a rank that dies at once (segfault, abort, sigterm, gpu_error) by
    its exit with that fault's code and no timeout before it; a rank that unwinds (exception, sigint) by its
    exit or, where it lingers after its traceback, by the open section's timeout (its linger measured,
    ftqual.verification.checks.linger); a rank that lives on (gil_lock, gpu_hang) by a timeout before any
    exit; a
    workload that handled SIGTERM itself is said (with the checkpoint it wrote on the way out) and fails, as
    nothing was restarted. It then decided to restart, the failed cycle ended and the replacement cycle
    started after it. With N injections, each one's (fault_injected.<k>.json), in its own cycle, and at
    least N restart decisions."""
    cid = FAILURE_DETECTED
    if not exp.faulty:
        return skip(cid, "no fault in this scenario")
    needed = [n for n in ("marker", "launcher_log", "cycle_infos") if not snap.ok(n)]
    if needed:
        return inconclusive(cid, snap.reason(*needed))
    f = Findings(cid)
    marker = snap.marker
    if marker is None:
        absent_after_stop(
            snap,
            f,
            "no injection recorded (no fault_injected.json): a failure without the requested injection "
            "does not show that this fault is detected",
        )
        return f.result()
    if len(snap.markers) <= 1:
        _detection(snap, exp, f, marker)
        _restart_decision(snap, f)
        _cycle_records(snap, f, marker)
    else:
        each = []
        for item, g in per_injection(f, snap.markers):
            _detection(snap, exp, g, item)
            _cycle_records(snap, g, item)
            each.append({"injection": item.number, "cycle": item.cycle, **g.values})
        f.values.update({k: v for k, v in each[0].items() if k not in ("injection", "cycle")})
        f.values["injections"] = each
        _restart_decision(snap, f)
    _restart_count(snap, f, max(exp.injections, len(snap.markers)))
    early = derive.failures_before_injection(snap)
    if early:
        f.note(
            f"{len(early)} failure report(s) before the injection, first: {early[0].ref.text}", early[0].ref
        )
    return f.result()


def _detection(snap: RunSnapshot, exp: RunPlan, f: Findings | Scoped, marker: FaultMarker) -> None:
    launcher = snap.launcher
    assert launcher is not None
    found = derive.detection(snap, marker)
    f.values["detected_by"] = found.detected_by if found is not None else None
    injected_local = marker.local_rank if marker else None
    exits = derive.exits_after_injection(snap, marker)
    exit_ = exits[0] if exits else None
    known = fault_kind(exp.fault)
    if known is not None and known.exit_judged_by == "killed_pid":
        _kill_exit(snap, f, exits, injected_local, marker)
        return
    if family_of(exp.fault) == "storage":
        _storage_detection(snap, f, marker, found)
        return
    # A fault that comes back is detected as the registry says, like the catalog's (its first failure here;
    # its stop is recurring_fault_outcome's).
    if exp.fault in CATALOG_FAULTS or family_of(exp.fault) == "recurring":
        if marker.method:
            f.fact(f"injected by {marker.method}", marker.ref)
            f.values["method"] = marker.method
        if detection_path(exp.fault) == "exit":
            _exit_path(snap, f, exits, injected_local, marker, exp.fault)
            return
        first = derive.qualifying_failures(snap, marker)[:1]
        if first and isinstance(first[0], WorkerExit):
            item = first[0]
            f.problem(
                f"the first report after the injection is a worker exit (local_rank {item.local_rank}, code "
                f"{item.exit_code}), not a timeout: a {exp.fault} leaves the rank alive, so only its section "
                "or out-of-section timeout may detect it; another path fired",
                item.ref,
            )
    if family_of(exp.fault) == "node":
        # The lost node's launcher died with its workers and reports nothing: a surviving node's launcher
        # sees the loss as its own worker failing (the collective broke) or a section timing out.
        if found is None or found.ref is None:
            f.missing_fact(
                "launcher.log shows no worker exit or timeout after the injection: no surviving node saw the "
                "loss",
                snap.sources["launcher_log"].complete,
            )
        else:
            f.fact(
                f"a surviving node saw the loss ({found.detected_by}): {found.ref.text.strip()}", found.ref
            )
        return
    timeout = found.timeout if found is not None else None
    if timeout is None:
        early = [t for t in launcher.timeouts if t not in derive.qualifying_failures(snap, marker)]
        seen = f" (only a worker exit: {exit_.ref.text})" if exit_ else ""
        if early:
            seen += (
                f"; {len(early)} timeout line(s) before the injection or from another cycle do not count "
                f"(first: {early[0].ref.text})"
            )
        f.missing_fact(
            f"launcher.log shows no section or out-of-section timeout after the injection in cycle "
            f"{derive.fault_cycle(snap, marker)}{seen}",
            snap.sources["launcher_log"].complete,
            exit_.ref if exit_ else None,
            *(t.ref for t in early[:1]),
        )
        return
    if timeout.elapsed_s < timeout.timeout_s:
        f.problem(
            f"the timeout line says the section was open {timeout.elapsed_s:g} s, less than its timeout "
            f"{timeout.timeout_s:g} s",
            timeout.ref,
        )
    what = f"section '{timeout.section}'" if timeout.section else "out of section"
    f.fact(
        f"rank monitor of local_rank {timeout.local_rank} fired in cycle {timeout.cycle}: {what} "
        f"open {timeout.elapsed_s:.2f} s, timeout {timeout.timeout_s:.2f} s",
        timeout.ref,
    )
    _placed_section_fired(f, marker, timeout)
    f.values.update(reported_local_rank=timeout.local_rank, timeout_s=timeout.timeout_s)
    _rank_note(f, timeout.local_rank, injected_local)
    if marker is not None and marker.host and timeout.host and timeout.host != marker.host:
        f.note(f"timeout reported on host {timeout.host}, injection on {marker.host}")
    if exit_ is not None:
        f.fact(f"worker local_rank {exit_.local_rank} then exited with code {exit_.exit_code}", exit_.ref)


# A worker's exit code when a signal stopped it: -N from torch's elastic agent, 128+N through a shell.
STOPPED_BY_SIGNAL = (-15, -9, 143, 137)


def _storage_detection(
    snap: RunSnapshot, f: Findings | Scoped, marker: FaultMarker, found: derive.Detection | None
) -> None:
    """A storage fault leaves the rank alive: the stack may notice it by a rank's loud failure (its exit) or
    by a timeout of the rank waiting on the save; either is a detection, nothing else is."""
    if found is None or found.ref is None or found.detected_by is None:
        f.missing_fact(
            f"launcher.log shows no worker exit or timeout after the {snap.meta.fault} fault in cycle "
            f"{derive.fault_cycle(snap, marker)}: the failed storage went unnoticed",
            snap.sources["launcher_log"].complete,
        )
        return
    if found.detected_by == "exit" and found.exit_code in STOPPED_BY_SIGNAL:
        # SIGTERM or SIGKILL: a rank stopped from outside (the launcher's teardown), not one that noticed
        f.problem(
            f"the first report after the {snap.meta.fault} fault is a worker stopped by a signal (code "
            f"{found.exit_code}), with no timeout or loud failure before it: the stack did not notice",
            found.ref,
        )
        return
    by = found.detected_by
    how = {"exit": "a worker's exit", "out_of_section": "the out-of-section timeout"}.get(
        by, f"the '{by.removeprefix('section:')}' section timeout"
    )
    f.fact(f"detected by {how}: {found.ref.text.strip()}", found.ref)
    f.values["reported_local_rank"] = found.local_rank


# Placements that put a live fault in a known section (the immediate one lands wherever the rank is).
PLACED_SECTIONS = {"step": "step", "checkpointing": "checkpointing", "out_of_section": None, "setup": "setup"}


def _placed_section_fired(f: Findings | Scoped, marker: FaultMarker, timeout: TimeoutFired) -> None:
    """A live fault placed in a section must be caught by that section's timeout (out of every section: the
    out-of-section timeout): another one firing means the rank was somewhere else when it stopped, or a
    timeout fires for a reason of its own."""
    if marker.placement not in PLACED_SECTIONS:
        return
    wanted = marker.section
    if timeout.section == wanted:
        return
    placed = f"section '{wanted}'" if wanted else "out of every section"
    fired = f"the '{timeout.section}' section timeout" if timeout.section else "the out-of-section timeout"
    peer = (
        timeout.local_rank is not None
        and marker.local_rank is not None
        and (
            timeout.local_rank != marker.local_rank
            or (timeout.host and marker.host and timeout.host != marker.host)
        )
    )
    if peer:
        # A peer waiting on the stopped rank (in a collective of its own step) timed out first: a true
        # detection, whose cost is the peer's timeout, not the placed section's.
        f.note(
            f"the fault was placed {placed}, and a peer caught it first: local_rank {timeout.local_rank}'s "
            f"{fired.removeprefix('the ')} fired while it waited on the stopped rank"
        )
        return
    f.problem(
        f"the fault was placed {placed} ({marker.ref.path}: placement {marker.placement}), but {fired} "
        "caught it: another section's timeout fired",
        marker.ref,
        timeout.ref,
    )


def _no_worker_exit(snap: RunSnapshot, f: Findings | Scoped, cycle: int | None) -> None:
    f.missing_fact(
        "launcher.log shows no worker exit (`failed (exitcode: N) local_rank: R`) after the injection in "
        f"cycle {cycle}",
        snap.sources["launcher_log"].complete,
    )


def _kill_exit(
    snap: RunSnapshot, f: Findings | Scoped, exits: list, injected_local: int | None, marker: FaultMarker
) -> None:
    """A kill is detected by the killed worker's exit: the marker's local rank (and host, when both name
    one) must be among the exits after the injection in its cycle; a peer may be listed first."""
    if not exits:
        _no_worker_exit(snap, f, derive.fault_cycle(snap, marker))
        return
    killed = linger_mod.exits_of_rank(exits, injected_local, marker.host)
    first = exits[0]
    f.values.update(exit_code=first.exit_code, reported_local_rank=first.local_rank)
    pid = marker.pid
    same_pid = [e for e in exits if pid is not None and e.pid == pid]
    if same_pid and same_pid[0].local_rank != injected_local:
        f.problem(
            f"the launcher reports the killed pid {pid} as local_rank {same_pid[0].local_rank}; "
            f"fault_injected.json says local_rank {injected_local}",
            same_pid[0].ref,
        )
        return
    if injected_local is None:
        f.unknown("fault_injected.json has no local_rank: the killed worker's exit cannot be identified")
        return
    if not killed:
        f.problem(
            f"the launcher reported exits of local rank(s) {sorted({e.local_rank for e in exits})}, "
            f"not of the killed local rank {injected_local}",
            first.ref,
        )
        return
    item = killed[0]
    f.fact(f"worker local_rank {item.local_rank} exited with code {item.exit_code}", item.ref)
    if item.exit_code != -9:
        f.note(f"exit code {item.exit_code}, not -9 (SIGKILL)")
    _rank_note(f, first.local_rank, injected_local)


def _exit_path(
    snap: RunSnapshot,
    f: Findings | Scoped,
    exits: list,
    injected_local: int | None,
    marker: FaultMarker,
    fault: str,
) -> None:
    """A fault the rank dies of: its exit (the marker's local rank, one of the fault's codes) must be what
    the launcher saw, and no section or out-of-section timeout before it (that would be another path). An
    unwinding fault (exception, sigint) whose traceback follows the injection may be ended by the open
    section's timeout instead (the timeout's kill, -9): the same detection, cut short; its linger is said
    either way. Seen on one H200 with Megatron-LM: the rank exited by itself 37.4 s after its traceback
    under a 60 s step timeout, and a 10 s one cut it."""
    known = fault_kind(fault)
    wanted = known.exit_codes if known is not None else ()
    f.values["expected_exit_codes"] = list(wanted)
    cycle = derive.fault_cycle(snap, marker)
    timeouts = [t for t in derive.qualifying_failures(snap, marker) if isinstance(t, TimeoutFired)]
    if not exits:
        if known is not None and known.catchable and _handled_sigterm(snap, f, marker, cycle):
            return
        if timeouts:
            first = timeouts[0]
            what = f"section '{first.section}'" if first.section else "out of section"
            f.problem(
                f"launcher.log shows no worker exit after the injection in cycle {cycle} but a timeout "
                f"({what}, local_rank {first.local_rank}): a {fault} must be detected by the rank's exit; "
                "another path fired",
                first.ref,
            )
            return
        _no_worker_exit(snap, f, cycle)
        return
    mine = linger_mod.exits_of_rank(exits, injected_local, marker.host)
    first = exits[0]
    f.values.update(exit_code=first.exit_code, reported_local_rank=first.local_rank)
    if injected_local is None:
        f.unknown("fault_injected.json has no local_rank: the faulted worker's exit cannot be identified")
        return
    unwinds = is_fault(fault, lambda k: k.unwinds)
    found = linger_mod.linger(snap, marker) if unwinds else None
    if not mine and found is not None and found.traceback is not None and timeouts:
        # The faulted rank unwound (its traceback follows the injection) and lingered; a peer blocked with
        # it in a collective had its own open section time out first, and the launcher stopped the group
        # before the faulted rank's exit was reported (seen on CPU under load: a 5 s step timeout on the
        # peer while the faulted rank joined its data worker). Whichever rank's monitor looks first, the
        # timeout of the section both hold open is the detection, as for a lingering rank's own.
        peer = timeouts[0]
        what = f"section '{peer.section}'" if peer.section else "out of section"
        f.note(
            f"a peer's timeout came first: the {what} timeout of local rank {peer.local_rank} fired while "
            f"the faulted local rank {injected_local} was still unwinding its {fault} (its traceback is in "
            "the log); the launcher stopped the group before the faulted rank's own exit was reported",
            peer.ref,
            found.traceback,
        )
        f.fact(f"worker local_rank {first.local_rank} exited with code {first.exit_code}", first.ref)
        _linger_facts(snap, f, marker, found, fault, what)
        return
    if not mine and unwinds and not timeouts:
        # The faulted rank unwinds for about a second before it exits; a peer whose collective broke with it
        # can die first, and the launcher then stops the group before the faulted rank's own exit is
        # reported (seen on CPU with two ranks, exception and sigint). The peer's exit is the detection.
        f.note(
            f"a peer died first: the launcher reported the exit of local rank(s) "
            f"{sorted({e.local_rank for e in exits})} (code {first.exit_code}) while the faulted local rank "
            f"{injected_local} was still unwinding its {fault}; its own exit code was not reported",
            first.ref,
        )
        f.fact(f"worker local_rank {first.local_rank} exited with code {first.exit_code}", first.ref)
        return
    if not mine:
        f.problem(
            f"the launcher reported exits of local rank(s) {sorted({e.local_rank for e in exits})}, "
            f"not of the faulted local rank {injected_local}",
            first.ref,
        )
        return
    item = mine[0]
    f.values["exit_code"] = item.exit_code
    codes = " or ".join(str(c) for c in wanted)
    early = [t for t in timeouts if t.t is not None and (item.t is None or t.t < item.t)]
    what = (f"section '{early[0].section}'" if early[0].section else "out of section") if early else ""
    # An exception or SIGINT that unwound (a traceback after the injection) ends its rank by the rank's own
    # exit or by the open section's timeout, whichever comes first: both are its detection.
    cut = found is not None and found.cut_by_timeout and found.traceback is not None and bool(early)
    if item.exit_code == -15 and -15 not in wanted and snap.meta.interrupted_by:
        # the launcher, stopped from outside, ends its workers with SIGTERM: that exit is the stop's
        f.unknown(
            f"worker local_rank {item.local_rank} exited with code -15 after the launcher was stopped by "
            f"{snap.meta.interrupted_by} from outside: the stop's exit, not the {fault}'s",
            item.ref,
        )
    elif cut and item.exit_code in linger_mod.KILLED_CODES:
        f.fact(
            f"worker local_rank {item.local_rank} exited with code {item.exit_code}, the {what} timeout's "
            "kill",
            item.ref,
        )
    elif item.exit_code not in wanted:
        f.problem(
            f"worker local_rank {item.local_rank} exited with code {item.exit_code}; "
            f"a {fault} exits with {codes}",
            item.ref,
        )
    else:
        f.fact(
            f"worker local_rank {item.local_rank} exited with code {item.exit_code} ({fault}: {codes})",
            item.ref,
        )
    if found is not None:
        _linger_facts(snap, f, marker, found, fault, what)
    if early and not (found is not None and found.traceback is not None):
        f.problem(
            f"a timeout ({what}) fired before the exit: the {fault} was detected by another path than the "
            "rank's exit",
            early[0].ref,
        )
    _rank_note(f, first.local_rank, injected_local)


def _linger_facts(
    snap: RunSnapshot,
    f: Findings | Scoped,
    marker: FaultMarker,
    found: linger_mod.Linger,
    fault: str,
    what: str,
) -> None:
    """The linger of an unwinding fault, in the check's values and detail: how long the rank lived on after
    its fault and what ended it (its own exit, or the open section's timeout: both a detection), and what
    held it where it lingered."""
    f.values.update(
        linger_s=None if found.seconds is None else round(found.seconds, 3),
        linger_cut_by_timeout=found.cut_by_timeout,
        linger_ended_by=found.ended_by,
    )
    if found.seconds is None:
        return
    if found.cut_by_timeout and found.traceback is not None:
        bound = f" {found.timeout_s:g} s" if found.timeout_s is not None else ""
        f.fact(
            f"the {fault} unwound (a traceback follows the injection) and its rank lingered: the {what} "
            f"timeout{bound} ended it {found.phrase()} after the injection, a detection (the {fault}'s rank "
            "lives until its interpreter has shut down, or until the open section's timeout ends it); "
            f"{linger_mod.held_by_phrase(snap, linger_mod.held_by(snap, marker))}",
            found.traceback,
            found.end,
        )
    elif found.ended_by == "exit" and found.lingered:
        f.fact(
            f"the rank lingered: it exited by itself {found.phrase()} after the injection; "
            f"{linger_mod.held_by_phrase(snap, linger_mod.held_by(snap, marker))}",
            found.traceback,
        )
    elif found.ended_by == "exit":
        f.fact(f"the rank exited {found.phrase()} after the injection")


def _handled_sigterm(snap: RunSnapshot, f: Findings | Scoped, marker: FaultMarker, cycle: int) -> bool:
    """The workload caught SIGTERM and ended in order (Megatron's --exit-signal-handler): say so, with the
    checkpoint it wrote on the way out; a failure, as ft_launcher saw none and restarted nothing."""
    log = snap.train_log(cycle)
    said = log.milestone(SIGTERM_EXIT) if log is not None else None
    if log is None or said is None:
        return False
    after = [
        e
        for e in log.saves_of("done")
        if marker.injected_at is None or e.t is None or e.t >= marker.injected_at
    ]
    if after:
        wrote = f"wrote checkpoint {after[0].iteration} on the way out"
    else:
        wrote = "wrote no checkpoint on the way out"
    f.values["handled_by_workload"] = True
    f.values["exit_checkpoint_iteration"] = after[0].iteration if after else None
    f.problem(
        f"the workload handled SIGTERM itself ('{SIGTERM_EXIT}' in logs/train_cycle{cycle}.log) and "
        f"{wrote}; its ranks ended in order, so ft_launcher saw no failure and restarted nothing",
        said.ref,
        *(e.ref for e in after[:1]),
    )
    return True


def _rank_note(f: Findings | Scoped, reported: int | None, injected: int | None) -> None:
    if reported is None or injected is None:
        return
    if reported == injected:
        f.fact(f"the reported local rank is the injected one ({injected})")
    else:
        f.note(
            f"the launcher reported local_rank {reported} first; the injected local rank is {injected} "
            f"(a peer can be reported first)"
        )
        f.values["reported_rank_is_injected"] = False


def _restart_decision(snap: RunSnapshot, f: Findings) -> None:
    launcher = snap.launcher
    assert launcher is not None
    if not launcher.restarts:
        f.missing_fact(
            "launcher.log shows no restart decision (`Worker group UNHEALTHY|FAILED. n/m attempts left`)",
            snap.sources["launcher_log"].complete,
        )
        return
    decision = launcher.restarts[0]
    f.fact(
        f"launcher: worker group {decision.state}, {decision.attempts_left}/{decision.attempts_max} "
        f"attempts left, restarting",
        decision.ref,
    )


def _restart_count(snap: RunSnapshot, f: Findings, wanted: int) -> None:
    """At least one restart decision per injection (a run of one injection: `_restart_decision` says it)."""
    launcher = snap.launcher
    assert launcher is not None
    if wanted <= 1 or not launcher.restarts:
        return
    if len(launcher.restarts) < wanted:
        f.missing_fact(
            f"{wanted} injections but launcher.log shows {len(launcher.restarts)} restart decision(s)",
            snap.sources["launcher_log"].complete,
            launcher.restarts[-1].ref,
        )
    else:
        f.fact(
            f"{len(launcher.restarts)} restart decisions for {wanted} injections", launcher.restarts[-1].ref
        )


def _cycle_records(snap: RunSnapshot, f: Findings | Scoped, marker: FaultMarker) -> None:
    cycles = snap.cycles
    assert cycles is not None
    failed, replacement = derive.fault_cycle(snap, marker), derive.replacement_cycle(snap, marker)
    old, new = cycles.by_cycle(failed), cycles.by_cycle(replacement)
    if old is None:
        f.problem(f"no cycle_info record for the failed cycle {failed}")
    elif old.end is None:
        f.problem(f"cycle {failed} has no cycle_end_time", old.ref)
    else:
        f.fact(f"cycle {failed} ended {iso_z(old.end)}", old.ref)
    if new is None:
        absent_after_stop(snap, f, f"no replacement cycle: cycle_infos has no record for cycle {replacement}")
    elif new.start is None:
        f.problem(f"cycle {replacement} has no cycle_start_time", new.ref)
    else:
        f.fact(f"replacement cycle {replacement} started {iso_z(new.start)}", new.ref)
        if old is not None and old.end is not None and new.start < old.end:
            f.problem(f"cycle {replacement} started before cycle {failed} ended", old.ref, new.ref)
    if new is not None and snap.train_log(replacement) is None:
        f.unknown(f"no logs/train_cycle{replacement}.log for the replacement cycle")


SPECS = (
    CheckSpec(
        "checkpoint_before_failure",
        "a checkpoint completed (async save finalized, tracker written) before the fault was injected, at the"
        " iteration the injection marker records",
        judged_per_fault("checkpoint_before_failure", first_failure_only(checkpoint_before_failure)),
    ),
    CheckSpec(
        "failure_detected_and_restarted",
        "ft_launcher recorded the failed cycle (exit code, or the section timeout naming the stopped rank)"
        " and started replacement workers in a new cycle",
        judged_per_fault(
            "failure_detected_and_restarted", first_failure_only(failure_detected_and_restarted)
        ),
        waived_by=("node_loss_outcome",),
    ),
)
