"""Live progress of a run from its own files; `ftqual status [--follow]`.

Live progress of a run, from its run directory's own files: works the same for a local run and for a
Slurm job on a shared file system.

`Watcher` follows one run directory incrementally (it keeps each log's read offset, so a long run costs
only its new bytes) and turns what appeared since the last look into events, in the order they happen:
start, cycle N started, resumed from K, iteration i/N (s/it), checkpoint K completed, fault injected,
detected, finished. Where no iteration line came since the last one said (a hang, a slow save), the cadence
says so instead of repeating it: "no step has completed for 45 s (last: iteration 10/30)". While a hang
waits for its detection it says what it waits for and how long is left ("waiting for the 'step' timeout:
45 / 120 s"). The run job prints these lines on the console (scripts/rule_run_scenario.py); `ftqual status
[WORK_DIR] [--follow]` shows the latest state of every scenario of a workflow (a run whose log has not grown
for a while says for how long): plain lines, or on a terminal with --follow a table that rich redraws in
place.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ftqual.contract import LIVE_FAULTS
from ftqual.rank.tracker import TRACKER_NAME
from ftqual.verification.evidence import safeio
from ftqual.verification.evidence.patterns import launcher as launcher_lines
from ftqual.verification.evidence.patterns import train as train_lines

ITERATION_EVERY_S = 30.0  # an iteration line at most this often: a steady cadence, not every step


@dataclass
class _Tail:
    """New complete lines of a file since the last call."""

    path: Path
    root: Path
    offset: int = 0
    partial: bytes = b""

    def new_lines(self) -> list[str]:
        try:
            with safeio.open_regular(self.path, self.root) as fh:
                fh.seek(self.offset)
                data = fh.read(8 << 20)  # a bounded bite per look; the rest comes next time
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        *complete, self.partial = data.split(b"\n")
        if len(self.partial) > safeio.MAX_LINE_BYTES:
            self.partial = b""
        return [line.decode("utf-8", "replace") for line in complete]


@dataclass
class Watcher:
    run_dir: Path
    timeouts: dict[str, float] = field(default_factory=dict)
    fault: str = "none"
    _tails: dict[str, _Tail] = field(default_factory=dict)
    _cycles_seen: set[int] = field(default_factory=set)
    _checkpoint: str | None = None
    _injected: dict | None = None
    _detected: bool = False
    _last_iteration_at: float = 0.0
    _last_iteration: tuple[int, int, float] | None = None
    _iteration_seen_at: float | None = None  # when the newest iteration line was first seen
    _iteration_said: bool = False  # the newest iteration line has been printed
    _iteration_cycle: int | None = None  # the cycle whose log holds it
    _finished: bool = False
    # Why ftqual itself is stopping the run (a signal to the workflow, run.json's `interrupted_by`): the
    # ranks' SIGTERM exits that follow are its stop, never a fault's detection.
    stopped_by: str | None = None

    def _tail(self, rel: str) -> list[str]:
        tail = self._tails.setdefault(rel, _Tail(self.run_dir / rel, self.run_dir))
        return tail.new_lines()

    def poll(self, now: float | None = None) -> list[str]:
        """Events since the last poll, as console lines."""
        now = time.monotonic() if now is None else now
        events: list[str] = []
        newest = self._last_iteration
        for cycle in self._cycle_numbers():
            if cycle not in self._cycles_seen:
                self._cycles_seen.add(cycle)
                events.append(f"cycle {cycle} started" + (" (restart)" if cycle else ""))
            for line in self._tail(f"logs/train_cycle{cycle}.log"):
                events += self._train_line(cycle, line)
        if self._last_iteration is not newest:
            self._iteration_seen_at, self._iteration_said = now, False
        events += self._checkpoint_and_marker()  # before the launcher's report of what the fault did
        for line in self._tail("logs/launcher.log"):
            events += self._launcher_line(line)
        if self._last_iteration and now - self._last_iteration_at >= ITERATION_EVERY_S:
            i, n, ms = self._last_iteration
            if self._iteration_said:
                stalled = now - (self._iteration_seen_at if self._iteration_seen_at is not None else now)
                events.append(f"no step has completed for {stalled:.0f} s (last: iteration {i}/{n})")
            else:
                events.append(f"iteration {i}/{n} ({ms / 1000:.2f} s/it)")
                self._iteration_said = True
            self._last_iteration_at = now
        return events

    @property
    def injected_and_detected(self) -> tuple[bool, bool]:
        """Whether the run's fault was injected, and whether its detection was seen."""
        return self._injected is not None, self._detected

    @property
    def last_iteration(self) -> tuple[int, int, float] | None:
        """(iteration, of N, ms per iteration) of the newest iteration line seen."""
        return self._last_iteration

    def quiet_s(self, wall: float | None = None) -> float | None:
        """Seconds since the log that holds the newest iteration line last grew (at least that long no step
        has completed), for a reader that looks once (`ftqual status`); None without one."""
        if self._iteration_cycle is None:
            return None
        try:
            grown = (self.run_dir / "logs" / f"train_cycle{self._iteration_cycle}.log").stat().st_mtime
        except OSError:
            return None
        return max(0.0, (time.time() if wall is None else wall) - grown)

    def waiting(self) -> str | None:
        """What a run waits for while a live fault (a hang, a held GIL, a GPU kernel that never ends) is not
        yet detected, and how long is left."""
        if self.fault not in LIVE_FAULTS or not self._injected or self._detected:
            return None
        section = self._injected.get("section") or "step"
        limit = self.timeouts.get(section) or self.timeouts.get("out_of_section")
        try:
            start = datetime.fromisoformat(str(self._injected["injected_at"]).replace("Z", "+00:00"))
        except (KeyError, ValueError):
            return None
        waited = (datetime.now(UTC) - start).total_seconds()
        return f"waiting for the '{section}' timeout: {waited:.0f} / {limit:g} s" if limit else None

    def _cycle_numbers(self) -> list[int]:
        try:
            names = [p.name for p in (self.run_dir / "logs").iterdir()]
        except OSError:
            return []
        return sorted(int(m.group(1)) for n in names if (m := train_lines.TRAIN_LOG_NAME.fullmatch(n)))

    def _train_line(self, cycle: int, line: str) -> list[str]:
        if match := train_lines.ITERATION_PACE.search(line):
            self._last_iteration = (int(match.group(1)), int(match.group(2)), float(match.group(3)))
            self._iteration_cycle = cycle
            return []
        if (loaded := train_lines.load_iteration(train_lines.LOADED, line)) is not None:
            return [f"cycle {cycle} resumed from checkpoint iteration {loaded}"]
        if cycle and train_lines.FRESH.search(line):
            return [f"cycle {cycle} found no checkpoint: it starts from iteration 0"]
        return []

    def _launcher_line(self, line: str) -> list[str]:
        if match := launcher_lines.SECTION_TIMEOUT.search(line):
            if self._detected:
                return []
            self._detected = True
            return [f"detected: the '{match.group(2)}' section timeout fired in cycle {match.group(1)}"]
        if match := launcher_lines.WORKER_EXIT.search(line):
            if self.stopped_by:
                return [
                    f"stopping: local rank {match.group(2)} exited with {match.group(1)} after ftqual "
                    f"stopped the run ({self.stopped_by}), not a fault's detection"
                ]
            if self._detected:
                return []
            self._detected = True
            return [f"detected: local rank {match.group(2)} exited with {match.group(1)}"]
        if launcher_lines.SUCCESS_LINE.search(line) and not self._finished:
            self._finished = True
            return ["training finished (the worker group completed)"]
        return []

    def _checkpoint_and_marker(self) -> list[str]:
        events = []
        tracker = _read_small(self.run_dir / "checkpoints" / TRACKER_NAME, self.run_dir)
        if tracker and tracker.strip().isdigit() and tracker.strip() != self._checkpoint:
            self._checkpoint = tracker.strip()
            events.append(f"checkpoint at iteration {self._checkpoint} completed")
        if self._injected is None:
            marker = _read_small(self.run_dir / "fault_injected.json", self.run_dir)
            if marker:
                try:
                    self._injected = json.loads(marker)
                except ValueError:
                    return events
                m = self._injected
                events.append(
                    f"fault injected: {m.get('fault')} of rank {m.get('rank')} after checkpoint "
                    f"{m.get('checkpoint_iteration')}"
                    + (f" (in '{m['section']}')" if m.get("section") else "")
                )
        return events


