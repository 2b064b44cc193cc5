"""Run one ft_launcher command: run.json, ft_launcher in its own session, signals, pids/.

Run one ft_launcher command: write run.json, start ft_launcher in its own session, record its process
group, forward SIGTERM/SIGINT/SIGHUP, make sure nothing of the run survives, then fill exit_code/finished_at.

A run whose logs never came into being (ft_launcher's log server could not serve) is a failed run: the
cause goes to stderr and to run.json's `launcher_error`, and we exit non-zero even when ft_launcher
said 0 (ftqual.launch.logport explains the port it needs and how we hold it).

ft_launcher gets its own session so a signal meant for our launcher (a terminal's Ctrl-C, Snakemake) is
forwarded once, by us, and followed by a deadline: a SIGSTOPped rank ignores SIGTERM, so after
term-timeout plus a margin every recorded process group of the run is killed (ftqual.launch.cleanup).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ftqual.contract import family_of, launcher_prepares
from ftqual.jsonfile import write_json_atomic as write_json_atomic  # re-exported
from ftqual.launch import (
    capped_storage,
    cleanup,
    logport,
    procs,
    restart_agent,
    runstate,
    stop_grace,
)
from ftqual.launch.checkpoint_record import record_at_end
from ftqual.launch.command import LaunchPlan
from ftqual.launch.run_schema import RunRecord, iso_z
from ftqual.launch.settings import Settings, SettingsError
from ftqual.scenario import campaign_plan
from ftqual.scenario import job as jobshape
from ftqual.stack.resolve import StackChoice

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
EXIT_LOGS_LOST = 74  # EX_IOERR: ft_launcher said 0 but the run's logs were never written
# How long after the start we watch the log server's own log for a failure (it binds within seconds).
SERVER_WATCH_S = 120


def utc_now() -> str:
    return iso_z(datetime.now(UTC)) or ""


free_port = logport.free_port  # kept for callers of the earlier name


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


# What deterministic training needs of the environment (replay exact): Megatron-LM's --deterministic-mode
# asserts NCCL_ALGO is set to one of its deterministic choices; cuBLAS needs a fixed workspace, Transformer
# Engine its non-deterministic algorithms off.
DETERMINISTIC_ENV = {
    "NCCL_ALGO": "Ring",
    "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
    "NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0",
}


def child_env(
    base: dict[str, str], tp: int = 1, run_id: str | None = None, deterministic: bool = False
) -> dict[str, str]:
    env = dict(base)
    env.update(CHILD_ENV)
    if deterministic:
        env.update(DETERMINISTIC_ENV)
    if run_id is not None:
        # Everything ft_launcher starts inherits it: the proof `ftqual cleanup` asks for before a signal.
        env[procs.RUN_ID_ENV] = run_id
    if tp > 1:
        # Megatron asserts at start with tensor parallelism unless CUDA_DEVICE_MAX_CONNECTIONS is 1
        # (seen on 2 x H200 with TP=2: every cycle died, the launcher gave up with exit 1).
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    return env


def initial_checkpoint_iteration(s: Settings) -> int:
    """The tracker's iteration in the checkpoint directory before the launch; 0 when absent.

    check_run_state has already refused a tracker that cannot be this run's; one that went bad since
    counts as absent here (the workers refuse to start on it)."""
    try:
        return runstate.read_tracker(s.tracker_path) or 0
    except SettingsError:
        return 0


def job_record(s: Settings, stack: StackChoice) -> dict[str, Any]:
    """run.json's `job`: the model and the arguments that ran, its shape's digest and estimates."""
    return jobshape.record(
        s.job, s.tp, s.pp, s.data_parallel_size, bool(stack.dist_optimizer),
        flash_attention=stack.transformer_impl == "transformer_engine", workload=s.workload,
    )  # fmt: skip


def run_record(
    s: Settings, plan: LaunchPlan, stack: StackChoice, env: dict[str, str], host: str
) -> RunRecord:
    """run.json as written before the launch (ftqual.launch.run_schema.RunRecord)."""
    return RunRecord(
        run_id=s.run_id,
        scenario=s.scenario,
        fault=s.fault,
        fault_rank=s.fault_rank,
        world_size=s.world_size,
        train_iters=s.train_iters,
        save_interval=s.save_interval,
        checkpoint_dir="checkpoints" if s.checkpoint_dir_is_default else str(s.checkpoint_dir),
        max_restarts=s.max_restarts,
        timeouts=s.timeouts_record(),
        started_at=datetime.now(UTC),
        workload=s.workload,
        hang_placement=s.hang_placement if family_of(s.fault) != "none" else None,
        global_batch_size=s.global_batch_size,
        batch=s.batch_record(),
        evaluation=s.evaluation_record(),
        tz_offset_s=tz_offset_s(env),
        command=plan.argv,
        nnodes=s.nnodes,
        gpus_per_node=s.gpus_per_node,
        tp=s.tp,
        pp=s.pp,
        megatron_flags=plan.megatron_flags,
        adaptations=[a.to_json() for a in plan.adaptations],
        dist_optimizer=stack.dist_optimizer,
        transformer_impl=stack.transformer_impl if s.workload == "megatron" else None,
        log_server_port=plan.log_server_port,
        stack_dump_tool=plan.dump_tool,
        term_timeout=s.term_timeout,
        workers_stop_timeout=s.workers_stop_timeout,
        extra_args=list(s.extra_args),
        host=host,
        settings_fingerprint=s.settings_fingerprint,
        injections=s.injections,
        fault_timing=s.fault_timing,
        checkpoint_damage=s.checkpoint_damage,
        async_save=s.async_save,
        verify_integrity=s.verify_integrity,
        checkpoint_load=s.checkpoint_load,
        initial_checkpoint_iteration=initial_checkpoint_iteration(s),
        join_timeout=s.join_timeout,
        max_no_progress_cycles=s.max_no_progress_cycles,
        restart_agent=s.restart_agent,
        spare_nodes=s.spare_nodes,
        timeouts_source=s.timeouts_source,
        timeouts_from=s.timeouts_from_record(),
        calc_ft_timeouts=s.calc_ft_timeouts,
        replay=s.replay,
        campaign=campaign_record(s),
        job={
            **job_record(s, stack),
            "batch": s.batch_record(),
            "evaluation": s.evaluation_record(),
            "replaced": list(plan.replaced),
        },
    )


def campaign_record(s: Settings) -> dict | None:
    """run.json's `campaign`: what drew the plan, and where it lies (written before ft_launcher starts)."""
    plan = s.campaign
    if plan is None:
        return None
    return {
        "plan": s.campaign_plan_path.name,
        "seed": plan.seed,
        "faults": plan.count,
        "mtti_iterations": plan.mtti_iterations,
    }


