"""The cross-field rules of a run's settings, written once, said in the config's or the launcher's words.

The cross-field rules of a run's settings, each written once and said in either vocabulary: the workflow's
config keys (ftqual.scenario.model, which collects every problem of every scenario) or the launcher's
environment
(ftqual.launch.settings, which stops at the first). Each rule returns its problem as one line, or None.

The rules, and why:
- the fault rank lies inside the world (NNODES*GPUS_PER_NODE ranks);
- the world divides by TP*PP (and the job's model takes TP and PP: ftqual.scenario.job, its MODEL's
  tiny GPT by default);
- every injection needs a checkpoint of its own before the last iteration;
- an in-save fault is a kill (a hang during a save is another scenario);
- a fault placed in a replacement's setup needs an earlier fault to make the replacement (injections >= 2,
  the first placed in a step) and the tracker's timing (it is armed by the cycle's start, not by a save);
- a storage fault is one injection on one node (its filesystem is the node's own mount): disk_full at the
  tracker's timing (it fills the disk once a checkpoint completed), writer_stall at a save phase with shards
  being written by a process of their own (an asynchronous save);
- a node loss needs a second node to survive it, takes a rank of a later node (the first node's ft_launcher
  hosts the rendezvous store: losing it ends every node) and one injection at a checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ftqual.contract import (
    FAULT_ACTIONS,
    STORAGE_FAULTS,
    family_of,
    faults_where,
    is_fault,
    launcher_prepares,
)
from ftqual.contract import fault as fault_kind
from ftqual.rank.ids import IN_SAVE_TIMINGS
from ftqual.scenario.job import MODEL, ModelShape


@dataclass(frozen=True)
class Vocabulary:
    """How one side names a setting and says a value of it: `rank 5` in the config, `NVRX_FAULT_RANK=5` in
    the environment."""

    names: dict[str, str]
    separator: str  # between a name and its value
    multinode_hint: str = ""  # what runs a multi-node scenario, where the vocabulary has a say in it
    quote: bool = field(default=False)  # quote a value that came in as text (the environment's)

    def name(self, key: str) -> str:
        return self.names[key]

    def said(self, key: str, value: object) -> str:
        return f"{self.names[key]}{self.separator}{value}"

    def got(self, value: object) -> str:
        return repr(str(value)) if self.quote else str(value)


KEYS = ("rank", "nnodes", "gpus_per_node", "tp", "pp", "injections", "save_interval", "train_iters", "fault",
        "fault_timing", "hang_placement", "checkpoint_damage", "async_save")  # fmt: skip
CONFIG = Vocabulary(names={k: k for k in KEYS}, separator=" ", multinode_hint=", and the Slurm profile")
ENVIRONMENT = Vocabulary(
    names={
        "rank": "NVRX_FAULT_RANK",
        "nnodes": "NNODES",
        "gpus_per_node": "GPUS_PER_NODE",
        "tp": "TP",
        "pp": "PP",
        "injections": "NVRX_INJECTIONS",
        "save_interval": "SAVE_INTERVAL",
        "train_iters": "TRAIN_ITERS",
        "fault": "NVRX_DEMO_FAULT",
        "fault_timing": "NVRX_FAULT_TIMING",
        "hang_placement": "NVRX_HANG_PLACEMENT",
        "checkpoint_damage": "NVRX_CHECKPOINT_DAMAGE",
        "async_save": "NVRX_ASYNC_SAVE",
    },
    separator="=",
    quote=True,
)


def rank_outside_world(v: Vocabulary, rank: int | None, world: int) -> str | None:
    if rank is None or rank < world:
        return None
    return (
        f"{v.said('rank', rank)} is outside the world of {world} rank(s) "
        f"({v.name('nnodes')}*{v.name('gpus_per_node')}); use 0..{world - 1} ({v.said('rank', 0)} on one GPU)"
    )


def world_not_divisible(v: Vocabulary, world: int, tp: int, pp: int, shape: ModelShape = MODEL) -> str | None:
    """`shape`: the job's model (ftqual.scenario.job): TP splits its heads and query groups, PP its layers."""
    if world % (tp * pp) == 0:
        return shape.parallelism_problem(tp, pp)
    return (
        f"World size {world} ({v.name('nnodes')}*{v.name('gpus_per_node')}) must be divisible by "
        f"{v.name('tp')}*{v.name('pp')}={tp * pp}"
    )


def injections_do_not_fit(
    v: Vocabulary, fault: str, injections: int, save_interval: int, train_iters: int
) -> str | None:
    if family_of(fault) == "none" or injections * save_interval < train_iters:
        return None
    return (
        f"{v.said('injections', injections)}: each fault needs a new checkpoint before the last iteration, "
        f"so {v.name('injections')}*{v.name('save_interval')}={injections * save_interval} must be below "
        f"{v.name('train_iters')}={train_iters}"
    )


def _faults_said(v: Vocabulary, names: tuple[str, ...]) -> str:
    return " or ".join(v.said("fault", name) for name in names)


