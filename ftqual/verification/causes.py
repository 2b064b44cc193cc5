"""One-line causes: why a scenario's run failed, classified from the run directory's own logs.

A failed verdict lists checks; a platform engineer first wants the one reason behind them. `classify` takes
launcher.log's facts from the evidence (the run's `RunSnapshot` where the caller has one, else the same
parser, `evidence.launcher_log`), reads the per-cycle training logs' lines once for their error lines (which
no fact keeps; regular files inside the run only, bounded lines), and names the first cause that fits, most
specific first:

- the run exited 0 before its last iteration (a silent end), or a replacement cycle trained from iteration 0
  while a checkpoint existed (ftqual.verification.evidence.endings): named even where the exit was 0;
- a fault that comes back stopped past its bound, or a curable job stopped while it made progress (the stop
  as ftqual.verification.checks.recurring judges it: who stopped the job, the cycles and GPU-seconds burned);
- NVRx stopped restarting because no cycle made progress (exit 93), with the error that ended the cycles
  and the restarts without progress with the GPU-seconds they burned (which a timeout's or a crash's cause
  below adds too, and restarts exhausted, exit 1, where nothing more specific names the end);
- a section timeout fired in every cycle (with the measured iteration time against the timeout);
- the workload rejected its arguments (argparse's `error:` line), in every cycle;
- every cycle crashed with the same error line;
- the restarts were exhausted (every cycle failed; max_restarts reached); named before the per-cycle causes
  when the run requested more injections than max_restarts allows;
- the rendezvous timed out;
- a fault scenario ended without its injection (no checkpoint before the end);
- the evidence is missing (no launcher.log: ft_launcher's log pipe never started).
Anything else is "unknown", pointing at the error the logs end on. Each cause cites file:line.

A cycle's error is the fault rank's own (fault_injected*.json names the rank), else the last error that is no
peer's consequence, whichever rank logged last: a surviving rank's gloo/NCCL `Connection closed by peer`,
`remote worker crashing`, a collective's watchdog or timeout (patterns.common.PEER_CONSEQUENCE) is never
named as the cause, only said as a peer's consequence where nothing else is logged.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ftqual.contract import INJECTED_FAULTS, family_of
from ftqual.verification.checks.recurring import recurring_fault_outcome
from ftqual.verification.checks.run_plan import run_plan_from
from ftqual.verification.evidence import endings, safeio
from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.launcher_log import LAUNCHER_LOG, LauncherLog, parse_launcher_log
from ftqual.verification.evidence.patterns import common, launcher, train
from ftqual.verification.evidence.run_meta import marker_names, read_markers
from ftqual.verification.evidence.snapshot import RunSnapshot

STOPPED = (
    "the launcher was stopped by {signal} from outside before the run ended (a stopped workflow, a "
    "scheduler's time limit or scancel): not the stack's doing; a rerun qualifies the scenario"
)
NOT_INJECTED = (
    "the {fault} was never injected: no checkpoint completed with training left after it "
    "(the fault waits for the first one)"
)
MAX_TEXT = 200
PEER_SAID = "only a peer's consequence is logged (the failing rank's own error is not)"


@dataclass(frozen=True)
class Cause:
    # silent_end | restarted_from_scratch | kept_restarting | curable_stopped | not_recurred |
    # no_progress | section_timeout | argument_error | crash | restarts_exhausted | rendezvous_timeout |
    # not_injected | evidence_missing | unknown
    kind: str
    text: str
    path: str | None = None  # evidence, relative to the run directory
    line: int | None = None

    def to_json(self) -> dict:
        return {"kind": self.kind, "text": self.text, "path": self.path, "line": self.line}


def _lines(run_dir: Path, rel: str):
    """(number, text) of a log inside the run; nothing when it is missing or not a regular file."""
    try:
        with safeio.open_regular(run_dir / rel, run_dir) as fh:
            for number, (raw, _ended) in enumerate(safeio.bounded_lines(fh), start=1):
                yield number, raw.decode("utf-8", "replace").rstrip()
    except OSError:
        return


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


@dataclass(frozen=True)
class _Error:
    line: int
    text: str
    rank: int | None  # the rank that logged it (torch's `[rankN]: `, else ft_launcher's `N: `)
    consequence: bool  # a surviving rank's report of a peer's failure (common.PEER_CONSEQUENCE)


MAX_ERRORS = 1000  # per cycle: the causes want the last few of each rank, never a flood


@dataclass
class _Cycle:
    arg_error: tuple[int, str] | None = None
    errors: list[_Error] = field(default_factory=list)
    iteration_ms: list[float] | None = None
    fault_ranks: frozenset[int] = frozenset()  # the ranks a fault was injected on in this cycle

    @property
    def last_error(self) -> tuple[int, str] | None:
        chosen = self.error()
        return (chosen.line, chosen.text) if chosen is not None else None

    def error(self) -> _Error | None:
        """The error that ended this cycle, whichever rank logged it last: the fault rank's own (not a peer's
        consequence), else the last error that is no consequence, else the last consequence (marked)."""
        own = [e for e in self.errors if not e.consequence]
        for pool in ([e for e in own if e.rank in self.fault_ranks], own, self.errors):
            if pool:
                return pool[-1]
        return None


def _rank_of(text: str) -> int | None:
    if torch := train.TORCH_RANK_OF.match(text):
        return int(torch.group(1))
    prefix = train.PREFIX.match(text)
    return int(prefix.group(1)) if prefix else None


def _exception_line(stripped: str) -> bool:
    """The last line of a traceback: `module.Name: message` or a bare `Name`, unindented."""
    if stripped.startswith(("File ", "During ", "The ")):
        return False
    return bool(train.EXCEPTION_NAME.match(stripped))


def _scan_cycle(run_dir: Path, rel: str, fault_ranks: frozenset[int] = frozenset()) -> _Cycle:
    cycle = _Cycle(iteration_ms=[], fault_ranks=fault_ranks)
    previous = ""
    in_traceback: set[int | None] = set()  # ranks whose traceback has not printed its exception yet
    for number, text in _lines(run_dir, rel):
        if cycle.arg_error is None and train.ARG_ERROR.search(text):
            cycle.arg_error = (number, text)
        rank = _rank_of(text)
        stripped = train.RANK_AND_TORCH_RANK.sub("", text, count=1)
        match = train.ERROR_LINE.match(text)
        error = match.group(1) if match else None
        if train.TRACEBACK in text:
            in_traceback.add(rank)
        elif rank in in_traceback and stripped[:1] not in ("", " ", "\t", "^"):
            in_traceback.discard(rank)
            # the exception a traceback ends with, whatever its name (`InjectedFault: ...`)
            if error is None and _exception_line(stripped.strip()):
                error = stripped.strip()
        if error is not None:
            if error.rstrip(":").isidentifier():  # a bare `AssertionError`: the failing line says more
                error = f"{error} at `{previous}`"
            if len(cycle.errors) >= MAX_ERRORS:
                del cycle.errors[: MAX_ERRORS // 2]
            cycle.errors.append(_Error(number, error, rank, bool(common.PEER_CONSEQUENCE.search(text))))
        stripped = stripped.strip()
        if stripped and set(stripped) != {"^"}:  # Python's caret markers under the failing expression
            previous = stripped
        ms = train.ELAPSED.search(text)
        if ms and len(cycle.iteration_ms) < 100_000:
            cycle.iteration_ms.append(float(ms.group(1)))
    return cycle


def _cycle_logs(run_dir: Path) -> list[str]:
    try:
        names = [p.name for p in (run_dir / "logs").iterdir()]
    except OSError:
        return []
    found = sorted((int(m.group(1)), n) for n in names if (m := train.TRAIN_LOG_NAME.fullmatch(n)))
    return [f"logs/{name}" for _, name in found]


def root_cause(
    run_dir: Path, run: dict, launcher_exit: int | None, snapshot: RunSnapshot | None = None
) -> dict | None:
    """The cause the logs name for a run that did not pass (`classify`, as JSON), or None where the failed
    check says it better: the launcher ended cleanly after its fault (or the run had none). `snapshot`: the
    run's evidence where the caller has read it already (`classify`)."""
    if snapshot is not None and (ended := ending_cause(snapshot)) is not None:
        return ended.to_json()
    if snapshot is not None and (stop := stop_cause(snapshot)) is not None:
        return stop.to_json()
    fault = run.get("fault") or (run.get("settings") or {}).get("fault")
    if launcher_exit in (0, None) and (
        fault is None or family_of(fault) == "none" or (Path(run_dir) / "fault_injected.json").exists()
    ):
        return None
    return classify(Path(run_dir), run, launcher_exit, snapshot).to_json()


