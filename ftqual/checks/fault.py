"""Fault scenarios, up to the restart: a checkpoint had completed; the launcher detected and restarted."""

from __future__ import annotations

from ftqual.checks import derive
from ftqual.checks.expectations import Expectations
from ftqual.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.evidence.clock import iso_z
from ftqual.evidence.snapshot import RunSnapshot

CHECKPOINT_BEFORE_FAILURE = "checkpoint_before_failure"
FAILURE_DETECTED = "failure_detected_and_restarted"


def checkpoint_before_failure(snap: RunSnapshot, exp: Expectations) -> CheckResult:
    """The checkpoint named by the marker completed (save line + `.metadata`) before the injection."""
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
    k = marker.checkpoint_iteration
    f.values.update(checkpoint_iteration=k, injected_at=iso_z(marker.injected_at))
    if k is None:
        return inconclusive(cid, "fault_injected.json has no checkpoint_iteration")
    if k < 1:
        f.problem(
            f"marker checkpoint_iteration is {k}: the injection did not wait for a checkpoint", marker.ref
        )
        return f.result()
    if marker.baseline_iteration is not None and k <= marker.baseline_iteration:
        f.problem(
            f"marker checkpoint_iteration {k} did not advance past its baseline {marker.baseline_iteration}",
            marker.ref,
        )
    fault_log = snap.train_log(derive.fault_cycle(snap))
    done = [
        e
        for log in snap.train_logs
        if log.cycle <= derive.fault_cycle(snap)
        for e in log.saves_of("done")
        if e.iteration == k
    ]
    if not done and fault_log is None:
        f.unknown(f"no logs/train_cycle{derive.fault_cycle(snap)}.log for the cycle that was hit")
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
    _iter_dir(snap, f, k)
    f.cite(marker.ref)
    _tracker_progress(snap, f, k)
    return f.result()


def _iter_dir(snap: RunSnapshot, f: Findings, k: int) -> None:
    if not snap.ok("checkpoints") or snap.checkpoints is None:
        f.unknown(snap.reason("checkpoints"))
        return
    folder = snap.checkpoints.dir_for(k)
    if folder is None:
        f.problem(f"no iter_{k:07d} folder in {snap.checkpoints.root}")
    elif not folder.has_metadata:
        f.problem(f"{folder.ref.path} has no .metadata (checkpoint never finalized)", folder.ref)
    else:
        f.fact(f"{folder.ref.path}/.metadata present", folder.ref)
        if folder.payload_files == 0:
            f.note(f"{folder.ref.path} holds no payload files (*.distcp, *.pt): payload not verified")


def _tracker_progress(snap: RunSnapshot, f: Findings, k: int) -> None:
    if snap.launcher is None:
        return
    reports = [p for p in snap.launcher.progress if p.cycle == derive.fault_cycle(snap)]
    if reports:
        report = reports[0]
        f.cite(report.ref)
        if report.end != k:
            f.note(f"launcher's progress tracker read iteration {report.end} at the failure, marker says {k}")


def failure_detected_and_restarted(snap: RunSnapshot, exp: Expectations) -> CheckResult:
    """The launcher saw the failure (exit or timeout), decided to restart, and a replacement cycle started."""
    cid = FAILURE_DETECTED
    if not exp.faulty:
        return skip(cid, "no fault in this scenario")
    needed = [n for n in ("launcher_log", "cycle_infos") if not snap.ok(n)]
    if needed:
        return inconclusive(cid, snap.reason(*needed))
    f = Findings(cid)
    marker = snap.marker
    _detection(snap, exp, f)
    _restart_decision(snap, f)
    _cycle_records(snap, f)
    early = derive.failures_before_injection(snap)
    if early:
        f.note(
            f"{len(early)} failure report(s) before the injection, first: {early[0].ref.text}", early[0].ref
        )
    if marker is None:
        f.note("no fault_injected.json: injected rank unknown")
    return f.result()


def _detection(snap: RunSnapshot, exp: Expectations, f: Findings) -> None:
    launcher = snap.launcher
    assert launcher is not None
    found = derive.detection(snap)
    marker = snap.marker
    injected_local = marker.local_rank if marker else None
    exit_ = derive.first_exit_after_injection(snap)
    if exp.fault == "kill":
        if exit_ is None:
            f.missing_fact(
                "launcher.log shows no worker exit (`failed (exitcode: N) local_rank: R`) "
                "after the injection",
                snap.sources["launcher_log"].complete,
            )
            return
        f.fact(f"worker local_rank {exit_.local_rank} exited with code {exit_.exit_code}", exit_.ref)
        f.values.update(exit_code=exit_.exit_code, reported_local_rank=exit_.local_rank)
        if exit_.exit_code != -9:
            f.note(f"exit code {exit_.exit_code}, not -9 (SIGKILL): a peer may have been reported first")
        _rank_note(f, exit_.local_rank, injected_local)
        return
    timeout = found.timeout if found is not None else None
    if timeout is None:
        timeout = launcher.timeouts[0] if launcher.timeouts else None
    if timeout is None:
        seen = f" (only a worker exit: {exit_.ref.text})" if exit_ else ""
        f.missing_fact(
            f"launcher.log shows no section or out-of-section timeout for the hang{seen}",
            snap.sources["launcher_log"].complete,
            exit_.ref if exit_ else None,
        )
        return
    what = f"section '{timeout.section}'" if timeout.section else "out of section"
    f.fact(
        f"rank monitor of local_rank {timeout.local_rank} fired in cycle {timeout.cycle}: {what} "
        f"open {timeout.elapsed_s:.2f} s, timeout {timeout.timeout_s:.2f} s",
        timeout.ref,
    )
    f.values.update(
        detected_by=timeout.detected_by, reported_local_rank=timeout.local_rank, timeout_s=timeout.timeout_s
    )
    _rank_note(f, timeout.local_rank, injected_local)
    if marker is not None and marker.host and timeout.host and timeout.host != marker.host:
        f.note(f"timeout reported on host {timeout.host}, injection on {marker.host}")
    if exit_ is not None:
        f.fact(f"worker local_rank {exit_.local_rank} then exited with code {exit_.exit_code}", exit_.ref)


def _rank_note(f: Findings, reported: int | None, injected: int | None) -> None:
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


def _cycle_records(snap: RunSnapshot, f: Findings) -> None:
    cycles = snap.cycles
    assert cycles is not None
    failed, replacement = derive.fault_cycle(snap), derive.replacement_cycle(snap)
    old, new = cycles.by_cycle(failed), cycles.by_cycle(replacement)
    if old is None:
        f.problem(f"no cycle_info record for the failed cycle {failed}")
    elif old.end is None:
        f.problem(f"cycle {failed} has no cycle_end_time", old.ref)
    else:
        f.fact(f"cycle {failed} ended {iso_z(old.end)}", old.ref)
    if new is None:
        f.problem(f"no replacement cycle: cycle_infos has no record for cycle {replacement}")
    elif new.start is None:
        f.problem(f"cycle {replacement} has no cycle_start_time", new.ref)
    else:
        f.fact(f"replacement cycle {replacement} started {iso_z(new.start)}", new.ref)
        if old is not None and old.end is not None and new.start < old.end:
            f.problem(f"cycle {replacement} started before cycle {failed} ended", old.ref, new.ref)
    if new is not None and snap.train_log(replacement) is None:
        f.unknown(f"no logs/train_cycle{replacement}.log for the replacement cycle")
