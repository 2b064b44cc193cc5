"""The launcher's settings: the seed's environment interface plus ours, validated into one dataclass.

Every rule has its own one-line message (raised as SettingsError, printed on stderr, exit 2), and
nothing here creates a file: validation runs before any directory exists. `load_settings` reads only the
environment (and whether pretrain_gpt.py exists); `check_run_state` reads the run and checkpoint
directories and refuses to reuse evidence.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ftqual.launch import stack

FAULTS = ("none", "kill", "hang")
WORKLOADS = ("megatron", "smoke")
HANG_PLACEMENTS = ("step", "immediate")
SECTIONS = ("setup", "step", "checkpointing")
MODEL_LAYERS = 4
MODEL_HEADS = 8
TRACKER_NAME = "latest_checkpointed_iteration.txt"
RUN_ID_RE = re.compile(r"^[A-Za-z0-9_-]+$")
POSITIVE_INT_RE = re.compile(r"^[1-9][0-9]*$")
NON_NEGATIVE_INT_RE = re.compile(r"^(0|[1-9][0-9]*)$")
ENDPOINT_RE = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[^:\s]+):(?P<port>[0-9]+)$")

DEFAULT_SECTION_TIMEOUTS = "setup:900,step:120,checkpointing:600"


class SettingsError(Exception):
    """A setting is missing or invalid; the message is the one line printed on stderr."""


@dataclass(frozen=True)
class Settings:
    workload: str
    megatron_path: Path | None
    work_dir: Path
    run_id: str
    checkpoint_dir: Path
    checkpoint_dir_is_default: bool
    nnodes: int
    gpus_per_node: int
    tp: int
    pp: int
    train_iters: int
    save_interval: int
    fault: str
    fault_rank: int | None  # None when fault is "none"
    rdzv_endpoint: str
    dry_run: bool
    scenario: str
    section_timeouts: dict[str, float]
    out_of_section_timeout: float
    max_restarts: int
    term_timeout: int
    workers_stop_timeout: int
    log_server_port: int | None  # None: pick a free port at launch
    transformer_impl: str
    dist_optimizer: str
    hang_placement: str
    node_rank: int
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    @property
    def world_size(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def global_batch_size(self) -> int:
        return self.world_size  # micro batch 1 on every rank, as the seed sets it

    @property
    def run_dir(self) -> Path:
        return self.work_dir / "runs" / self.run_id

    @property
    def marker_path(self) -> Path:
        return self.run_dir / "fault_injected.json"

    @property
    def tracker_path(self) -> Path:
        return self.checkpoint_dir / TRACKER_NAME

    @property
    def entrypoint(self) -> Path | None:
        return self.megatron_path / "pretrain_gpt.py" if self.megatron_path else None

    def timeouts_record(self) -> dict[str, float | int]:
        """run.json's `timeouts`: the section timeouts plus out_of_section, in seconds."""
        record = {name: _number(value) for name, value in self.section_timeouts.items()}
        record["out_of_section"] = _number(self.out_of_section_timeout)
        return record

    def section_timeouts_arg(self) -> str:
        return ",".join(f"{name}:{_number(value)}" for name, value in self.section_timeouts.items())


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else value


def _get(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name)
    return default if value is None or value == "" else value


def _positive_int(env: Mapping[str, str], name: str, default: str) -> int:
    raw = _get(env, name, default)
    if not POSITIVE_INT_RE.match(raw):
        raise SettingsError(f"{name} must be a positive integer (got {raw!r})")
    return int(raw)


def _non_negative_int(env: Mapping[str, str], name: str, default: str) -> int:
    raw = _get(env, name, default)
    if not NON_NEGATIVE_INT_RE.match(raw):
        raise SettingsError(f"{name} must be a non-negative integer (got {raw!r})")
    return int(raw)


def _positive_seconds(raw: str, name: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise SettingsError(f"{name} must be a positive number of seconds (got {raw!r})")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, choices: Sequence[str]) -> str:
    raw = _get(env, name, default)
    if raw not in choices:
        listed = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        raise SettingsError(f"{name} must be {listed} (got {raw!r})")
    return raw


def parse_section_timeouts(raw: str) -> dict[str, float]:
    """`setup:900,step:120,checkpointing:600` -> dict; every one of Megatron's three sections, once."""
    name = "NVRX_SECTION_TIMEOUTS"
    timeouts: dict[str, float] = {}
    for item in raw.split(","):
        section, sep, value = item.strip().partition(":")
        if not sep or section not in SECTIONS:
            raise SettingsError(f"{name} must be setup:S,step:S,checkpointing:S in seconds (got {raw!r})")
        if section in timeouts:
            raise SettingsError(f"{name} names section {section!r} twice (got {raw!r})")
        timeouts[section] = _positive_seconds(value, f"{name} {section}")
    missing = [s for s in SECTIONS if s not in timeouts]
    if missing:
        raise SettingsError(
            f"{name} must give all of setup, step and checkpointing (missing {', '.join(missing)})"
        )
    return {s: timeouts[s] for s in SECTIONS}


