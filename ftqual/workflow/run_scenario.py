"""Rule `run_scenario`: one attempt of one scenario under ft_launcher (through `python -m ftqual.launch`).

The attempt's slot is results/<scenario>/<fingerprint>-<n>/ (ftqual.workflow.plan). Its run gets a fresh run
ID, `<scenario>-<UTC time>-<SLURM_JOB_ID or pid>-a<n>`, and so its own runs/<run-id>/ that Snakemake never
sees as an output and never deletes. The attempt's record, attempt.json, is the run directory's run.json plus
where it lies, the launcher's exit and, when the launcher failed, the cause (the last lines it and ft_launcher
printed). Nothing is launched when the preflight failed or (for a scenario other than the baseline) the
baseline's current attempt did not pass: attempt.json then says why, and verify makes that a FAIL verdict.
Nor for a scenario the preflight found this stack cannot run (its `not_applicable`): attempt.json records
`not_applicable` with the reason, and verify gives it the verdict `not_applicable`.

The job itself fails only when interrupted, so that Snakemake redoes the slot on the next run; every other
outcome is a verdict, reported by the summary and the gate.

A multi-node scenario (nnodes > 1, Slurm only) starts one launcher per node with
`srun --nodes=N --ntasks-per-node=1`; the rendezvous endpoint is the allocation's first node (where this
job runs), computed inside the step, and all nodes share the run ID and the log server port.

Signals: the launcher runs in its own session, so it gets exactly one SIGTERM from us for a first
SIGINT, SIGTERM or SIGHUP (Ctrl-C, Snakemake, scancel, a closed terminal); it forwards it to ft_launcher
and kills what is left by the process ids recorded in runs/<run-id>/pids/. If the workflow that started
this job disappears (Snakemake killed with SIGKILL), the run is stopped the same way: nobody would verify
it; only Snakemake's own process and those between it and this job are watched, never the shell that started
it (ftqual.workflow.interrupts.watched_chain). A workflow interrupted as this job starts, before the job was
on record to get the signal, left a marker that the job reads (ftqual.workflow.interrupts.stop_asked). To let
runs survive a closed terminal, start the workflow under nohup, setsid, tmux or Slurm (a SIGHUP that is
ignored when this job starts stays ignored). After a failed or interrupted run, `ftqual cleanup <run dir>`
runs once more here, for a launcher that was itself killed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from ftqual.contract import is_fault
from ftqual.jsonfile import write_json_atomic
from ftqual.launch import checkpoint_record, gpu_turn, logport, procs
from ftqual.launch.runstate import read_tracker
from ftqual.launch.settings import SettingsError
from ftqual.preflight import report_schema as preflight_schema
from ftqual.rank.tracker import TRACKER_NAME
from ftqual.report import scope as timeouts_scope
from ftqual.scenario import model as scenarios
from ftqual.stack.identity import probe_machine
from ftqual.verification.verdict import ENDS_NONZERO_BY_DESIGN
from ftqual.workflow import attempts, eta, interrupts, progress
from ftqual.workflow.attempts import attempt_key

TAIL_LINES = 12
STALE_SUMMARY = ("results/summary.json", "results/summary.md", "results/junit.xml")
INTERRUPTED = 130  # the job fails, so that Snakemake redoes the slot
SLOT_MISMATCH = 2


@dataclass
class Say:
    """The rule's voice: every line to its log, some also to the console the workflow was started from."""

    scenario: str
    log: TextIO
    console: TextIO | None = None  # None: the process's original stderr (the rule's stderr is the log)

    def __call__(self, message: str, console: bool = False) -> None:
        print(f"[run_scenario {self.scenario}] {message}", file=self.log)
        if console:
            print(f"ftqual: {self.scenario}: {message}", file=self.console or sys.__stderr__, flush=True)


@dataclass(frozen=True)
class LauncherRun:
    """How the launcher ended: its exit code, why it was stopped (None when it was not), and the monotonic
    time it started (None when it never did)."""

    rc: int
    stopped_by: str | None
    started: float | None


