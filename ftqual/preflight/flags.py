"""The ft_launcher command a scenario will run, built by the launcher's own code, for NVRx's parser to judge.

The environment is the one the workflow gives the launcher (ftqual.scenario.model.launcher_env); the
launcher's
`load_settings` and `build_plan` turn it into the argv. Paths point into a placeholder run directory that
is never created: ft_launcher's parser only needs them absolute.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ftqual.scenario.model import Scenario, WorkflowConfig, launcher_env

PLACEHOLDER_HOST = "preflight-rdzv-host:29400"  # multi-node runs get the real endpoint from Slurm


@dataclass(frozen=True)
class BuiltArgv:
    scenario: str
    argv: list[str]  # after the ft_launcher executable
    source: str
    error: str | None = None  # the launcher itself refused these settings (it would exit 2)
    adaptations: tuple = ()  # ftqual.launch.compat.Adaptation: flags changed for this Megatron version


def scenario_env(cfg: WorkflowConfig, s: Scenario, work_dir: str, log_port: int | None) -> dict[str, str]:
    """The launcher environment the workflow gives scenario `s` (ftqual.scenario.model.launcher_env), in
    dry-run
    mode, with a placeholder run ID and, for several nodes, a placeholder rendezvous endpoint."""
    env = launcher_env(cfg, s)
    env.update(NVRX_WORK_DIR=work_dir, NVRX_RUN_ID=f"{s.name}-preflight", NVRX_DRY_RUN="1")
    if s.multinode:
        env["RDZV_ENDPOINT"] = PLACEHOLDER_HOST
    if log_port:
        env["NVRX_LOG_SERVER_PORT"] = str(log_port)
    return env


def build_argv(
    cfg: WorkflowConfig, s: Scenario, stack_probe: object, work_dir: str, log_port: int
) -> BuiltArgv:
    """The argv the launcher would exec for scenario `s` (after the executable)."""
    from ftqual.launch import command, compat, megatron_compat, settings
    from ftqual.stack import resolve as stack

    env: Mapping[str, str] = scenario_env(cfg, s, work_dir, log_port)
    source = "built by ftqual.launch"
    if cfg.workload == "megatron" and not has_entrypoint(cfg.megatron_path):
        # Launcher flags do not depend on the workload; check them even before Megatron is in place
        # (the megatron_path check reports the missing tree).
        env = {**env, "NVRX_WORKLOAD": "smoke"}
        source += " (launcher flags only: no Megatron tree)"
    try:
        sett = settings.load_settings(env, (), pid=os.getpid())
    except settings.SettingsError as exc:
        return BuiltArgv(s.name, [], source, str(exc))
    choice = stack.resolve(sett.transformer_impl, sett.dist_optimizer, stack_probe)
    try:
        adapted = megatron_compat(sett)
    except compat.IncompatibleStack as exc:
        return BuiltArgv(s.name, [], source, str(exc))
    plan = command.build_plan(sett, choice, log_port, "ft_launcher", adapted)
    return BuiltArgv(s.name, plan.argv[1:], source, adaptations=plan.adaptations)


def has_entrypoint(path: str | None) -> bool:
    return bool(path) and os.path.isfile(os.path.join(path, "pretrain_gpt.py"))
