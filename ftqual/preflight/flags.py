"""The ft_launcher command a scenario will run, built by the launcher's own code, for NVRx's parser to judge.

The environment mirrors what the workflow's run_scenario rule gives the launcher (rules/common.smk
`launcher_env`); the launcher's `load_settings` and `build_plan` turn it into the argv. Paths point into a
placeholder run directory that is never created: ft_launcher's parser only needs them absolute.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ftqual.preflight.config import PreflightConfig, Scenario

PLACEHOLDER_HOST = "preflight-rdzv-host:29400"  # multi-node runs get the real endpoint from Slurm


@dataclass(frozen=True)
class BuiltArgv:
    scenario: str
    argv: list[str]  # after the ft_launcher executable
    source: str
    error: str | None = None  # the launcher itself refused these settings (it would exit 2)


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def scenario_env(cfg: PreflightConfig, s: Scenario, work_dir: str, log_port: int | None) -> dict[str, str]:
    """The launcher environment of one scenario (docs/architecture.md's variables)."""
    t = s.timeouts
    env = {
        "NVRX_WORKLOAD": cfg.workload,
        "NVRX_SCENARIO": s.name,
        "NVRX_WORK_DIR": work_dir,
        "NVRX_RUN_ID": f"{s.name}-preflight",
        "NNODES": str(s.nnodes),
        "GPUS_PER_NODE": str(s.gpus_per_node),
        "TP": str(s.tp),
        "PP": str(s.pp),
        "TRAIN_ITERS": str(s.train_iters),
        "SAVE_INTERVAL": str(s.save_interval),
        "NVRX_DEMO_FAULT": s.fault,
        "NVRX_SECTION_TIMEOUTS": ",".join(
            f"{name}:{_num(getattr(t, name))}" for name in ("setup", "step", "checkpointing")
        ),
        "NVRX_OUT_OF_SECTION_TIMEOUT": _num(t.out_of_section),
        "NVRX_MAX_RESTARTS": str(s.max_restarts),
        "NVRX_TERM_TIMEOUT": str(s.term_timeout),
        "NVRX_TRANSFORMER_IMPL": s.transformer_impl,
        "NVRX_DIST_OPTIMIZER": s.dist_optimizer,
        "NVRX_HANG_PLACEMENT": s.hang_placement,
        "NVRX_DRY_RUN": "1",
    }
    if s.rank is not None:
        env["NVRX_FAULT_RANK"] = str(s.rank)
    if s.nnodes > 1:
        env["RDZV_ENDPOINT"] = PLACEHOLDER_HOST
    if cfg.megatron_path:
        env["MEGATRON_PATH"] = cfg.megatron_path
    if s.checkpoint_dir:
        env["NVRX_CHECKPOINT_DIR"] = s.checkpoint_dir
    if log_port:
        env["NVRX_LOG_SERVER_PORT"] = str(log_port)
    return env


def build_argv(
    cfg: PreflightConfig, s: Scenario, stack_probe: object, work_dir: str, log_port: int
) -> BuiltArgv:
    """The argv the launcher would exec for scenario `s` (after the executable)."""
    from ftqual.launch import command, settings, stack

    env: Mapping[str, str] = scenario_env(cfg, s, work_dir, log_port)
    source = "built by ftqual.launch"
    if cfg.workload == "megatron" and not _has_entrypoint(cfg.megatron_path):
        # Launcher flags do not depend on the workload; check them even before Megatron is in place
        # (the megatron_path check reports the missing tree).
        env = {**env, "NVRX_WORKLOAD": "smoke"}
        source += " (launcher flags only: no Megatron tree)"
    try:
        sett = settings.load_settings(env, (), pid=os.getpid())
    except settings.SettingsError as exc:
        return BuiltArgv(s.name, [], source, str(exc))
    choice = stack.resolve(sett.transformer_impl, sett.dist_optimizer, stack_probe)
    plan = command.build_plan(sett, choice, log_port, "ft_launcher")
    return BuiltArgv(s.name, plan.argv[1:], source)


def _has_entrypoint(path: str | None) -> bool:
    return bool(path) and os.path.isfile(os.path.join(path, "pretrain_gpt.py"))