def srun_prefix(nnodes: int, gpus_per_node: int, port: int, resources: object) -> list[str]:
    """One launcher per node inside this allocation; RDZV_ENDPOINT = first node of the allocation.
    `resources` is the job's Snakemake resources (cpus_per_gpu, cpus_per_task, tasks_per_node read)."""
    cpus = []
    if getattr(resources, "cpus_per_gpu", None):
        cpus = [f"--cpus-per-task={resources.cpus_per_gpu * gpus_per_node}"]
    elif getattr(resources, "cpus_per_task", None) and resources.cpus_per_task > 0:
        cpus = [f"--cpus-per-task={resources.cpus_per_task * getattr(resources, 'tasks_per_node', 1)}"]
    step = (
        'export RDZV_ENDPOINT="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1):'
        f'{port}"; exec "$@"'
    )
    return [
        "srun",
        f"--nodes={nnodes}",
        "--ntasks-per-node=1",
        f"--gres=gpu:{gpus_per_node}",
        *cpus,
        "--label",
        "bash",
        "-c",
        step,
        "bash",
    ]


def show_progress(
    say: Say,
    watcher: progress.Watcher,
    state: dict[str, float],
    eta_line: Callable[[], str | None] | None = None,
) -> None:
    """Print what happened in the run since the last look (ftqual.workflow.progress), each iteration line with
    the elapsed time and what is left (ftqual.workflow.eta), and while a hang waits for its detection, what it
    waits for, every 15 s."""
    for event in watcher.poll():
        if eta_line is not None and event.startswith("iteration "):
            extra = eta_line()
            event = f"{event}; {extra}" if extra else event
        say(event, console=True)
    wait = watcher.waiting()
    now = time.monotonic()
    if wait and now - state.get("waited", 0.0) >= 15:
        state["waited"] = now
        say(wait, console=True)


def eta_estimator(cfg, s, watcher: progress.Watcher, stack_digest: str) -> Callable[[float], str | None]:
    """The elapsed time and what is left, for this scenario and the workflow (ftqual.workflow.eta): the
    baseline's measured pace where it ran, else this run's own; every scenario whose attempt under these
    settings and this stack has no verdict yet counts."""
    results = Path.cwd() / "results"
    first_step: list[float] = []
    keys = {x.name: attempt_key(cfg.fingerprint(x), stack_digest) for x in cfg.scenarios}

    def line(elapsed: float) -> str | None:
        newest = watcher.last_iteration
        if newest is None:
            return None
        if not first_step:
            first_step.append(elapsed)
        own = eta.Pace(newest[2] / 1000.0, first_step[0])
        measured = eta.baseline_pace(results, cfg.baseline_scenario) or own
        injected, detected = watcher.injected_and_detected
        left = eta.run_left_s(s, own, newest[0], injected, detected)
        others = eta.pending(results, keys, s.name)
        workflow = left + sum(eta.scenario_s(cfg.by_name[n], measured) for n in others)
        return eta.phrase(elapsed, left, workflow)

    return line


def wait_turn(say: Say, turn: gpu_turn.GpuTurn, stopped: list[str], chain: list[tuple[int, int]]) -> bool:
    """Wait for the GPUs this run uses (ftqual.launch.gpu_turn) while answering signals and noticing a
    vanished workflow, saying whom it waits for (again when that changes); True once taken, False when the run
    was stopped first (the reason is then in `stopped`)."""
    said = ""
    while not turn.take():
        waiting = f"waiting for {turn.waiting_for()}"
        if waiting != said:
            say(waiting, console=True)
            said = waiting
        if stopped:
            return False
        asked = interrupts.stop_asked(Path.cwd())
        if asked:
            stopped.append(asked)
            return False
        gone = procs.first_gone(chain)
        if gone is not None:
            stopped.append(f"the workflow process {gone} is gone")
            return False
        time.sleep(0.5)
    if said:
        say(f"got {turn.gpus.label()}: launching", console=True)
    return True


