"""The stack identity of one workflow invocation: probed once by the main process, handed to its jobs.

Local executor: everything is probed here (this machine trains): the software of the interpreter running
Snakemake (the rules run in it), the Megatron tree, this host's GPUs and driver. No job, no GPU time.

Slurm executor: the software and the Megatron tree are probed here (README: the project and its Python
environment are at the same path on every node), the partition's nodes and GRES come from `sinfo`, and the
training node's GPUs and driver from a one-task step, `srun ... python -m ftqual stack --machine`, on the
partition the jobs use (it costs a queue wait and a few seconds of one node; `node_stack_probe: false` in
the config skips it: the node side is then recorded by every job but not keyed). A dry run (`-n`) never
submits anything: it keys the node side as the latest real run probed it, and says so.

Jobs re-parse the Snakefile (a Slurm job runs Snakemake again on its node): they must compute the same
slots, so they never probe. The main process writes the identity to `results/stack/<digest>.json` and
exports its digest as FTQUAL_STACK (declared with `envvars:` in the Snakefile, so Snakemake passes it to
every job); a job reads that file.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ftqual.jsonfile import write_json_atomic
from ftqual.stack import identity as stackid
from ftqual.stack.identity import StackIdentity

ENV_VAR = "FTQUAL_STACK"
STACK_DIR = Path("results") / "stack"
NODE_CACHE = STACK_DIR / "node-latest.json"
NODE_PROBE_TIMEOUT_S = 3600.0  # a queue wait, not the probe (seconds of work)


class StackProbeError(RuntimeError):
    """The identity cannot be established: one line saying why and how to fix it."""


@dataclass(frozen=True)
class SlurmTarget:
    partition: str | None
    account: str | None
    gpus: int | None  # GPUs the node-side probe asks for (as the preflight does); None: no GPU asked
    probe_node: bool


def record_path(digest: str) -> Path:
    return STACK_DIR / f"{digest}.json"


def inherited(workdir: Path, env: Mapping[str, str] | None = None) -> StackIdentity | None:
    """The identity a job's parent workflow exported (in `env`, by default this process's environment), or
    None when this process is not such a job."""
    digest = (os.environ if env is None else env).get(ENV_VAR, "")
    if not digest:
        return None
    try:
        data = json.loads((workdir / record_path(digest)).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StackProbeError(
            f"{ENV_VAR}={digest} names the stack record {record_path(digest)}, which cannot be read ({exc}); "
            "the project directory must be shared with the nodes at the same path"
        ) from None
    ident = stackid.from_json(data)
    if ident is None or ident.digest != digest:
        raise StackProbeError(f"the stack record {record_path(digest)} is not the one {ENV_VAR} names")
    return ident


def node_probe_command(python: str, target: SlurmTarget) -> list[str]:
    cmd = ["srun", "--nodes=1", "--ntasks=1", "--time=5", "--job-name=ftqual-stack-probe"]
    if target.partition:
        cmd.append(f"--partition={target.partition}")
    if target.account:
        cmd.append(f"--account={target.account}")
    if target.gpus:
        cmd.append(f"--gpus={target.gpus}")
    return [*cmd, python, "-m", "ftqual", "stack", "--machine"]


def probe_node(python: str, target: SlurmTarget, run: Callable = subprocess.run) -> dict[str, str]:
    """The training node's GPUs, driver and name, from a one-task Slurm step."""
    cmd = node_probe_command(python, target)
    try:
        proc = run(cmd, capture_output=True, text=True, timeout=NODE_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StackProbeError(
            f"the node-side stack probe could not run ({shlex.join(cmd)}: {exc}); "
            "fix the partition/account in the profile, or set node_stack_probe: false"
        ) from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    try:
        parts = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except ValueError:
        parts = None
    if not isinstance(parts, dict) or not all(isinstance(v, str) for v in parts.values()):
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}, no answer"])[-1]
        raise StackProbeError(
            f"the node-side stack probe failed ({shlex.join(cmd)}: {why}); "
            "fix the partition/account in the profile, or set node_stack_probe: false"
        )
    return parts


def _cached_node(workdir: Path) -> dict[str, str] | None:
    try:
        data = json.loads((workdir / NODE_CACHE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    parts = data.get("parts") if isinstance(data, dict) else None
    return parts if isinstance(parts, dict) and all(isinstance(v, str) for v in parts.values()) else None


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, data)


def current(
    workdir: Path,
    *,
    workload: str,
    megatron_path: str | None,
    executor: str | None,
    python: str,
    dry_run: bool,
    slurm: SlurmTarget | None = None,
    say: Callable[[str], None] = lambda line: None,
    node_probe: Callable[[str, SlurmTarget], dict[str, str]] = probe_node,
) -> StackIdentity:
    """The main process's identity of the stack under test (module docstring); recorded unless dry_run."""
    parts = stackid.software_parts(workload, megatron_path, python)
    parts["executor"] = executor or "unknown"
    if executor == "slurm" and slurm is not None:
        parts.update(stackid.slurm_parts(slurm.partition, slurm.account))
        if slurm.probe_node:
            node = None
            if dry_run:
                node = _cached_node(workdir)
                say(
                    "stack: the training node's GPUs and driver as the last real run probed them"
                    if node
                    else "stack: no real run has probed a training node yet (a real run does, with srun)"
                )
            else:
                say(f"stack: probing a training node ({shlex.join(node_probe_command(python, slurm))})")
                node = node_probe(python, slurm)
                _write(workdir / NODE_CACHE, {"parts": node})
            parts.update(node or {"gpus": "not probed yet", "driver": "not probed yet"})
    elif executor != "slurm":
        parts.update(stackid.probe_machine())
    where = os.path.abspath(megatron_path) if megatron_path else None
    inputs = {"workload": workload, "megatron_path": where, "executor": executor, "python": python}
    if slurm is not None:
        inputs.update(slurm_partition=slurm.partition, slurm_account=slurm.account)
    ident = StackIdentity(parts, inputs)
    if not dry_run:
        _write(workdir / record_path(ident.digest), ident.to_json())
    os.environ[ENV_VAR] = ident.digest
    return ident


def reprobe(recorded: StackIdentity) -> tuple[StackIdentity, list[str]]:
    """The stack as it is now, probed as `recorded` was (its inputs), for `ftqual status`; parts that need a
    job (a Slurm node's GPUs and driver) keep their recorded value. Also says which parts those are."""
    inputs = recorded.inputs
    workload = str(inputs.get("workload") or "smoke")
    megatron_path = inputs.get("megatron_path")
    python = str(inputs.get("python") or sys.executable)
    parts = stackid.software_parts(workload, str(megatron_path) if megatron_path else None, python)
    executor = inputs.get("executor")
    parts["executor"] = str(executor or "unknown")
    kept: list[str] = []
    if executor == "slurm":
        parts.update(stackid.slurm_parts(inputs.get("slurm_partition"), inputs.get("slurm_account")))
        for key in ("gpus", "driver", "node"):
            if key in recorded.parts:
                parts[key] = recorded.parts[key]
                kept.append(key)
    else:
        parts.update(stackid.probe_machine())
    return StackIdentity(parts, dict(inputs)), kept
