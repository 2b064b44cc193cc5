"""Run a parser in a child interpreter: the preflight's way of asking NVRx and Megatron-LM themselves.

A broken install or a hanging import must not stall or crash the preflight, and their modules must not be
imported into it; the child reads one JSON request on stdin and prints one JSON line. Slurm's job
variables are dropped: the preflight may run in an allocation shaped differently from the training step,
and ft_launcher's one-launcher-per-node check reads them.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment for a parse: `env` minus Slurm's job variables."""
    return {k: v for k, v in env.items() if not k.startswith("SLURM_")}


def run_json_child(
    python: str, script: str, request: dict, timeout_s: float, env: Mapping[str, str] | None, what: str
) -> dict | str:
    """The child's JSON answer, or one line saying why there is none (`what` names the slow import)."""
    try:
        proc = subprocess.run(
            [python, "-c", script],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=child_env(os.environ if env is None else env),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"{what} took more than {timeout_s:.0f} s"
    except OSError as exc:
        return f"cannot run {python}: {exc}"
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"parser child exited {proc.returncode}: {tail}"
    return json.loads(lines[-1])