NODE_SCHEMA = "ftqual.node/v1"


def write_node_record(
    s: Settings, host: str, launcher_pid: int | None, started_at: str, rc: int | None
) -> None:
    """nodes/<host>.json: how this node's ft_launcher ended, written by every node's launcher (run.json is
    the first node's only): the evidence a lost node leaves behind (killed by SIGKILL), and when."""
    record = {
        "schema": NODE_SCHEMA,
        "host": host,
        "node_rank": s.node_rank,
        "launcher_pid": launcher_pid,
        "started_at": started_at,
        "finished_at": utc_now(),
        "exit_code": rc,  # ft_launcher's; negative: killed by that signal; None: never started or unknown
        "signal": signal.Signals(-rc).name if rc is not None and rc < 0 else None,
    }
    try:
        (s.run_dir / "nodes").mkdir(exist_ok=True)
        write_json_atomic(s.run_dir / "nodes" / f"{host}.json", record)
    except OSError as exc:  # evidence, not a reason to change the run's exit code
        print(f"ftqual launch: cannot write nodes/{host}.json: {exc}", file=sys.stderr)


def make_dirs(s: Settings) -> None:
    """Create the run's directories, all or none: on failure, what was created is removed again.

    The checkpoint directory below NVRX_CHECKPOINT_ROOT is made alone, never the root or anything above it
    (the root is the team's, checked by runstate.check_directories): a root gone since is a failure here."""
    created: list[Path] = []
    try:
        for target in s.run_dirs:
            own_only = target == s.checkpoint_dir and s.checkpoint_from_root
            for path in [target] if own_only else [*reversed(target.parents), target]:
                if not path.is_dir():
                    try:
                        path.mkdir()
                    except FileExistsError:
                        # Every node's launcher starts at once on a shared filesystem: a peer made it
                        # between our look and our mkdir (seen with three launchers on one host).
                        if not path.is_dir():
                            raise
                        continue
                    created.append(path)
    except OSError as exc:
        for path in reversed(created):
            try:
                path.rmdir()
            except OSError:
                pass
        raise DirectoryError(
            f"cannot create {exc.filename or 'a run directory'}: {exc.strerror or exc}"
        ) from exc


