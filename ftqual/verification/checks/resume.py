"""Fault scenarios, after the restart: restored with optimizer state, progressed, finished cleanly."""

from __future__ import annotations

import numpy as np

from ftqual.verification.checks import result as checks
from ftqual.verification.checks.checkpoint_folder import NOT_COMPLETED, completed_folder
from ftqual.verification.checks.result import CheckResult, Findings, Scoped
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import NO_RECOVERY, CheckSpec, judged_per_fault, plain
from ftqual.verification.evidence import derive, endings
from ftqual.verification.evidence.iterations import HAS_GBS, INT64_MAX
from ftqual.verification.evidence.run_meta import FaultMarker
from ftqual.verification.evidence.snapshot import RunSnapshot

RESUMED = "resumed_from_checkpoint"
PROGRESS = "progress_after_resume"
CLEAN_FINISH = "clean_finish"


NO_INJECTION = "no injection recorded (no fault_injected.json): recovery was not exercised"


def resumed_from_checkpoint(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: the replacement cycle loaded checkpoint K >= 1, no older than the marker's, whose
    `iter_K/.metadata` is a non-empty regular file inside the run, with its optimizer state (no fresh
    start, no optimizer-load error, neither --no-load-optim nor --finetune), and its first step is K+1 with
    consumed samples (K+1) x global batch size. With N injections, the cycle after each one resumed so,
    from a checkpoint at or after that injection's, completed before that cycle."""
    cid = RESUMED
    if (early := checks.unready(cid, snap, exp, "train_logs")) is not None:
        return early
    f = Findings(cid)
    if len(snap.markers) <= 1:
        _resumed_after(snap, f, snap.marker)
        return f.result()
    each = []
    for item, g in checks.per_injection(f, snap.markers):
        _resumed_after(snap, g, item, _stopped_in_setup(snap, derive.replacement_cycle(snap, item)))
        each.append({"injection": item.number, "cycle": derive.replacement_cycle(snap, item), **g.values})
    f.values.update({k: v for k, v in each[0].items() if k not in ("injection", "cycle")})
    f.values["injections"] = each
    return f.result()


def _stopped_in_setup(snap: RunSnapshot, cycle: int) -> FaultMarker | None:
    """The later injection (hang_placement setup) that stopped this cycle in its setup, if one did."""
    return next((m for m in snap.markers if m.placement == "setup" and m.cycle == cycle), None)


def _resumed_after(
    snap: RunSnapshot, f: Findings | Scoped, marker: FaultMarker | None, stopped: FaultMarker | None = None
) -> None:
    """The replacement cycle of one injection (`marker`; None: the run recorded none) resumed; one that a
    later injection stopped in its setup (`stopped`) proves its load, and its first step cannot come."""
    cycle = derive.replacement_cycle(snap, marker)
    log = snap.train_log(cycle)
    if log is None:
        checks.absent_after_stop(snap, f, f"no replacement cycle: logs/train_cycle{cycle}.log is absent")
        return
    for ref_ in log.fresh_starts:
        f.problem("the replacement started from scratch ('could not find the metadata file')", ref_)
    for ref_ in log.optimizer_errors:
        f.problem("Megatron could not load the optimizer state", ref_)
    for name in ("no_load_optim", "finetune"):
        if log.arg_true(name):
            f.problem(f"argument {name} is True: optimizer state is not restored", log.args[name].ref)
    if "no_load_optim" not in log.args and "finetune" not in log.args:
        f.note(f"{log.path} has no arguments block: --no-load-optim/--finetune not ruled out from arguments")
    starts, dones = log.loads_of("start"), log.loads_of("done")
    if not starts and not dones:
        f.missing_fact(f"{log.path} has no 'loading ... checkpoint ... at iteration K' line", log.complete)
        if not snap.meta.checkpoint_load:
            f.problem("run.json says checkpoint_load false: the workload was launched without --load")
        return
    if not dones:
        errors = log.errors[:2]
        f.missing_fact(
            f"loading iteration {starts[0].iteration} began but no 'successfully loaded checkpoint' "
            f"line follows",
            log.complete,
            starts[0].ref,
            *errors,
        )
        return
    done = dones[0]
    k = done.iteration
    f.values["restored_iteration"] = k
    matching = [s for s in starts if s.iteration == k and s.ref.line <= done.ref.line]
    f.fact(f"loaded checkpoint at iteration {k}", *(s.ref for s in (matching[:1] or starts[:1])), done.ref)
    if starts and not matching:
        f.problem(f"load started at iteration {starts[0].iteration} but finished at {k}", starts[0].ref)
    if k < 1:
        f.problem(f"restored iteration {k}: that is a fresh start, not a recovery", done.ref)
    _completed(snap, f, k, marker)
    marker_k = marker.checkpoint_iteration if marker else None
    if marker_k is not None and k < marker_k:
        f.problem(f"restored iteration {k} is older than checkpoint {marker_k} completed before the failure")
    elif marker_k is not None and k > marker_k:
        f.note(f"restored iteration {k} is newer than the marker's checkpoint {marker_k}")
        if not derive.saves_done(snap, k, before_cycle=cycle) and k != snap.meta.initial_checkpoint_iteration:
            f.missing_fact(
                f"restored iteration {k} was never completed before cycle {cycle} (no 'successfully saved "
                f"checkpoint from iteration {k}' line): an unfinished checkpoint",
                all(item.complete for item in snap.train_logs if item.cycle < cycle),
            )
    if stopped is not None:
        # Its first step never came by design: the next injection's replacement proves the step after it.
        f.fact(
            f"cycle {cycle} was then stopped in its setup by injection {stopped.number} (placement setup): "
            "no first step expected there",
            stopped.ref,
        )
        return
    _first_step(snap, f, log, done.ref.line, k)


def _completed(snap: RunSnapshot, f: Findings | Scoped, k: int, marker: FaultMarker | None) -> None:
    folder = completed_folder(
        snap,
        f,
        k,
        absent="iter_{k:07d} is not a completed checkpoint (no such folder in {root})",
        unfinished=NOT_COMPLETED,
    )
    if folder is not None:
        f.cite(folder.ref)
    elif snap.checkpoints is None:
        return  # unread: completed_folder said so
    earlier = derive.saves_done(snap, k, before_cycle=derive.replacement_cycle(snap, marker))
    if earlier:
        f.cite(earlier[0].ref)
    elif marker is None or marker.baseline_iteration is None or k > marker.baseline_iteration:
        f.note(f"no 'successfully saved checkpoint from iteration {k}' line in an earlier cycle")


def _first_step(snap: RunSnapshot, f: Findings | Scoped, log, after_line: int, k: int) -> None:
    first = derive.first_step_after(log, after_line)
    if first is None:
        f.missing_fact(f"no iteration line after the restore in {log.path}", log.complete)
        return
    f.values["first_iteration"] = first.iteration
    if first.iteration != k + 1:
        f.problem(f"first iteration after the restore is {first.iteration}, expected {k + 1}", first.ref)
        return
    gbs = derive.global_batch_size(snap, first)
    if gbs is None:
        f.note("global batch size unknown: consumed samples not checked")
        f.fact(f"first step after the restore is iteration {k + 1}", first.ref)
        return
    expected = (k + 1) * gbs
    if first.consumed_samples != expected:
        f.problem(
            f"iteration {k + 1} reports {first.consumed_samples} consumed samples, expected "
            f"{expected} = {k + 1} x {gbs}: the data position was not restored",
            first.ref,
        )
    else:
        f.fact(
            f"first step is iteration {k + 1} with consumed samples {expected} = {k + 1} x {gbs}", first.ref
        )


def progress_after_resume(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: after the restored iteration K the run trained forward to the end: iteration lines in
    the replacement cycle (and later) strictly increase in log order, never go back to K or before, never
    repeat, and each reports consumed samples = iteration x global batch size; a later checkpoint completed
    (its `.metadata` real); the final iteration was reached; the tracker names it and its folder is a
    completed checkpoint."""
    cid = PROGRESS
    if (early := checks.unready(cid, snap, exp, "train_logs")) is not None:
        return early
    f = Findings(cid)
    scratch_restarts(snap, f)
    cycle = derive.replacement_cycle(snap)
    later_logs = [log for log in snap.train_logs if log.cycle >= cycle]
    if not later_logs:
        checks.absent_after_stop(snap, f, f"no replacement cycle log (train_cycle{cycle}.log or later)")
        return f.result()
    # A run stopped from outside was cut short by the stop: what it lacks after that is unknown, not wrong.
    complete = later_logs[-1].complete and not stopped_from_outside(snap)
    restored = derive.restore(snap)
    base = restored.iteration if restored else (snap.marker.checkpoint_iteration if snap.marker else None)
    if base is None:
        return checks.inconclusive(cid, "restored iteration unknown (no load line, no marker)")
    tables = [log.iterations for log in later_logs]
    first = derive.first_row(tables, lambda rows: rows["iteration"] > base, low=base + 1)
    if first is None:
        f.missing_fact(f"no iteration committed after the restored iteration {base}", complete)
    else:
        steps = sum(table.count_iterations(low=base + 1) for table in tables)
        f.fact(f"{steps} iterations committed after iteration {base}", first.ref)
    _forward(snap, f, later_logs, base)
    later_saves = [e for log in later_logs for e in log.saves_of("done") if e.iteration > base]
    if not later_saves:
        f.missing_fact(f"no checkpoint after iteration {base} completed in cycle {cycle} or later", complete)
    else:
        first = later_saves[0]
        folder = snap.checkpoints.dir_for(first.iteration) if snap.checkpoints else None
        if snap.checkpoints is not None and (folder is None or not folder.has_metadata):
            why = folder.why_incomplete if folder else "no folder"
            f.problem(
                f"checkpoint {first.iteration} logged as saved but iter_{first.iteration:07d} is not "
                f"complete ({why})",
                first.ref,
            )
        else:
            f.fact(
                f"checkpoint {first.iteration} completed in a later cycle",
                first.ref,
                folder.ref if folder else None,
            )
    total = derive.train_iters(snap)
    _final(snap, f, later_logs, total, complete)
    return f.result()


def _forward(snap: RunSnapshot, f: Findings, logs, base: int) -> None:
    """Iteration lines of the replacement cycle(s), in log order: strictly increasing past `base`, none
    missing at the log interval, each with consumed samples = iteration x global batch size (when that is
    known and constant)."""
    _none_missing(f, logs, base)
    for log in logs:
        table = log.iterations
        back = derive.first_row([table], lambda rows: rows["iteration"] <= base, high=base + 1)
        if back:
            f.problem(
                f"{log.path}: iteration {back.iteration} after the restore at {base}: training went back",
                back.ref,
            )
        if (turn := table.first_turn()) is not None:
            prev, cur = table.row(turn - 1), table.row(turn)
            f.problem(
                f"{log.path}: iteration {cur.iteration} follows iteration {prev.iteration} "
                "(iterations out of order or repeated)",
                prev.ref,
                cur.ref,
            )
        gbs = derive.global_batch_size(snap)
        if gbs is None:
            continue  # unknown: consumed samples are not a product
        sizes, wrong = _sizes_and_first_not_product(table, gbs)
        if len(sizes) > 1 or (sizes and sizes != {gbs}):
            continue  # batch-size ramp-up: consumed samples are not a product
        if wrong is not None:
            item = table.row(wrong)
            f.problem(
                f"iteration {item.iteration} reports {item.consumed_samples} consumed samples, expected "
                f"{item.iteration * gbs} = {item.iteration} x {gbs}",
                item.ref,
            )


def _sizes_and_first_not_product(table, gbs: int) -> tuple[set[int], int | None]:
    """(the global batch sizes the rows report: at most two, more only says 'more than one'; the index of
    the first row whose consumed samples are not iteration x gbs), in one pass over the table."""
    sizes: set[int] = set()
    wrong: int | None = None
    for start, rows in table.chunks():
        found = np.unique(rows["gbs"][(rows["flags"] & HAS_GBS) != 0], return_index=True)[0]  # no numpy.ma
        sizes.update(int(v) for v in found[:2])
        if len(sizes) > 1:
            break  # a ramp-up: no product to check
        if wrong is None and len(hits := np.flatnonzero(_not_product(rows, gbs))):
            wrong = start + int(hits[0])
    return sizes, wrong


def _not_product(rows: np.ndarray, gbs: int) -> np.ndarray:
    """consumed samples != iteration x gbs, exactly (a product beyond int64 is never a logged count)."""
    its = rows["iteration"]
    limit = INT64_MAX // gbs if gbs > 0 else INT64_MAX
    over = its > limit
    with np.errstate(over="ignore"):
        product = np.where(over, 0, its) * np.int64(gbs)
    return over | (rows["consumed"] != product)


WANTED_WINDOW = 10_000_000  # wanted iterations counted at a time: one byte each, 10 MB
MAX_WANTED_WINDOWS = 100  # a billion logged iterations after a restore: no real run, a forged number


def _none_missing(f: Findings, logs, base: int) -> None:
    interval = None
    for log in logs:
        arg = log.args.get("log_interval")
        if arg is not None and arg.value.isascii() and arg.value.isdigit() and int(arg.value) > 0:
            interval = int(arg.value)
    tables = [log.iterations for log in logs]
    if interval is None or not any(table.count_iterations(low=base + 1) for table in tables):
        return
    top = max(r[1] for table in tables if (r := table.iteration_range()) is not None)
    wanted = range(base + interval - base % interval, top + 1, interval)
    if len(wanted) > WANTED_WINDOW * MAX_WANTED_WINDOWS:  # never skipped in silence: a gap could hide there
        f.unknown(
            f"{len(wanted)} iterations wanted after the restore at log interval {interval} (up to {top}): "
            f"more than the {WANTED_WINDOW * MAX_WANTED_WINDOWS} this verifier checks for gaps"
        )
        return
    chunks = [item for table in tables for item in table.chunk_ranges()]
    lacking, first = 0, None
    for at in range(0, len(wanted), WANTED_WINDOW):  # one window for every run of up to 10 M iterations
        window = wanted[at : at + WANTED_WINDOW]
        seen = np.zeros(len(window), dtype=bool)
        for low, high, load in chunks:
            if high < window.start or low >= window.stop:
                continue
            its = load()["iteration"]
            its = its[(its >= window.start) & (its < window.stop) & ((its - window.start) % interval == 0)]
            seen[(its - window.start) // interval] = True
        missing = np.flatnonzero(~seen)
        if len(missing):
            lacking += len(missing)
            first = window[int(missing[0])] if first is None else first
    if lacking:
        f.missing_fact(
            f"{lacking} iteration(s) after the restore never logged at log interval {interval} "
            f"(first: {first})",
            logs[-1].complete,
        )


def _final(snap: RunSnapshot, f: Findings, logs, total: int | None, complete: bool) -> None:
    if total is None:
        f.unknown("train_iters unknown (neither run.json nor iteration lines say)")
        return
    tables = [log.iterations for log in logs]
    final = derive.first_row(tables, lambda rows: rows["iteration"] == total, low=total, high=total + 1)
    if final:
        f.fact(f"final iteration {total} reached", final.ref)
    else:
        reached = derive.max_iteration(tables)
        if stopped_from_outside(snap):
            f.unknown(
                f"final iteration {total} not reached (last seen: {reached}): {stopped_from_outside(snap)}"
            )
        elif (end := endings.silent_end(snap)) is not None:  # exit 0 with whole logs proves the end
            f.problem(f"{end.text}: final iteration {total} not reached (last seen: {reached})", *end.refs)
        else:
            f.missing_fact(f"final iteration {total} not reached (last seen: {reached})", complete)
    tracker_matches(snap, f, total)


def scratch_restarts(snap: RunSnapshot, f: Findings) -> None:
    """A replacement cycle that trained from iteration 0 while a completed checkpoint existed (Megatron
    starts from random without a tracker) is named, with its first iteration and the save it ignored."""
    for item in endings.scratch_restarts(snap):
        f.problem(f"{item.text} (its first iteration: {item.first_iteration})", *item.refs)


def tracker_matches(snap: RunSnapshot, f: Findings, total: int) -> None:
    """The tracker file must name the final iteration (empty or unreadable: unknown, absent: wrong), and
    the folder it designates must be a completed checkpoint (`.metadata` a non-empty regular file)."""
    if snap.checkpoints is None:
        f.unknown(snap.reason("checkpoints"))
        return
    tracker = snap.checkpoints.tracker
    stopped = stopped_from_outside(snap)
    if stopped and (tracker.state == "absent" or (tracker.state == "value" and tracker.value != total)):
        f.unknown(f"{tracker.ref.path} does not name the final iteration {total}: {stopped}", tracker.ref)
    elif tracker.state == "absent":
        f.problem(f"{tracker.ref.path} is absent: no checkpoint was ever recorded")
    elif tracker.state == "empty":
        f.unknown(
            f"{tracker.ref.path} is empty (written non-atomically): tracked iteration unknown", tracker.ref
        )
    elif tracker.state == "invalid":
        f.unknown(f"{tracker.ref.path} holds no integer ({tracker.raw!r})", tracker.ref)
    elif tracker.value != total:
        f.problem(f"tracker says {tracker.value}, expected the final iteration {total}", tracker.ref)
    else:
        folder = snap.checkpoints.dir_for(total)
        if folder is None:
            f.problem(f"tracker = {total} but {snap.checkpoints.root} has no iter_{total:07d}", tracker.ref)
        elif not folder.has_metadata:
            f.problem(
                f"tracker = {total} but {folder.ref.path} is not a completed checkpoint "
                f"({folder.why_incomplete})",
                tracker.ref,
                folder.ref,
            )
        else:
            f.fact(f"tracker = {total}, {folder.ref.path} completed", tracker.ref, folder.ref)


def clean_finish(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: ft_launcher exited 0; exactly the requested number N of injections happened (one marker
    each, fault_injected.json then fault_injected.<k>.json, in N distinct cycles) and each is the requested
    one (the markers' fault, rank and run_id, and any `[ftqual-inject]` line's, equal run.json's); exactly
    N + 1 cycles ran; no no-progress stop, no non-zero agent exit. A launcher that gave up with
    max_restarts restarts spent on more injections than max_restarts fails naming it."""
    cid = CLEAN_FINISH
    if not exp.faulty:
        return checks.skip(cid, "no fault in this scenario")
    f = Findings(cid)
    _restarts_exhausted(snap, exp, f)
    exit_code(snap, f)
    if exp.injections > 1 or len(snap.markers) > 1:
        _many_injections(snap, exp, f)
    else:
        _injections(snap, f)
    cycles(snap, f, exp.expected_cycles)
    launcher_outcome(snap, f)
    last = snap.train_logs[-1] if snap.train_logs else None
    if last is not None and not last.closed:
        f.note(f"{last.path} has no 'FT: closed.' line")
    return f.result()


def exit_code(snap: RunSnapshot, f: Findings) -> None:
    code = snap.meta.exit_code
    if code is None:
        f.unknown("run.json has no exit_code (the launcher had not finished?)", snap.meta.ref)
    elif code != 0 and stopped_from_outside(snap):
        f.unknown(f"ft_launcher exit code {code}: {stopped_from_outside(snap)}", snap.meta.ref)
    elif code != 0:
        what = {93: " (NVRx no-restart: no progress)", 1: " (restarts exhausted or launcher error)"}.get(
            code, ""
        )
        f.problem(f"ft_launcher exit code {code}{what}", snap.meta.ref)
    else:
        f.fact("ft_launcher exit code 0", snap.meta.ref)


def _injections(snap: RunSnapshot, f: Findings) -> None:
    if not snap.ok("marker"):
        f.unknown(snap.reason("marker"))
        return
    lines = snap.injections
    if len(lines) > 1:
        f.problem(
            f"{len(lines)} injection lines ([ftqual-inject]): the fault was injected more than once",
            *(item.ref for item in lines[:3]),
        )
    if snap.marker is None:
        if lines:
            f.problem("an injection line was printed but fault_injected.json is absent", lines[0].ref)
        else:
            checks.absent_after_stop(snap, f, NO_INJECTION)
    elif len(lines) <= 1:
        f.fact("exactly one injection", snap.marker.ref, *(item.ref for item in lines))
    if snap.marker is not None:
        conflicts, unknowns = derive.marker_mismatches(snap)
        for text in conflicts:
            f.problem(f"the injection is not the requested one: {text}", snap.marker.ref, snap.meta.ref)
        for text in unknowns:
            f.unknown(f"the injection cannot be tied to the request: {text}", snap.marker.ref)
        if not conflicts and not unknowns:
            f.fact(f"the injection is the requested one ({snap.meta.fault} of rank {snap.meta.fault_rank})")


def _restarts_exhausted(snap: RunSnapshot, exp: RunPlan, f: Findings) -> None:
    """ft_launcher exited non-zero after max_restarts restarts, with more injections requested than it
    may restart for: the scenario asked for more than the launcher allows (causes.py names it alike)."""
    code, most = snap.meta.exit_code, exp.max_restarts
    if code in (None, 0) or most is None or exp.injections <= most:
        return
    count, source = derive.cycle_count(snap)
    restarts = count - 1 if count is not None and source == "cycle_infos" else None
    if restarts is None and snap.launcher is not None:
        restarts = len(snap.launcher.restarts)
    if restarts is None or restarts < most:
        return
    f.problem(
        f"ft_launcher gave up after {restarts} restarts (max_restarts {most}): {exp.injections} injections "
        f"requested, one restart each, more than max_restarts allows (restarts exhausted, exit code {code})",
        snap.meta.ref,
    )


def _many_injections(snap: RunSnapshot, exp: RunPlan, f: Findings) -> None:
    """N injections: exactly N markers numbered 1..N, each naming its number, in increasing cycles, each the
    requested fault; at most N `[ftqual-inject]` lines."""
    if not snap.ok("marker"):
        f.unknown(snap.reason("marker"))
        return
    wanted, markers, lines = exp.injections, snap.markers, snap.injections
    numbers = [m.number for m in markers]
    f.values["injections"] = len(markers)
    if len(lines) > wanted:
        f.problem(
            f"{len(lines)} injection lines ([ftqual-inject]) for {wanted} requested injection(s)",
            *(item.ref for item in lines[:3]),
        )
    if not markers:
        checks.absent_after_stop(snap, f, NO_INJECTION)
        return
    if numbers != list(range(1, len(markers) + 1)):
        f.problem(
            f"the markers are injections {numbers}, not 1..{len(markers)}", *(m.ref for m in markers[:3])
        )
    if len(markers) != wanted:
        text, refs = f"{len(markers)} injection marker(s), {wanted} requested", [m.ref for m in markers[-1:]]
        if len(markers) < wanted:  # too few may be the stop's doing; too many never are
            checks.absent_after_stop(snap, f, text, *refs)
        else:
            f.problem(text, *refs)
    else:
        f.fact(f"exactly {wanted} injections", *(m.ref for m in markers))
    for before, after in zip(markers, markers[1:], strict=False):
        if before.cycle is not None and after.cycle is not None and after.cycle <= before.cycle:
            f.problem(
                f"{after.ref.path} says cycle {after.cycle}, not after {before.ref.path}'s cycle "
                f"{before.cycle}",
                after.ref,
            )
    clean = True
    for marker in markers:
        if marker.injection is not None and marker.injection != marker.number:
            f.problem(f"{marker.ref.path} says injection {marker.injection}", marker.ref)
        if marker.injections is not None and marker.injections != wanted:
            f.problem(f"{marker.ref.path} says {marker.injections} injections, run.json {wanted}", marker.ref)
        if marker.timing is not None and marker.timing != snap.meta.fault_timing:
            f.problem(
                f"{marker.ref.path} says timing {marker.timing!r}, run.json {snap.meta.fault_timing!r}",
                marker.ref,
            )
        conflicts, unknowns = derive.marker_mismatches(snap, marker)
        for text in conflicts:
            f.problem(f"the injection is not the requested one: {text}", marker.ref, snap.meta.ref)
        for text in unknowns:
            f.unknown(f"the injection cannot be tied to the request: {text}", marker.ref)
        clean = clean and not conflicts and not unknowns
    if clean:
        f.fact(f"every injection is the requested one ({snap.meta.fault} of rank {snap.meta.fault_rank})")


def cycles(snap: RunSnapshot, f: Findings, expected: int) -> None:
    """Exactly `expected` cycles, as cycle_infos records them (the per-cycle logs alone do not show a
    cycle that died before it printed: missing records leave the count unknown)."""
    count, source = derive.cycle_count(snap)
    if count is None or source != "cycle_infos":
        f.unknown(f"number of cycles unknown: {snap.reason('cycle_infos')}")
        return
    logs = len(snap.train_logs)
    f.values["cycles"] = count
    if count < expected:
        checks.absent_after_stop(snap, f, f"{count} cycles ran, expected {expected}")
    elif count != expected:
        f.problem(f"{count} cycles ran, expected {expected}")
    elif logs > count:
        f.problem(f"{logs} per-cycle train logs, but cycle_infos records {count} cycle(s)")
    else:
        f.fact(f"{count} cycle(s) as expected")


def stopped_from_outside(snap: RunSnapshot) -> str | None:
    """Why the run's end cannot be judged: our launcher was stopped by a signal from outside (a stopped
    workflow, a scheduler's time limit, scancel) before the run ended; None when nothing stopped it."""
    signal = snap.meta.interrupted_by
    if not signal:
        return None
    return f"the launcher was stopped by {signal} from outside before the run ended (run.json interrupted_by)"


def launcher_outcome(snap: RunSnapshot, f: Findings) -> None:
    launcher = snap.launcher
    if launcher is None:  # missing evidence is never a pass, whatever the exit code suggests
        f.unknown(f"launcher outcome not shown: {snap.reason('launcher_log')}")
        return
    stopped = stopped_from_outside(snap)
    # How a run stopped from outside ended is the stop's doing, not the stack's: not judged.
    ending = (lambda text, *refs: f.unknown(f"{text}: {stopped}", *refs)) if stopped else f.problem
    for item in launcher.no_progress_stops[:2]:
        f.problem("NVRx stopped the job: no progress across restarts", item.ref)
    for item in launcher.nonzero_exits[:1]:
        ending("launcher: some rank(s) exited with non-zero exit code", item.ref)
    for item in launcher.agent_exit_codes:
        if item.code not in (None, 0):
            ending(f"launcher agent exit code {item.code}", item.ref)
    if launcher.successes:
        f.fact("launcher: worker group successfully finished", launcher.successes[-1].ref)
    else:
        f.missing_fact(
            "launcher.log has no 'worker group successfully finished' line",
            snap.sources["launcher_log"].complete and not stopped,
        )


SPECS = (
    CheckSpec(
        "resumed_from_checkpoint",
        "the replacement loaded a completed checkpoint at iteration K ≥ 1 with optimizer state, not a fresh"
        " start from iteration 0",
        judged_per_fault("resumed_from_checkpoint", plain(resumed_from_checkpoint)),
        waived_by=NO_RECOVERY,
    ),
    CheckSpec(
        "progress_after_resume",
        "optimizer steps were committed past K, a later checkpoint completed, and the final iteration was"
        " reached",
        judged_per_fault("progress_after_resume", plain(progress_after_resume)),
        waived_by=NO_RECOVERY,
    ),
    CheckSpec(
        "clean_finish",
        "ft_launcher exited 0 after exactly the requested injections (one unless the scenario sets more),"
        " with no no-progress stop (exit 93)",
        plain(clean_finish),
        waived_by=NO_RECOVERY,
    ),
)
