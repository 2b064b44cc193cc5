"""The fault registry, and nothing else: FAULT_KINDS, one `Fault` per kind, and the functions that ask it.

Every fault table is derived from it.

The code that runs inside every training rank (ftqual.rank, standard library only) imports it as its one
module of the package, so it must import nothing outside the standard library
(tests/unit/rank/test_boundary.py
holds both). What several stages share beside the registry lives with its users: the rank's ids (damage kinds,
save phases) in ftqual.rank.ids, the tracker's name in ftqual.rank.tracker, the model's shape in
ftqual.scenario.job, the exit codes' meanings in ftqual.verification.evidence.endings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# The checks every fault scenario's verify report must carry, one per point of the walkthrough's "Verify
# recovery" list (docs/checks.md), and the baseline's one.
RECOVERY_CHECKS = (
    "checkpoint_before_failure",
    "failure_detected_and_restarted",
    "resumed_from_checkpoint",
    "progress_after_resume",
    "clean_finish",
)
BASELINE_CHECKS = ("uninterrupted_completion",)
FAMILIES = ("none", "rank", "node", "storage", "recurring", "exactness", "campaign")
DETECTIONS = ("exit", "timeout", "node")
# What a fault needs of each stage beyond its family's common path, named here (data: the rank stays
# standard-library only) and resolved to code by the stage's own table. The launcher's (ftqual.launch.
# preparations): a size-capped filesystem mounted as the checkpoint directory, or a workload that writes its
# async saves from a writer process (so there is one to stop). The rank's (ftqual.rank.faults.PREPARATIONS):
# before the marker is claimed, the node's ft_launcher stopped and its processes listed, the checkpoint
# filesystem filled, or the save's writer processes found; each has its record (the marker's key), its undo
# (the marker was taken: the fault is not made) and its step right before the action.
LAUNCHER_PREPARATIONS = ("capped_fs", "writer_process")
RANK_PREPARATIONS = ("freeze_node", "fill_filesystem", "find_writers")
# When a fault's injection may be armed (the wrapper's --fault-timing, ftqual.rank.ids.TIMINGS): once a
# checkpoint completed, at the end of a checkpointing section with a save in flight, or at a phase of a save
# seen on disk (ftqual.rank.ids.SAVE_PHASES, written out here: the registry imports nothing of ours).
AFTER_CHECKPOINT = ("checkpoint",)
WRITING_PHASES = ("save_shards_partial", "save_shards_complete")  # a writer holds the save's shards open
ANY_TIMING = ("checkpoint", "in_save", "save_staged", *WRITING_PHASES, "save_finalized")
# Where a recurring fault comes back after its first injection (ftqual.rank.recurring.TRIGGERS).
RECURS_AT = ("first_step", "setup")
# What an exactness fault does to the workload's save or restore (Fault.tampers; ftqual.rank.exactness.TAMPERS
# resolves them, the workload calls its hooks): a save writes the previous save's state under the new
# iteration's name; the restore loads the model's weights only, leaves the RNG as the fresh process seeded
# it, or restarts the data at sample 0. Only the smoke workload calls the hooks (TAMPER_WORKLOADS).
TAMPERS = ("stale_save", "weights_only", "fresh_rng", "data_from_start")
TAMPER_WORKLOADS = ("smoke",)


# How the verifier judges a dying fault's exit (Fault.exit_judged_by).
EXIT_JUDGEMENTS = ("exit_codes", "killed_pid")


@dataclass(frozen=True)
class Fault:
    """One fault kind, everything the stages must agree on about it. `family`: none (the baseline), rank
    (one rank of the job meets it), node (a whole node: its ft_launcher and every process below it), storage
    (the checkpoint storage fails, the rank lives on: ftqual.verification.checks.storage), recurring (one rank
    meets it again in every cycle, at the same iteration or in setup, so no restart cures it and the stack
    must stop the job: never drawn into a campaign, ftqual.verification.checks.recurring), exactness (one rank
    is killed after a checkpoint, as kill is, and the save before it or the replacement's restore loses part
    of the state: the job recovers and trains on from a wrong state, which only the checkpoint shows,
    ftqual.verification.checks.checkpoint_equal; never drawn into a campaign), campaign (many
    faults of one run, drawn from the rank faults by ftqual.scenario.campaign_plan). `detection`: the path
    ft_launcher must detect it by: "exit" (the rank's death, with one of `exit_codes`: torch's elastic agent
    prints a death by signal N as -N, a shell between makes it 128+N), "timeout" (a live rank's section or
    out-of-section timeout), "node" (a surviving node's report), None (no fault, or one judged by its own
    outcome check). `unwinds`: the rank dies through Python's exception handling (prints the traceback, runs
    its exit handlers, joins what the interpreter waits for at shutdown) before it exits, and a peer whose
    collective broke with it can die first: its own exit or the open section's timeout ends it, both are its
    detection. `catalog`: one of NVRx's fault catalog (nvidia_resiliency_ext.shared_utils.inject_fault.Fault),
    judged by its detection path (the walkthrough's kill and hang keep their own texts). `checks`: the
    checks its verify report must carry beyond the family's (required_checks)."""

    name: str
    family: str
    action: str  # what it does, in one phrase (the preflight, the report's fault table, the docs)
    detection: str | None = None
    exit_codes: tuple[int, ...] = ()
    gpu_only: bool = False  # refused on the smoke workload, which has no GPU
    unwinds: bool = False
    catalog: bool = False
    ends_at_once: bool = False  # a signal the rank does not handle ends it at once: no stack to dump
    checks: tuple[str, ...] = ()
    # What each stage does for it, resolved by the stage's table (see LAUNCHER_PREPARATIONS above):
    act: str | None = None  # the rank's action (ftqual.rank.faults.ACTIONS); None: nothing to inject
    rank_prepares: str | None = None  # RANK_PREPARATIONS: made before the marker, recorded in it, undone
    launcher_prepares: str | None = None  # LAUNCHER_PREPARATIONS
    timings: tuple[str, ...] = AFTER_CHECKPOINT  # the --fault-timing values it takes
    damages_checkpoint: bool = False  # it may leave a broken checkpoint (checkpoint_damage): it dies at once
    recurs_at: str | None = None  # a recurring fault's later cycles (RECURS_AT)
    # The verifier's reading of it: "killed_pid": its death is judged by the killed pid's own exit (a peer may
    # be listed first), else by one of its exit codes; `catchable`: a signal the workload may catch and end in
    # order (Megatron's --exit-signal-handler), a path the check tells apart.
    exit_judged_by: str = "exit_codes"
    catchable: bool = False
    tampers: str | None = None  # an exactness fault's change to the save or the restore (TAMPERS)

    def __post_init__(self) -> None:
        if self.family not in FAMILIES or (self.detection is not None and self.detection not in DETECTIONS):
            raise ValueError(f"fault {self.name}: family {self.family!r}, detection {self.detection!r}")
        if bool(self.exit_codes) != (self.detection == "exit"):
            raise ValueError(f"fault {self.name}: exit codes go with detection 'exit' and only with it")
        if (self.act is not None) != (self.injected and self.family != "campaign"):
            raise ValueError(f"fault {self.name}: every fault a rank injects has its act, and only those")
        if self.rank_prepares not in (None, *RANK_PREPARATIONS) or self.launcher_prepares not in (
            None,
            *LAUNCHER_PREPARATIONS,
        ):
            raise ValueError(
                f"fault {self.name}: preparations {self.rank_prepares!r}, {self.launcher_prepares!r}"
            )
        if self.exit_judged_by not in EXIT_JUDGEMENTS:
            raise ValueError(
                f"fault {self.name}: exit_judged_by {self.exit_judged_by!r} not in {EXIT_JUDGEMENTS}"
            )
        if not set(self.timings) <= set(ANY_TIMING) or not self.timings:
            raise ValueError(f"fault {self.name}: timings {self.timings!r} must be among {ANY_TIMING}")
        if (self.tampers is not None) != (self.family == "exactness") or self.tampers not in (None, *TAMPERS):
            raise ValueError(f"fault {self.name}: an exactness fault, and only one, says what it tampers")
        if (self.recurs_at is not None) != (self.family == "recurring") or self.recurs_at not in (
            None,
            *RECURS_AT,
        ):
            raise ValueError(f"fault {self.name}: a recurring fault, and only one, says where it recurs")

    @property
    def injected(self) -> bool:
        """A fault is injected: every kind but the baseline's."""
        return self.family != "none"

    @property
    def lives_on(self) -> bool:
        """The rank lives on and no step completes: only a section (or out-of-section) timeout of the rank
        monitor can detect it; an exit seen first means something else ended the rank."""
        return self.detection == "timeout"

    @property
    def has_rank(self) -> bool:
        """It is aimed at a rank (the fault rank, or a rank of the node to lose): not the baseline, not a
        campaign, whose ranks are its plan's."""
        return self.family not in ("none", "campaign")

    @property
    def required_checks(self) -> tuple[str, ...]:
        """The checks its verify report must carry (one that does not apply says skip, it is never absent)."""
        return (*(RECOVERY_CHECKS if self.injected else BASELINE_CHECKS), *self.checks)

    @property
    def detection_paths(self) -> tuple[str, ...]:
        """Every path that is a detection of it: its own, and for an unwinding fault whose rank lingers after
        its traceback the open section's timeout as well."""
        if self.detection is None:
            return ()
        return (self.detection, "timeout") if self.unwinds else (self.detection,)


def _rank(name: str, action: str, detection: str, *exit_codes: int, **more: object) -> Fault:
    return Fault(name, "rank", action, detection, exit_codes, **more)  # type: ignore[arg-type]


def _exactness(name: str, action: str, tampers: str) -> Fault:
    """A kill after a checkpoint whose save or restore `tampers` (TAMPERS): detected as kill is, judged by
    the checkpoint the recovered run writes (checkpoint_equal)."""
    return Fault(
        name,
        "exactness",
        f"{action}; SIGKILL after that checkpoint",
        "exit",
        (-9, 137),
        ends_at_once=True,
        checks=("checkpoint_equal",),
        act="sigkill",
        exit_judged_by="killed_pid",
        tampers=tampers,
    )


# Every fault kind, in the order the schema, the launcher and the report list them: the walkthrough's three,
# the node loss, NVRx's fault catalog as one rank of a training job meets it, the storage faults
# (config/checkpoint_faults.yaml), the recurring faults (config/recurring_faults.yaml), the faults that break
# exactness silently (config/exact_faults.yaml), and the campaign.
# sigterm is the default action's death (a workload that handles SIGTERM itself is told apart by the check);
# sigint is Python's KeyboardInterrupt, uncaught: Python re-raises SIGINT (-2) only when the exception ends
# the interpreter's top-level code, and under ft_launcher on CPU the rank exits 1 after the traceback;
# gpu_error ends in an uncaught CUDA error (exit 1) or an abort in the CUDA teardown after it (-6). The
# storage faults: the checkpoint filesystem fills up (a size-capped filesystem the launcher mounts for the
# run, filled by a file of ours to less than half a checkpoint), or the process writing a save's shards is
# stopped (SIGSTOP) mid-write; the rank lives on and what the stack does then is under test. The recurring
# faults come back in every cycle (ftqual.rank.recurring): an exception at the first iteration after the first
# checkpoint K (K+1, before the next save, so no progress is ever kept); a batch whose loss is NaN at K+1,
# which the job's own NaN check must raise on (Megatron's --check-for-nan-in-loss-and-grad, on by default: a
# RuntimeError, exit 1, with its rerun state machine's validate_results mode exit 16 or 17); a rank that dies
# in setup on every start after the first fault (a device that fails at initialisation). Adding a fault:
# docs/architecture.md, "Adding a fault" (its entry here, its action in ftqual.rank.faults, its tests).
FAULT_KINDS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("none", "none", "no fault"),
        _rank(
            "kill",
            "SIGKILL",
            "exit",
            -9,
            137,
            ends_at_once=True,
            act="sigkill",
            timings=ANY_TIMING,
            damages_checkpoint=True,
            exit_judged_by="killed_pid",
        ),
        _rank("hang", "SIGSTOP", "timeout", act="sigstop"),
        Fault(
            "node_loss",
            "node",
            "SIGKILL of the node's ft_launcher and every process below it",
            "node",
            ends_at_once=True,
            checks=("node_loss_outcome",),
            act="sigkill",
            rank_prepares="freeze_node",
        ),
        _rank(
            "segfault",
            "a segmentation fault (SIGSEGV)",
            "exit",
            -11,
            139,
            catalog=True,
            ends_at_once=True,
            act="segfault",
        ),
        _rank("abort", "os.abort() (SIGABRT)", "exit", -6, 134, catalog=True, ends_at_once=True, act="abort"),
        _rank(
            "exception",
            "an exception raised in the training thread",
            "exit",
            1,
            unwinds=True,
            catalog=True,
            act="exception",
        ),
        _rank(
            "sigterm",
            "SIGTERM",
            "exit",
            -15,
            143,
            catalog=True,
            ends_at_once=True,
            act="sigterm",
            catchable=True,
        ),
        _rank("sigint", "SIGINT", "exit", -2, 130, 1, catalog=True, unwinds=True, act="sigint"),
        _rank("gil_lock", "a thread that holds the GIL forever", "timeout", catalog=True, act="gil_lock"),
        _rank(
            "gpu_error",
            "an illegal device access (the CUDA context dies)",
            "exit",
            1,
            -6,
            134,
            catalog=True,
            gpu_only=True,
            act="gpu_error",
        ),
        _rank(
            "gpu_hang",
            "a GPU kernel that never ends",
            "timeout",
            catalog=True,
            gpu_only=True,
            act="gpu_sleep",
        ),
        Fault(
            "disk_full",
            "storage",
            "the checkpoint filesystem filled to less than half a checkpoint",
            checks=("storage_fault_outcome",),
            act="nothing_more",
            rank_prepares="fill_filesystem",
            launcher_prepares="capped_fs",
        ),
        Fault(
            "writer_stall",
            "storage",
            "SIGSTOP of the process writing a save's shards",
            checks=("storage_fault_outcome",),
            act="stop_writers",
            rank_prepares="find_writers",
            launcher_prepares="writer_process",
            timings=WRITING_PHASES,
        ),
        Fault(
            "recurring_exception",
            "recurring",
            "an exception raised in the training thread at iteration K+1 in every cycle (K: the first "
            "checkpoint)",
            "exit",
            (1,),
            unwinds=True,
            checks=("recurring_fault_outcome",),
            act="exception",
            recurs_at="first_step",
        ),
        Fault(
            "nan_loss",
            "recurring",
            "a poisoned batch at iteration K+1 in every cycle: NaN in the embedding's output, the loss NaN, "
            "the job's NaN check raises",
            "exit",
            (1, 16, 17),
            unwinds=True,
            checks=("recurring_fault_outcome",),
            act="poisoned_batch",
            recurs_at="first_step",
        ),
        Fault(
            "setup_crash",
            "recurring",
            "an exception after the first checkpoint, then in setup on every start (a device that fails "
            "at initialisation)",
            "exit",
            (1,),
            unwinds=True,
            checks=("recurring_fault_outcome",),
            act="device_failure",
            recurs_at="setup",
        ),
        _exactness(
            "stale_save",
            "a save writes the previous save's state (bit for bit) under the new iteration's name",
            "stale_save",
        ),
        _exactness(
            "optimizer_not_restored",
            "the replacement's restore loads the model's weights only",
            "weights_only",
        ),
        _exactness(
            "rng_not_restored",
            "the replacement's restore leaves the RNG as seeded at start",
            "fresh_rng",
        ),
        _exactness(
            "data_position_lost",
            "the replacement's restore restarts the data at sample 0",
            "data_from_start",
        ),
        Fault(
            "campaign",
            "campaign",
            "a seeded series of the faults above, one per cycle, as campaign_plan.json plans them",
            checks=("campaign_plan_followed", "cycles_do_not_accumulate"),
        ),
    )
}


