"""Run one ft_launcher command: write run.json, start ft_launcher in its own session, record its process
group, forward SIGTERM/SIGINT, make sure nothing of the run survives, then fill exit_code/finished_at.

ft_launcher gets its own session so a signal meant for our launcher (a terminal's Ctrl-C, Snakemake) is
forwarded once, by us, and followed by a deadline: a SIGSTOPped rank ignores SIGTERM, so after
term-timeout plus a margin every recorded process group of the run is killed (ftqual.cleanup).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ftqual import cleanup, procs
from ftqual.launch.command import LaunchPlan
from ftqual.launch.settings import Settings
from ftqual.launch.stack import StackChoice

RUN_SCHEMA = "ftqual.run/v1"
# Kept in the workers' environment whatever the caller set: NVLink multicast (NVLS) must stay off on the
# lent machines, and timestamps are only comparable in one zone.
CHILD_ENV = {
    "TZ": "UTC",
    "PYTHONUNBUFFERED": "1",
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# Extra wait after term-timeout before we stop trusting ft_launcher's own shutdown.
SHUTDOWN_MARGIN_S = 60
EXIT_CANNOT_START = 127  # as a shell reports a command it cannot run


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write via a temporary file and rename, so a reader never sees half a record."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh, indent=2)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def free_port() -> int:
    """A TCP port free right now, for the gRPC log server (50051 collides between concurrent runs)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def tz_offset_s(env: dict[str, str]) -> int:
    """UTC offset of the local clock under the workers' TZ (Megatron prints naive local times)."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = env.get("TZ", "UTC")
    time.tzset()
    try:
        offset = datetime.now().astimezone().utcoffset()
        return int(offset.total_seconds()) if offset else 0
    finally:
        if saved is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = saved
        time.tzset()


def child_env(base: dict[str, str], tp: int = 1) -> dict[str, str]:
    env = dict(base)
    env.update(CHILD_ENV)
    if tp > 1:
        # Megatron asserts at start with tensor parallelism unless CUDA_DEVICE_MAX_CONNECTIONS is 1
        # (seen on 2 x H200 with TP=2: every cycle died, the launcher gave up with exit 1).
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    return env


def run_record(
    s: Settings, plan: LaunchPlan, stack: StackChoice, env: dict[str, str], host: str
) -> dict[str, Any]:
    """run.json as written before the launch: the contract keys first, then our extensions."""
    return {
        "schema": RUN_SCHEMA,
        "run_id": s.run_id,
        "scenario": s.scenario,
        "fault": s.fault,
        "fault_rank": s.fault_rank,
        "world_size": s.world_size,
        "train_iters": s.train_iters,
        "save_interval": s.save_interval,
        "checkpoint_dir": "checkpoints" if s.checkpoint_dir_is_default else str(s.checkpoint_dir),
        "max_restarts": s.max_restarts,
        "timeouts": s.timeouts_record(),
        "started_at": utc_now(),
        "finished_at": None,
        "exit_code": None,
        "workload": s.workload,
        "hang_placement": s.hang_placement if s.fault != "none" else None,
        "global_batch_size": s.global_batch_size,
        "tz_offset_s": tz_offset_s(env),
        "command": plan.argv,
        "nnodes": s.nnodes,
        "gpus_per_node": s.gpus_per_node,
        "tp": s.tp,
        "pp": s.pp,
        "megatron_flags": plan.megatron_flags,
        "dist_optimizer": stack.dist_optimizer,
        "transformer_impl": stack.transformer_impl if s.workload == "megatron" else None,
        "log_server_port": plan.log_server_port,
        "term_timeout": s.term_timeout,
        "workers_stop_timeout": s.workers_stop_timeout,
        "extra_args": list(s.extra_args),
        "host": host,
        "interrupted_by": None,
    }


def make_dirs(s: Settings) -> None:
    for path in (s.run_dir / "logs", s.run_dir / "cycle_infos", s.run_dir / "pids", s.checkpoint_dir):
        path.mkdir(parents=True, exist_ok=True)


class _Signals:
    """Remember the first SIGTERM/SIGINT and forward it to ft_launcher; a second one means: kill now."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.first: int | None = None
        self.hurry = False
        self.previous = {sig: signal.signal(sig, self.handle) for sig in (signal.SIGTERM, signal.SIGINT)}

    def attach(self, pid: int) -> None:
        self.pid = pid
        if self.first is not None:  # the signal came while ft_launcher was starting
            self.forward()

    def forward(self) -> None:
        if self.pid is None:
            return
        try:
            # ft_launcher forwards it to the workers and SIGKILLs them after --term-timeout.
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass

    def handle(self, signum: int, _frame: object) -> None:
        if self.first is None:
            self.first = signum
            self.forward()
        else:
            self.hurry = True

    def restore(self) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)


def _wait(proc: subprocess.Popen, signals: _Signals, term_timeout: int) -> int | None:
    """Wait for ft_launcher; after a forwarded signal, only until term-timeout plus a margin."""
    deadline = None
    while True:
        try:
            return proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        if signals.first is not None and deadline is None:
            deadline = time.monotonic() + term_timeout + SHUTDOWN_MARGIN_S
        if signals.hurry or (deadline is not None and time.monotonic() > deadline):
            return None


def launch(
    s: Settings, plan: LaunchPlan, stack: StackChoice, host: str, base_env: Mapping[str, str] | None = None
) -> int:
    """Start ft_launcher and see it through; returns our exit code (ft_launcher's, 128+N for a signal)."""
    env = child_env(dict(os.environ if base_env is None else base_env), tp=s.tp)
    run_json = s.run_dir / "run.json"
    record = run_record(s, plan, stack, env, host)
    writes_run_json = s.node_rank == 0
    if writes_run_json:
        write_json_atomic(run_json, record)
        (s.run_dir / "command.txt").write_text(plan.shell + "\n")
    sys.stdout.flush()

    signals = _Signals()
    try:
        try:
            proc = subprocess.Popen(plan.argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            print(f"ftqual launch: cannot start {plan.argv[0]}: {exc}", file=sys.stderr)
            return _finish(record, run_json, writes_run_json, EXIT_CANNOT_START, signals)
        signals.attach(proc.pid)
        try:
            launcher_rec = procs.pid_record(proc.pid) | {"host": host, "command": plan.argv}
            write_json_atomic(s.run_dir / "pids" / f"{host}.launcher.json", launcher_rec)
        except ProcessLookupError:
            pass  # it already exited (a bad flag): its exit code tells the story
        rc = _wait(proc, signals, s.term_timeout)
        # Whatever happened, nothing of this run may outlive us on this host.
        report = cleanup.kill_run(s.run_dir, host)
        if rc is None:
            rc = proc.wait()
        if report.killed:
            pids = ", ".join(str(item["pid"]) for item in report.killed)
            print(
                f"ftqual launch: killed {len(report.killed)} leftover process(es) of run {s.run_id}: {pids}",
                file=sys.stderr,
            )
    finally:
        signals.restore()

    return _finish(record, run_json, writes_run_json, rc, signals)


def _finish(record: dict[str, Any], run_json: Path, writes_run_json: bool, rc: int, signals: _Signals) -> int:
    if writes_run_json:
        record["exit_code"] = rc
        record["finished_at"] = utc_now()
        if signals.first is not None:
            record["interrupted_by"] = signal.Signals(signals.first).name
        write_json_atomic(run_json, record)
    return rc if rc >= 0 else 128 - rc
