"""Constants that several stages must agree on, in one place.

The walkthrough's GPT (its shape decides which TP/PP a run may use), the checkpoint tracker's name and the
fault kinds with the path each is detected by. The stdlib-only worker wrapper
(workloads/megatron_gpt_worker.py) loads this file by its path for the tracker name and the fault kinds, so it
must import nothing outside the standard library (tests/unit/test_contract.py checks both).
"""

from __future__ import annotations

from dataclasses import dataclass

# The walkthrough's three, the node loss, and NVRx's fault catalog (nvidia_resiliency_ext.shared_utils.
# inject_fault.Fault) as one rank of a training job meets it.
FAULTS = (
    "none",
    "kill",
    "hang",
    "node_loss",
    "segfault",
    "abort",
    "exception",
    "sigterm",
    "sigint",
    "gil_lock",
    "gpu_error",
    "gpu_hang",
    "disk_full",
    "writer_stall",
    "campaign",
)
# Faults of one rank (node_loss takes a whole node: its ft_launcher and every process below it; a campaign
# is many faults of one run, drawn from these by ftqual.scenario.campaign_plan).
# Faults of the checkpoint storage, not of a rank (config/checkpoint_faults.yaml): the checkpoint filesystem
# fills up (a size-capped filesystem the launcher mounts for the run, filled by a file of ours to less than
# half a checkpoint), or the process writing a save's shards is stopped (SIGSTOP) mid-write. The rank lives
# on; what the stack does then is under test (ftqual.verification.checks.storage).
STORAGE_FAULTS = ("disk_full", "writer_stall")
RANK_FAULTS = tuple(f for f in FAULTS if f not in ("none", "node_loss", "campaign", *STORAGE_FAULTS))
# Faults only a GPU can suffer: refused on the smoke workload, which has none.
GPU_ONLY_FAULTS = ("gpu_error", "gpu_hang")
# Faults after which the rank lives on and no step completes: only a section (or out-of-section) timeout of
# the rank monitor can detect them; an exit seen first means something else ended the rank.
LIVE_FAULTS = ("hang", "gil_lock", "gpu_hang")
# Faults the rank dies of, each with the exit codes ft_launcher may report for it (torch's elastic agent
# prints a death by signal N as -N; a shell between would make it 128+N). sigterm is the default action's
# death (a workload that handles SIGTERM itself is told apart by the check); sigint is Python's
# KeyboardInterrupt, uncaught: Python re-raises SIGINT (-2) only when the exception ends the interpreter's
# top-level code, and under ft_launcher on CPU the rank exits 1 after the traceback; gpu_error ends in an
# uncaught CUDA error (exit 1) or an abort in the CUDA teardown after it (-6).
EXIT_CODES: dict[str, tuple[int, ...]] = {
    "kill": (-9, 137),
    "segfault": (-11, 139),
    "abort": (-6, 134),
    "exception": (1,),
    "sigterm": (-15, 143),
    "sigint": (-2, 130, 1),
    "gpu_error": (1, -6, 134),
}
# Faults the rank dies of through Python's exception handling: it unwinds (prints the traceback, runs its exit
# handlers, joins what the interpreter waits for at shutdown) before it exits, and a peer whose collective
# broke with it can die first. Its own exit or the open section's timeout ends it: both are its detection.
UNWINDING_FAULTS = ("exception", "sigint")
# How long such a rank takes to unwind when nothing holds it (1.2 s measured on CPU with the smoke workload,
# where a signal's death takes 0.2-0.3 s): longer is a linger (ftqual.verification.checks.linger), which the
# open section's
# timeout may cut.
UNWIND_MARGIN_S = 2.0
# What each fault does to the rank, in one phrase (the preflight, the docs).
FAULT_ACTIONS = {
    "none": "no fault",
    "kill": "SIGKILL",
    "hang": "SIGSTOP",
    "node_loss": "SIGKILL of the node's ft_launcher and every process below it",
    "segfault": "a segmentation fault (SIGSEGV)",
    "abort": "os.abort() (SIGABRT)",
    "exception": "an exception raised in the training thread",
    "sigterm": "SIGTERM",
    "sigint": "SIGINT",
    "gil_lock": "a thread that holds the GIL forever",
    "gpu_error": "an illegal device access (the CUDA context dies)",
    "gpu_hang": "a GPU kernel that never ends",
    "disk_full": "the checkpoint filesystem filled to less than half a checkpoint",
    "writer_stall": "SIGSTOP of the process writing a save's shards",
    "campaign": "a seeded series of the faults above, one per cycle, as campaign_plan.json plans them",
}


def detection_path(fault: str) -> str | None:
    """How ft_launcher must detect `fault`: "exit" (the rank's death), "timeout" (a live rank's section or
    out-of-section timeout), "node" (node_loss: a surviving node's report), None for no fault."""
    if fault in LIVE_FAULTS:
        return "timeout"
    if fault in EXIT_CODES:
        return "exit"
    return "node" if fault == "node_loss" else None


def detection_paths(fault: str) -> tuple[str, ...]:
    """Every path that is a detection of `fault`: its own (detection_path), and for an unwinding fault whose
    rank lingers after its traceback the open section's timeout as well ("timeout")."""
    own = detection_path(fault)
    if own is None:
        return ()
    return (own, "timeout") if fault in UNWINDING_FAULTS else (own,)


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