def _read_small(path: Path, root: Path) -> str | None:
    try:
        return safeio.read_bytes(path, root, limit=1 << 16).decode("utf-8", "replace")
    except OSError:
        return None


# ---------------------------------------------------------------------------------------------
# ftqual status


# The attempts the workflow that runs (or ran last) in this directory plans, by scenario: written by its main
# process at its start (rules/common.smk, onstart), so that `ftqual status` shows these, not the attempts of
# earlier settings that still lie in results/.
PLAN_RECORD = Path(".snakemake") / "ftqual-plan.json"


def record_plan(work_dir: Path, attempts: dict[str, str]) -> None:
    """The main process's plan (scenario -> the slot of its current attempt), for `ftqual status`."""
    from ftqual.jsonfile import write_json_atomic

    (work_dir / PLAN_RECORD).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(work_dir / PLAN_RECORD, {"attempts": dict(attempts)})


def planned_slots(work_dir: Path) -> dict[str, str] | None:
    """scenario -> slot of the latest workflow's plan; None where no workflow recorded one."""
    attempts = (_json(work_dir / PLAN_RECORD) or {}).get("attempts")
    if not isinstance(attempts, dict):
        return None
    return {str(name): str(slot) for name, slot in attempts.items()}


def scenario_states(work_dir: Path) -> list[tuple[str, str]]:
    """(scenario, one line) for every scenario of the current plan: its current attempt and where it is.
    Attempts under other settings or another stack are not this run's: a scenario whose current attempt has
    not started yet is pending, whatever an earlier attempt's verdict. Without a recorded plan (a directory
    no workflow of this version ran in), each scenario's latest attempt under WORK_DIR/results."""
    planned = planned_slots(work_dir)
    if planned is None:
        return [(name, _state_line(work_dir, slot.parent, slot)) for name, slot in latest_slots(work_dir)]
    states = []
    for name, slot_name in planned.items():
        slot = work_dir / "results" / name / slot_name
        if slot.is_dir():
            states.append((name, _state_line(work_dir, slot.parent, slot)))
        else:
            states.append((name, f"attempt {slot_name}: pending (not started yet)"))
    return states