def load_settings(
    env: Mapping[str, str], argv: Sequence[str] = (), now: datetime | None = None, pid: int = 0
) -> Settings:
    """Validate the environment in the seed's order; SettingsError (one line) on the first problem."""
    work_dir_raw = env.get("NVRX_WORK_DIR", "")
    if not work_dir_raw:
        raise SettingsError("Set NVRX_WORK_DIR to an absolute directory visible on all nodes")
    if not work_dir_raw.startswith("/"):
        raise SettingsError(f"NVRX_WORK_DIR must be absolute (got {work_dir_raw!r})")
    workload = _choice(env, "NVRX_WORKLOAD", "megatron", WORKLOADS)
    megatron_path = None
    if workload == "megatron":
        raw = env.get("MEGATRON_PATH", "")
        if not raw:
            raise SettingsError(
                "Set MEGATRON_PATH to an installed Megatron-LM source checkout "
                "(or NVRX_WORKLOAD=smoke for the CPU stand-in)"
            )
        megatron_path = Path(raw)
        if not (megatron_path / "pretrain_gpt.py").is_file():
            raise SettingsError(f"pretrain_gpt.py not found in MEGATRON_PATH ({raw})")

    fault = _get(env, "NVRX_DEMO_FAULT", "kill")
    if fault not in FAULTS:
        raise SettingsError(f"NVRX_DEMO_FAULT must be none, kill, or hang (got {fault!r})")

    nnodes = _positive_int(env, "NNODES", "1")
    gpus_per_node = _positive_int(env, "GPUS_PER_NODE", "2")
    tp = _positive_int(env, "TP", "1")
    pp = _positive_int(env, "PP", "1")
    train_iters = _positive_int(env, "TRAIN_ITERS", "100")
    save_interval = _positive_int(env, "SAVE_INTERVAL", "5")

    world = nnodes * gpus_per_node
    if world % (tp * pp):
        raise SettingsError(f"World size {world} (NNODES*GPUS_PER_NODE) must be divisible by TP*PP={tp * pp}")
    if MODEL_LAYERS % pp:
        raise SettingsError(f"PP={pp} must divide the model's {MODEL_LAYERS} layers")
    if MODEL_HEADS % tp:
        raise SettingsError(f"TP={tp} must divide the model's {MODEL_HEADS} attention heads")

    if nnodes > 1:
        endpoint = env.get("RDZV_ENDPOINT", "")
        if not endpoint:
            raise SettingsError("Set RDZV_ENDPOINT to a common reachable host:port for all nodes")
        run_id = env.get("NVRX_RUN_ID") or env.get("SLURM_JOB_ID") or ""
        if not run_id:
            raise SettingsError("Set NVRX_RUN_ID (or run under Slurm) to the same unique run ID on all nodes")
    else:
        endpoint = _get(env, "RDZV_ENDPOINT", "localhost:0")
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
        run_id = env.get("NVRX_RUN_ID") or f"{stamp}-{pid}"
    if not ENDPOINT_RE.match(endpoint) or int(ENDPOINT_RE.match(endpoint)["port"]) > 65535:
        raise SettingsError(f"RDZV_ENDPOINT must be host:port (got {endpoint!r})")
    if not RUN_ID_RE.match(run_id):
        raise SettingsError(f"Use letters, digits, underscores or hyphens in NVRX_RUN_ID (got {run_id!r})")

    work_dir = Path(work_dir_raw)
    ckpt_raw = env.get("NVRX_CHECKPOINT_DIR", "")
    if ckpt_raw and not ckpt_raw.startswith("/"):
        raise SettingsError(f"NVRX_CHECKPOINT_DIR must be absolute (got {ckpt_raw!r})")
    checkpoint_dir = Path(ckpt_raw) if ckpt_raw else work_dir / "runs" / run_id / "checkpoints"

    fault_rank = None
    if fault != "none":
        fault_rank = _non_negative_int(env, "NVRX_FAULT_RANK", "1")
        if fault_rank >= world:
            raise SettingsError(
                f"NVRX_FAULT_RANK={fault_rank} is outside the world of {world} rank(s); "
                f"use 0..{world - 1} (NVRX_FAULT_RANK=0 on one GPU)"
            )

    dry_raw = env.get("NVRX_DRY_RUN", "0") or "0"
    if dry_raw not in ("0", "1"):
        raise SettingsError(f"NVRX_DRY_RUN must be 0 or 1 (got {dry_raw!r})")

    scenario = _get(env, "NVRX_SCENARIO", fault)
    if not RUN_ID_RE.match(scenario):
        raise SettingsError(
            f"Use letters, digits, underscores or hyphens in NVRX_SCENARIO (got {scenario!r})"
        )
    section_timeouts = parse_section_timeouts(_get(env, "NVRX_SECTION_TIMEOUTS", DEFAULT_SECTION_TIMEOUTS))
    out_of_section = _positive_seconds(
        _get(env, "NVRX_OUT_OF_SECTION_TIMEOUT", "180"), "NVRX_OUT_OF_SECTION_TIMEOUT"
    )
    max_restarts = _non_negative_int(env, "NVRX_MAX_RESTARTS", "3")
    term_timeout = _positive_int(env, "NVRX_TERM_TIMEOUT", "15")
    workers_stop_timeout = _positive_int(env, "NVRX_WORKERS_STOP_TIMEOUT", "15")
    port_raw = env.get("NVRX_LOG_SERVER_PORT", "")
    log_server_port = None
    if port_raw:
        if not POSITIVE_INT_RE.match(port_raw) or int(port_raw) > 65535:
            raise SettingsError(f"NVRX_LOG_SERVER_PORT must be a TCP port 1..65535 (got {port_raw!r})")
        log_server_port = int(port_raw)
    transformer_impl = _choice(env, "NVRX_TRANSFORMER_IMPL", "auto", stack.TRANSFORMER_IMPLS)
    dist_optimizer = _choice(env, "NVRX_DIST_OPTIMIZER", "auto", stack.DIST_OPTIMIZER_MODES)
    hang_placement = _choice(env, "NVRX_HANG_PLACEMENT", "step", HANG_PLACEMENTS)
    node_rank_name = "NVRX_NODE_RANK" if env.get("NVRX_NODE_RANK") else "SLURM_NODEID"
    node_rank = _non_negative_int(env, node_rank_name, "0")
    if node_rank >= nnodes:
        raise SettingsError(f"{node_rank_name}={node_rank} must be below NNODES={nnodes}")

    return Settings(
        workload=workload,
        megatron_path=megatron_path,
        work_dir=work_dir,
        run_id=run_id,
        checkpoint_dir=checkpoint_dir,
        checkpoint_dir_is_default=not ckpt_raw,
        nnodes=nnodes,
        gpus_per_node=gpus_per_node,
        tp=tp,
        pp=pp,
        train_iters=train_iters,
        save_interval=save_interval,
        fault=fault,
        fault_rank=fault_rank,
        rdzv_endpoint=endpoint,
        dry_run=dry_raw == "1",
        scenario=scenario,
        section_timeouts=section_timeouts,
        out_of_section_timeout=out_of_section,
        max_restarts=max_restarts,
        term_timeout=term_timeout,
        workers_stop_timeout=workers_stop_timeout,
        log_server_port=log_server_port,
        transformer_impl=transformer_impl,
        dist_optimizer=dist_optimizer,
        hang_placement=hang_placement,
        node_rank=node_rank,
        extra_args=tuple(argv),
    )


