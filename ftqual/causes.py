"""One-line causes: why a scenario's run failed, classified from the run directory's own logs.

A failed verdict lists checks; a platform engineer first wants the one reason behind them. `classify` reads
launcher.log and the per-cycle training logs once (regular files inside the run only, bounded lines) and
names the first cause that fits, most specific first:

- NVRx stopped restarting because no cycle made progress (exit 93), with the error that ended the cycles;
- a section timeout fired in every cycle (with the measured iteration time against the timeout);
- the workload rejected its arguments (argparse's `error:` line), in every cycle;
- every cycle crashed with the same error line;
- the restarts were exhausted (every cycle failed; max_restarts reached); named before the per-cycle causes
  when the run requested more injections than max_restarts allows;
- the rendezvous timed out;
- a fault scenario ended without its injection (no checkpoint before the end);
- the evidence is missing (no launcher.log: ft_launcher's log pipe never started).
Anything else is "unknown", pointing at the last line that names an error. Each cause cites file:line.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ftqual.contract import FAULTS
from ftqual.evidence import safeio
from ftqual.evidence.run_meta import marker_names

CYCLE_LOG = re.compile(r"train_cycle(\d+)\.log")
NO_PROGRESS = re.compile(r"no progress across restarts", re.I)
SECTION_TIMEOUT = re.compile(
    r"\[Cycle (\d+)\] Section '(\w+)' has been open for ([\d.]+) seconds\. Timeout is ([\d.]+)"
)
OUT_OF_SECTION = re.compile(r"\[Cycle (\d+)\].*out.of.section.*?([\d.]+) seconds.*Timeout is ([\d.]+)", re.I)
ARG_ERROR = re.compile(
    r"^(?:\d+: )?(?:\S+: )?error: (?:unrecognized arguments|argument|the following arguments)"
)
ERROR_LINE = re.compile(r"^(?:\d+: )?(?:\[rank\d+\]: )?((?:\w+\.)*\w*(?:Error|Exception)\b.*)$")
NEVER_INJECTED = re.compile(r"fault (?:\(injection \d+ of \d+\) )?was never injected")
NOT_INJECTED = (
    "the {fault} was never injected: no checkpoint completed with training left after it "
    "(the fault waits for the first one)"
)
RDZV_TIMEOUT = re.compile(r"RendezvousTimeoutError|rendezvous.*timed out", re.I)
EXIT_CODE = re.compile(r"failed \(exitcode: (-?\d+)\)")
ITERATION_MS = re.compile(r"elapsed time per iteration \(ms\): ([\d.]+)")
TELLING = re.compile(r"error|exception|traceback|timed? ?out|exitcode|failed|refus", re.I)
MAX_TEXT = 200


@dataclass(frozen=True)
class Cause:
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


@dataclass
class _Cycle:
    arg_error: tuple[int, str] | None = None
    last_error: tuple[int, str] | None = None
    iteration_ms: list[float] | None = None


def _scan_cycle(run_dir: Path, rel: str) -> _Cycle:
    cycle = _Cycle(iteration_ms=[])
    previous = ""
    for number, text in _lines(run_dir, rel):
        if cycle.arg_error is None and ARG_ERROR.search(text):
            cycle.arg_error = (number, text)
        match = ERROR_LINE.match(text)
        if match:
            error = match.group(1)
            if error.rstrip(":").isidentifier():  # a bare `AssertionError`: the failing line says more
                error = f"{error} at `{previous}`"
            cycle.last_error = (number, error)
        stripped = re.sub(r"^(?:\d+: )?(?:\[rank\d+\]: )?", "", text).strip()
        if stripped and set(stripped) != {"^"}:  # Python's caret markers under the failing expression
            previous = stripped
        ms = ITERATION_MS.search(text)
        if ms and len(cycle.iteration_ms) < 100_000:
            cycle.iteration_ms.append(float(ms.group(1)))
    return cycle


def _cycle_logs(run_dir: Path) -> list[str]:
    try:
        names = [p.name for p in (run_dir / "logs").iterdir()]
    except OSError:
        return []
    found = sorted((int(m.group(1)), n) for n in names if (m := CYCLE_LOG.fullmatch(n)))
    return [f"logs/{name}" for _, name in found]


def root_cause(run_dir: Path, run: dict, launcher_exit: int | None) -> dict | None:
    """The cause the logs name for a run that did not pass (`classify`, as JSON), or None where the failed
    check says it better: the launcher ended cleanly after its fault (or the run had none)."""
    fault = run.get("fault") or (run.get("settings") or {}).get("fault")
    if launcher_exit in (0, None) and (
        fault in (None, "none") or (Path(run_dir) / "fault_injected.json").exists()
    ):
        return None
    return classify(Path(run_dir), run, launcher_exit).to_json()


def classify(run_dir: Path, run: dict, launcher_exit: int | None = None) -> Cause:
    """The cause of a failed run, from its evidence; `run` is its run.json (settings: fault, timeouts...)."""
    run_dir = Path(run_dir)
    launcher = "logs/launcher.log"
    launcher_lines = list(_lines(run_dir, launcher))
    if not launcher_lines:
        return Cause(
            "evidence_missing",
            "no launcher.log: ft_launcher's log never started (a bad flag or a missing module is printed "
            "only on the launcher's console)",
        )
    cycles = _cycle_logs(run_dir)
    scans = {rel: _scan_cycle(run_dir, rel) for rel in cycles}
    crash = _same_crash(scans)

    # A fault that never came is the root cause whatever NVRx did after it: the wrapper fails the fault
    # rank when it never came, so every cycle "fails" and NVRx may stop with exit 93 (no progress).
    fault = run.get("fault") or (run.get("settings") or {}).get("fault")
    wanted = run.get("injections") or (run.get("settings") or {}).get("injections") or 1
    made = len(marker_names(run_dir))
    if fault in FAULTS[1:] and isinstance(wanted, int) and made < wanted:
        said = next(
            ((rel, n, t) for rel in cycles for n, t in _lines(run_dir, rel) if NEVER_INJECTED.search(t)), None
        )
        if said:
            text = NOT_INJECTED.format(fault=fault)
            if made:  # the first came; a later one did not
                text = f"injection {made + 1} of {wanted}: " + text
            return Cause("not_injected", text, said[0], said[1])

    # the restarts (every cycle after the first, which the fault ended) failing alike
    restarted = _same_crash({rel: scans[rel] for rel in cycles[1:]}) if len(cycles) > 1 else None
    for number, text in launcher_lines:
        if NO_PROGRESS.search(text):
            why = (
                f"; every restart ended with {restarted[2]} ({restarted[0]}:{restarted[1]})"
                if restarted
                else ""
            )
            text = f"NVRx stopped restarting: no progress across restarts (exit 93){why}"
            return Cause("no_progress", text, launcher, number)

    gave_up = _injections_exhausted(run, launcher_exit, cycles, launcher_lines)
    if gave_up is not None:
        return gave_up

    timeouts = _timeouts(launcher_lines)
    if cycles and timeouts and len(timeouts) >= len(cycles):
        section, seconds, number = timeouts[-1]
        measured = [ms for s in scans.values() for ms in s.iteration_ms or []]
        pace = f"; measured iteration time {statistics.median(measured) / 1000:.1f} s" if measured else ""
        text = (
            f"the '{section}' timeout ({seconds:g} s) fired in every cycle ({len(timeouts)} of {len(cycles)})"
        )
        return Cause("section_timeout", text + pace, launcher, number)

    arg_errors = [(rel, s.arg_error) for rel, s in scans.items() if s.arg_error]
    if cycles and len(arg_errors) == len(cycles):
        rel, (number, text) = arg_errors[-1]
        text = f"the workload rejected its arguments in every cycle: {_short(text)}"
        return Cause("argument_error", text, rel, number)

    if crash:
        rel, number, text = crash
        return Cause("crash", f"every cycle ({len(cycles)}) crashed with: {_short(text)}", rel, number)

    for number, text in launcher_lines:
        if RDZV_TIMEOUT.search(text):
            return Cause("rendezvous_timeout", f"the rendezvous timed out: {_short(text)}", launcher, number)

    exits = [(n, t) for n, t in launcher_lines if EXIT_CODE.search(t)]
    max_restarts = run.get("max_restarts")
    if (
        launcher_exit not in (0, None)
        and cycles
        and isinstance(max_restarts, int)
        and len(cycles) > max_restarts
    ):
        number = exits[-1][0] if exits else None
        text = f"restarts exhausted: all {len(cycles)} cycles failed (max_restarts {max_restarts})"
        return Cause("restarts_exhausted", text, launcher, number)

    if fault in FAULTS[1:] and not (run_dir / "fault_injected.json").exists():
        return Cause("not_injected", NOT_INJECTED.format(fault=fault))

    for rel in [*reversed(cycles), launcher]:
        lines = launcher_lines if rel == launcher else list(_lines(run_dir, rel))
        for number, text in reversed(lines):
            if TELLING.search(text):
                return Cause("unknown", f"unknown cause; the last error line: {_short(text)}", rel, number)
    return Cause("unknown", "unknown cause: no line in the logs names an error", launcher, None)


def _injections_exhausted(
    run: dict, launcher_exit: int | None, cycles: list[str], launcher_lines: list[tuple[int, str]]
) -> Cause | None:
    """More injections were requested than max_restarts allows: ft_launcher gave up after its last restart.
    Named before the per-cycle causes, which the injections themselves produce (a timeout or a killed
    worker in every cycle)."""
    injections, max_restarts = run.get("injections"), run.get("max_restarts")
    if not isinstance(injections, int) or not isinstance(max_restarts, int) or injections <= max_restarts:
        return None
    if launcher_exit in (0, None) or len(cycles) <= max_restarts:
        return None
    exits = [n for n, t in launcher_lines if EXIT_CODE.search(t)]
    text = (
        f"ft_launcher gave up after {len(cycles) - 1} restarts (max_restarts {max_restarts}): {injections} "
        f"injections requested, one restart each (restarts exhausted)"
    )
    return Cause("restarts_exhausted", text, "logs/launcher.log", exits[-1] if exits else None)


def _timeouts(lines: list[tuple[int, str]]) -> list[tuple[str, float, int]]:
    """(section, timeout, line) of the first timeout report of each cycle."""
    seen: dict[str, tuple[str, float, int]] = {}
    for number, text in lines:
        match = SECTION_TIMEOUT.search(text)
        if match and match.group(1) not in seen:
            seen[match.group(1)] = (match.group(2), float(match.group(4)), number)
        oos = OUT_OF_SECTION.search(text)
        if oos and oos.group(1) not in seen:
            seen[oos.group(1)] = ("out of section", float(oos.group(3)), number)
    return list(seen.values())


def _same_crash(scans: dict[str, _Cycle]) -> tuple[str, int, str] | None:
    """(log, line, error) when every cycle's last error line is the same one."""
    if not scans or any(s.last_error is None for s in scans.values()):
        return None
    texts = {s.last_error[1] for s in scans.values()}
    if len(texts) != 1:
        return None
    rel = list(scans)[-1]
    number, text = scans[rel].last_error
    return rel, number, text


# ---------------------------------------------------------------------------------------------
# failing fast: timeouts the baseline already shows cannot work

ITERATION_STAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\] iteration\s+\d+/")


def baseline_pace(run_dir: Path, run: dict) -> tuple[float | None, float | None]:
    """(slowest step, seconds from the launch to the first step) the baseline run measured."""
    slowest, first = None, None
    for _number, text in _lines(Path(run_dir), "logs/train_cycle0.log"):
        if ms := ITERATION_MS.search(text):
            slowest = max(slowest or 0.0, float(ms.group(1)) / 1000)
        if first is None and (stamp := ITERATION_STAMP.search(text)):
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
