"""Constants that several stages must agree on, in one place.

The walkthrough's GPT (its shape decides which TP/PP a run may use), the checkpoint tracker's name and the
fault registry (FAULT_KINDS: one `Fault` per kind, from which every fault table is derived). The code that
runs inside every training rank (ftqual.rank, standard library only) imports it as its one module of the
package, so it must import nothing outside the standard library (tests/unit/rank/test_boundary.py holds both).
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
FAMILIES = ("none", "rank", "node", "storage", "recurring", "campaign")
DETECTIONS = ("exit", "timeout", "node")


@dataclass(frozen=True)
class Fault:
    """One fault kind, everything the stages must agree on about it. `family`: none (the baseline), rank
    (one rank of the job meets it), node (a whole node: its ft_launcher and every process below it), storage
    (the checkpoint storage fails, the rank lives on: ftqual.verification.checks.storage), recurring (one rank
    meets it again in every cycle, at the same iteration or in setup, so no restart cures it and the stack
    must stop the job: never drawn into a campaign, ftqual.verification.checks.recurring), campaign (many
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

    def __post_init__(self) -> None:
        if self.family not in FAMILIES or (self.detection is not None and self.detection not in DETECTIONS):
            raise ValueError(f"fault {self.name}: family {self.family!r}, detection {self.detection!r}")
        if bool(self.exit_codes) != (self.detection == "exit"):
            raise ValueError(f"fault {self.name}: exit codes go with detection 'exit' and only with it")

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


def _rank(name: str, action: str, detection: str, *exit_codes: int, **more: bool) -> Fault:
    return Fault(name, "rank", action, detection, exit_codes, **more)


# Every fault kind, in the order the schema, the launcher and the report list them: the walkthrough's three,
# the node loss, NVRx's fault catalog as one rank of a training job meets it, the storage faults
# (config/checkpoint_faults.yaml), the recurring faults (config/recurring_faults.yaml), and the campaign.
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
# in setup on every start after the first fault (a device that fails at initialisation). Adding a fault: its
# entry here, its injection (ftqual.rank), the schema's fault enum (config/schema.yaml;
# tests/unit/test_fault_registry.py holds it equal to FAULTS, and a rank fault's campaign kinds to
# RANK_FAULTS) and its test.
FAULT_KINDS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("none", "none", "no fault"),
        _rank("kill", "SIGKILL", "exit", -9, 137, ends_at_once=True),
        _rank("hang", "SIGSTOP", "timeout"),
        Fault(
            "node_loss",
            "node",
            "SIGKILL of the node's ft_launcher and every process below it",
            "node",
            ends_at_once=True,
            checks=("node_loss_outcome",),
        ),
        _rank(
            "segfault", "a segmentation fault (SIGSEGV)", "exit", -11, 139, catalog=True, ends_at_once=True
        ),
        _rank("abort", "os.abort() (SIGABRT)", "exit", -6, 134, catalog=True, ends_at_once=True),
        _rank(
            "exception", "an exception raised in the training thread", "exit", 1, unwinds=True, catalog=True
        ),
        _rank("sigterm", "SIGTERM", "exit", -15, 143, catalog=True, ends_at_once=True),
        _rank("sigint", "SIGINT", "exit", -2, 130, 1, catalog=True, unwinds=True),
        _rank("gil_lock", "a thread that holds the GIL forever", "timeout", catalog=True),
        _rank(
            "gpu_error",
            "an illegal device access (the CUDA context dies)",
            "exit",
            1,
            -6,
            134,
            catalog=True,
            gpu_only=True,
        ),
        _rank("gpu_hang", "a GPU kernel that never ends", "timeout", catalog=True, gpu_only=True),
        Fault(
            "disk_full",
            "storage",
            "the checkpoint filesystem filled to less than half a checkpoint",
            checks=("storage_fault_outcome",),
        ),
        Fault(
            "writer_stall",
            "storage",
            "SIGSTOP of the process writing a save's shards",
            checks=("storage_fault_outcome",),
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
    if fault not in GPU_ONLY_FAULTS or workload != "smoke":
        return None
    return (
        f"{name}{separator}{fault} is GPU-only: the smoke workload runs on CPU and has no CUDA context to "
        "break; use the megatron workload on GPUs"
    )


TRACKER_NAME = "latest_checkpointed_iteration.txt"

# What the fault rank does to the checkpoint it just completed, right before it kills itself, so that the
# replacement meets a broken checkpoint (config/checkpoint_faults.yaml): the tracker overwritten with NUL
# bytes (a write cut short: not a number), the directory the tracker names moved aside (renamed, never
# deleted), the tracker moved aside, the largest shard file of that checkpoint cut to half its size, or
# bytes inside its largest tensor inverted.
CHECKPOINT_DAMAGES = (
    "tracker_not_a_number",
    "tracker_missing_iteration",
    "tracker_removed",
    "shard_truncated",
    "shard_corrupted",
)
# The damages that break the named iteration's own files: the tracker must still name it when they are made
# (else no replacement meets them), and a replacement that loads that iteration loads a broken checkpoint.
DAMAGES_TO_FILES = ("tracker_missing_iteration", "shard_truncated", "shard_corrupted")
DAMAGE_SUFFIX = ".ftqual-moved"  # what a moved-aside tracker or directory is renamed to (its name + this)
# disk_full's file on the checkpoint filesystem (hidden: never taken for a checkpoint), and the share of the
# completed checkpoint's bytes it leaves free: the next save starts and runs out of space midway.
FILLER_NAME = ".ftqual-filler"
FILLER_HEADROOM = 0.5

# Kills at a phase of a save, seen on disk by the fault rank's poller while a save S newer than the tracker is
# under way (kill only): the save begun and no shard file yet (the state being staged to host memory), some
# shard files (`*.distcp`) without the global `.metadata`, shard files whose sizes stopped changing still
# without `.metadata` (every shard written), `.metadata` written while the tracker still names an older
# iteration (finalised, not yet tracked). `in_save` is the older timing: at the end of a checkpointing
# section with a save in flight.
SAVE_PHASES = ("save_staged", "save_shards_partial", "save_shards_complete", "save_finalized")
IN_SAVE_TIMINGS = ("in_save", *SAVE_PHASES)


@dataclass(frozen=True)
class ModelShape:
    """A GPT's shape as Megatron builds it; the defaults are the walkthrough's tiny GPT. PP must divide its
    layers, TP its attention heads and its query groups (ftqual.scenario.job reads a shape from the
    arguments and estimates its parameters, checkpoint and memory)."""

    num_layers: int = 4
    hidden_size: int = 512
    num_attention_heads: int = 8
    seq_length: int = 256
    vocab_size: int = 1024
    num_query_groups: int | None = None  # None: as many as heads (no GQA)
    ffn_hidden_size: int | None = None  # None: 4 x hidden
    max_position_embeddings: int | None = None  # None: seq_length
    swiglu: bool = False
    untied_embeddings: bool = False
    position_embedding: str = "learned_absolute"  # or rope (no position table)
    normalization: str = "LayerNorm"  # or RMSNorm (no bias)
    bias_linear: bool = True

    def parallelism_problem(self, tp: int, pp: int) -> str | None:
        """Why this TP/PP cannot split the model, or None."""
        if pp < 1 or self.num_layers % pp:
            return f"PP={pp} must divide the model's {self.num_layers} layers"
        if tp < 1 or self.num_attention_heads % tp:
            return f"TP={tp} must divide the model's {self.num_attention_heads} attention heads"
        groups = self.num_query_groups
        if groups is not None and groups % tp:
            return f"TP={tp} must divide the model's {groups} query groups"
        return None


MODEL = ModelShape()

# NVRx's rank monitor checks the section and out-of-section timeouts this often (FaultToleranceConfig.
# workload_check_interval, 0.7.0's default, which the launcher leaves alone): a live fault is detected at most
# this long after its timeout has passed.
RANK_MONITOR_INTERVAL_S = 5.0

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