def run_launcher(
    say: Say,
    cmd: Sequence[str],
    env: Mapping[str, str],
    console: Path,
    watcher: progress.Watcher | None = None,
    turn: gpu_turn.GpuTurn | None = None,
    eta_line: Callable[[float], str | None] | None = None,
) -> LauncherRun:
    """Run the launcher in its own session; stop it on a signal or when the workflow disappears. With a
    `turn`, the launcher starts only once the GPUs it uses are this run's. Installs this process's
    SIGINT, SIGTERM (and SIGHUP, unless ignored) handlers and leaves them in place, as the rule always
    has: a signal after the launcher ended is absorbed, so the job still records the attempt."""
    stopped: list[str] = []
    started: list[subprocess.Popen] = []
    # Re-entrant: the signal handler runs on this thread, possibly while it holds the lock to start the
    # launcher (a plain Lock would wait for itself there forever).
    lock = threading.RLock()
    terminated: list[int] = []

    def terminate() -> None:
        """One SIGTERM to the launcher, once it has started."""
        if started and not terminated:
            terminated.append(started[0].pid)
            try:
                os.kill(started[0].pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(why: str) -> None:
        with lock:
            stopped.append(why)
            if watcher is not None:  # what the ranks' exits now show is this stop, not a detection
                watcher.stopped_by = stopped[0]
            if started and not terminated:
                say(f"{why}: sending SIGTERM to the launcher (pid {started[0].pid})")
            terminate()

    def on_signal(signum, _frame):
        stop(signal.Signals(signum).name)

    handled = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup: the user chose to survive it
        handled.append(signal.SIGHUP)
    for sig in handled:
        signal.signal(sig, on_signal)
    # On record while it may launch: a signal to the workflow's own pid reaches this job too (interrupts).
    with interrupts.registered(Path.cwd()):
        # Start ticks, not psutil's create_time(): that moves by a second when a VM's clock is adjusted, and a
        # live workflow then looked gone (seen on CI: the run was stopped with SIGTERM, its job failed).
        # Up to the workflow's own process, never the shell above it (nohup make run &: it may exit).
        chain = interrupts.watched_chain(procs.ancestry(), interrupts.workflow_process())
        progress_state: dict[str, float] = {}
        # On record first, then the marker: a workflow interrupted before it saw this job left one.
        asked = interrupts.stop_asked(Path.cwd())
        if asked and not stopped:
            stopped.append(asked)
        if stopped:
            return LauncherRun(1, stopped[0], None)
        with open(console, "w") as out:
            if turn is not None and not wait_turn(say, turn, stopped, chain):
                return LauncherRun(1, stopped[0], None)
            launched = time.monotonic()

            def elapsed_line() -> str | None:
                return eta_line(time.monotonic() - launched) if eta_line is not None else None

            with lock:
                started.append(
                    subprocess.Popen(
                        cmd,
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
                if stopped:  # a signal came while it was starting
                    terminate()
            while True:
                try:
                    rc = started[0].wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    if watcher is not None:
                        show_progress(say, watcher, progress_state, elapsed_line)
                    if stopped:
                        continue
                    gone = procs.first_gone(chain)
                    if gone is not None:
                        stop(f"the workflow process {gone} is gone")
                    elif asked := interrupts.stop_asked(Path.cwd()):
                        stop(asked)  # a signal the job itself never got (module interrupts)
    return LauncherRun(rc, stopped[0] if stopped else None, launched)


def relative_if_below(path: Path, base: Path) -> str:
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def tail(path: Path, lines: int = TAIL_LINES) -> list[str]:
    """The last non-blank lines of a file, read from its last 64 KiB; none when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]


# Not ftqual.verification.causes.TELLING: this one also takes NVRx's "no progress" and "exhausted" lines, and
# the cause
# it makes loses the logger's prefix; causes.py cites whole lines with file:line. Kept apart so that the
# run.json cause stays what it was.
_TELLING = re.compile(
    r"error|exception|traceback|timed? ?out|timeout|exitcode|failed|no progress|exhausted|refus", re.I
)
_LOG_PREFIX = re.compile(r"^.*?\]\s+\S+\.py:\d+\s+-?\s*")  # NVRx's "<time> [INFO] [host] [...] file.py:N"


def telling_line(lines: Sequence[str]) -> str | None:
    """The last line that names an error, without the logger's prefix, as a short cause."""
    for line in reversed(lines):
        if _TELLING.search(line):
            return _LOG_PREFIX.sub("", line).strip()[:200]
    return None


def verdict_of(path: str | Path | None, judge: Callable[[Any], Any] = lambda doc: doc.get("verdict")) -> Any:
    """The verdict of a report, as `judge` reads it; None when the file cannot be read."""
    if path is None:
        return None
    try:
        return judge(json.loads(Path(path).read_text()))
    except (OSError, ValueError, RecursionError, AttributeError, TypeError):
        return None


def not_launched(say: Say, out_run: Path, record: dict, cause: str) -> int:
    """Record why nothing was launched: a verdict (verify fails it), so the job itself succeeds."""
    say(f"not launched: {cause}", console=True)
    write_json_atomic(out_run, {**record, "launched": False, "cause": cause})
    return 0


def not_applicable(say: Say, out_run: Path, record: dict, reason: str) -> int:
    """Record that this stack cannot run the scenario (the preflight said why): nothing is launched, and
    verify gives the attempt the verdict `not_applicable`, neither a pass nor a failure."""
    say(f"not applicable on this stack: {reason}; nothing launched", console=True)
    cause = f"not applicable on this stack: {reason}"
    write_json_atomic(out_run, {**record, "launched": False, "not_applicable": reason, "cause": cause})
    return 0


def not_applicable_here(scenario: str, preflight: str | Path | None) -> str | None:
    """Why this stack cannot run `scenario`, as a preflight that passed (or warned) says in its
    `not_applicable` (ftqual.preflight.applicability); None otherwise: a failed, missing or malformed
    preflight refuses every scenario alike (refusal), whatever it judged of each."""
    if verdict_of(preflight, preflight_schema.verdict_of) not in ("pass", "warn"):
        return None
    return (verdict_of(preflight, preflight_schema.not_applicable_of) or {}).get(scenario)


def _baseline_pointer(baseline_verify: Path) -> dict:
    """The baseline attempt's record, beside its verify.json: where the baseline's run directory lies."""
    return json.loads(attempts.record_path(baseline_verify.parent).read_text())


def baseline_says_no(baseline_verify: Path, s: scenarios.Scenario) -> str | None:
    """Fail fast: timeouts the baseline's own measurements show cannot work (a step slower than the step
    timeout would fire in every cycle and spend every restart). None when the run may start."""
    from ftqual.verification.causes import timeout_problems  # the evidence readers, only for a fault scenario

    try:
        pointer = _baseline_pointer(baseline_verify)
        report = json.loads(baseline_verify.read_text())
        run_dir = Path(pointer["run_dir"])
        record = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None  # nothing measured to judge by
    save_max = (report.get("metrics") or {}).get("checkpoint_save_s_max")
    save_max = save_max if isinstance(save_max, int | float) else None
    problems = timeout_problems(run_dir, record, save_max, s.timeouts.as_dict())
    if not problems:
        return None
    return (
        "refused before launch: " + "; ".join(problems) + f" (baseline run {pointer.get('run_id')}); "
        "raise the timeout(s) for this scenario"
    )


def too_short(baseline_verify: Path, s: scenarios.Scenario) -> str | None:
    """Fail fast: a length with which the fault is not certain to come on this stack: the baseline's run
    measured once (ftqual.verification.evidence.finalize_lag), judged by ftqual.scenario.fit."""
    if not is_fault(s.fault, lambda f: f.injected):
        return None
    from ftqual.scenario.fit import scenario_problem
    from ftqual.verification.evidence.finalize_lag import measure_baseline  # the evidence readers

    try:
        pointer = _baseline_pointer(baseline_verify)
        run_dir = Path(pointer["run_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    problem = scenario_problem(s, measure_baseline(run_dir))
    return f"{problem} (baseline run {pointer.get('run_id')})" if problem else None


def seed_checkpoint(baseline_verify: Path, dest: Path, make_parents: bool = True) -> dict | str:
    """Copy the baseline run's last completed checkpoint (its tracker and iter_<K> folder) to `dest`, a
    folder of this run's own: the walkthrough's resume of an existing run through NVRX_CHECKPOINT_DIR.
    Returns what was copied, or a one-line reason why it cannot be."""
    try:
        pointer = _baseline_pointer(baseline_verify)
        run_dir = Path(pointer["run_dir"])
        source_run = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"resume_from: cannot read the baseline's run ({baseline_verify.parent}): {exc}"
    source = Path(source_run.get("checkpoint_dir") or "checkpoints")
    source = source if source.is_absolute() else run_dir / source
    tracker = source / TRACKER_NAME
    try:
        iteration = read_tracker(tracker)  # the launcher's own reading of a tracker it would resume from
    except SettingsError as exc:
        return f"resume_from: the baseline's checkpoint cannot be resumed: {exc}"
    if iteration is None:
        return f"resume_from: the baseline's checkpoint tracker {tracker} is absent"
    folder = f"iter_{iteration:07d}"
    if not (source / folder).is_dir():
        return f"resume_from: the baseline's tracker names iteration {iteration}; {source / folder} is absent"
    # Below a configured checkpoint_dir only the run's own folder is made (the team's root must exist).
    dest.mkdir(parents=make_parents)
    shutil.copytree(source / folder, dest / folder, symlinks=True)
    shutil.copyfile(tracker, dest / TRACKER_NAME)
    return {
        "scenario": pointer.get("scenario"),
        "run_id": pointer.get("run_id"),
        "source_checkpoint_dir": str(source),
        "iteration": iteration,
        "checkpoint_dir": str(dest),
    }


def invalidate_summary(say: Say, names: Sequence[str] = STALE_SUMMARY) -> None:
    """A summary of earlier attempts must not stand while this one runs (or after it is interrupted)."""
    for name in names:
        path = Path(name)
        if path.exists():
            path.unlink()
            say(f"removed {path}: it is rebuilt when the workflow finishes")


def refusal(
    cfg: scenarios.WorkflowConfig,
    scenario: str,
    preflight: str | Path | None,
    baseline: str | Path | None,
) -> str | None:
    """Why this attempt of `scenario` must not launch (the preflight, the baseline's verdict, what the
    baseline measured), or None when it may. `preflight` and `baseline` are the reports' paths."""
    s = cfg.by_name[scenario]
    # 'malformed' for a preflight.json that is not one (ftqual.preflight.report_schema)
    verdict = verdict_of(preflight, preflight_schema.verdict_of)
    if verdict not in ("pass", "warn"):
        if preflight is None or not Path(preflight).is_file():
            return f"the preflight report ({preflight or 'none given'}) is missing"
        what = "report is malformed" if verdict == "malformed" else "failed"
        return f"the preflight {what} ({preflight})"
    if scenario != cfg.baseline_scenario:
        base = verdict_of(baseline)
        if base != "pass" or baseline is None:
            return (
                f"the baseline's attempt ({baseline}) is {base or 'missing'}: "
                "fault scenarios run after the baseline passes"
            )
        return baseline_says_no(Path(baseline), s) or too_short(Path(baseline), s)
    return None


def run(
    *,
    scenario: str,
    slot: str,
    config: Mapping[str, Any],
    stack: Mapping[str, Any],
    slot_reason: str,
    preflight: str | Path,
    baseline: str | Path | None,
    output: str | Path,
    resources: object,
    log: TextIO,
    console: TextIO | None = None,
) -> int:
    """The rule's job: the attempt of `scenario` in `slot`, its record written to `output`. Returns the
    job's exit code: 0 whenever the attempt is over (whatever its verdict), 130 when interrupted, 2 for a
    slot the current settings and stack do not name. `console`: the original stderr when None."""
    say = Say(scenario, log, console)
    cfg = scenarios.resolve(config)
    s = cfg.by_name[scenario]
    fingerprint = cfg.fingerprint(s)
    stack = dict(stack)
    key = attempt_key(fingerprint, stack["digest"])
    if slot.rsplit("-", 1)[0] != key:
        say(f"slot {slot} does not match the current settings and stack ({key}); refusing to run")
        return SLOT_MISMATCH
    out_run = Path(output)
    out_run.parent.mkdir(parents=True, exist_ok=True)
    slot_number = int(slot.rsplit("-", 1)[1])
    record = {
        "scenario": scenario,
        "slot": slot,
        "settings_fingerprint": fingerprint,
        "settings": cfg.shaping_settings(s),
        # The stack this attempt was keyed by, and the machine this job ran on (recorded, for Slurm).
        "stack": stack,
        "stack_digest": stack["digest"],
        "slot_reason": str(slot_reason),
        "machine": {
            **probe_machine(keyed_host=False),
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        },  # fmt: skip
    }

    # Before the baseline's verdict: what this stack cannot run is so whether the baseline passed or not.
    inapplicable = not_applicable_here(scenario, preflight)
    if inapplicable is not None:
        return not_applicable(say, out_run, record, inapplicable)
    refused = refusal(cfg, scenario, preflight, baseline) or timeouts_scope.launch_problem(
        config, preflight, baseline if scenario != cfg.baseline_scenario else None
    )
    if refused:
        return not_launched(say, out_run, record, refused)
    invalidate_summary(say)

    slurm_job = os.environ.get("SLURM_JOB_ID")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_id = f"{scenario}-{stamp}-{slurm_job or os.getpid()}-a{slot_number}"
    cwd = Path.cwd()
    work_dir = Path(os.path.abspath(cfg.work_dir or cwd))
    run_dir = work_dir / "runs" / run_id
    attempts = out_run.parent.parent / "attempts"
    attempts.mkdir(parents=True, exist_ok=True)
    console = attempts / f"{run_id}.console.log"

    python_bin = os.path.dirname(sys.executable)
    launcher_env = scenarios.launcher_env(cfg, s)
    if s.resume_from is not None:
        # below the config's checkpoint_dir where it names one: the run's checkpoints on the team's storage
        root = Path(s.checkpoint_root) if s.checkpoint_root else work_dir / "checkpoints"
        seeded = seed_checkpoint(Path(baseline), root / run_id, make_parents=not s.checkpoint_root)
        if isinstance(seeded, str):
            return not_launched(say, out_run, record, seeded)
        record["resume_from"] = seeded
        launcher_env["NVRX_CHECKPOINT_DIR"] = seeded["checkpoint_dir"]
        say(f"starts from iteration {seeded['iteration']} of {seeded['run_id']}: {seeded['checkpoint_dir']}")
    env = scenarios.clean_environment(os.environ)
    env.update(launcher_env)
    env.update(
        NVRX_WORK_DIR=str(work_dir),
        NVRX_RUN_ID=run_id,
        PYTHONUNBUFFERED="1",
        PATH=os.pathsep.join(filter(None, [python_bin, os.environ.get("PATH")])),
    )
    cmd = [sys.executable, "-m", "ftqual.launch", *scenarios.workload_args(cfg, s)]
    if s.multinode:
        # Every node's launcher must agree on the log server port (NVRx's default, 50051, would be
        # shared by concurrent multi-node runs); this host is the allocation's first node.
        rdzv_port, log_port = logport.ports_outside_ephemeral(2)
        env["NVRX_LOG_SERVER_PORT"] = str(log_port)
        cmd = srun_prefix(s.allocated_nodes, s.gpus_per_node, rdzv_port, resources) + cmd
    say(f"run {run_id} (attempt {slot}), run dir {run_dir}, Slurm job {slurm_job or '-'}", console=True)
    say("environment: " + " ".join(f"{k}={v}" for k, v in sorted(launcher_env.items())))
    say("$ " + " ".join(cmd))

    watcher = progress.Watcher(run_dir, timeouts=s.timeouts.as_dict(), fault=s.fault)
    holder = f"scenario {scenario} (run {run_id}) of {cwd} (pid {os.getpid()})"
    turn = gpu_turn.for_run(s.gpus_per_node, cfg.workload, holder)  # None: no GPU shared, no turn
    try:
        launched = run_launcher(
            say, cmd, env, console, watcher, turn, eta_estimator(cfg, s, watcher, stack["digest"])
        )
        rc, stopped_by, started = launched.rc, launched.stopped_by, launched.started
        if started is None:
            say(f"interrupted ({stopped_by}) before the launcher started; nothing ran", console=True)
            return INTERRUPTED
        finished = time.monotonic()
        show_progress(say, watcher, {})
        say(f"launcher exited {rc} after {finished - started:.0f} s; console: {console}")
        print(f"--- {console}", file=log)
        print(console.read_text(errors="replace"), file=log)
        if (rc != 0 or stopped_by is not None) and run_dir.is_dir():
            # The launcher kills what its run left behind; this covers a launcher that was killed itself.
            cleanup = [sys.executable, "-m", "ftqual", "cleanup", str(run_dir)]
            say("$ " + " ".join(cleanup))
            subprocess.run(cleanup, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            # A launcher killed itself left no record of its checkpoints: made here, quick when stopped.
            checkpoint_record.write_for_run(
                run_dir, hash_bytes=0 if stopped_by else checkpoint_record.HASH_BYTES
            )
    finally:
        if turn is not None:
            turn.release()  # after the cleanup: the next run must not meet this one's leftovers
    if stopped_by is not None:
        say(f"interrupted ({stopped_by}); evidence kept in {run_dir}", console=True)
        return INTERRUPTED

    attempt = Attempt(record, run_id, run_dir, console, slurm_job, cwd)
    write_json_atomic(out_run, attempt_record(say, attempt, rc, finished - started, s.fault, out_run))
    say(f"done: {out_run}")
    return 0


@dataclass(frozen=True)
class Attempt:
    """What this job knows of its attempt before the launcher ran: the slot's `record` (scenario, slot,
    settings, stack, machine), the run's ID and directory, the console log, the Slurm job, the cwd that
    run_dir is recorded relative to."""

    record: dict
    run_id: str
    run_dir: Path
    console: Path
    slurm_job: str | None
    cwd: Path


def attempt_record(say: Say, attempt: Attempt, rc: int, duration_s: float, fault: str, out_run: Path) -> dict:
    """The record (attempt.json) of a launched attempt: the run directory's own run.json, this job's record
    on top, the launcher's exit and, when it failed, the cause; the fault marker copied beside `out_run`."""
    record, run_id, run_dir, console = attempt.record, attempt.run_id, attempt.run_dir, attempt.console
    cwd, slurm_job = attempt.cwd, attempt.slurm_job
    run: dict = {}
    record_path = run_dir / "run.json"
    if record_path.is_file():
        try:
            run = json.loads(record_path.read_text())
        except ValueError:
            run = {}
    run.update(record)
    run.update(
        run_id=run.get("run_id", run_id),
        launched=True,
        launcher_exit=rc,
        duration_s=round(duration_s, 3),
        run_dir=relative_if_below(run_dir, cwd),
        slurm_job_id=slurm_job,
        console_log=str(console),
    )
    if rc != 0:
        lines = tail(console) + tail(run_dir / "logs" / "launcher.log")
        telling = telling_line(lines)
        run["cause"] = f"the launcher exited {rc}" + (f": {telling}" if telling else "")
        run["launcher_tail"] = lines
        if fault in ENDS_NONZERO_BY_DESIGN or (run.get("checkpoint_damage") or "none") != "none":
            # a lost node, a broken checkpoint or failed storage may end loudly: that is for verify to judge
            say(f"stopped: the launcher exited {rc} (this scenario may stop loudly: verify judges it); "
                f"evidence kept in {run_dir}", console=True)  # fmt: skip
        else:
            say(f"FAILED: the launcher exited {rc}; evidence kept in {run_dir}", console=True)
    elif not record_path.is_file():
        run["cause"] = f"the launcher exited 0 but wrote no {record_path}"
    if is_fault(fault, lambda f: f.injected):
        marker = run_dir / "fault_injected.json"
        if marker.is_file():
            shutil.copyfile(marker, out_run.with_name("fault_injected.json"))
    return run