def ending_cause(snap: RunSnapshot) -> Cause | None:
    """A run that exited 0 before its last iteration (a silent end), or whose replacement cycle trained
    from iteration 0 while a checkpoint existed: the stack's finding, named before anything it caused."""
    if (end := endings.silent_end(snap)) is not None:
        said = f" (the launcher's exit: {end.exit_line.path}:{end.exit_line.line})" if end.exit_line else ""
        where = end.last_line
        return Cause(
            "silent_end", end.text + said, where.path if where else None, where.line if where else None
        )
    if scratch := endings.scratch_restarts(snap):
        first = scratch[0]
        where = first.first_line
        return Cause(
            "restarted_from_scratch", first.text, where.path if where else None, where.line if where else None
        )
    return None


def stop_cause(snap: RunSnapshot) -> Cause | None:
    """A fault that comes back whose stop failed its bound (or that never stopped), or a curable job NVRx
    stopped while it made progress: the stop, its cycles and GPU-seconds, as recurring_fault_outcome says
    them (one judgement: the check's); None for every other run and for a stop the check passed."""
    if endings.stop_role(snap.meta.fault, snap.meta.injections) is None:
        return None
    judged = recurring_fault_outcome(snap, run_plan_from(snap.meta))
    if judged.status != "fail":
        return None
    where = judged.evidence[0] if judged.evidence else None
    kind = str(judged.values.get("outcome") or "kept_restarting")
    return Cause(kind, judged.detail, where.path if where else None, where.line if where else None)