def read_tracker(path: Path) -> int | None:
    """The tracker's iteration, None when absent; SettingsError when empty, not an integer or unreadable."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(
            f"Checkpoint tracker {path} is unreadable ({exc.__class__.__name__}); fix it before launching"
        ) from exc
    value = text.strip()
    if not value:
        raise SettingsError(f"Checkpoint tracker {path} is empty; fix it before launching")
    if not NON_NEGATIVE_INT_RE.match(value):
        raise SettingsError(
            f"Checkpoint tracker {path} does not hold an integer iteration (got {value[:40]!r})"
        )
    return int(value)


def check_run_state(settings: Settings, host: str) -> None:
    """Refuse to reuse evidence: an old marker, an earlier launch, calculated timeouts, a broken tracker."""
    run_dir = settings.run_dir
    if settings.marker_path.exists():
        raise SettingsError("This run ID already has an injection marker; use a new NVRX_RUN_ID")
    # Node 0 writes run.json; on the other nodes of a multi-node run it may already be there, so each of
    # them checks its own launcher record instead.
    if settings.node_rank == 0 and (run_dir / "run.json").exists():
        raise SettingsError(
            f"Run directory {run_dir} already holds run.json from an earlier launch; use a new NVRX_RUN_ID"
        )
    if (run_dir / "pids" / f"{host}.launcher.json").exists():
        raise SettingsError(f"Host {host} already launched run {settings.run_id}; use a new NVRX_RUN_ID")
    if (settings.checkpoint_dir / "ft_state.json").exists():
        raise SettingsError(
            "This fixed-timeout run requires a checkpoint directory without calculated "
            f"ft_state.json ({settings.checkpoint_dir}); archive it deliberately"
        )
    read_tracker(settings.tracker_path)
