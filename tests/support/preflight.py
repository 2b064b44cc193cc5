"""Made-up facts for the pure preflight checks (a GPU node like the recorded H200 one)."""

from __future__ import annotations

from dataclasses import replace

from ftqual.preflight.probes import DirFacts, Facts, MegatronFacts, PortFacts, ToolFacts
from ftqual.stack.facts import StackFacts

GIB = 2**30

# A GPU node like the recorded H200 one: torch with CUDA, 2 GPUs, NVRx 0.7.0, no TE, no Apex.
H200_STACK = StackFacts(
    python="3.12.3",
    torch="2.11.0",
    cuda="13.0",
    nccl="2.27.7",
    gpu_model="NVIDIA H200",
    gpu_count=2,
    driver="580.65",
    nvrx="0.7.0",
    megatron="0.19.1",
    transformer_engine=None,
    apex=None,
    host="gpu01",
    apex_wgrad_ext=False,
    nccl_backend=True,
    gloo_backend=True,
)


def good_tools() -> ToolFacts:
    return ToolFacts(
        make="/usr/bin/make",
        cxx="/usr/bin/g++",
        python3="/venv/bin/python3",
        python3_version="3.12.3",
        python3_config="/usr/bin/python3-config",
        python3_config_suffix=".cpython-312-x86_64-linux-gnu.so",
        training_suffix=".cpython-312-x86_64-linux-gnu.so",
        pybind11=True,
    )


def good_facts(**overrides) -> Facts:
    facts = Facts(
        stack=H200_STACK,
        python_executable="/venv/bin/python",
        tmpdir="/tmp",
        pid_max=4194304,
        env={},
        work_dir=DirFacts(
            path="/lus/ftqual",
            absolute=True,
            exists=True,
            probe_path="/lus/ftqual",
            writable=True,
            fs_type="lustre",
            mount_point="/lus",
            free_bytes=500 * GIB,
        ),
        tools=good_tools(),
        megatron=MegatronFacts(
            path="/opt/mlm",
            exists=True,
            pretrain_gpt=True,
            version="0.19.1",
            datasets_writable=True,
            helper_built=False,
        ),
        ports=PortFacts(ephemeral_ok=True, default_in_use=False),
        ft_launcher_exe="/venv/bin/ft_launcher",
    )
    return replace(facts, **overrides)