def _burned(snapshot: RunSnapshot | None) -> str:
    """'; <the restarts without progress and the GPU-seconds they burned>' for a stop's cause, or ''."""
    burned = endings.burned_cycles(snapshot) if snapshot is not None else None
    return f"; {burned.text}" if burned is not None else ""


_ANY_YEAR = 2000  # the causes use no timestamp; a leap year takes every glog date


class _Launcher:
    """launcher.log's facts (the evidence parser's: the snapshot's, or read here the same way) and, only for
    the last causes, its lines."""

    def __init__(self, run_dir: Path, snapshot: RunSnapshot | None) -> None:
        self.run_dir = run_dir
        self.log: LauncherLog | None = None
        if snapshot is not None and snapshot.ok("launcher_log"):
            self.log = snapshot.launcher
        else:
            try:
                self.log = parse_launcher_log(
                    run_dir / LAUNCHER_LOG, LAUNCHER_LOG, Clock(), _ANY_YEAR, run_dir
                )
            except OSError:
                self.log = None
        self._lines: list[tuple[int, str]] | None = None

    @property
    def empty(self) -> bool:
        return self.log is None or self.log.lines == 0

    def lines(self) -> list[tuple[int, str]]:
        if self._lines is None:
            self._lines = list(_lines(self.run_dir, LAUNCHER_LOG))
        return self._lines

    def no_progress_line(self) -> int | None:
        """The line of NVRx's `no progress across restarts` (the first), if any."""
        assert self.log is not None
        for stop in self.log.no_progress_stops:
            if launcher.NO_PROGRESS_STOP.search(stop.ref.text):
                return stop.ref.line
        return None

    def last_exit_line(self) -> int | None:
        assert self.log is not None
        return max((item.ref.line for item in self.log.exits), default=None)

    def timeouts(self) -> list[tuple[str, float, int]]:
        """(section, timeout, line) of the first timeout report of each cycle."""
        assert self.log is not None
        seen: dict[int, tuple[str, float, int]] = {}
        for fired in self.log.timeouts:
            if fired.cycle not in seen:
                seen[fired.cycle] = (fired.section or "out of section", fired.timeout_s, fired.ref.line)
        return list(seen.values())


