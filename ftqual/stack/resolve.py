"""Resolve the stack-dependent Megatron flags (`auto` settings) from what is installed.

The one resolution of the stack: the launcher runs it inside the training job, and the preflight feeds it
the facts it probed (ftqual.stack.facts.resolve_for_stack), so what the preflight reports is what the
launcher will run.
Only `importlib.util.find_spec` is used: it finds a top-level module without importing it, so this is
cheap and safe on a login node where importing Transformer Engine would need a GPU driver.
Why each flag (Megatron core_v0.19, measured on H200: docs/benchmarks.md, docs/gpu-qualification/):
- without Transformer Engine the `local` transformer needs `--no-persist-layer-norm` (torch norm asserts) and
  `--no-masked-softmax-fusion` (fused softmax kernels come from Apex/TE);
- `--no-gradient-accumulation-fusion` unless Apex's `fused_weight_gradient_mlp_cuda` extension exists (the LM
  head needs it even with TE);
- a `--use-distributed-optimizer` checkpoint does not resume without TE and Apex, so `auto` turns it off
  there.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field

LOCAL_ONLY_FLAGS = ["--no-persist-layer-norm", "--no-masked-softmax-fusion"]
NO_GRAD_ACC_FUSION = "--no-gradient-accumulation-fusion"

TRANSFORMER_IMPLS = ("auto", "local", "transformer_engine")
DIST_OPTIMIZER_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class Probe:
    """Which optional modules this interpreter can import."""

    transformer_engine: bool
    apex: bool
    apex_grad_acc_fusion: bool  # Apex's fused_weight_gradient_mlp_cuda extension


@dataclass(frozen=True)
class StackChoice:
    """What `auto` became on a stack; `warnings` are notes on explicit settings that cannot work."""

    transformer_impl: str  # "local" or "transformer_engine"
    dist_optimizer: bool
    megatron_flags: list[str]  # the stack-dependent flags, in command order
    reasons: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    workload: str = "megatron"

    def to_json(self) -> dict:
        """The `resolved` object of preflight.json (docs/interfaces.md); warnings go to the checks."""
        return {
            "workload": self.workload,
            "transformer_impl": self.transformer_impl,
            "dist_optimizer": self.dist_optimizer,
            "megatron_flags": list(self.megatron_flags),
            "reasons": dict(self.reasons),
        }


def module_present(name: str) -> bool:
    """Whether a top-level module can be found, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def probe(has_module: Callable[[str], bool] = module_present) -> Probe:
    return Probe(
        transformer_engine=has_module("transformer_engine"),
        apex=has_module("apex"),
        apex_grad_acc_fusion=has_module("fused_weight_gradient_mlp_cuda"),
    )


def resolve(transformer_impl: str, dist_optimizer: str, found: Probe) -> StackChoice:
    """Turn the `auto|...` settings into concrete choices and Megatron flags for this stack."""
    reasons: dict[str, str] = {}
    warnings: list[str] = []
    if transformer_impl == "auto":
        impl = "transformer_engine" if found.transformer_engine else "local"
        reasons["transformer_impl"] = (
            "transformer_engine is importable"
            if found.transformer_engine
            else "transformer_engine is not installed"
        )
    else:
        impl = transformer_impl
        reasons["transformer_impl"] = f"set to {transformer_impl}"
        if impl == "transformer_engine" and not found.transformer_engine:
            warnings.append(
                "NVRX_TRANSFORMER_IMPL=transformer_engine but transformer_engine is not importable"
            )

    flags = ["--transformer-impl", impl]
    if found.apex_grad_acc_fusion:
        reasons["gradient_accumulation_fusion"] = "on: Apex's fused_weight_gradient_mlp_cuda is installed"
    else:
        flags.append(NO_GRAD_ACC_FUSION)
        reasons["gradient_accumulation_fusion"] = (
            "off: Apex's fused_weight_gradient_mlp_cuda is not installed"
        )
    if impl == "local":
        flags += LOCAL_ONLY_FLAGS

    can_resume_dist_opt = found.transformer_engine or found.apex
    if dist_optimizer == "auto":
        use_dist = can_resume_dist_opt
        reasons["dist_optimizer"] = (
            "on: Transformer Engine or Apex is installed"
            if use_dist
            else "off: without Transformer Engine and Apex a distributed-optimizer checkpoint does not "
            "resume in Megatron core 0.19 (assert in DistributedOptimizer.state_dict)"
        )
    else:
        use_dist = dist_optimizer == "on"
        reasons["dist_optimizer"] = f"set to {dist_optimizer}"
        if use_dist and not can_resume_dist_opt:
            warnings.append(
                "NVRX_DIST_OPTIMIZER=on without Transformer Engine and Apex: Megatron core 0.19 "
                "cannot resume this checkpoint; expect restarts until the no-progress stop "
                "(exit 93)"
            )
    return StackChoice(
        transformer_impl=impl,
        dist_optimizer=use_dist,
        megatron_flags=flags,
        reasons=reasons,
        warnings=warnings,
    )
