"""What a qualification ran on (GPUs, Megatron or the smoke workload), read from its summary.json.

Pure: whether the machine had GPUs and whether the workload was Megatron (a model) or the smoke workload
(no model, trained on CPU with gloo wherever it runs, so its ranks hold no GPU even on a GPU machine). The
report speaks of GPUs, GPU memory and Megatron only where they were there; `ftqual compare` shows no
checkpoint rate of a run without a model.

Each fact is True, False or None (the summary does not say: a report made without a preflight from verify
reports that record no stack). None keeps the report's usual words, which are the GPU and Megatron ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

# ftqual.stack.current's `gpus` part: `1 x NVIDIA H200`, `none`, `none (no nvidia-smi)`, `unknown (...)`
_COUNTED = re.compile(r"^\s*[1-9]\d* x ")


@dataclass(frozen=True)
class Ran:
    gpu: bool | None  # the machine had GPUs
    megatron: bool | None  # the workload was Megatron-LM (a model); False: the smoke workload, no model

    @property
    def no_gpu(self) -> bool:
        """The ranks held no GPU: none on the machine, or the smoke workload (CPU ranks)."""
        return self.gpu is False or self.megatron is False

    @property
    def no_model(self) -> bool:
        return self.megatron is False

    @property
    def busy_seconds(self) -> str:
        """The unit of world size x wall time: GPU-seconds where the ranks held GPUs, rank-seconds on CPU."""
        return "rank-s" if self.no_gpu else "GPU-s"


def _gpus_part(text: object) -> bool | None:
    if not isinstance(text, str):
        return None
    if text.strip().startswith("none"):
        return False
    return True if _COUNTED.match(text) else None


def _gpu(summary: Mapping) -> bool | None:
    """The stack the verdicts were earned on (its `gpus` part, or each attempt's machine), else the
    preflight's GPU count."""
    parts = (summary.get("stack_identity") or {}).get("parts") or {}
    found = _gpus_part(parts.get("gpus"))
    if found is not None:
        return found
    for sc in summary.get("scenarios") or []:
        machine = ((sc.get("attempt") or {}) if isinstance(sc, Mapping) else {}).get("machine") or {}
        found = _gpus_part(machine.get("gpus") if isinstance(machine, Mapping) else None)
        if found is not None:
            return found
    count = (summary.get("stack") or {}).get("gpu_count")
    if isinstance(count, int) and not isinstance(count, bool):
        return count > 0
    return None


def _megatron(summary: Mapping) -> bool | None:
    """The preflight's resolved workload, else the job record (the smoke workload runs no Megatron
    arguments)."""
    workload = (summary.get("resolved") or {}).get("workload")
    if isinstance(workload, str) and workload:
        return workload == "megatron"
    job = summary.get("job")
    args = job.get("megatron_args") if isinstance(job, Mapping) else None
    return bool(args) if isinstance(args, list) else None


def what_ran(summary: Mapping) -> Ran:
    return Ran(gpu=_gpu(summary), megatron=_megatron(summary))
