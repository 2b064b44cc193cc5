"""Faults that come back (family `recurring`): whether a cycle injects, and where its injection lands.

Faults that come back (contract family `recurring`): whether the fault rank injects in this cycle, where in
the cycle the injection lands, and the NaN that poisons a batch (nan_loss).

A recurring fault is injected in every cycle, with no count to reach (the markers still number them:
fault_injected.json for the first, claimed once, fault_injected.<k>.json for the k-th, as several injections
of a curable fault are). Where it lands is decided at the worker's start from what the rank knows then, the
markers earlier cycles claimed and the tracker's value (the checkpoint this cycle resumes):

- `checkpoint`: no injection yet (or nothing to resume): train until the tracker passes the cycle's start,
  then inject at the next `step` section's start, the first iteration after that checkpoint K (K+1 where the
  save was finalized before that step: synchronous saves);
- `first_step`: a later cycle of recurring_exception or nan_loss resumes K and injects as the workload
  closes its `setup` section, which Megatron's ft_integration (and the smoke workload) do at the start of
  the first training step, iteration K+1 again, before the monitor knows setup closed;
- `setup`: a later cycle of setup_crash injects as the workload opens its `setup` section, before the model,
  the optimizer or the checkpoint: a device that fails at initialisation on every start.

The standard library only, as everything in ftqual.rank: torch is the workload's, found in sys.modules once
the workload imported it (an injection lands after the workload's setup began, never before).
"""

from __future__ import annotations

import sys

from ftqual.contract import FAULT_KINDS, RECURRING_FAULTS

CHECKPOINT, FIRST_STEP, SETUP = "checkpoint", "first_step", "setup"
TRIGGERS = (CHECKPOINT, FIRST_STEP, SETUP)


def is_recurring(fault: str) -> bool:
    return fault in RECURRING_FAULTS


def injects_now(fault: str, made: int, injections: int) -> bool:
    """Whether the fault rank arms an injection in this cycle: a recurring fault in every cycle, any other
    while fewer than `injections` markers exist."""
    return is_recurring(fault) or made < injections


def trigger(fault: str, made: int, baseline: int) -> str:
    """Where this cycle's injection of a recurring fault lands (CHECKPOINT, FIRST_STEP, SETUP), from the
    markers earlier cycles claimed (`made`) and the tracker's value at the cycle's start (`baseline`)."""
    if made == 0 or baseline < 1:
        return CHECKPOINT  # the first fault follows a checkpoint of this run; so does one with none to resume
    # where the registry's entry says it comes back: the first step, or setup (RECURS_AT)
    return SETUP if FAULT_KINDS[fault].recurs_at == SETUP else FIRST_STEP


class InjectedDeviceFailure(RuntimeError):
    """setup_crash: the error a rank meets when its device fails, raised on the training thread."""


def raise_device_failure(rank: int, where: str) -> None:
    raise InjectedDeviceFailure(f"ftqual injected a device failure on rank {rank} ({where})")


def is_embedding(module: object) -> bool:
    """The modules whose output a poisoned batch enters through: every embedding (torch.nn.Embedding,
    Megatron's VocabParallelEmbedding and LanguageModelEmbedding), by their class name, as this package never
    imports torch or Megatron."""
    return type(module).__name__.endswith("Embedding")


class Poison:
    """nan_loss: a batch whose embeddings are NaN. A torch forward hook on every module, which adds NaN to the
    output of every embedding while it is on: the loss computed from that batch is NaN through the model's
    own arithmetic, and the job's NaN check (Megatron's --check-for-nan-in-loss-and-grad) must raise. It is
    on for one iteration: from the start of the step it was turned on in until the next step section
    starts (a rerun of that iteration, as Megatron's rerun state machine makes one, meets the same batch)."""

    def __init__(self) -> None:
        self.handle = None
        self.steps_at_start: int | None = None

    def hook(self, module, args, output):
        torch = sys.modules.get("torch")
        if torch is None or not is_embedding(module) or not isinstance(output, torch.Tensor):
            return None
        if not output.is_floating_point():
            return None
        return output + float("nan")

    def start(self, steps_seen: int) -> None:
        """Turn it on: torch's global forward hook (torch is imported by the workload by now)."""
        torch = sys.modules["torch"]
        self.steps_at_start = steps_seen
        self.handle = torch.nn.modules.module.register_module_forward_hook(self.hook)

    def on_step_start(self, steps_seen: int) -> bool:
        """A `step` section started; the poison ends at the first one after its own. True once it ended."""
        if self.handle is None or self.steps_at_start is None or steps_seen <= self.steps_at_start:
            return False
        self.handle.remove()
        self.handle = None
        return True