def fault(name: object) -> Fault | None:
    """The registry's fault of that name, or None for a name it does not know."""
    return FAULT_KINDS.get(name) if isinstance(name, str) else None


def family_of(name: object) -> str | None:
    """The family of the fault of that name ("none" for the baseline), or None for a name the registry does
    not know."""
    kind = fault(name)
    return kind.family if kind is not None else None


def faults_where(test: Callable[[Fault], bool]) -> tuple[str, ...]:
    """The names of the faults `test` holds for, in the registry's order."""
    return tuple(f.name for f in FAULT_KINDS.values() if test(f))


def launcher_prepares(name: object) -> str | None:
    """What the launcher prepares for the fault of that name (LAUNCHER_PREPARATIONS), None for nothing or a
    name the registry does not know."""
    kind = fault(name)
    return kind.launcher_prepares if kind is not None else None


def is_fault(name: object, test: Callable[[Fault], bool]) -> bool:
    """Whether `name` is a known fault that `test` holds for (False for an unknown name)."""
    kind = fault(name)
    return kind is not None and test(kind)


# The tables every stage reads, derived from the registry.
FAULTS = tuple(FAULT_KINDS)
INJECTED_FAULTS = faults_where(lambda f: f.injected)
RANK_FAULTS = faults_where(lambda f: f.family == "rank")  # a campaign's kinds: never a recurring one
RECURRING_FAULTS = faults_where(lambda f: f.family == "recurring")
STORAGE_FAULTS = faults_where(lambda f: f.family == "storage")
GPU_ONLY_FAULTS = faults_where(lambda f: f.gpu_only)
EXACTNESS_FAULTS = faults_where(lambda f: f.family == "exactness")
LIVE_FAULTS = faults_where(lambda f: f.lives_on)
EXIT_CODES: dict[str, tuple[int, ...]] = {f.name: f.exit_codes for f in FAULT_KINDS.values() if f.exit_codes}
UNWINDING_FAULTS = faults_where(lambda f: f.unwinds)
CATALOG_FAULTS = faults_where(lambda f: f.catalog)
FAULT_ACTIONS = {f.name: f.action for f in FAULT_KINDS.values()}
REQUIRED_CHECKS = {f.name: f.required_checks for f in FAULT_KINDS.values()}
# How long such a rank takes to unwind when nothing holds it (1.2 s measured on CPU with the smoke workload,
# where a signal's death takes 0.2-0.3 s): longer is a linger (ftqual.verification.checks.linger), which the
# open section's timeout may cut.
UNWIND_MARGIN_S = 2.0


