"""The checkpoint and restart account of one run (verify.json's optional key `checkpoint_account`).

Saves, one per `successfully saved` line (every cycle's log, in order):
- `bytes`: the iteration folder's size (ftqual.verification.evidence.checkpoints: the files on disk, or the
  dropped-payload manifest's sizes; None for a folder whose payload was trimmed without one);
- `blocked_s`: how long the training step was held: Megatron's `save-checkpoint` timer (the max across
  ranks) printed after the save, else the `saving` -> `scheduled an async checkpoint save` lines;
- `durable_s`: `saving checkpoint` -> `successfully saved checkpoint` (printed after the finalize wrote the
  tracker: complete and durable; for an async save it includes the wait for the step that finalizes it);
- `gbps`: bytes / durable_s (10^9 bytes per second), the rate to set against the storage's write floor.

Restarts, one per injection that was followed by a replacement cycle:
- `detection_s` (injection -> detection) and `restart_s` as ftqual.verification.metrics measures them;
- `worker_stop_s`: detection -> the launcher's `worker_terminated` event (metrics.teardown_s);
- `gpu_reclaim_s`: NVRx's wait for GPU memory before the replacement (its `memory reclaimed in` line, or
  the time it gave up after); None where the launcher printed none (a CPU run);
- `process_start_s`: the replacement cycle's start -> Megatron's `[after in-process setup and before
  initialize_megatron]` stamp (interpreter, imports, library set-up);
- `init_s`: that stamp -> `[after model, optimizer, and learning rate scheduler are built]`, less the load;
- `load_s`: Megatron's `load-checkpoint` timer; `load_bytes`: the restored iteration's folder; `load_gbps`;
- `first_step_s`: the model-built stamp -> the first iteration line after the restore (data loaders and
  the first step).
Every figure is None where its evidence is missing, never estimated.
"""

from __future__ import annotations

import bisect
from datetime import timedelta

from ftqual.verification import metrics
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.clock import seconds
from ftqual.verification.evidence.snapshot import RunSnapshot
from ftqual.verification.evidence.train_log import MODEL_BUILT

SAVE_KEYS = ("iteration", "cycle", "bytes", "blocked_s", "durable_s", "gbps")
RESTART_KEYS = (
    "cycle",
    "detection_s",
    "worker_stop_s",
    "gpu_reclaim_s",
    "process_start_s",
    "init_s",
    "load_s",
    "load_bytes",
    "load_gbps",
    "first_step_s",
)
IN_PROCESS_SETUP = "after in-process setup and before initialize_megatron"
MAX_SAVES = metrics.MAX_SAVES_LISTED  # a long run's saves: the first ones listed, all counted


def _gbps(nbytes: int | None, secs: float | None) -> float | None:
    if nbytes is None or secs is None or secs <= 0:
        return None
    return round(nbytes / secs / 1e9, 3)


def _bytes(snap: RunSnapshot, iteration: int | None) -> int | None:
    if iteration is None or snap.checkpoints is None:
        return None
    folder = snap.checkpoints.dir_for(iteration)
    return folder.bytes if folder is not None else None


def _blocked(timers: list[tuple[int, float]], start_line: int, end_line: int) -> float | None:
    """The first `save-checkpoint` timer (line, max ms) printed between a save's start and the next save's
    start, in seconds."""
    at = bisect.bisect_right(timers, (start_line, float("inf")))
    if at < len(timers) and timers[at][0] < end_line:
        return round(timers[at][1] / 1000.0, 3)
    return None


def saves(snap: RunSnapshot) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for log in snap.train_logs:
        starts = [e.ref.line for e in log.saves_of("start")]  # in line order
        timers = [(t.ref.line, t.max_ms) for t in log.timers if t.name == "save-checkpoint"]
        scheduled = {e.iteration: e for e in log.saves_of("scheduled")}
        for done, start in derive.completed_saves(log):
            blocked = None
            if start is not None:
                at = bisect.bisect_right(starts, start.ref.line)
                blocked = _blocked(timers, start.ref.line, starts[at] if at < len(starts) else log.lines + 1)
                sched = scheduled.get(done.iteration)
                if blocked is None and sched is not None and sched.ref.line > start.ref.line:
                    blocked = seconds(start.t, sched.t)
            durable = seconds(start.t, done.t) if start is not None else None
            size = _bytes(snap, done.iteration)
            out.append(
                {
                    "iteration": done.iteration,
                    "cycle": log.cycle,
                    "bytes": size,
                    "blocked_s": blocked,
                    "durable_s": durable,
                    "gbps": _gbps(size, durable),
                }
            )
    return out


def _gpu_reclaim(snap: RunSnapshot, after, before) -> float | None:
    """NVRx's longest wait for GPU memory between a failure's detection and the replacement's start."""
    if snap.launcher is None or after is None:
        return None
    low = after - timedelta(seconds=derive.SLACK_S)
    high = before + timedelta(seconds=derive.SLACK_S) if before is not None else None
    waits = [
        r.waited_s
        for r in snap.launcher.gpu_reclaims
        if r.t is not None and r.t >= low and (high is None or r.t <= high)
    ]
    return max(waits) if waits else None


def _restart(snap: RunSnapshot, marker) -> dict[str, object] | None:
    replacement = derive.replacement_cycle(snap, marker)
    log = snap.train_log(replacement)
    new = snap.cycles.by_cycle(replacement) if snap.cycles else None
    if log is None and new is None:
        return None  # no replacement cycle: nothing restarted
    found = derive.detection(snap, marker)
    detected = found.t if found else None
    old = snap.cycles.by_cycle(derive.fault_cycle(snap, marker)) if snap.cycles else None
    restored = derive.restore(snap, marker)
    in_process = log.milestone(IN_PROCESS_SETUP) if log else None
    built = log.milestone(MODEL_BUILT) if log else None
    load = metrics.load_s(log)
    init = seconds(in_process.t if in_process else None, built.t if built else None)
    first = derive.first_step_after(log, restored.ref.line if restored else 0)
    load_bytes = _bytes(snap, restored.iteration if restored else None)
    return {
        "cycle": replacement,
        "detection_s": seconds(marker.injected_at, detected),
        "worker_stop_s": metrics.teardown_s(snap, detected, replacement),
        "gpu_reclaim_s": _gpu_reclaim(snap, detected, new.start if new else None),
        "process_start_s": seconds(new.start if new else None, in_process.t if in_process else None),
        "init_s": round(max(init - load, 0.0), 3) if init is not None and load is not None else init,
        "load_s": load,
        "load_bytes": load_bytes if restored is not None else None,
        "load_gbps": _gbps(load_bytes, load) if restored is not None else None,
        "first_step_s": seconds(built.t if built else None, first.t if first else None),
        "restart_s": seconds(metrics.failed_cycle_end(old, new, detected), new.start if new else None),
    }


def restarts(snap: RunSnapshot) -> list[dict[str, object]]:
    out = []
    for marker in snap.markers:
        entry = _restart(snap, marker)
        if entry is not None:
            out.append(entry)
    return out


def account(snap: RunSnapshot) -> dict[str, object]:
    """verify.json's `checkpoint_account`: {"saves": [...], "restarts": [...]} (and `saves_total` when a
    long run has more saves than are listed)."""
    listed = saves(snap)
    out: dict[str, object] = {"saves": listed[:MAX_SAVES], "restarts": restarts(snap)}
    if len(listed) > MAX_SAVES:
        out["saves_total"] = len(listed)
    return out