def interruption_line(work_dir: Path) -> str | None:
    """After an interrupted workflow (ftqual.workflow.interrupts' marker): that it was, and what to run."""
    from ftqual.launch import procs
    from ftqual.workflow import interrupts

    marker = _json(work_dir / interrupts.MARKER)
    if not marker:
        return None
    sig = marker.get("signal") or "a signal"
    try:
        _host, pid, start = str(marker.get("workflow")).split()
        alive = procs.alive(int(pid), int(start))
    except ValueError:
        pid, alive = "?", False
    if alive:
        return f"the workflow (pid {pid}) was interrupted ({sig}) and is stopping its runs"
    return (
        f"the workflow (pid {pid}) was interrupted ({sig}): run the same command again to resume it "
        "(verdicts reached are kept; an interrupted scenario is redone)"
    )


def stack_line(work_dir: Path) -> str | None:
    """Whether the stack now differs from the one the latest attempts ran on (ftqual.stack.identity): probed
    again
    as they were, without a job; None when no attempt records a stack."""
    from ftqual.stack import current as stack_current
    from ftqual.stack import identity as stackid
    from ftqual.workflow import attempts

    recorded: dict[str, stackid.StackIdentity] = {}
    for name, slot in latest_slots(work_dir):
        ident = stackid.from_json((_json(attempts.record_path(slot)) or {}).get("stack"))
        if ident is not None:
            recorded[name] = ident
    if not recorded:
        return None
    # probed as the identity most of the latest attempts share was (they all are, unless rerun by hand)
    [(common, _)] = Counter(ident.digest for ident in recorded.values()).most_common(1)
    now, kept = stack_current.reprobe(next(i for i in recorded.values() if i.digest == common))
    kept_note = f"; {', '.join(kept)} as the last node probe saw them (a rerun probes a node)" if kept else ""
    stale = [name for name, ident in recorded.items() if ident.digest != now.digest]
    if not stale:
        return f"stack {now.digest}: unchanged since the latest attempts{kept_note}"
    old = recorded[stale[0]]
    return (
        f"stack {now.digest}: CHANGED since the latest attempts of {', '.join(stale)} (stack {old.digest}): "
        f"{stackid.describe_changes(old, now)}; a rerun requalifies them{kept_note}"
    )


