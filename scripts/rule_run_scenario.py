"""Rule `run_scenario`: one attempt of one scenario under ft_launcher (through `python -m ftqual.launch`).

Each attempt gets a fresh run ID, `<scenario>-<UTC time>-<SLURM_JOB_ID or pid>-a<attempt>`, and so its own
runs/<run-id>/ that Snakemake never sees as an output and never deletes. The job succeeds when the launcher
exits 0; then results/<scenario>/run.json is the run directory's run.json plus `run_dir`, and for a fault
scenario results/<scenario>/fault_injected.json is a copy of the injection marker.

A multi-node scenario (nnodes > 1, Slurm only) starts one launcher per node with
`srun --nodes=N --ntasks-per-node=1`; the rendezvous endpoint is the allocation's first node (where this
script runs), computed inside the step, and all nodes share the run ID and the log server port.

Signals: the launcher runs in its own session, so it gets exactly one SIGTERM from us for a first
SIGINT/SIGTERM (a terminal's Ctrl-C, Snakemake, scancel); it forwards it to ft_launcher and kills what
is left by the process ids recorded in runs/<run-id>/pids/. A second signal is forwarded too (the
launcher then stops waiting). After a failed or interrupted run, `ftqual cleanup <run dir>` runs once
more here, for a launcher that was itself killed.

The launcher's console goes to results/<scenario>/attempts/<run-id>.console.log and, at the end, into
the rule's log.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log


def say(message):
    print(f"[run_scenario {sm.wildcards.scenario}] {message}", file=log)


def free_ports(count):
    """`count` distinct TCP ports free on this host right now."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


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


def run_launcher(cmd, env, console):
    """Run the launcher in its own session; forward SIGINT/SIGTERM as SIGTERM. Returns (rc, first signal)."""
    received, started = [], []

    def forward(signum, _frame):
        received.append(signum)
        if started:
            say(f"got {signal.Signals(signum).name}: sending SIGTERM to the launcher (pid {started[0].pid})")
            try:
                os.kill(started[0].pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, forward)
    if received:  # interrupted before anything started
        return 128 + received[0], received[0]
    with open(console, "w") as out:
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
        if received:  # a signal came while it was starting
            os.kill(started[0].pid, signal.SIGTERM)
        rc = started[0].wait()
    return rc, (received[0] if received else None)


def relative_if_below(path, base):
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def main():
    scenario = sm.wildcards.scenario
    record = json.loads(Path(sm.input.settings).read_text())
    settings = record["settings"]
    attempt = int(sm.resources.attempt)
    slurm_job = os.environ.get("SLURM_JOB_ID")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    run_id = f"{scenario}-{stamp}-{slurm_job or os.getpid()}-a{attempt}"
    cwd = Path.cwd()
    work_dir = Path(os.path.abspath(record["work_dir"] or cwd))
    run_dir = work_dir / "runs" / run_id
    out_run = Path(sm.output.run)
    out_fault = out_run.with_name("fault_injected.json")
    out_fault.unlink(missing_ok=True)  # a previous attempt's copy; this one writes its own
    attempts = out_run.parent / "attempts"
    attempts.mkdir(parents=True, exist_ok=True)
    console = attempts / f"{run_id}.console.log"

    root = Path(sm.scriptdir).resolve().parent
    python_bin = os.path.dirname(sys.executable)
    env = dict(os.environ)
    env.update(record["env"])
    env.update(
        NVRX_WORK_DIR=str(work_dir),
        NVRX_RUN_ID=run_id,
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        PATH=os.pathsep.join(filter(None, [python_bin, os.environ.get("PATH")])),
    )
    cmd = [sys.executable, "-m", "ftqual.launch", *record["workload_args"]]
    if env.get("MEGATRON_PATH"):
        env["MEGATRON_PATH"] = os.path.abspath(env["MEGATRON_PATH"])
    if settings["nnodes"] > 1:
        # Every node's launcher must agree on the log server port (NVRx's default, 50051, would be
        # shared by concurrent multi-node runs); this host is the allocation's first node.
        rdzv_port, log_port = free_ports(2)
        env["NVRX_LOG_SERVER_PORT"] = str(log_port)
        cmd = srun_prefix(settings["nnodes"], settings["gpus_per_node"], rdzv_port) + cmd
    say(f"attempt {attempt}, run {run_id}, run dir {run_dir}, Slurm job {slurm_job or '-'}")
    say("environment: " + " ".join(f"{k}={v}" for k, v in sorted(record["env"].items())))
    say("$ " + " ".join(cmd))

    rc, got_signal = run_launcher(cmd, env, console)
    say(f"launcher exited {rc}; console: {console}")
    print(f"--- {console}", file=log)
    print(console.read_text(errors="replace"), file=log)
    if (rc != 0 or got_signal is not None) and run_dir.is_dir():
        # The launcher kills what its run left behind; this covers a launcher that was killed itself.
        cleanup = [sys.executable, "-m", "ftqual", "cleanup", str(run_dir)]
        say("$ " + " ".join(cleanup))
        subprocess.run(cleanup, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    if got_signal is not None:
        say(f"interrupted by {signal.Signals(got_signal).name}; evidence kept in {run_dir}")
        return 128 + got_signal
    if rc != 0:
        say(f"FAILED: the launcher exited {rc}; evidence kept in {run_dir}")
        return rc if 0 < rc < 256 else 1

    record_path = run_dir / "run.json"
    if not record_path.is_file():
        say(f"FAILED: the launcher exited 0 but wrote no {record_path}")
        return 1
    run = json.loads(record_path.read_text())
    run.update(
        run_dir=relative_if_below(run_dir, cwd),
        attempt=attempt,
        slurm_job_id=slurm_job,
        console_log=str(console),
    )
    if settings["fault"] != "none":
        marker = run_dir / "fault_injected.json"
        if not marker.is_file():
            say(f"FAILED: fault {settings['fault']} scenario finished without {marker}")
            return 1
        shutil.copyfile(marker, out_fault)
    out_run.write_text(json.dumps(run, indent=2) + "\n")
    say(f"done: {out_run}")
    return 0


sys.exit(main())
