"""Rule `run_scenario`: one attempt of one scenario under ft_launcher (through `python -m ftqual.launch`).

The attempt's slot is results/<scenario>/<fingerprint>-<n>/ (rules/common.smk). Its run gets a fresh run ID,
`<scenario>-<UTC time>-<SLURM_JOB_ID or pid>-a<n>`, and so its own runs/<run-id>/ that Snakemake never sees
as an output and never deletes. The slot's run.json is the run directory's run.json plus where it lies,
the launcher's exit and, when the launcher failed, the cause (the last lines it and ft_launcher printed).
Nothing is launched when the preflight failed or (for a scenario other than the baseline) the baseline's
current attempt did not pass: run.json then says why, and verify turns that into a FAIL verdict.

The job itself fails only when interrupted, so that Snakemake redoes the slot on the next run; every other
outcome is a verdict, reported by the summary and the gate.

A multi-node scenario (nnodes > 1, Slurm only) starts one launcher per node with
`srun --nodes=N --ntasks-per-node=1`; the rendezvous endpoint is the allocation's first node (where this
script runs), computed inside the step, and all nodes share the run ID and the log server port.

Signals: the launcher runs in its own session, so it gets exactly one SIGTERM from us for a first
SIGINT, SIGTERM or SIGHUP (Ctrl-C, Snakemake, scancel, a closed terminal); it forwards it to ft_launcher
and kills what is left by the process ids recorded in runs/<run-id>/pids/. If the workflow that started
this job disappears (Snakemake killed with SIGKILL), the run is stopped the same way: nobody would verify
it. To let runs survive a closed terminal, start the workflow under nohup, tmux or Slurm (a SIGHUP that is
ignored when this job starts stays ignored). After a failed or interrupted run, `ftqual cleanup <run dir>`
runs once more here, for a launcher that was itself killed.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log

from ftqual import procs, progress, scenarios  # noqa: E402 - installed (tools/bootstrap.sh); errors go to the log
from ftqual.attempts import attempt_key  # noqa: E402
from ftqual.contract import TRACKER_NAME  # noqa: E402
from ftqual.launch import gpu_turn, logport  # noqa: E402
from ftqual.launch.runstate import read_tracker  # noqa: E402
from ftqual.launch.settings import SettingsError  # noqa: E402
from ftqual.preflight import report_schema as preflight_schema  # noqa: E402
from ftqual.stackid import probe_machine  # noqa: E402

SCENARIO = sm.wildcards.scenario
SLOT = sm.wildcards.slot
TAIL_LINES = 12
STALE_SUMMARY = ("results/summary.json", "results/summary.md", "results/junit.xml")


def say(message, console=False):
    print(f"[run_scenario {SCENARIO}] {message}", file=log)
    if console:
        print(f"ftqual: {SCENARIO}: {message}", file=sys.__stderr__, flush=True)


def srun_prefix(nnodes, gpus_per_node, port):
    """One launcher per node inside this allocation; RDZV_ENDPOINT = first node of the allocation."""
    res = sm.resources
    cpus = []
    if getattr(res, "cpus_per_gpu", None):
        cpus = [f"--cpus-per-task={res.cpus_per_gpu * gpus_per_node}"]
    elif getattr(res, "cpus_per_task", None) and res.cpus_per_task > 0:
        cpus = [f"--cpus-per-task={res.cpus_per_task * getattr(res, 'tasks_per_node', 1)}"]
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


def show_progress(watcher, state):
    """Print what happened in the run since the last look (ftqual.progress), and while a hang waits for its
    detection, what it waits for, every 15 s."""
    for event in watcher.poll():
        say(event, console=True)
    wait = watcher.waiting()
    now = time.monotonic()
    if wait and now - state.get("waited", 0.0) >= 15:
        state["waited"] = now
        say(wait, console=True)


def wait_turn(turn, stopped, chain):
    """Wait for this machine's GPUs (ftqual.launch.gpu_turn) while answering signals and noticing a vanished
    workflow; True once taken, False when the run was stopped first (the reason is then in `stopped`)."""
    if turn.take():
        return True
    holder = turn.current_holder() or f"see {turn.path}"
    say(f"waiting for this machine's GPUs: another scenario run has them ({holder})", console=True)
    while not turn.take():
        if stopped:
            return False
        gone = procs.first_gone(chain)
        if gone is not None:
            stopped.append(f"the workflow process {gone} is gone")
            return False
        time.sleep(0.5)
    say("got the GPUs: launching", console=True)
    return True


def run_launcher(cmd, env, console, watcher=None, turn=None):
    """Run the launcher in its own session; stop it on a signal or when the workflow disappears. With a
    `turn`, the launcher starts only once the machine's GPUs are this run's.

    Returns (exit code, why it was stopped or None, monotonic time the launcher started or None)."""
    stopped, started = [], []
    lock = threading.Lock()

    def stop(why):
        with lock:
            stopped.append(why)
            if started:
                say(f"{why}: sending SIGTERM to the launcher (pid {started[0].pid})")
                try:
                    os.kill(started[0].pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def on_signal(signum, _frame):
        stop(signal.Signals(signum).name)

    handled = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:  # nohup: the user chose to survive it
        handled.append(signal.SIGHUP)
    for sig in handled:
        signal.signal(sig, on_signal)
    # Start ticks, not psutil's create_time(): that moves by a second when a VM's clock is adjusted, and a
    # live workflow then looked gone (seen on CI: the run was stopped with SIGTERM, its job failed).
    chain = procs.ancestry()
    progress_state = {}
    if stopped:
        return 1, stopped[0], None
    with open(console, "w") as out:
        if turn is not None and not wait_turn(turn, stopped, chain):
            return 1, stopped[0], None
        launched = time.monotonic()
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
            os.kill(started[0].pid, signal.SIGTERM)
        while True:
            try:
                rc = started[0].wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                if watcher is not None:
                    show_progress(watcher, progress_state)
                gone = procs.first_gone(chain)
                if gone is not None and not stopped:
                    stop(f"the workflow process {gone} is gone")
    return rc, (stopped[0] if stopped else None), launched


def relative_if_below(path, base):
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def tail(path, lines=TAIL_LINES):
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 64 * 1024))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]


TELLING = re.compile(
    r"error|exception|traceback|timed? ?out|timeout|exitcode|failed|no progress|exhausted|refus", re.I
)
LOG_PREFIX = re.compile(r"^.*?\]\s+\S+\.py:\d+\s+-?\s*")  # NVRx's "<time> [INFO] [host] [...] file.py:N"


def telling_line(lines):
    """The last line that names an error, without the logger's prefix, as a short cause."""
    for line in reversed(lines):
        if TELLING.search(line):
            return LOG_PREFIX.sub("", line).strip()[:200]
    return None