def classify(
    run_dir: Path, run: dict, launcher_exit: int | None = None, snapshot: RunSnapshot | None = None
) -> Cause:
    """The cause of a failed run, from its evidence; `run` is its run.json (settings: fault, timeouts...).
    With `snapshot` (the run's evidence, already read) launcher.log's facts are taken from it; the training
    logs' error lines, which no fact keeps, are read here."""
    run_dir = Path(run_dir)
    # A run stopped from outside ended because of the stop: that outranks whatever its logs say next.
    stopped = run.get("interrupted_by")
    if isinstance(stopped, str) and stopped:
        return Cause("interrupted", STOPPED.format(signal=stopped), "run.json", None)

    launcher_log = _Launcher(run_dir, snapshot)
    if launcher_log.empty:
        return Cause(
            "evidence_missing",
            "no launcher.log: ft_launcher's log never started (a bad flag or a missing module is printed "
            "only on the launcher's console)",
        )
    cycles = _cycle_logs(run_dir)
    ranks = _fault_ranks(run_dir, run, snapshot)
    scans = {rel: _scan_cycle(run_dir, rel, ranks(rel)) for rel in cycles}
    crash = _same_crash(scans)

    # A fault that never came is the root cause whatever NVRx did after it: the wrapper fails the fault
    # rank when it never came, so every cycle "fails" and NVRx may stop with exit 93 (no progress).
    fault = run.get("fault") or (run.get("settings") or {}).get("fault")
    wanted = run.get("injections") or (run.get("settings") or {}).get("injections") or 1
    made = len(marker_names(run_dir))
    if fault in INJECTED_FAULTS and isinstance(wanted, int) and made < wanted:
        said = next(
            (
                (rel, n, t)
                for rel in cycles
                for n, t in _lines(run_dir, rel)
                if train.NEVER_INJECTED.search(t)
            ),
            None,
        )
        if said:
            text = NOT_INJECTED.format(fault=fault)
            if made:  # the first came; a later one did not
                text = f"injection {made + 1} of {wanted}: " + text
            return Cause("not_injected", text, said[0], said[1])

    # the restarts (every cycle after the first, which the fault ended) failing alike
    restarted = _same_crash({rel: scans[rel] for rel in cycles[1:]}) if len(cycles) > 1 else None
    if (number := launcher_log.no_progress_line()) is not None:
        why = (
            f"; every restart ended with {restarted[2]} ({restarted[0]}:{restarted[1]})" if restarted else ""
        )
        text = f"NVRx stopped restarting: no progress across restarts (exit 93){why}{_burned(snapshot)}"
        return Cause("no_progress", text, LAUNCHER_LOG, number)

    last_exit = launcher_log.last_exit_line()
    gave_up = _injections_exhausted(run, launcher_exit, cycles, last_exit)
    if gave_up is not None:
        return gave_up

    timeouts = launcher_log.timeouts()
    if cycles and timeouts and len(timeouts) >= len(cycles):
        section, seconds, number = timeouts[-1]
        measured = [ms for s in scans.values() for ms in s.iteration_ms or []]
        pace = f"; measured iteration time {statistics.median(measured) / 1000:.1f} s" if measured else ""
        text = (
            f"the '{section}' timeout ({seconds:g} s) fired in every cycle ({len(timeouts)} of {len(cycles)})"
        )
        return Cause("section_timeout", text + pace + _burned(snapshot), LAUNCHER_LOG, number)

    arg_errors = [(rel, s.arg_error) for rel, s in scans.items() if s.arg_error]
    if cycles and len(arg_errors) == len(cycles):
        rel, (number, text) = arg_errors[-1]
        text = f"the workload rejected its arguments in every cycle: {_short(text)}"
        return Cause("argument_error", text, rel, number)

    if crash:
        rel, number, text = crash
        text = f"every cycle ({len(cycles)}) crashed with: {_short(text)}{_burned(snapshot)}"
        return Cause("crash", text, rel, number)

    for number, text in launcher_log.lines():
        if launcher.ANY_RENDEZVOUS_TIMEOUT.search(text):
            return Cause(
                "rendezvous_timeout", f"the rendezvous timed out: {_short(text)}", LAUNCHER_LOG, number
            )

    if (burned := _burned(snapshot)) and launcher_exit == endings.RESTARTS_EXHAUSTED_EXIT:
        # restarts that made no progress until ft_launcher ran out of them (a corrupt checkpoint's loop),
        # where no more specific cause (a timeout or the same crash in every cycle) names what ended them
        why = (
            f"; every restart ended with {restarted[2]} ({restarted[0]}:{restarted[1]})" if restarted else ""
        )
        text = f"restarts exhausted (exit 1){why}{burned}"
        return Cause("restarts_exhausted", text, LAUNCHER_LOG, last_exit)

    max_restarts = run.get("max_restarts")
    if (
        launcher_exit not in (0, None)
        and cycles
        and isinstance(max_restarts, int)
        and len(cycles) > max_restarts
    ):
        text = f"restarts exhausted: all {len(cycles)} cycles failed (max_restarts {max_restarts})"
        return Cause("restarts_exhausted", text, LAUNCHER_LOG, last_exit)

    if fault in INJECTED_FAULTS and not (run_dir / "fault_injected.json").exists():
        return Cause("not_injected", NOT_INJECTED.format(fault=fault))

    return _last_error(run_dir, cycles, scans, launcher_log)


