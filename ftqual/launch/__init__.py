"""`ftqual launch` (and scripts/run_megatron_gpt.sh): the seed's launcher, environment interface unchanged.

Flow: settings from the environment -> refuse to reuse evidence -> resolve the stack's Megatron flags ->
build one ft_launcher command -> dry run prints it, a real run executes it (ftqual.launch.run).
Exit codes: ft_launcher's; 2 for any bad setting (one line on stderr, nothing created or launched).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from ftqual import procs
from ftqual.launch import command, run, settings, stack

NVRX_DEFAULT_LOG_SERVER_PORT = 50051


def _prepare(argv: Sequence[str], env: Mapping[str, str], host: str) -> settings.Settings:
    s = settings.load_settings(env, argv, now=datetime.now(UTC), pid=os.getpid())
    settings.check_run_state(s, host)
    return s


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    env = os.environ if env is None else env
    host = procs.host_name()
    try:
        s = _prepare(argv, env, host)
    except settings.SettingsError as exc:
        print(exc, file=sys.stderr)
        return 2

    choice = stack.resolve(s.transformer_impl, s.dist_optimizer, stack.probe())
    executable = command.ft_launcher_executable()
    if executable is None and not s.dry_run:
        print(
            "ft_launcher not found beside this Python or on PATH; install nvidia-resiliency-ext",
            file=sys.stderr,
        )
        return 2
    # Every node must dial the store host's log server on one port: multi-node runs keep NVRx's default
    # unless NVRX_LOG_SERVER_PORT says otherwise; a single node takes a free port (runs may share the host).
    port = s.log_server_port or (NVRX_DEFAULT_LOG_SERVER_PORT if s.nnodes > 1 else run.free_port())
    plan = command.build_plan(s, choice, port, executable or "ft_launcher")
    if s.workload == "megatron":
        for warning in choice.warnings:
            print(f"warning: {warning}", file=sys.stderr)

    run.make_dirs(s)
    print(f"Run artifacts: {s.run_dir}\nCheckpoint directory: {s.checkpoint_dir}")
    if s.dry_run:
        print(plan.shell)
        return 0
    return run.launch(s, plan, choice, host, env)
