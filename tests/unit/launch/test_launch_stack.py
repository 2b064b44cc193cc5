"""Resolution of the stack-dependent Megatron flags from what is installed (find_spec only)."""

from __future__ import annotations

import pytest

from ftqual.stack.resolve import Probe, probe, resolve

LOCAL = [
    "--transformer-impl",
    "local",
    "--no-gradient-accumulation-fusion",
    "--no-persist-layer-norm",
    "--no-masked-softmax-fusion",
]


def test_no_te_no_apex_uses_local_and_no_distributed_optimizer():
    choice = resolve("auto", "auto", Probe(transformer_engine=False, apex=False, apex_grad_acc_fusion=False))
    assert choice.transformer_impl == "local"
    assert choice.megatron_flags == LOCAL
    assert choice.dist_optimizer is False
    assert "does not resume" in choice.reasons["dist_optimizer"]
    assert choice.warnings == []


def test_te_without_apex_disables_gradient_accumulation_fusion():
    choice = resolve("auto", "auto", Probe(transformer_engine=True, apex=False, apex_grad_acc_fusion=False))
    assert choice.megatron_flags == [
        "--transformer-impl",
        "transformer_engine",
        "--no-gradient-accumulation-fusion",
    ]
    assert choice.dist_optimizer is True


def test_te_with_apex_extension_keeps_fusion():
    choice = resolve("auto", "auto", Probe(transformer_engine=True, apex=True, apex_grad_acc_fusion=True))
    assert choice.megatron_flags == ["--transformer-impl", "transformer_engine"]
    assert choice.dist_optimizer is True


def test_apex_without_te_runs_local_with_fusion():
    choice = resolve("auto", "auto", Probe(transformer_engine=False, apex=True, apex_grad_acc_fusion=True))
    assert choice.megatron_flags == [
        "--transformer-impl",
        "local",
        "--no-persist-layer-norm",
        "--no-masked-softmax-fusion",
    ]
    assert choice.dist_optimizer is True


def test_explicit_local_on_a_te_stack():
    choice = resolve("local", "off", Probe(transformer_engine=True, apex=False, apex_grad_acc_fusion=False))
    assert choice.megatron_flags == LOCAL and choice.dist_optimizer is False


@pytest.mark.parametrize(
    ("impl", "dist", "warning"),
    [
        ("transformer_engine", "auto", "transformer_engine is not importable"),
        ("auto", "on", "cannot resume this checkpoint"),
    ],
)
def test_explicit_settings_that_cannot_work_warn(impl, dist, warning):
    choice = resolve(impl, dist, Probe(transformer_engine=False, apex=False, apex_grad_acc_fusion=False))
    assert any(warning in w for w in choice.warnings)


def test_probe_uses_find_spec_without_importing():
    asked = []
    found = probe(lambda name: asked.append(name) or name == "apex")
    assert asked == ["transformer_engine", "apex", "fused_weight_gradient_mlp_cuda"]
    assert found == Probe(transformer_engine=False, apex=True, apex_grad_acc_fusion=False)


def test_probe_of_this_interpreter_is_cheap_and_boolean():
    found = probe()
    flags = (found.transformer_engine, found.apex, found.apex_grad_acc_fusion)
    assert all(isinstance(v, bool) for v in flags)