class DirectoryError(Exception):
    """A run directory could not be created (nothing was left behind); the message is one line."""


def _stop_signals() -> list[signal.Signals]:
    """SIGTERM, SIGINT and SIGHUP, unless SIGHUP is ignored (nohup): the user chose to outlive the terminal.

    Without a handler a closed terminal's SIGHUP would kill only us and leave ft_launcher (in its own
    session) and the workers running, unaccounted for."""
    stops = [signal.SIGTERM, signal.SIGINT]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        stops.append(signal.SIGHUP)
    return stops


class _Signals:
    """Remember the first SIGTERM/SIGINT/SIGHUP and forward SIGTERM to ft_launcher; a second one: kill now."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.first: int | None = None
        self.hurry = False
        self.previous = {sig: signal.signal(sig, self.handle) for sig in _stop_signals()}

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


class _ServerWatch:
    """Polls the log server's own log during the first minutes: a server that failed means lost logs."""

    def __init__(self, log_dir: Path, enabled: bool) -> None:
        self.log_dir = log_dir
        self.enabled = enabled
        self.until = time.monotonic() + SERVER_WATCH_S
        self.next_poll = 0.0
        self.problem: str | None = None

    def found(self) -> bool:
        """True once, when the failure is first seen."""
        now = time.monotonic()
        if not self.enabled or self.problem is not None or now > self.until or now < self.next_poll:
            return False
        self.next_poll = now + 1.0
        self.problem = logport.server_failure(self.log_dir)
        return self.problem is not None


def _wait(
    proc: subprocess.Popen,
    signals: _Signals,
    budget_s: float,
    watch: _ServerWatch | None = None,
    on_stop: Callable[[], None] | None = None,
) -> int | None:
    """Wait for ft_launcher; after a forwarded signal (or a failed log server), only `budget_s` more
    (ftqual.launch.stop_grace). `on_stop` is called once, when a stop from outside is first seen."""
    deadline = None
    stop_seen = False
    while True:
        try:
            return proc.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        if watch is not None and watch.found():
            # Training on would only produce a run without evidence: stop it now, as for a SIGTERM.
            print(f"ftqual launch: {watch.problem}; stopping the run", file=sys.stderr)
            signals.forward()
            deadline = time.monotonic() + budget_s
        if signals.first is not None and not stop_seen:
            stop_seen = True
            deadline = min(deadline or float("inf"), time.monotonic() + budget_s)
            if on_stop is not None:
                on_stop()
        if signals.hurry or (deadline is not None and time.monotonic() > deadline):
            return None


def launch(
    s: Settings,
    plan: LaunchPlan,
    stack: StackChoice,
    host: str,
    base_env: Mapping[str, str] | None = None,
    reservation: logport.PortReservation | None = None,
) -> int:
    """Start ft_launcher and see it through; returns our exit code (ft_launcher's, 128+N for a signal,
    EXIT_LOGS_LOST when it said 0 but no logs were written). `reservation` (the log server's port, held
    since we chose it) is released once ft_launcher has exited."""
    try:
        with restart_agent.port_turn(s.restart_agent):  # its service's port is one per host
            return _launch(s, plan, stack, host, base_env)
    finally:
        if reservation is not None:
            reservation.release()


