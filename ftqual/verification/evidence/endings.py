"""How a run ended where its exit code misleads, and who stopped the job.

How a run ended, where the exit code alone misleads: a silent end, a restart from scratch, restarts that
made no progress.

- A *silent end*: ft_launcher exited 0 but training never reached `train_iters`. Megatron's `read_metadata`
  calls `sys.exit()` without a code on a tracker that is not an integer (and so does
  `--exit-on-missing-checkpoint`): the rank exits 0, which ft_launcher takes for a finished worker.
- A *restart from scratch*: a replacement cycle restored nothing (or iteration 0) while an earlier cycle had
  completed a checkpoint (Megatron "will start from random" when the tracker is missing).
- *Burned cycles*: replacement cycles that completed no checkpoint beyond the one they restored, in a run
  that NVRx stopped (no progress, exit 93) or that ran out of restarts (exit 1); their GPU-seconds are the
  world size times their wall time (cycle_infos).
- *Who stopped the job* (`job_stop`): NVRx's progress tracker (its no-progress line), `--max-restarts` (exit 1
  after the last attempt was spent), the restart agent (a hook: its stop line is not read yet), the workload
  itself (non-zero without NVRx's stop), or nobody (exit 0); and its bill (`stop_bill`): the cycles, and the
  GPU-seconds from the first failure (the marker's `injected_at`) to the end (run.json's `finished_at`, else
  launcher.log's last timestamped fact), for the scenarios whose stop is judged (`stop_role`).

Pure functions of a `RunSnapshot`; the checks name these findings, the causes and the metrics report them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ftqual.contract import family_of
from ftqual.verification.evidence import derive, restart_agent
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.patterns import launcher as launcher_patterns
from ftqual.verification.evidence.snapshot import RunSnapshot

# What a final exit code means to a scheduler (the report's exit-code table, ftqual.report.exit_codes):
# code -> (meaning, requeue). ft_launcher's own codes (0, 1, 93) and the ranks' deaths by signal (torch's
# elastic agent prints -N; a shell between makes it 128+N). An exit 0 that did not reach the last iteration
# is a silent end (ftqual.verification.evidence.endings), whatever this table says of 0.
EXIT_MEANINGS: dict[int, tuple[str, str]] = {
    0: ("finished", "no"),
    1: ("restarts exhausted (ft_launcher) or an uncaught error (a rank)", "yes, after looking"),
    93: ("NVRx no-progress stop: cycles without progress", "no: a loop"),
    # Megatron-LM's rerun state machine (megatron/core/rerun_state_machine.py, with
    # --check-for-nan-in-loss-and-grad): 16 asks to resume from the same checkpoint on another GPU, to tell a
    # faulty GPU from a bad batch; on the same GPU it exits 16 again, so a restart in place loops.
    16: (
        "Megatron's rerun state machine: resume on another GPU to tell a faulty GPU from a bad batch",
        "on another GPU",
    ),
    17: (
        "Megatron's result validation failed (its rerun state machine's diagnosis is in the log)",
        "after looking",
    ),
    -9: ("killed (SIGKILL)", "yes"),
    137: ("killed (SIGKILL)", "yes"),
    -6: ("aborted (SIGABRT)", "yes, after looking"),
    134: ("aborted (SIGABRT)", "yes, after looking"),
    -11: ("segmentation fault (SIGSEGV)", "yes, after looking"),
    139: ("segmentation fault (SIGSEGV)", "yes, after looking"),
    -15: ("terminated (SIGTERM)", "yes"),
    143: ("terminated (SIGTERM)", "yes"),
}
SILENT_END_MEANING = (
    "silent end: exit 0 before the last iteration",
    "no: investigate, training did not finish",
)


def exit_meaning(code: int | None) -> tuple[str, str]:
    """(meaning, requeue) of a final exit code; an unlisted code is Megatron's or the workload's own."""
    if code is None:
        return ("not recorded", "unknown")
    return EXIT_MEANINGS.get(code, (f"exit {code}: the workload's own code", "after looking"))


NO_PROGRESS_EXIT = 93  # NVRx's progress tracker stops a job after cycles without progress
RESTARTS_EXHAUSTED_EXIT = 1  # ft_launcher out of --max-restarts
# Who stopped a job (JobStop.by): NVRx's progress tracker, ft_launcher's --max-restarts, NVRx's restart agent
# (attribution), the workload itself (non-zero without NVRx's stop), nobody (exit 0).
STOPPERS = ("progress_tracker", "max_restarts", "restart_agent", "workload", "none")


@dataclass(frozen=True)
class SilentEnd:
    iteration: int | None  # the last iteration logged (None: none at all)
    train_iters: int
    last_line: Ref | None  # the last iteration's line
    exit_line: Ref | None  # the launcher's line that says the workers finished (else run.json)

    @property
    def text(self) -> str:
        reached = self.iteration if self.iteration is not None else 0
        return f"silent end: exit 0 at iteration {reached} of {self.train_iters}"

    @property
    def refs(self) -> tuple[Ref, ...]:
        return tuple(r for r in (self.last_line, self.exit_line) if r is not None)


@dataclass(frozen=True)
class ScratchRestart:
    cycle: int
    first_iteration: int | None  # the cycle's first logged iteration
    checkpoint: int  # the newest checkpoint completed before the cycle
    first_line: Ref | None
    saved_line: Ref | None

    @property
    def text(self) -> str:
        return f"cycle {self.cycle} restarted from scratch while checkpoint {self.checkpoint} existed"

    @property
    def refs(self) -> tuple[Ref, ...]:
        return tuple(r for r in (self.first_line, self.saved_line) if r is not None)


@dataclass(frozen=True)
class BurnedCycles:
    cycles: tuple[int, ...]  # replacement cycles that left the job no further than they found it
    restored: tuple[int, ...]  # the iteration each restored (0: none)
    exit_code: int
    wall_s: float | None  # their wall time together (None: a cycle's times unknown)
    world_size: int | None

    @property
    def gpu_s(self) -> float | None:
        if self.wall_s is None or not self.world_size:
            return None
        return round(self.wall_s * self.world_size, 1)

    @property
    def text(self) -> str:
        stop = "NVRx's no-progress stop" if self.exit_code == NO_PROGRESS_EXIT else "restarts exhausted"
        burned = f", {self.gpu_s:g} GPU-s burned" if self.gpu_s is not None else ", GPU-s unknown"
        at = sorted(set(self.restored))
        # 0: the cycle loaded nothing (its load failed, or it started from random)
        restored = (
            "no checkpoint restored" if at == [0] else f"restored iteration {at[0] if len(at) == 1 else at}"
        )
        return (
            f"{len(self.cycles)} restart(s) without progress (cycles {list(self.cycles)}, {restored}) "
            f"until {stop} (exit {self.exit_code}){burned}"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "cycles": list(self.cycles),
            "restored": list(self.restored),
            "exit_code": self.exit_code,
            "wall_s": None if self.wall_s is None else round(self.wall_s, 3),
            "world_size": self.world_size,
            "gpu_s": self.gpu_s,
        }


def _last_row(snap: RunSnapshot, reached: int | None):
    if reached is None:
        return None
    tables = [log.iterations for log in reversed(snap.train_logs)]
    return derive.first_row(tables, lambda rows: rows["iteration"] == reached, low=reached, high=reached + 1)


def silent_end(snap: RunSnapshot) -> SilentEnd | None:
    """The run exited 0 (run.json) before its last iteration; None when it reached it, exited otherwise,
    was stopped from outside, its length is unknown or a training log looks cut short (then the missing
    iterations may be the cut's: the checks call that inconclusive)."""
    if snap.meta.exit_code != 0 or snap.meta.interrupted_by:
        return None
    if not snap.ok("train_logs") or any(not log.complete for log in snap.train_logs):
        return None
    total = derive.train_iters(snap)
    if total is None:
        return None
    reached = derive.max_iteration([log.iterations for log in snap.train_logs])
    if reached is not None and reached >= total:
        return None
    row = _last_row(snap, reached)
    exit_line = snap.meta.ref
    if snap.launcher is not None and snap.launcher.successes:
        exit_line = snap.launcher.successes[-1].ref
    return SilentEnd(reached, total, row.ref if row else None, exit_line)


def restored_iteration(log) -> int:
    """The iteration a cycle's log says it loaded (0: it loaded none)."""
    done = log.loads_of("done") if log is not None else ()
    return done[0].iteration if done else 0


def scratch_restarts(snap: RunSnapshot) -> list[ScratchRestart]:
    """Replacement cycles that restored nothing while a completed checkpoint existed: one saved by an
    earlier cycle ('successfully saved', its folder still complete where the checkpoints are readable) or
    the one the run started from (run.json's initial checkpoint)."""
    found: list[ScratchRestart] = []
    newest, saved_line = snap.meta.initial_checkpoint_iteration, None
    for log in snap.train_logs:
        if log.cycle > 0 and newest > 0 and restored_iteration(log) == 0:
            first = derive.first_step_after(log)
            if first is not None and first.iteration <= newest:
                found.append(ScratchRestart(log.cycle, first.iteration, newest, first.ref, saved_line))
        for event in log.saves_of("done"):
            folder = snap.checkpoints.dir_for(event.iteration) if snap.checkpoints is not None else None
            complete = snap.checkpoints is None or (folder is not None and folder.has_metadata)
            if complete and event.iteration > newest:
                newest, saved_line = event.iteration, event.ref
    return found


def after_the_fault(snap: RunSnapshot, cycle: int | None) -> tuple[list, int | None, BurnedCycles | None]:
    """What the outcome of a broken checkpoint or a failed storage is judged from: the training logs of the
    cycles after the fault's, the job's exit code, and the cycles it burned without progress."""
    fault_cycle = cycle or 0
    after = [log for log in snap.train_logs if log.cycle > fault_cycle]
    return after, snap.meta.exit_code, burned_cycles(snap)


def first_ending(snap: RunSnapshot, after: str) -> tuple[str | None, str, tuple] | None:
    """The endings a job meets first whatever broke it, as (outcome, what the logs show, refs): stopped from
    outside (outcome None: nothing to judge), a silent end, a restart from scratch; None for none of them.
    `after` says what broke it ("after the storage fault")."""
    if snap.meta.interrupted_by:
        return None, f"the run was stopped from outside ({snap.meta.interrupted_by})", (snap.meta.ref,)
    if (end := silent_end(snap)) is not None:
        return "silent_end", f"{end.text} {after}", end.refs
    if scratch := scratch_restarts(snap):
        return "restarted_from_scratch", f"{scratch[0].text} ({after})", scratch[0].refs
    return None


def made_progress(log, start: int) -> bool:
    """A cycle's log says it completed a checkpoint beyond `start`, the iteration it began from."""
    return any(e.iteration > start for e in log.saves_of("done"))


def burned_cycles(snap: RunSnapshot) -> BurnedCycles | None:
    """The replacement cycles that completed no checkpoint beyond the one they restored, in a run that
    ended with NVRx's no-progress stop (exit 93) or with its restarts exhausted (exit 1); None otherwise."""
    code = snap.meta.exit_code
    stopped = snap.launcher is not None and bool(snap.launcher.no_progress_stops)
    if code not in (NO_PROGRESS_EXIT, RESTARTS_EXHAUSTED_EXIT) and not stopped:
        return None
    if code is None or snap.meta.interrupted_by:
        return None
    cycles, restored = [], []
    for log in snap.train_logs:
        if log.cycle == 0:
            continue
        start = restored_iteration(log)
        if not made_progress(log, start):
            cycles.append(log.cycle)
            restored.append(start)
    if not cycles:
        return None
    wall: float | None = 0.0
    for cycle in cycles:
        info = snap.cycles.by_cycle(cycle) if snap.cycles is not None else None
        if info is None or info.start is None or info.end is None or wall is None:
            wall = None
            continue
        wall += max(0.0, (info.end - info.start).total_seconds())
    world = snap.meta.world_size
    return BurnedCycles(tuple(cycles), tuple(restored), code, wall, world)


@dataclass(frozen=True)
class JobStop:
    """Who stopped the job and with which exit. `by` is one of STOPPERS, or None where the evidence cannot
    say (stopped from outside, no exit recorded, an exit 93 without NVRx's line, launcher.log unreadable)."""

    by: str | None
    exit_code: int | None
    why: str  # what the evidence shows, in words
    line: Ref | None = None  # the line that names the stop (else run.json)

    @property
    def stopped(self) -> bool:
        """NVRx stopped it: its progress tracker, its restart budget or its restart agent."""
        return self.by in ("progress_tracker", "max_restarts", "restart_agent")


def restart_agent_stop(snap: RunSnapshot) -> Ref | None:
    """NVRx's restart agent's stop, where the launcher acted on one: NVRx 0.7.0 logs `Attribution recommended
    stopping the job; terminating workers ...` (or, where the STOP came while the next cycle formed,
    `Rendezvous closed because NVRx decided the job must not be restarted (attribution_stop)`) and exits 93
    like the progress tracker (the agent's lines are read by ftqual.verification.evidence.restart_agent)."""
    log = restart_agent.read_agent_log(snap.run_dir)
    if log.enforced_stop_line is None:
        return None
    return Ref(restart_agent.LOG, log.enforced_stop_line, "the launcher acted on the restart agent's STOP")


def _no_progress_line(snap: RunSnapshot) -> Ref | None:
    """NVRx's `no progress across restarts` line, else its `EARLY TERMINATION` line (either says the stop)."""
    stops = snap.launcher.no_progress_stops if snap.launcher is not None else ()
    said = [s.ref for s in stops if launcher_patterns.NO_PROGRESS_STOP.search(s.ref.text)]
    return (said or [s.ref for s in stops] or [None])[0]


def _restarts_spent(snap: RunSnapshot, most: int | None) -> Ref | None:
    """The failure ft_launcher found no attempt left for: after as many restart decisions as --max-restarts
    allows (run.json's, else the decisions' own `N/N attempts`), a worker's failure with no decision after
    it (NVRx 0.7.0 logs none: it stops the workers and returns). None where launcher.log says otherwise."""
    log = snap.launcher
    if log is None:
        return None
    decisions = log.restarts
    allowed = most if most is not None else (decisions[0].attempts_max if decisions else None)
    if allowed is None or len(decisions) < allowed:
        return None
    after = decisions[-1].ref.line if decisions else 0
    failed = [e.ref for e in log.exits if e.ref.line > after]
    return failed[-1] if failed else None


def job_stop(snap: RunSnapshot) -> JobStop:
    """Who stopped the job (module docstring), from run.json's exit and launcher.log's lines."""
    code, meta = snap.meta.exit_code, snap.meta
    if meta.interrupted_by:
        return JobStop(None, code, f"the run was stopped from outside ({meta.interrupted_by})", meta.ref)
    if code is None:
        return JobStop(None, None, "run.json records no exit code (the launcher had not finished?)", meta.ref)
    if code == 0:
        return JobStop("none", 0, "exit 0: nothing stopped the job", meta.ref)
    if not snap.ok("launcher_log") or snap.launcher is None:
        return JobStop(None, code, f"exit {code}, and launcher.log cannot say who stopped the job: "
                       f"{snap.reason('launcher_log') or 'no launcher.log'}", meta.ref)  # fmt: skip
    if (agent := restart_agent_stop(snap)) is not None:
        return JobStop("restart_agent", code, f"NVRx's restart agent stopped the job (exit {code})", agent)
    if (line := _no_progress_line(snap)) is not None:
        return JobStop(
            "progress_tracker", code, f"NVRx's progress tracker stopped the job (exit {code})", line
        )
    if code == NO_PROGRESS_EXIT:
        cut = "" if snap.launcher.complete else " (launcher.log looks cut short)"
        return JobStop(None, code, f"exit {code} without NVRx's no-progress line in launcher.log{cut}: "
                       "who stopped the job is unknown", meta.ref)  # fmt: skip
    if code == RESTARTS_EXHAUSTED_EXIT and (spent := _restarts_spent(snap, meta.max_restarts)) is not None:
        most = meta.max_restarts if meta.max_restarts is not None else len(snap.launcher.restarts)
        return JobStop("max_restarts", code, f"ft_launcher's restarts were exhausted (max_restarts {most}, "
                       f"exit {code})", spent)  # fmt: skip
    return JobStop("workload", code, f"the job ended with exit {code} without NVRx's stop", meta.ref)


@dataclass(frozen=True)
class StopBill:
    """What a job cost from its first failure to its end: the cycles it ran, those without progress, the
    wall time and GPU-seconds (world size x wall time)."""

    cycles: int | None  # every cycle the job ran (cycle_infos, else the per-cycle logs)
    without_progress: tuple[int, ...]  # replacement cycles that completed no checkpoint beyond their restore
    wall_s: float | None  # the first failure to the end
    world_size: int | None
    start: Ref | None = None  # the marker (injected_at)
    end: str | None = None  # where the end was read: run.json finished_at | launcher.log

    @property
    def gpu_s(self) -> float | None:
        if self.wall_s is None or not self.world_size:
            return None
        return round(self.wall_s * self.world_size, 1)


def _launcher_last_time(snap: RunSnapshot) -> datetime | None:
    """The latest time among launcher.log's timestamped facts (its last line that one of them is)."""
    log = snap.launcher
    if log is None:
        return None
    facts = (log.exits, log.restarts, log.timeouts, log.progress, log.successes, log.no_progress_stops,
             log.nonzero_exits, log.agent_exit_codes, log.gpu_reclaims)  # fmt: skip
    times = [item.t for kind in facts for item in kind if item.t is not None]
    times += [item.t for item in log.events if item.t is not None]
    return max(times, default=None)


def stop_bill(snap: RunSnapshot) -> StopBill:
    """The bill of a job from its first failure (the first marker's `injected_at`) to its end (run.json's
    `finished_at`, else launcher.log's last timestamped fact)."""
    cycles = derive.cycle_count(snap)[0]
    burned = burned_cycles(snap)
    without = burned.cycles if burned is not None else ()
    marker = snap.marker
    start = marker.injected_at if marker is not None else None
    end, where = snap.meta.finished_at, "run.json finished_at"
    if end is None:
        end, where = _launcher_last_time(snap), "launcher.log"
    wall = max(0.0, (end - start).total_seconds()) if start is not None and end is not None else None
    return StopBill(cycles, without, wall, snap.meta.world_size, marker.ref if marker else None, where)


def stop_role(fault: str, injections: int) -> str | None:
    """Whose stop is judged: "loop" for a fault that comes back after every restart (family recurring),
    "curable" for a rank fault injected more than once, each after a new checkpoint (progress kept
    between: it must never be stopped); None for every other scenario."""
    family = family_of(fault)
    if family == "recurring":
        return "loop"
    if family == "rank" and injections > 1:
        return "curable"
    return None


def stop_metrics(snap: RunSnapshot) -> dict[str, object]:
    """verify.json's metrics of who stopped the job and what it cost (only where `stop_role` judges one)."""
    if stop_role(snap.meta.fault, snap.meta.injections) is None:
        return {}
    stop, bill = job_stop(snap), stop_bill(snap)
    return {
        "stopped_by": stop.by,
        "stop_exit_code": stop.exit_code,
        "burned_cycles": len(bill.without_progress),
        "burned_wall_s": None if bill.wall_s is None else round(bill.wall_s, 3),
        "burned_gpu_s": bill.gpu_s,
    }


def ending_metrics(snap: RunSnapshot) -> dict[str, object]:
    """verify.json's optional metrics of these findings (keys present only where a finding is)."""
    out: dict[str, object] = {}
    if (end := silent_end(snap)) is not None:
        out["silent_end"] = {"iteration": end.iteration, "train_iters": end.train_iters}
    if scratch := scratch_restarts(snap):
        out["scratch_restarts"] = [{"cycle": s.cycle, "checkpoint": s.checkpoint} for s in scratch]
    if (burned := burned_cycles(snap)) is not None:
        out["no_progress_cycles"] = burned.as_dict()
    out.update(stop_metrics(snap))
    return out