def in_save_needs_kill(v: Vocabulary, fault: str, fault_timing: str) -> str | None:
    """A timing during a save is taken by the faults whose registry entry lists it (`timings`): the kill."""
    if fault_timing not in IN_SAVE_TIMINGS or is_fault(fault, lambda f: fault_timing in f.timings):
        return None
    if fault in STORAGE_FAULTS:
        return None  # storage_problem says which timing each takes
    takers = faults_where(lambda f: fault_timing in f.timings and f.family != "storage")
    return (
        f"{v.said('fault_timing', fault_timing)} needs {_faults_said(v, takers)} (got {v.got(fault)}): "
        "a hang during a save is not this scenario"
    )


def recurring_problem(v: Vocabulary, fault: str, injections: int) -> str | None:
    """A recurring fault (family recurring) comes back in every cycle by itself: a count of injections means
    nothing to it (ftqual.rank.recurring)."""
    if family_of(fault) != "recurring" or injections == 1:
        return None
    return (
        f"{v.said('fault', fault)} comes back in every cycle by itself: leave {v.name('injections')} at 1 "
        f"(got {v.got(injections)}); the stack must stop it (max_restarts, max_no_progress_cycles)"
    )


def storage_problem(
    v: Vocabulary, fault: str, fault_timing: str, injections: int, nnodes: int, async_save: bool
) -> str | None:
    """A storage fault (contract.STORAGE_FAULTS) is one injection on a single node, at the timings its
    registry entry takes: disk_full fills the node's own size-capped mount once a checkpoint completed;
    writer_stall stops the process writing a save's shards, which an asynchronous save has (a synchronous one
    writes from the training thread: a fault whose launcher prepares a writer process needs async_save)."""
    kind = fault_kind(fault)
    if kind is None or fault not in STORAGE_FAULTS:
        return None
    said = v.said("fault", fault)
    if injections != 1 or nnodes != 1:
        return (
            f"{said} needs {v.said('injections', 1)} and {v.said('nnodes', 1)} (got {v.got(injections)}, "
            f"{v.got(nnodes)}): the filesystem it breaks is one node's and stays broken"
        )
    if fault_timing not in kind.timings:
        wanted = " or ".join(v.said("fault_timing", t) for t in kind.timings)
        return f"{said} needs {wanted} (got {v.got(fault_timing)}): {FAULT_ACTIONS[fault]}"
    if launcher_prepares(fault) == "writer_process" and not async_save:
        return (
            f"{said} needs {v.said('async_save', 'true')}: a synchronous save writes from the training "
            "thread, with no writer process to stop"
        )
    return None


def damage_problem(
    v: Vocabulary, fault: str, checkpoint_damage: str, injections: int, fault_timing: str
) -> str | None:
    """A broken checkpoint is left by a kill right after the checkpoint completed: one injection, so that the
    replacements meet it with nothing else in the way."""
    if checkpoint_damage == "none":
        return None
    said = v.said("checkpoint_damage", checkpoint_damage)
    if not is_fault(fault, lambda f: f.damages_checkpoint):
        takers = _faults_said(v, faults_where(lambda f: f.damages_checkpoint))
        return f"{said} needs {takers} (got {v.got(fault)}): the rank that breaks it dies at once"
    if fault_timing != "checkpoint" or injections != 1:
        return (
            f"{said} needs {v.said('fault_timing', 'checkpoint')} and {v.said('injections', 1)} "
            f"(got {v.got(fault_timing)}, {v.got(injections)}): it breaks the checkpoint just completed"
        )
    return None


def setup_placement_problem(
    v: Vocabulary, fault: str, hang_placement: str, injections: int, fault_timing: str
) -> str | None:
    """A fault in a replacement's setup: injection 1 makes the replacement (placed in a step), every later
    one stops a replacement while its setup section is open."""
    if hang_placement != "setup" or family_of(fault) == "none":
        return None
    placed = v.said("hang_placement", "setup")
    if family_of(fault) in ("node", "campaign"):
        return f"{placed} places a rank fault, not {v.said('fault', fault)}"
    if fault_timing != "checkpoint":
        return f"{placed} needs {v.said('fault_timing', 'checkpoint')} (got {v.got(fault_timing)})"
    if injections < 2:
        return (
            f"{placed} needs {v.name('injections')} >= 2 (got {v.got(injections)}): only a replacement has "
            "a setup to stop after a checkpoint, and the first fault (placed in a step) makes it"
        )
    return None


def node_loss_problems(
    v: Vocabulary, nnodes: int, gpus_per_node: int, rank: int | None, injections: int, fault_timing: str
) -> list[str]:
    """node_loss takes the node of the fault rank: never the first, whose ft_launcher hosts the rendezvous
    store and the log server (losing it ends every node, whatever NVRx could do)."""
    fault = v.said("fault", "node_loss")
    if nnodes < 2:
        return [f"{fault} needs {v.name('nnodes')} >= 2 (a node must survive to report){v.multinode_hint}"]
    problems = []
    if rank is not None and rank < gpus_per_node:
        problems.append(
            f"{v.said('rank', rank)} is on the first node, which hosts the rendezvous store; {fault} needs a "
            f"rank of a later node ({gpus_per_node}..{nnodes * gpus_per_node - 1})"
        )
    if injections != 1 or fault_timing != "checkpoint":
        problems.append(
            f"{fault} takes one injection ({v.said('injections', 1)}) with "
            f"{v.said('fault_timing', 'checkpoint')}"
        )
    return problems