def _last_error(run_dir: Path, cycles: list[str], scans: dict[str, _Cycle], launcher_log: _Launcher) -> Cause:
    """'unknown', with the error the logs end on: the fault rank's own, else the last error that is no peer's
    consequence (an error line of a cycle, else any line naming an error), else a peer's consequence, said
    as one (a surviving rank reporting that another failed is never the cause)."""
    for rel in reversed(cycles):
        chosen = scans[rel].error()
        if chosen is not None and not chosen.consequence:
            own = chosen.rank in scans[rel].fault_ranks
            who = f"rank {chosen.rank}'s error (the fault's rank)" if own else "the last error line"
            return Cause("unknown", f"unknown cause; {who}: {_short(chosen.text)}", rel, chosen.line)
    consequence: Cause | None = None
    for rel in [*reversed(cycles), LAUNCHER_LOG]:
        lines = launcher_log.lines() if rel == LAUNCHER_LOG else list(_lines(run_dir, rel))
        for number, text in reversed(lines):
            if not common.TELLING.search(text):
                continue
            if not common.PEER_CONSEQUENCE.search(text):
                return Cause("unknown", f"unknown cause; the last error line: {_short(text)}", rel, number)
            if consequence is None:
                consequence = Cause("unknown", f"unknown cause; {PEER_SAID}: {_short(text)}", rel, number)
    if consequence is not None:
        return consequence
    return Cause("unknown", "unknown cause: no line in the logs names an error", LAUNCHER_LOG, None)


def _fault_ranks(run_dir: Path, run: dict, snapshot: RunSnapshot | None):
    """rel -> the ranks a fault was injected on in that cycle (fault_injected*.json; any cycle's where the
    markers name none of this one, and run.json's fault_rank)."""
    markers = snapshot.markers if snapshot is not None else read_markers(run_dir)[0]
    every = {m.rank for m in markers if isinstance(m.rank, int)}
    if isinstance(run.get("fault_rank"), int):
        every.add(run["fault_rank"])

    def ranks(rel: str) -> frozenset[int]:
        found = train.TRAIN_LOG_NAME.search(rel)
        cycle = int(found.group(1)) if found else None
        mine = {m.rank for m in markers if m.cycle == cycle and isinstance(m.rank, int)}
        return frozenset(mine or every)

    return ranks