def verdict_of(path, judge=lambda doc: doc.get("verdict")):
    """The verdict of a report, as `judge` reads it; None when the file cannot be read."""
    try:
        return judge(json.loads(Path(path).read_text()))
    except (OSError, ValueError, RecursionError, AttributeError):
        return None


def not_launched(out_run, record, cause):
    say(f"not launched: {cause}", console=True)
    out_run.write_text(json.dumps({**record, "launched": False, "cause": cause}, indent=2) + "\n")
    return 0


def baseline_says_no(baseline_verify, s):
    """Fail fast: timeouts the baseline's own measurements show cannot work (a step slower than the step
    timeout would fire in every cycle and spend every restart). None when the run may start."""
    from ftqual.causes import timeout_problems

    try:
        pointer = json.loads(baseline_verify.with_name("run.json").read_text())
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


def too_short(baseline_verify, s):
    """Fail fast: a length with which the fault is not certain to come on this stack (ftqual.sizing)."""
    from ftqual.sizing import scenario_problem

    try:
        pointer = json.loads(baseline_verify.with_name("run.json").read_text())
        run_dir = Path(pointer["run_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    problem = scenario_problem(run_dir, s)
    return f"{problem} (baseline run {pointer.get('run_id')})" if problem else None


def seed_checkpoint(baseline_verify, dest):
    """Copy the baseline run's last completed checkpoint (its tracker and iter_<K> folder) to `dest`, a
    folder of this run's own: the walkthrough's resume of an existing run through NVRX_CHECKPOINT_DIR.
    Returns what was copied, or a one-line reason why it cannot be."""
    try:
        pointer = json.loads(baseline_verify.with_name("run.json").read_text())
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
    dest.mkdir(parents=True)
    shutil.copytree(source / folder, dest / folder, symlinks=True)
    shutil.copyfile(tracker, dest / TRACKER_NAME)
    return {
        "scenario": pointer.get("scenario"),
        "run_id": pointer.get("run_id"),
        "source_checkpoint_dir": str(source),
        "iteration": iteration,
        "checkpoint_dir": str(dest),
    }


def invalidate_summary():
    """A summary of earlier attempts must not stand while this one runs (or after it is interrupted)."""
    for name in STALE_SUMMARY:
        path = Path(name)
        if path.exists():
            path.unlink()
            say(f"removed {path}: it is rebuilt when the workflow finishes")


def main():
    cfg = scenarios.resolve(sm.config)
    s = cfg.by_name[SCENARIO]
    fingerprint = cfg.fingerprint(s)
    stack = dict(sm.params.stack)
    key = attempt_key(fingerprint, stack["digest"])
    if SLOT.rsplit("-", 1)[0] != key:
        say(f"slot {SLOT} does not match the current settings and stack ({key}); refusing to run")
        return 2
    out_run = Path(sm.output.run)
    out_run.parent.mkdir(parents=True, exist_ok=True)
    slot_number = int(SLOT.rsplit("-", 1)[1])
    record = {
        "scenario": SCENARIO,
        "slot": SLOT,
        "settings_fingerprint": fingerprint,
        "settings": cfg.shaping_settings(s),
        # The stack this attempt was keyed by, and the machine this job ran on (recorded, for Slurm).
        "stack": stack,
        "stack_digest": stack["digest"],
        "slot_reason": str(sm.params.slot_reason),
        "machine": {
            **probe_machine(keyed_host=False),
            "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        },  # fmt: skip
    }

    # 'malformed' for a preflight.json that is not one (ftqual.preflight.report_schema)
    preflight = verdict_of(sm.input.preflight, preflight_schema.verdict_of)
    if preflight not in ("pass", "warn"):
        what = "report is malformed" if preflight == "malformed" else "failed"
        return not_launched(out_run, record, f"the preflight {what} ({sm.input.preflight})")
    if SCENARIO != cfg.baseline_scenario:
        baseline = verdict_of(sm.input.baseline)
        if baseline != "pass":
            return not_launched(
                out_run,
                record,
                f"the baseline's attempt ({sm.input.baseline}) is {baseline or 'missing'}: "
                "fault scenarios run after the baseline passes",
            )
        refused = baseline_says_no(Path(sm.input.baseline), s) or too_short(Path(sm.input.baseline), s)
        if refused:
            return not_launched(out_run, record, refused)
    invalidate_summary()

    slurm_job = os.environ.get("SLURM_JOB_ID")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_id = f"{SCENARIO}-{stamp}-{slurm_job or os.getpid()}-a{slot_number}"
    cwd = Path.cwd()
    work_dir = Path(os.path.abspath(cfg.work_dir or cwd))
    run_dir = work_dir / "runs" / run_id
    attempts = out_run.parent.parent / "attempts"
    attempts.mkdir(parents=True, exist_ok=True)
    console = attempts / f"{run_id}.console.log"

    python_bin = os.path.dirname(sys.executable)
    launcher_env = scenarios.launcher_env(cfg, s)
    if s.resume_from is not None:
        seeded = seed_checkpoint(Path(sm.input.baseline), work_dir / "checkpoints" / run_id)
        if isinstance(seeded, str):
            return not_launched(out_run, record, seeded)
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
        cmd = srun_prefix(s.allocated_nodes, s.gpus_per_node, rdzv_port) + cmd
    say(f"run {run_id} (attempt {SLOT}), run dir {run_dir}, Slurm job {slurm_job or '-'}", console=True)
    say("environment: " + " ".join(f"{k}={v}" for k, v in sorted(launcher_env.items())))
    say("$ " + " ".join(cmd))

    watcher = progress.Watcher(run_dir, timeouts=s.timeouts.as_dict(), fault=s.fault)
    turn = None
    if gpu_turn.needed():
        turn = gpu_turn.GpuTurn(gpu_turn.lock_path(), f"{run_id} (pid {os.getpid()}, {cwd})")
    try:
        rc, stopped_by, started = run_launcher(cmd, env, console, watcher, turn)
        if started is None:
            say(f"interrupted ({stopped_by}) before the launcher started; nothing ran", console=True)
            return 130
        finished = time.monotonic()
        show_progress(watcher, {})
        say(f"launcher exited {rc} after {finished - started:.0f} s; console: {console}")
        print(f"--- {console}", file=log)
        print(console.read_text(errors="replace"), file=log)
        if (rc != 0 or stopped_by is not None) and run_dir.is_dir():
            # The launcher kills what its run left behind; this covers a launcher that was killed itself.
            cleanup = [sys.executable, "-m", "ftqual", "cleanup", str(run_dir)]
            say("$ " + " ".join(cleanup))
            subprocess.run(cleanup, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    finally:
        if turn is not None:
            turn.release()  # after the cleanup: the next run must not meet this one's leftovers
    if stopped_by is not None:
        say(f"interrupted ({stopped_by}); evidence kept in {run_dir}", console=True)
        return 130

    run = {}
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
        duration_s=round(finished - started, 3),
        run_dir=relative_if_below(run_dir, cwd),
        slurm_job_id=slurm_job,
        console_log=str(console),
    )
    if rc != 0:
        lines = tail(console) + tail(run_dir / "logs" / "launcher.log")
        telling = telling_line(lines)
        run["cause"] = f"the launcher exited {rc}" + (f": {telling}" if telling else "")
        run["launcher_tail"] = lines
        say(f"FAILED: the launcher exited {rc}; evidence kept in {run_dir}", console=True)
    elif not record_path.is_file():
        run["cause"] = f"the launcher exited 0 but wrote no {record_path}"
    if s.fault != "none":
        marker = run_dir / "fault_injected.json"
        if marker.is_file():
            shutil.copyfile(marker, out_run.with_name("fault_injected.json"))
    out_run.write_text(json.dumps(run, indent=2) + "\n")
    say(f"done: {out_run}")
    return 0


sys.exit(main())