def latest_slots(work_dir: Path) -> list[tuple[str, Path]]:
    """(scenario, its latest slot folder) under WORK_DIR/results."""
    out = []
    try:
        folders = sorted(
            p
            for p in (work_dir / "results").iterdir()
            if p.is_dir() and p.name not in ("preflight", "reports", "stack")
        )
    except OSError:
        return []
    for folder in folders:
        slots = sorted((p for p in folder.iterdir() if p.is_dir() and p.name != "attempts"), key=_mtime)
        if slots:
            out.append((folder.name, slots[-1]))
    return out


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _state_line(work_dir: Path, folder: Path, slot: Path) -> str:
    report = _json(slot / "verify.json")
    if report:
        # The scenario's outcome, as the summary and the gate judge it: a negative control that failed as
        # expected qualifies (ftqual.verification.schema.judged, ftqual.verification.expectation).
        from ftqual.verification.schema import judged

        seen = judged(report)
        outcome = seen.outcome
        if outcome.verdict == "pass" and outcome.raw_verdict != "pass":
            said = f"PASS (negative control: {outcome.detail})"
        elif outcome.verdict == "pass":
            said = "PASS"
        else:
            why = seen.cause if seen.raw != "pass" else outcome.detail
            said = f"{outcome.verdict.upper()}" + (f" — {why}" if why else "")
        return f"attempt {slot.name}: {said} (run {report.get('run_id')})"
    from ftqual.workflow.attempts import record_path

    run = _json(record_path(slot))
    if run:
        return (
            f"attempt {slot.name}: run {run.get('run_id')} ended (exit {run.get('launcher_exit')}), verifying"
        )
    consoles = sorted((folder / "attempts").glob("*.console.log"), key=_mtime)
    if not consoles:
        return f"attempt {slot.name}: waiting"
    run_id = consoles[-1].name.removesuffix(".console.log")
    run_dir = _find_run_dir(work_dir, run_id)
    if run_dir is None:
        return f"attempt {slot.name}: run {run_id} starting"
    record = _json(run_dir / "run.json") or {}
    watcher = Watcher(run_dir, timeouts=record.get("timeouts") or {}, fault=record.get("fault") or "none")
    if record.get("interrupted_by"):
        watcher.stopped_by = str(record["interrupted_by"])
        watcher.poll(now=float("inf"))
        where = ""
        if watcher.last_iteration:
            where = f" at iteration {watcher.last_iteration[0]}/{watcher.last_iteration[1]}"
        return (
            f"attempt {slot.name}: run {run_id} interrupted ({record['interrupted_by']}){where}; "
            "the same workflow command redoes this attempt"
        )
    events = [e for e in watcher.poll(now=float("inf")) if not e.startswith("iteration ")]
    parts = [events[-1] if events else "started"]
    if watcher.last_iteration:
        i, n, ms = watcher.last_iteration
        parts.append(f"at iteration {i}/{n} ({ms / 1000:.2f} s/it)")
        quiet = watcher.quiet_s()
        if quiet is not None and quiet >= ITERATION_EVERY_S:
            parts.append(f"no step has completed for at least {quiet:.0f} s")
    if wait := watcher.waiting():
        parts.append(wait)
    return f"attempt {slot.name}: run {run_id} running — " + "; ".join(parts)


def _find_run_dir(work_dir: Path, run_id: str) -> Path | None:
    candidate = work_dir / "runs" / run_id
    return candidate if candidate.is_dir() else None


def _json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="ftqual status", description="the state of every scenario of a workflow, from its files"
    )
    p.add_argument(
        "work_dir", nargs="?", default=".", type=Path, help="the workflow's directory (default: .)"
    )
    p.add_argument("--follow", action="store_true", help="print again every --interval seconds until Ctrl-C")
    p.add_argument("--interval", type=float, default=10.0)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if not (args.work_dir / "results").is_dir():
        print(
            f"ftqual status: no results/ under {args.work_dir}: run the workflow there first", file=sys.stderr
        )
        return 2
    try:
        if args.follow and sys.stdout.isatty():
            return _follow_live(args.work_dir, max(args.interval, 1.0))
        stack = stack_line(args.work_dir)
        while True:
            stamp = datetime.now(UTC).strftime("%H:%M:%SZ")
            if stack:
                print(f"{stamp} {stack}", flush=True)
            if interrupted := interruption_line(args.work_dir):
                print(f"{stamp} {interrupted}", flush=True)
            for name, line in scenario_states(args.work_dir):
                print(f"{stamp} {name}: {line}", flush=True)
            if not args.follow:
                return 0
            time.sleep(max(args.interval, 1.0))
    except KeyboardInterrupt:
        return 0


def status_table(work_dir: Path):
    """The scenarios' states as a rich Table (a terminal redraws it in place; logs get plain lines)."""
    from rich.table import Table

    table = Table(title=f"ftqual status — {work_dir} — {datetime.now(UTC):%H:%M:%SZ}", expand=True)
    table.add_column("scenario", no_wrap=True)
    table.add_column("state")
    if interrupted := interruption_line(work_dir):
        table.add_row("workflow", interrupted, style="yellow")
    for name, line in scenario_states(work_dir):
        style = (
            "green" if ": PASS" in line else "red" if (": FAIL" in line or ": INCONCLUSIVE" in line) else ""
        )
        table.add_row(name, line, style=style)
    return table


def _follow_live(work_dir: Path, interval: float) -> int:
    from rich.live import Live

    with Live(status_table(work_dir), auto_refresh=False) as live:
        while True:
            time.sleep(interval)
            live.update(status_table(work_dir), refresh=True)
