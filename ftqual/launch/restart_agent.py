"""NVRx's restart agent under ft_launcher: its flags, its environment and its one run per host.

NVRx's restart agent (the attribution service, `nvrx-attrsvc`) under ft_launcher: the flags, the
environment and the host-wide turn a run with `restart_agent` log|stop needs.

What NVRx 0.7.0 does (docs/faults.md, "The restart agent", measured on CPU):
- `--ft-attribution-endpoint=localhost` makes the store-host launcher start the service itself, always on
  127.0.0.1:50050 (`attribution_manager.DEFAULT_ATTRIBUTION_PORT`, not configurable): two such runs on one
  host would share one service, the second one's analyses rejected outside its log folder. `port_turn`
  makes them take turns (a flock per user), as gpu_turn does for GPUs.
- The launcher refuses to start the service without an LLM API key file
  (`attribution_manager._resolve_api_key_file`), even where no LLM is used. ftqual runs the agent
  deterministic only (`NVRX_ATTRSVC_RESTART_AGENT_ENRICHMENT_ENABLED=false`: its layers L0, L2-L4, no model
  route), which decides without network or key, so the key file is an empty placeholder in the run.
- The agent's history of earlier cycles (L3, which turns a repeated failure into STOP) is kept per job id,
  read from SLURM_ARRAY_JOB_ID or SLURM_JOB_ID (`shared_utils/job_metadata.job_id_from_env`); without one
  every verdict is RESTART ("missing_job_id"). Outside Slurm the run id is given as SLURM_ARRAY_JOB_ID:
  SLURM_JOB_ID would make ft_launcher take the Slurm paths (it exits 1 at once on a machine without Slurm).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

MODES = ("off", "log", "stop")
STOP_ACTION = {"log": "log", "stop": "no-restart"}  # ft_launcher --ft-attribution-stop-action
ENRICHMENT_ENV = "NVRX_ATTRSVC_RESTART_AGENT_ENRICHMENT_ENABLED"
JOB_ID_ENV = "SLURM_ARRAY_JOB_ID"
KEY_FILE = "restart_agent/no-llm.key"  # under the run directory: the launcher's required key file, empty
SERVICE_LOG = "logs/launcher_attribution.log"  # where NVRx writes the service's log (beside launcher.log)
SERVICE_PORT = 50050
LOCK_ENV = "FTQUAL_ATTRSVC_LOCK"  # another lock path (tests)


def enabled(mode: str) -> bool:
    return mode in STOP_ACTION


def attribution_args(mode: str, run_dir: Path) -> list[str]:
    """ft_launcher's flags for the agent (none when off, so every earlier command stays as it was)."""
    if not enabled(mode):
        return []
    return [
        "--ft-attribution-endpoint=localhost",
        "--ft-attribution-analysis-backend=lib",
        f"--ft-attribution-stop-action={STOP_ACTION[mode]}",
        f"--ft-attribution-llm-api-key-file={run_dir / KEY_FILE}",
    ]


def agent_env(mode: str, env: Mapping[str, str], run_id: str) -> dict[str, str]:
    """The variables the launcher adds to ft_launcher's environment (the service inherits it)."""
    if not enabled(mode):
        return {}
    out = {ENRICHMENT_ENV: "false"}
    if not env.get("SLURM_ARRAY_JOB_ID") and not env.get("SLURM_JOB_ID"):
        out[JOB_ID_ENV] = run_id
    return out


def prepare(mode: str, run_dir: Path) -> None:
    """The empty key file the launcher insists on (never read: no model route is configured)."""
    if enabled(mode):
        key = run_dir / KEY_FILE
        key.parent.mkdir(parents=True, exist_ok=True)
        key.touch(mode=0o600, exist_ok=True)


def lock_path() -> Path:
    override = os.environ.get(LOCK_ENV)
    if override:
        return Path(override)
    return Path(tempfile.gettempdir()) / f"ftqual-attrsvc-{SERVICE_PORT}-{os.getuid()}.lock"


@contextlib.contextmanager
def port_turn(mode: str) -> Iterator[None]:
    """Hold the host's agent port for the run (blocking; the kernel drops the lock when we die)."""
    if not enabled(mode):
        yield
        return
    with open(lock_path(), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
