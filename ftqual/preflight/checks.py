"""Preflight checks: the registry, in report order (result type and verdict: check_base.py).

Each check is a pure function of a Context (check_base.py) returning one CheckResult or a list; they live
in checks_stack.py, checks_megatron.py and checks_host.py.
"""

from __future__ import annotations

from collections.abc import Callable

from ftqual.preflight.check_base import FAIL, PASS, SKIP, WARN, CheckResult, Context, verdict
from ftqual.preflight.checks_agent import check_restart_agent
from ftqual.preflight.checks_host import (
    check_checkpoint_dir,
    check_disk_space,
    check_gpu_memory,
    check_log_server_port,
    check_scenarios,
    check_shared_fs,
    check_storage_floor,
    check_tmpdir,
    check_work_dir,
)
from ftqual.preflight.checks_megatron import (
    check_apex,
    check_build_tools,
    check_dist_optimizer,
    check_megatron_args,
    check_megatron_imports,
    check_megatron_path,
    check_megatron_version,
    check_parallelism,
    check_transformer_engine,
    check_transformer_impl,
)
from ftqual.preflight.checks_stack import (
    check_cuda,
    check_ft_launcher,
    check_ft_launcher_flags,
    check_gpus,
    check_launcher_settings,
    check_nvrx,
    check_nvrx_env,
    check_python,
    check_stack_dumps,
    check_torch,
    check_workload,
)

__all__ = ["CHECKS", "FAIL", "PASS", "SKIP", "WARN", "CheckResult", "Context", "run_checks", "verdict"]

CHECKS: tuple[Callable[[Context], CheckResult | list[CheckResult]], ...] = (
    check_workload,
    check_python,
    check_torch,
    check_cuda,
    check_gpus,
    check_nvrx,
    check_ft_launcher,
    check_launcher_settings,
    check_ft_launcher_flags,
    check_nvrx_env,
    check_stack_dumps,
    check_megatron_path,
    check_megatron_version,
    check_megatron_imports,
    check_megatron_args,
    check_build_tools,
    check_transformer_engine,
    check_apex,
    check_transformer_impl,
    check_dist_optimizer,
    check_parallelism,
    check_work_dir,
    check_shared_fs,
    check_checkpoint_dir,
    check_disk_space,
    check_gpu_memory,
    check_storage_floor,
    check_tmpdir,
    check_log_server_port,
    check_restart_agent,
    check_scenarios,
)


def run_checks(ctx: Context) -> list[CheckResult]:
    results: list[CheckResult] = []
    for check in CHECKS:
        out = check(ctx)
        results.extend(out if isinstance(out, list) else [out])
    return results