def _launch(
    s: Settings, plan: LaunchPlan, stack: StackChoice, host: str, base_env: Mapping[str, str] | None
) -> int:
    env = child_env(
        dict(os.environ if base_env is None else base_env),
        tp=s.tp,
        run_id=s.run_id,
        deterministic=s.replay == "exact",
    )
    env.update(restart_agent.agent_env(s.restart_agent, env, s.run_id))
    run_json = s.run_dir / "run.json"
    # The kill wait is read before anything starts: at the stop there is no time to ask the controller.
    kill_wait_s = stop_grace.slurm_kill_wait_s(env)
    record = replace(run_record(s, plan, stack, env, host), scheduler_kill_wait_s=kill_wait_s)
    budget_s = stop_grace.wait_budget_s(s.term_timeout, SHUTDOWN_MARGIN_S, kill_wait_s)
    mount = None
    if launcher_prepares(s.fault) == "capped_fs":
        try:
            mount = capped_storage.mount_capped(s.checkpoint_dir, s.run_dir, s.storage_cap_mb)
        except capped_storage.StorageError as exc:
            print(f"ftqual launch: {exc}", file=sys.stderr)
            return 2
        record = replace(record, storage=mount.record())
    writes_run_json = s.node_rank == 0
    if writes_run_json and s.campaign is not None:
        campaign_plan.write(s.campaign, s.run_dir)  # before the launch: the run is judged against it
    restart_agent.prepare(s.restart_agent, s.run_dir)  # every node's launcher reads its key file
    if writes_run_json:
        write_json_atomic(run_json, record.to_json())
        (s.run_dir / "command.txt").write_text(plan.shell + "\n")
    sys.stdout.flush()

    # Only a single-node run's log server is surely ours (several nodes dial the store host's).
    ours = s.launchers == 1
    watch = _ServerWatch(s.run_dir / "logs", enabled=ours)
    signals = _Signals()

    def stop_recorder() -> None:
        # On record at once: a scheduler's SIGKILL may take us before the run's end is written.
        if writes_run_json and signals.first is not None:
            stopped = replace(record, interrupted_by=signal.Signals(signals.first).name)
            write_json_atomic(run_json, stopped.to_json())

    try:
        try:
            proc = subprocess.Popen(plan.argv, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            print(f"ftqual launch: cannot start {plan.argv[0]}: {exc}", file=sys.stderr)
            return _finish(record, run_json, writes_run_json, EXIT_CANNOT_START, signals, None)
        signals.attach(proc.pid)
        try:
            launcher_rec = procs.pid_record(proc.pid) | {"host": host, "command": plan.argv}
            write_json_atomic(s.run_dir / "pids" / f"{host}.launcher.json", launcher_rec)
        except ProcessLookupError:
            pass  # it already exited (a bad flag): its exit code tells the story
        rc = _wait(proc, signals, budget_s, watch, on_stop=stop_recorder)
        # Whatever happened, nothing of this run may outlive us on this host.
        report = cleanup.kill_run(s.run_dir, host, run_id=s.run_id)
        if rc is None:
            rc = proc.wait()
        write_node_record(s, host, proc.pid, iso_z(record.started_at) or "", rc)
        if report.killed:
            pids = ", ".join(str(item["pid"]) for item in report.killed)
            print(
                f"ftqual launch: killed {len(report.killed)} leftover process(es) of run {s.run_id}: {pids}",
                file=sys.stderr,
            )
    finally:
        signals.restore()
        if mount is not None:
            staging = s.checkpoint_dir.with_name(s.checkpoint_dir.name + ".ftqual-copy")
            kept = capped_storage.unmount_keeping(mount, staging)
            record = replace(record, storage=kept)
            if "problem" in kept:
                print(f"ftqual launch: {kept['problem']}", file=sys.stderr)

    problem = watch.problem or (logport.logs_problem(s.run_dir) if ours else None)
    code = _finish(record, run_json, writes_run_json, rc, signals, problem)
    if writes_run_json:
        # After run.json's end is on record: a stopped run's job must end before the scheduler's kill.
        record_at_end(s.run_dir, record.checkpoint_dir, stopped=signals.first is not None)
    return code


def _finish(
    record: RunRecord,
    run_json: Path,
    writes_run_json: bool,
    rc: int,
    signals: _Signals,
    problem: str | None,
) -> int:
    if problem is not None:
        print(f"ftqual launch: run {record.run_id} failed: {problem}", file=sys.stderr)
    if writes_run_json:
        stopped_by = signal.Signals(signals.first).name if signals.first is not None else None
        end = replace(
            record,
            exit_code=rc,
            finished_at=datetime.now(UTC),
            launcher_error=problem,
            interrupted_by=stopped_by,
        )
        write_json_atomic(run_json, end.to_json())
    if problem is not None and rc == 0:
        return EXIT_LOGS_LOST
    return rc if rc >= 0 else 128 - rc
