"""`ftqual launch`: settings -> directories -> port -> stack -> command -> dry run or run.

`ftqual launch` (and scripts/run_megatron_gpt.sh): the walkthrough's launcher, its environment interface
unchanged.

Flow: settings from the environment -> refuse to reuse evidence or unusable directories -> hold the log
server's port -> resolve the stack's Megatron flags -> build one ft_launcher command -> dry run prints
it, a real run executes it (ftqual.launch.run).
Exit codes: ft_launcher's; 2 for any bad setting (one line on stderr, nothing created or launched);
74 when ft_launcher exited 0 but the run's logs were never written (run.json's `launcher_error` says why).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from ftqual.contract import launcher_prepares
from ftqual.launch import capped_storage, command, compat, logport, procs, run, runstate, settings
from ftqual.stack import resolve as stack

NVRX_DEFAULT_LOG_SERVER_PORT = 50051


def _prepare(argv: Sequence[str], env: Mapping[str, str], host: str) -> settings.Settings:
    s = settings.load_settings(env, argv, now=datetime.now(UTC), pid=os.getpid())
    # Directories first: a work dir that is a file must be named as such, not as an unreadable tracker.
    runstate.check_directories(s)
    runstate.check_run_state(s, host)
    runstate.check_temp_dir(env)
    return s


def _port(s: settings.Settings) -> tuple[int, logport.PortReservation | None]:
    """The log server's port, held from now on for a real single-node run (ftqual.launch.logport)."""
    if s.launchers > 1:
        # Every node must dial the store host's log server on one port: NVRx's default unless set.
        return s.log_server_port or NVRX_DEFAULT_LOG_SERVER_PORT, None
    if s.dry_run:
        return s.log_server_port or logport.free_port(), None
    reservation = logport.reserve(s.log_server_port)
    return reservation.port, reservation


def megatron_compat(s: settings.Settings) -> compat.Compat:
    """The version adaptations for the run's Megatron tree (the folder of its entrypoint)."""
    if s.workload != "megatron":
        return compat.Compat()
    from ftqual.stack.facts import megatron_version

    tree = s.megatron_path
    version = megatron_version(tree) if tree else None
    return compat.resolve(tree, s.save_interval, version, vocab_size=s.job.shape.vocab_size)


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
    try:
        adapted = megatron_compat(s)
    except compat.IncompatibleStack as exc:
        print(f"ftqual launch: {exc}", file=sys.stderr)
        return 2
    executable = command.ft_launcher_executable()
    if executable is None and not s.dry_run:
        print(
            "ft_launcher not found beside this Python or on PATH; install nvidia-resiliency-ext",
            file=sys.stderr,
        )
        return 2
    capped = launcher_prepares(s.fault) == "capped_fs"  # the run's checkpoints on a size-capped filesystem
    if capped and not s.dry_run and (problem := capped_storage.cannot_mount()):
        print(f"ftqual launch: {problem}", file=sys.stderr)
        return 2
    try:
        port, reservation = _port(s)
    except logport.PortBusy as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        initial = run.initial_checkpoint_iteration(s)
        dump_tool = command.stack_dump_tool(env)
        plan = command.build_plan(s, choice, port, executable or "ft_launcher", adapted, initial, dump_tool)
        run.make_dirs(s)
    except run.DirectoryError as exc:
        if reservation is not None:
            reservation.release()
        print(f"ftqual launch: {exc}", file=sys.stderr)
        return 2
    if s.workload == "megatron":
        for warning in choice.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        for a in plan.adaptations:
            print(f"adapted: {a.flag} {a.action}: {a.reason}", file=sys.stderr)
    print(f"Run artifacts: {s.run_dir}\nCheckpoint directory: {s.checkpoint_dir}")
    if s.dry_run:
        print(plan.shell)
        return 0
    return run.launch(s, plan, choice, host, env, reservation)