def _injections_exhausted(
    run: dict, launcher_exit: int | None, cycles: list[str], last_exit: int | None
) -> Cause | None:
    """More injections were requested than max_restarts allows: ft_launcher gave up after its last restart.
    Named before the per-cycle causes, which the injections themselves produce (a timeout or a killed
    worker in every cycle). `last_exit`: the line of the last worker exit in launcher.log."""
    injections, max_restarts = run.get("injections"), run.get("max_restarts")
    if not isinstance(injections, int) or not isinstance(max_restarts, int) or injections <= max_restarts:
        return None
    if launcher_exit in (0, None) or len(cycles) <= max_restarts:
        return None
    text = (
        f"ft_launcher gave up after {len(cycles) - 1} restarts (max_restarts {max_restarts}): {injections} "
        f"injections requested, one restart each (restarts exhausted)"
    )
    return Cause("restarts_exhausted", text, LAUNCHER_LOG, last_exit)


def _same_crash(scans: dict[str, _Cycle]) -> tuple[str, int, str] | None:
    """(log, line, error) when every cycle ended with the same error (each cycle's `_Cycle.error`: the fault
    rank's own before a peer's consequence); an error that is only a peer's consequence is said as one."""
    if not scans or any(s.error() is None for s in scans.values()):
        return None
    texts = {s.error().text for s in scans.values()}
    if len(texts) != 1:
        return None
    rel = list(scans)[-1]
    chosen = scans[rel].error()
    text = f"{PEER_SAID}: {chosen.text}" if chosen.consequence else chosen.text
    return rel, chosen.line, text


# ---------------------------------------------------------------------------------------------
# failing fast: timeouts the baseline already shows cannot work


def baseline_pace(run_dir: Path, run: dict) -> tuple[float | None, float | None]:
    """(slowest step, seconds from the launch to the first step) the baseline run measured."""
    slowest, first = None, None
    for _number, text in _lines(Path(run_dir), "logs/train_cycle0.log"):
        if ms := train.ELAPSED.search(text):
            slowest = max(slowest or 0.0, float(ms.group(1)) / 1000)
        if first is None and (stamp := train.ITERATION_STAMP.search(text)):
            first = stamp.group(1)
    startup = None
    try:
        started = datetime.fromisoformat(str(run["started_at"]).replace("Z", "+00:00"))
        offset = float(run.get("tz_offset_s") or 0)
        if first is not None:
            at = datetime.fromisoformat(first).replace(tzinfo=UTC) - timedelta(seconds=offset)
            startup = (at - started).total_seconds()
    except (KeyError, ValueError, TypeError, OverflowError):
        startup = None
    return slowest, startup


def timeout_problems(run_dir: Path, run: dict, save_s_max: float | None, timeouts: dict) -> list[str]:
    """Why a fault scenario with these timeouts would spend its restarts in vain, judged from the baseline."""
    slowest, startup = baseline_pace(run_dir, run)
    problems = []
    if slowest is not None and timeouts.get("step", float("inf")) <= slowest:
        step = timeouts["step"]
        problems.append(
            f"the 'step' timeout ({step:g} s) is not above the baseline's slowest step ({slowest:.1f} s)"
        )
    if startup is not None and timeouts.get("setup", float("inf")) <= startup:
        problems.append(f"the 'setup' timeout ({timeouts['setup']:g} s) is not above the baseline's start-up "
                        f"({startup:.0f} s to the first step)")  # fmt: skip
    if save_s_max is not None and timeouts.get("checkpointing", float("inf")) <= save_s_max:
        problems.append(f"the 'checkpointing' timeout ({timeouts['checkpointing']:g} s) is not above the "
                        f"baseline's slowest save ({save_s_max:.1f} s)")  # fmt: skip
    return problems
