"""`Injector`: one injection armed by the tracker, a section's end or a save phase, and its marker.

The injector: once-only injection k of a run on the fault rank, armed by the tracker, a section's end or a
save phase seen on disk, and what it records in its marker.

Timing `checkpoint` (the default): a daemon thread polls the checkpoint tracker until it advances past the
baseline. With placement `step` (the default, for both faults; `--hang-placement` keeps the walkthrough's
variable's name) the training thread itself claims the marker and signals at the start of the next NVRx `step`
section (seen by wrapping RankMonitorClient.start_section/end_section in this process), so a hang is detected
by the step timeout rather than whichever section happened to be open; `immediate` signals from the poller
thread at once, as the walkthrough does (and lands wherever training is once the marker is fsynced).
Placement `setup` stops a replacement in its own `setup` section: injection 1 (cycle 0) is placed in a step,
as `step` does (a replacement needs an earlier fault); every later injection is armed by the cycle's start
from a completed checkpoint (tracker >= 1) and lands on the training thread as the workload closes `setup`,
before NVRx is told it closed (after the checkpoint load and everything else the workload does in setup),
so the `setup` timeout must catch it. Its marker names the checkpoint the replacement loaded.
Placement `setup_start` (setup_crash's later cycles, ftqual.rank.recurring) lands as the workload opens its
`setup` section, armed by the cycle's start from the checkpoint it resumes. A recurring fault (family
recurring) is armed in every cycle, without a count: its marker says `recurring` and the `trigger` that
placed it (ftqual.rank.recurring.trigger).
Timing `in_save` (kill only): at the end of an NVRx `checkpointing` section, on the training thread, once the
tracker is past the baseline and the newest iter_XXXXXXX directory is newer than the tracker (an async save
was scheduled and not finalized), the rank records that iteration as `save_iteration` and kills itself."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

from ftqual.rank import faults, recurring
from ftqual.rank.damage import make_damage
from ftqual.rank.freeze import WATCHED_PHASE, FreezeHelper
from ftqual.rank.ids import IN_SAVE_TIMINGS, INJECT_PREFIX, MARKER_SCHEMA, SAVE_PHASES
from ftqual.rank.markers import claim_marker, log, utc_now
from ftqual.rank.save_phases import PHASE_POLL_SECONDS, PhaseWatch, SaveOnDisk
from ftqual.rank.sections import SectionWatch, SentinelLink
from ftqual.rank.tracker import newest_checkpoint_iteration, poll_tracker

SECTION_OF_PLACEMENT = {"step": "step", "checkpointing": "checkpointing"}


POLL_SECONDS = 0.2


class Injector:
    """Once-only injection k of a run on the fault rank, triggered by the tracker advancing past its baseline
    (timing `checkpoint`), by the end of a checkpointing section with a save in flight (`in_save`), or by a
    phase of a save newer than the tracker seen on disk (SAVE_PHASES)."""

    def __init__(
        self,
        *,
        fault: str,
        placement: str,
        tracker: Path,
        marker: Path,
        baseline: int,
        identity: dict,
        watch: SectionWatch | None,
        kill=os.kill,
        poll_seconds: float | None = None,
        injection: int = 1,
        injections: int = 1,
        timing: str = "checkpoint",
        pid_dir: Path | None = None,
        arm_iteration: int | None = None,
        plan_index: int | None = None,
        damage: str | None = None,
        freeze_helper: bool = True,
        trigger: str | None = None,
    ) -> None:
        self.fault = fault
        # what the fault's registry entry has the rank make before its action (faults.PREPARATIONS)
        self.preparation = faults.preparation_of(fault)
        self.trigger = trigger  # a recurring fault's (ftqual.rank.recurring.TRIGGERS), None for any other
        self.steps_seen = 0  # `step` sections started in this process (nan_loss's poison lasts one)
        self.poison: recurring.Poison | None = None
        self.freeze_helper = (
            freeze_helper  # a save-phase kill through FreezeHelper (off: the rank kills itself)
        )
        self.damage = damage  # a CHECKPOINT_DAMAGES kind made to the triggering checkpoint before the fault
        self.arm_iteration = arm_iteration  # a campaign's: armed once the tracker reaches it, not before
        self.plan_index = plan_index  # a campaign's entry this injection follows
        self.pid_dir = pid_dir  # freeze_node: where pids/<host>.launcher.json is
        self.timing = timing
        if timing in IN_SAVE_TIMINGS:
            # in_save needs the section hooks (without them it never fires); a save phase is seen on disk
            self.placement = timing
        else:
            self.placement = placement if watch is not None else "immediate"
        self.tracker = tracker
        self.marker = marker
        self.baseline = baseline
        self.identity = identity  # run_id, rank, local_rank, host, cycle
        self.watch = watch
        self.kill = kill
        if poll_seconds is None:
            poll_seconds = PHASE_POLL_SECONDS if timing in SAVE_PHASES else POLL_SECONDS
        self.poll_seconds = poll_seconds
        self.injection = injection
        self.injections = injections
        self.lock = threading.Lock()
        self.armed_at: int | None = None  # the tracker value that triggered us
        self.save_iteration: int | None = None  # in_save and save phases: the iteration of the save in flight
        self.on_disk: dict | None = None  # a save phase: what iter_S held at the poll that saw the phase
        self.writers: list[dict] = []  # find_writers: the processes writing iter_S at the poll that saw them
        self.finished = False  # injected, gave up, or the workload ended
        self.claimed = False  # this process created the marker
        self.stop = threading.Event()
        self.sentinel: SentinelLink | None = None  # told of the injection (stack dumps of a live rank)
        self.helper: FreezeHelper | None = None  # a save-phase kill's: stops the rank, then kills it
        self.missed = 0  # a save-phase kill's: phases that had passed once the rank was stopped
        if watch is not None:
            watch.on_start = self._on_section_start
            watch.on_end = self._on_section_end
            watch.on_closing = self._on_section_closing

    def record(self, section: str | None) -> dict:
        record = {
            "schema": MARKER_SCHEMA,
            "run_id": self.identity["run_id"],
            "fault": self.fault,
            "rank": self.identity["rank"],
            "local_rank": self.identity["local_rank"],
            "host": self.identity["host"],
            "pid": os.getpid(),
            "cycle": self.identity["cycle"],
            "baseline_iteration": self.baseline,
            "checkpoint_iteration": self.armed_at,
            "injected_at": utc_now(),
            "placement": self.placement,
            "section": section,
            "injection": self.injection,
            "injections": self.injections,
            "timing": self.timing,
        }
        if self.trigger is not None:  # it comes back in every cycle: no count of injections to reach
            record.update(injections=None, recurring=True, trigger=self.trigger)
        if self.timing in IN_SAVE_TIMINGS:
            record["save_iteration"] = self.save_iteration
        if self.timing in SAVE_PHASES:
            record["on_disk"] = self.on_disk
        if self.plan_index is not None:
            record["plan_index"] = self.plan_index
            record["arm_iteration"] = self.arm_iteration
        return record

    def action(self) -> tuple[str, object] | None:
        """(how the fault is injected, as the marker's `method` says it; the call that injects it), prepared
        before the marker is claimed; None, with the reason logged, when it cannot be injected here: the
        fault's entry of the dispatch table (ftqual.rank.faults.ACTIONS)."""
        return faults.action(self)

    def inject(self, section: str | None) -> bool:
        """Claim the marker and signal ourselves; at most once, never after the workload ended."""
        with self.lock:
            if self.finished or self.armed_at is None:
                return False
            self.finished = True
        record = self.record(section)
        prepared = self.action()
        if prepared is None:
            return False
        record["method"], act = prepared
        prep, made = self.preparation, None
        if prep is not None:  # before the marker: a fault not made must not pass as one met
            made = prep.make(self)
            if made is None:
                return False
            record[prep.key] = made
        if self.damage is not None:
            damage = self.make_damage()
            if damage is None:
                return False  # never claimed: the wrapper's exit 3 says the fault never came
            record["damage"] = damage
        if not claim_marker(self.marker, record):
            log(f"marker {self.marker} already exists; not injecting")
            if prep is not None and made is not None:
                prep.undo(self, made)
            return False
        self.claimed = True
        print(f"{INJECT_PREFIX} {json.dumps(record)}", file=sys.stderr, flush=True)
        if self.sentinel is not None:  # before the fault: a stopped rank tells nobody anything
            self.sentinel.send({"event": "injected", "fault": self.fault})
        if prep is not None and made is not None:
            prep.before_act(self, made)
        act()
        return True

    def make_damage(self) -> dict | None:
        """Damage the checkpoint whose tracker armed this injection (--checkpoint-damage): its record, or None
        with the reason logged (ftqual.rank.damage.make_damage)."""
        return make_damage(self.marker, self.damage, self.tracker, self.armed_at)

    def _signal(self, pid: int, sig: signal.Signals) -> None:
        try:
            self.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # already gone (or never ours to signal)

    def freeze_node(self) -> dict | None:
        """node_loss: this node's ft_launcher stopped, every process below it listed (faults.freeze_node)."""
        return faults.freeze_node(self.identity["host"], self.pid_dir, self._signal)

    def poison_batch(self) -> None:
        """nan_loss: poison this iteration's batch (recurring.Poison), from the step about to run (placement
        setup: its section starts right after) or the one whose section just started."""
        self.poison = recurring.Poison()
        self.poison.start(self.steps_seen + (1 if self.watch is None or self.placement != "step" else 0))

    def on_tracker(self, value: int | None) -> bool:
        """One poll result; True once armed (the poller can stop). Timing in_save arms at a section's end,
        placement setup at the setup section's close, setup_start at its start."""
        if self.placement in ("setup", "setup_start"):
            return True
        if self.timing != "checkpoint" or value is None or value <= self.baseline:
            return False
        if self.arm_iteration is not None and value < self.arm_iteration:
            return False
        with self.lock:
            if self.armed_at is None:
                self.armed_at = value
        if self.placement == "immediate":
            self.inject(self.watch.current() if self.watch else None)
        # else: the next start_section("step") injects, on the training thread itself (see
        # _on_section_start). Injecting from this poller thread while a step is open would race: claiming
        # and fsyncing the marker takes tens of milliseconds on a shared filesystem, longer than a whole
        # step of a small model on a GPU, so the signal would land wherever training had moved on to
        # (seen on an H200: decided inside 'step', stopped inside 'checkpointing', detected after 300 s).
        return True

    def _on_section_start(self, name: str) -> None:
        if name == "step":
            self.steps_seen += 1
            if self.poison is not None and self.poison.on_step_start(self.steps_seen):
                log(f"{self.fault}: the poisoned iteration is over; this step's batch is the workload's own")
        if name == "setup" and self.placement == "setup_start" and self.timing == "checkpoint":
            with self.lock:
                if self.armed_at is None:
                    self.armed_at = self.baseline  # the checkpoint this cycle resumes
            self.inject("setup")
            return
        if self.timing != "checkpoint" or SECTION_OF_PLACEMENT.get(self.placement) != name:
            return
        if self.armed_at is None:
            # The training thread reads the tracker itself at every step: on a GPU a whole save interval
            # can pass between two polls (seen on 2 x H200 resuming at 30: saves at 35 and 40 finalized
            # within 0.7 s, the poller never armed, and the run ended without its fault).
            self.on_tracker(poll_tracker(self.tracker))
        if self.armed_at is not None:
            self.inject(name)

    def _on_section_closing(self, name: str) -> None:
        """placement setup: the workload closes its setup section (the checkpoint loaded); stop it there,
        before the monitor knows, when this cycle started from a completed checkpoint."""
        if name != "setup" or self.placement != "setup" or self.timing != "checkpoint":
            return
        if self.baseline < 1:
            log("placement setup: this cycle started from no checkpoint (tracker 0); not injecting")
            return
        with self.lock:
            if self.armed_at is None:
                self.armed_at = self.baseline  # the checkpoint this replacement loaded
        self.inject("setup")

    def _on_section_end(self, name: str) -> None:
        """in_save: a checkpointing section ended with a save newer than the tracker still in flight;
        placement out_of_section: a step's section ended (the monitor knows), and no section is open."""
        if name == "step" and self.placement == "out_of_section" and self.timing == "checkpoint":
            if self.armed_at is None:
                self.on_tracker(poll_tracker(self.tracker))
            if self.armed_at is not None and self.watch is not None and self.watch.current() is None:
                self.inject(None)
            return
        if name != "checkpointing" or self.timing != "in_save":
            return
        value = poll_tracker(self.tracker)
        if value is None or value <= self.baseline:
            return
        newest = newest_checkpoint_iteration(self.tracker.parent)
        if newest is None or newest <= value:
            return  # no save in flight: this section finalized one (or saved nothing new)
        with self.lock:
            if self.finished:
                return
            self.armed_at, self.save_iteration = value, newest
        self.inject("checkpointing")

    def poll_forever(self) -> None:
        while not self.stop.is_set():
            if self.on_tracker(poll_tracker(self.tracker)):
                return
            self.stop.wait(self.poll_seconds)

    def on_phase_poll(self, phases: PhaseWatch) -> bool:
        """One poll of a save phase; True once injected or given up (the poller can stop). Armed only once
        the tracker is past the baseline (a checkpoint completed in this cycle: the replacement has one to
        resume from) and a save S newer than it shows the phase on disk."""
        value = poll_tracker(self.tracker)
        if value is None or value <= self.baseline:
            return False
        if self.arm_iteration is not None and value < self.arm_iteration:
            return False
        watched = self.helper is not None and self.timing == WATCHED_PHASE
        seen = phases.in_flight(value) if watched else phases.look(value)
        if seen is None:
            return False
        writers = []
        if self.preparation is not None and self.preparation.look is not None:
            writers = self.preparation.look(self, seen[0])
            if not writers:
                return False  # the rank writes itself, or its writer holds no file now: look again
        with self.lock:
            if self.finished:
                return True
            self.armed_at, self.save_iteration = value, seen[0]
            self.on_disk = seen[1].record()
            self.writers = writers
        if self.helper is not None:
            return self.inject_frozen(phases, seen)
        # From this thread, at once: the phase lasts milliseconds, while the training thread may be inside
        # the save's own calls (a sync save) with no section boundary to wait for.
        self.inject(self.watch.current() if self.watch else None)
        return True

    def inject_frozen(self, phases: PhaseWatch, seen: tuple[int, SaveOnDisk]) -> bool:
        """A save-phase kill through the helper (FreezeHelper): True when this poller is done (the marker
        was taken, or the helper is gone), False when the phase had passed once the rank was stopped, or a
        watched save was finalized unseen (the rank went on: poll again). When the helper kills the rank,
        this never returns. The answer is awaited without the lock: a watch lasts as long as the save, and
        finish() closes the requests instead, which the helper checks before it kills."""
        with self.lock:
            if self.finished:
                return True
            names, total = seen[1].signature()
            request = {
                "record": self.record(self.watch.current() if self.watch else None),
                "marker": str(self.marker),
                "checkpoint_dir": str(self.tracker.parent),
                "phase": self.timing,
                "save_iteration": seen[0],
                "signature": [list(names), total],
                "stable": phases.stable,
                "reference": phases.reference_shards(self.armed_at),
                "polled_on_disk": self.on_disk,
                "missed_before": self.missed,
                "watch": self.timing == WATCHED_PHASE,
            }
        try:
            answer = self.helper.ask(request)
        except (OSError, ValueError) as exc:
            if not self.stop.is_set():  # else the workload ended and closed the helper's requests
                log(f"{exc}; not injecting")
            with self.lock:
                self.finished = True
            return True
        with self.lock:
            if answer.get("result") == "missed":
                self.missed += 1
                log(f"{self.timing} of the save of {seen[0]} was missed ({answer.get('why')}); polling on")
                return False
            if answer.get("result") == "taken":
                log(f"marker {self.marker} already exists; not injecting")
            else:
                log(f"the freeze helper could not inject ({answer.get('why')}); not injecting")
            self.finished = True
            return True

    def poll_phases(self) -> None:
        phases = PhaseWatch(self.timing, self.tracker.parent)
        while not self.stop.is_set():
            if self.on_phase_poll(phases):
                return
            self.stop.wait(self.poll_seconds)

    def start(self) -> threading.Thread | None:
        """Start the poller: the tracker's (timing checkpoint) or the save phases' (its own, polling every
        PHASE_POLL_SECONDS); in_save and placement setup need none."""
        if self.timing in SAVE_PHASES:
            target = self.poll_phases
            if faults.freezable(self.fault) and self.freeze_helper:
                try:
                    self.helper = FreezeHelper()
                except OSError as exc:  # the kill is then made by this rank itself, as for other timings
                    log(f"the freeze helper cannot be started ({exc}): the rank kills itself on the phase")
        elif self.timing != "checkpoint" or self.placement in ("setup", "setup_start"):
            return None
        else:
            target = self.poll_forever
        thread = threading.Thread(target=target, name="ftqual-injector", daemon=True)
        thread.start()
        return thread

    def finish(self) -> None:
        """The workload ended: never inject from now on."""
        self.stop.set()
        with self.lock:
            self.finished = True
        if self.helper is not None:
            self.helper.close()