def detection_path(fault: str) -> str | None:
    """How ft_launcher must detect `fault`: "exit" (the rank's death), "timeout" (a live rank's section or
    out-of-section timeout), "node" (node_loss: a surviving node's report), None for no fault."""
    kind = FAULT_KINDS.get(fault)
    return kind.detection if kind is not None else None


def detection_paths(fault: str) -> tuple[str, ...]:
    """Every path that is a detection of `fault`: its own (detection_path), and for an unwinding fault whose
    rank lingers after its traceback the open section's timeout as well ("timeout")."""
    kind = FAULT_KINDS.get(fault)
    return kind.detection_paths if kind is not None else ()


def gpu_only_problem(fault: str, workload: str, name: str = "fault", separator: str = " ") -> str | None:
    """Why `fault` cannot run on `workload`, in one line (the setting said as `name``separator``fault`: the
    config's `fault gpu_error`, the environment's `NVRX_DEMO_FAULT=gpu_error`), or None."""
    kind = FAULT_KINDS.get(fault)
    if kind is not None and kind.tampers is not None and workload not in TAMPER_WORKLOADS:
        return (
            f"{name}{separator}{fault} acts through the save and restore hooks only the "
            f"{' and '.join(TAMPER_WORKLOADS)} workload calls; the {workload} workload has none"
        )
    if fault not in GPU_ONLY_FAULTS or workload != "smoke":
        return None
    return (
        f"{name}{separator}{fault} is GPU-only: the smoke workload runs on CPU and has no CUDA context to "
        "break; use the megatron workload on GPUs"
    )
