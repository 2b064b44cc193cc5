"""The launcher's settings: the walkthrough's environment interface plus ours, validated into one dataclass.

Every rule has its own one-line message (raised as SettingsError, printed on stderr, exit 2), and nothing
here creates a file: validation runs before any directory exists. Patterns are matched with
`re.fullmatch` over ASCII classes (`$` would match before a trailing newline, `\\d` would take Unicode
digits), every value has a length limit and must be printable, and every integer has bounds checked on
its digits before `int()` sees it (Python refuses more than 4,300 digits with a traceback).

`load_settings` reads only the environment (and whether pretrain_gpt.py exists); ftqual.launch.runstate
then proves that every directory the run needs can be created and written, and refuses to reuse
evidence or to resume a checkpoint that is not ours.

Defaults: the workflow (ftqual/scenario/model.py `launcher_env`) always sets every variable, so the defaults
below apply only when scripts/run_megatron_gpt.sh is used on its own, as the walkthrough does. They are
the walkthrough's values (2 GPUs, 100 iterations, a checkpoint every 5, kill rank 1) so that its commands
keep working unchanged; an empty variable counts as unset, as `${VAR:-default}` in the walkthrough's script
did.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ftqual.contract import FAULTS, MODEL, TRACKER_NAME, gpu_only_problem
from ftqual.scenario import campaign_setup, constraints
from ftqual.scenario.campaign_plan import CampaignPlan, PlanError
from ftqual.stack import resolve as stack

__all__ = ["FAULTS", "TRACKER_NAME", "Settings", "SettingsError", "load_settings"]

WORKLOADS = ("megatron", "smoke")
# Where a rank fault lands once armed (the wrapper's --hang-placement; config/schema.yaml says each).
HANG_PLACEMENTS = ("step", "immediate", "checkpointing", "out_of_section", "setup")
FAULT_TIMINGS = ("checkpoint", "in_save")
SECTIONS = ("setup", "step", "checkpointing")

RUN_ID_MAX = 128  # a directory name and part of every pid record's name; 255 bytes is the file name limit
SCENARIO_MAX = 64
RUN_ID_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{RUN_ID_MAX - 1}}}")
SCENARIO_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{SCENARIO_MAX - 1}}}")
FINGERPRINT_RE = re.compile(r"[0-9a-f]{8,64}")
INT_RE = re.compile(r"0|[1-9][0-9]{0,11}")  # the digit cap keeps int() far from its 4,300-digit limit
SECONDS_RE = re.compile(r"(0|[1-9][0-9]{0,11})(\.[0-9]{1,17})?")  # what repr(float) writes, bounded
# One DNS label (letters, digits, hyphens inside; underscores, which some cluster node names use).
HOST_LABEL_RE = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
ENDPOINT_RE = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]{2,45}\]|[^:\[\]]{1,253}):(?P<port>[0-9]{1,5})")
# Paths are handed to ft_launcher, Megatron and shell-quoted into command.txt: keep to characters that no
# shell, log parser or Slurm script treats specially.
PATH_CHARS_RE = re.compile(r"[A-Za-z0-9._+,@%=~/-]+")
PATH_MAX = 1024
NAME_MAX = 255
VALUE_MAX = 256

# Upper bounds: generous for any real run, small enough that a typo (or an attack) is caught here rather
# than by a traceback or an hour-long launch.
MAX_NNODES = 4096
MAX_GPUS_PER_NODE = 64
MAX_TRAIN_ITERS = 10_000_000
MAX_RESTARTS = 1000
MAX_INJECTIONS = 1000
MAX_STOP_TIMEOUT_S = 3600
MAX_SECTION_TIMEOUT_S = 7 * 24 * 3600

PATH_VARIABLES = ("NVRX_WORK_DIR", "NVRX_CHECKPOINT_DIR", "MEGATRON_PATH")
# Every variable this module reads; each is checked for length and printable characters first.
VARIABLES = (
    *PATH_VARIABLES,
    "NVRX_WORKLOAD",
    "NVRX_RUN_ID",
    "SLURM_JOB_ID",
    "NVRX_DEMO_FAULT",
    "NNODES",
    "GPUS_PER_NODE",
    "TP",
    "PP",
    "TRAIN_ITERS",
    "SAVE_INTERVAL",
    "RDZV_ENDPOINT",
    "NVRX_FAULT_RANK",
    "NVRX_DRY_RUN",
    "NVRX_SCENARIO",
    "NVRX_SECTION_TIMEOUTS",
    "NVRX_OUT_OF_SECTION_TIMEOUT",
    "NVRX_MAX_RESTARTS",
    "NVRX_TERM_TIMEOUT",
    "NVRX_WORKERS_STOP_TIMEOUT",
    "NVRX_LOG_SERVER_PORT",
    "NVRX_TRANSFORMER_IMPL",
    "NVRX_DIST_OPTIMIZER",
    "NVRX_HANG_PLACEMENT",
    "NVRX_NODE_RANK",
    "SLURM_NODEID",
    "NVRX_SETTINGS_FINGERPRINT",
    "NVRX_INJECTIONS",
    "NVRX_FAULT_TIMING",
    "NVRX_LOAD_CHECKPOINTS",
    "NVRX_RDZV_JOIN_TIMEOUT",
    "NVRX_SPARE_NODES",
    "NVRX_TIMEOUTS_FROM",
    "NVRX_CALC_FT_TIMEOUTS",
    *campaign_setup.VARIABLES,
)

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
    settings_fingerprint: str | None = None  # NVRX_SETTINGS_FINGERPRINT, from the workflow
    injections: int = 1  # NVRX_INJECTIONS: faults in one run, one per cycle
    fault_timing: str = "checkpoint"  # NVRX_FAULT_TIMING: after a completed checkpoint, or in_save (kill)
    checkpoint_load: bool = True  # NVRX_LOAD_CHECKPOINTS=0: no --load, every cycle starts from iteration 0
    join_timeout: int | None = None  # NVRX_RDZV_JOIN_TIMEOUT: --rdzv-conf join_timeout (None: NVRx's default)
    spare_nodes: int = 0  # NVRX_SPARE_NODES: launchers beyond NNODES, standbys (ft_launcher --nnodes=N:N+S)
    # NVRX_TIMEOUTS_FROM: the configured timeouts these were recommended from (ftqual recommend-timeouts);
    # None: the timeouts are the configured ones
    timeouts_from: dict[str, float] | None = None
    # NVRX_CALC_FT_TIMEOUTS=1: the workload calculates its timeouts (--calc-ft-timeouts) and persists them in
    # ft_state.json; the section timeouts are then only the initial ones
    calc_ft_timeouts: bool = False
    campaign: CampaignPlan | None = None  # NVRX_DEMO_FAULT=campaign: the plan, written before the launch

    @property
    def launchers(self) -> int:
        """Nodes that run a launcher: the active NNODES and the spares."""
        return self.nnodes + self.spare_nodes

    @property
    def nnodes_arg(self) -> str:
        return str(self.nnodes) if not self.spare_nodes else f"{self.nnodes}:{self.launchers}"

    @property
    def world_size(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def global_batch_size(self) -> int:
        return self.world_size  # micro batch 1 on every rank, as the walkthrough sets it

    @property
    def run_dir(self) -> Path:
        return self.work_dir / "runs" / self.run_id

    @property
    def marker_path(self) -> Path:
        return self.run_dir / "fault_injected.json"

    @property
    def campaign_plan_path(self) -> Path:
        return self.run_dir / "campaign_plan.json"

    @property
    def leftovers_dir(self) -> Path:
        return self.run_dir / "leftovers"

    @property
    def tracker_path(self) -> Path:
        return self.checkpoint_dir / TRACKER_NAME

    @property
    def entrypoint(self) -> Path | None:
        return self.megatron_path / "pretrain_gpt.py" if self.megatron_path else None

    @property
    def run_dirs(self) -> tuple[Path, ...]:
        """Every directory the run writes into, in creation order."""
        run = self.run_dir
        return (run / "logs", run / "cycle_infos", run / "pids", run / "leftovers", self.checkpoint_dir)

    def timeouts_record(self) -> dict[str, float | int]:
        """run.json's `timeouts`: the section timeouts plus out_of_section, in seconds."""
        record = {name: plain_number(value) for name, value in self.section_timeouts.items()}
        record["out_of_section"] = plain_number(self.out_of_section_timeout)
        return record

    @property
    def timeouts_source(self) -> str:
        """run.json's `timeouts_source`: `recommended` when the timeouts came from a recommendation."""
        return "configured" if self.timeouts_from is None else "recommended"

    def timeouts_from_record(self) -> dict[str, float | int] | None:
        return (
            None
            if self.timeouts_from is None
            else {k: plain_number(v) for k, v in self.timeouts_from.items()}
        )

    def section_timeouts_arg(self) -> str:
        return ",".join(f"{name}:{plain_number(value)}" for name, value in self.section_timeouts.items())


def plain_number(value: float) -> float | int:
    """`value` as an int when it is whole: run.json, the launcher's variables and command lines say 300, not
    300.0 (ftqual.scenario.model writes the workflow's side with it too)."""
    return int(value) if float(value).is_integer() else value


def shown(raw: str, limit: int = 40) -> str:
    """A value for a one-line message: repr (escapes newlines and unprintables), long ones cut short."""
    if len(raw) <= limit:
        return repr(raw)
    return f"{raw[:limit]!r}... ({len(raw)} characters)"


def _check_values(env: Mapping[str, str]) -> None:
    """Length and printability of every variable we read, before any rule looks at its meaning."""
    for name in VARIABLES:
        raw = env.get(name)
        if raw is None:
            continue
        limit = PATH_MAX if name in PATH_VARIABLES else VALUE_MAX
        if len(raw) > limit:
            raise SettingsError(f"{name} is too long ({len(raw)} characters, at most {limit})")
        if not raw.isprintable():
            raise SettingsError(f"{name} holds a control or unprintable character (got {shown(raw)})")


def _get(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name)
    return default if value is None or value == "" else value


def _int(env: Mapping[str, str], name: str, default: str, low: int, high: int) -> int:
    raw = _get(env, name, default)
    kind = "positive" if low >= 1 else "non-negative"
    if not INT_RE.fullmatch(raw) or int(raw) < low:
        raise SettingsError(f"{name} must be a {kind} integer (got {shown(raw)})")
    value = int(raw)
    if value > high:
        raise SettingsError(f"{name} must be at most {high} (got {value})")
    return value


def _seconds(raw: str, name: str) -> float:
    """Plain decimal seconds (no sign, exponent, `nan`, `inf`, underscores or spaces), within bounds."""
    if not SECONDS_RE.fullmatch(raw) or not float(raw) > 0:
        raise SettingsError(f"{name} must be a positive number of seconds (got {shown(raw)})")
    value = float(raw)
    if value > MAX_SECTION_TIMEOUT_S:
        raise SettingsError(f"{name} must be at most {MAX_SECTION_TIMEOUT_S} seconds (got {shown(raw)})")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, choices: Sequence[str]) -> str:
    raw = _get(env, name, default)
    if raw not in choices:
        listed = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        raise SettingsError(f"{name} must be {listed} (got {shown(raw)})")
    return raw


def _path(name: str, raw: str) -> Path:
    """An absolute, normalised path of safe characters with no over-long component."""
    if not raw.startswith("/"):
        raise SettingsError(f"{name} must be absolute (got {shown(raw)})")
    if not PATH_CHARS_RE.fullmatch(raw):
        raise SettingsError(
            f"{name} may hold only letters, digits, '/' and . _ + , @ % = ~ - (got {shown(raw)})"
        )
    parts = raw.split("/")
    if any(part in (".", "..") for part in parts):
        raise SettingsError(f"{name} must not hold '.' or '..' components (got {shown(raw)})")
    if any(len(part.encode()) > NAME_MAX for part in parts):
        raise SettingsError(f"{name} has a component longer than {NAME_MAX} bytes (got {shown(raw)})")
    return Path(os.path.normpath(raw))


def _host_ok(host: str) -> bool:
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    return len(host) <= 253 and all(HOST_LABEL_RE.fullmatch(label) for label in host.split("."))


def parse_endpoint(raw: str, multi_node: bool) -> str:
    """RDZV_ENDPOINT: a host name, IPv4 address or [IPv6] address, and a port."""
    match = ENDPOINT_RE.fullmatch(raw)
    if not match or not _host_ok(match["host"]) or int(match["port"]) > 65535:
        raise SettingsError(f"RDZV_ENDPOINT must be host:port with a valid host name (got {shown(raw)})")
    if multi_node and int(match["port"]) == 0:
        raise SettingsError(
            f"RDZV_ENDPOINT needs a real port (1..65535) for several nodes (got {shown(raw)})"
        )
    return raw


def parse_section_timeouts(raw: str) -> dict[str, float]:
    """`setup:900,step:120,checkpointing:600` -> dict; every one of Megatron's three sections, once."""
    name = "NVRX_SECTION_TIMEOUTS"
    timeouts: dict[str, float] = {}
    for item in raw.split(","):
        section, sep, value = item.partition(":")
        if not sep or section not in SECTIONS:
            raise SettingsError(
                f"{name} must be setup:S,step:S,checkpointing:S in seconds (got {shown(raw)})"
            )
        if section in timeouts:
            raise SettingsError(f"{name} names section {section!r} twice (got {shown(raw)})")
        timeouts[section] = _seconds(value, f"{name} {section}")
    missing = [s for s in SECTIONS if s not in timeouts]
    if missing:
        raise SettingsError(
            f"{name} must give all of setup, step and checkpointing (missing {', '.join(missing)})"
        )
    return {s: timeouts[s] for s in SECTIONS}


def parse_timeouts_from(raw: str) -> dict[str, float]:
    """`setup:120,step:10,checkpointing:60,out_of_section:30` -> dict: each of the four, once."""
    name = "NVRX_TIMEOUTS_FROM"
    wanted = (*SECTIONS, "out_of_section")
    timeouts: dict[str, float] = {}
    for item in raw.split(","):
        section, sep, value = item.partition(":")
        if not sep or section not in wanted or section in timeouts:
            raise SettingsError(
                f"{name} must be setup:S,step:S,checkpointing:S,out_of_section:S in seconds, each once "
                f"(got {shown(raw)})"
            )
        timeouts[section] = _seconds(value, f"{name} {section}")
    missing = [s for s in wanted if s not in timeouts]
    if missing:
        raise SettingsError(f"{name} must give all four timeouts (missing {', '.join(missing)})")
    return {s: timeouts[s] for s in wanted}


def _workload(env: Mapping[str, str]) -> tuple[str, Path | None]:
    workload = _choice(env, "NVRX_WORKLOAD", "megatron", WORKLOADS)
    if workload != "megatron":
        return workload, None
    raw = env.get("MEGATRON_PATH", "")
    if not raw:
        raise SettingsError(
            "Set MEGATRON_PATH to an installed Megatron-LM source checkout "
            "(or NVRX_WORKLOAD=smoke for the CPU stand-in)"
        )
    megatron_path = _path("MEGATRON_PATH", raw)
    if not (megatron_path / "pretrain_gpt.py").is_file():
        raise SettingsError(f"pretrain_gpt.py not found in MEGATRON_PATH ({raw})")
    return workload, megatron_path


def _iterations(env: Mapping[str, str], fault: str, injections: int) -> tuple[int, int]:
    train_iters = _int(env, "TRAIN_ITERS", "100", 1, MAX_TRAIN_ITERS)
    save_interval = _int(env, "SAVE_INTERVAL", "5", 1, MAX_TRAIN_ITERS)
    # A fault is injected when a checkpoint completes, and recovery needs one before the last iteration;
    # a baseline may save only at its end, but a SAVE_INTERVAL past TRAIN_ITERS is always a mistake.
    if fault != "none" and save_interval >= train_iters:
        raise SettingsError(
            f"SAVE_INTERVAL={save_interval} must be below TRAIN_ITERS={train_iters}: "
            f"fault {fault} needs a checkpoint before the last iteration"
        )
    # Each injection needs a checkpoint newer than its cycle's start, before the last iteration.
    _refuse(
        constraints.injections_do_not_fit(
            constraints.ENVIRONMENT, fault, injections, save_interval, train_iters
        )
    )
    if save_interval > train_iters:
        raise SettingsError(f"SAVE_INTERVAL={save_interval} must not exceed TRAIN_ITERS={train_iters}")
    return train_iters, save_interval


def _fault_plan(env: Mapping[str, str], fault: str) -> tuple[int, str, bool]:
    """NVRX_INJECTIONS, NVRX_FAULT_TIMING and NVRX_LOAD_CHECKPOINTS, checked against the fault."""
    injections = _int(env, "NVRX_INJECTIONS", "1", 1, MAX_INJECTIONS)
    if fault == "none" and injections != 1:
        raise SettingsError(f"NVRX_INJECTIONS must be 1 with NVRX_DEMO_FAULT=none (got {injections})")
    fault_timing = _choice(env, "NVRX_FAULT_TIMING", "checkpoint", FAULT_TIMINGS)
    _refuse(constraints.in_save_needs_kill(constraints.ENVIRONMENT, fault, fault_timing))
    checkpoint_load = _choice(env, "NVRX_LOAD_CHECKPOINTS", "1", ("0", "1")) == "1"
    return injections, fault_timing, checkpoint_load


def _campaign(env: Mapping[str, str], workload: str, world: int, save_interval: int, train_iters: int):
    """NVRX_CAMPAIGN_*: the plan, refused in one line when it cannot be drawn or does not fit the run."""
    if env.get("NVRX_INJECTIONS", "1") not in ("", "1"):
        raise SettingsError("NVRX_INJECTIONS does not apply to a campaign: set NVRX_CAMPAIGN_FAULTS")
    if env.get("NVRX_FAULT_TIMING", "checkpoint") not in ("", "checkpoint"):
        raise SettingsError("a campaign injects after completed checkpoints: leave NVRX_FAULT_TIMING unset")
    try:
        plan = campaign_setup.plan_from_env(env, workload, world, save_interval)
    except PlanError as exc:
        raise SettingsError(str(exc)) from exc
    _refuse(campaign_setup.sizing_problem(plan, train_iters))
    return plan


def _run_id(env: Mapping[str, str], nnodes: int, now: datetime | None, pid: int) -> str:
    if nnodes > 1:
        run_id = env.get("NVRX_RUN_ID") or env.get("SLURM_JOB_ID") or ""
        if not run_id:
            raise SettingsError("Set NVRX_RUN_ID (or run under Slurm) to the same unique run ID on all nodes")
    else:
        stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S")
        run_id = env.get("NVRX_RUN_ID") or f"{stamp}-{pid}"
    if not RUN_ID_RE.fullmatch(run_id):
        raise SettingsError(
            "Use letters, digits, underscores or hyphens in NVRX_RUN_ID, starting with a letter or digit, "
            f"at most {RUN_ID_MAX} (got {shown(run_id)})"
        )
    return run_id


def _log_server_port(env: Mapping[str, str]) -> int | None:
    raw = env.get("NVRX_LOG_SERVER_PORT", "")
    if not raw:
        return None
    if not re.fullmatch(r"[1-9][0-9]{0,4}", raw) or int(raw) > 65535:
        raise SettingsError(f"NVRX_LOG_SERVER_PORT must be a TCP port 1..65535 (got {shown(raw)})")
    return int(raw)


def _fingerprint(env: Mapping[str, str]) -> str | None:
    raw = env.get("NVRX_SETTINGS_FINGERPRINT", "")
    if not raw:
        return None
    if not FINGERPRINT_RE.fullmatch(raw):
        raise SettingsError(
            f"NVRX_SETTINGS_FINGERPRINT must be 8 to 64 lowercase hex digits (got {shown(raw)})"
        )
    return raw


def _refuse(problem: str | None) -> None:
    """The launcher stops at its first problem (ftqual.scenario.constraints words it)."""
    if problem:
        raise SettingsError(problem)


def load_settings(
    env: Mapping[str, str], argv: Sequence[str] = (), now: datetime | None = None, pid: int = 0
) -> Settings:
    """Validate the environment in the walkthrough's order; SettingsError (one line) on the first problem."""
    _check_values(env)
    work_dir_raw = env.get("NVRX_WORK_DIR", "")
    if not work_dir_raw:
        raise SettingsError("Set NVRX_WORK_DIR to an absolute directory visible on all nodes")
    work_dir = _path("NVRX_WORK_DIR", work_dir_raw)
    workload, megatron_path = _workload(env)

    fault = _get(env, "NVRX_DEMO_FAULT", "kill")
    if fault not in FAULTS:
        # The walkthrough's own message, word for word (node_loss is the workflow's extension, below).
        raise SettingsError(f"NVRX_DEMO_FAULT must be none, kill, or hang (got {shown(fault)})")
    _refuse(gpu_only_problem(fault, workload, "NVRX_DEMO_FAULT", "="))

    nnodes = _int(env, "NNODES", "1", 1, MAX_NNODES)
    spare_nodes = _int(env, "NVRX_SPARE_NODES", "0", 0, MAX_NNODES)
    launchers = nnodes + spare_nodes
    gpus_per_node = _int(env, "GPUS_PER_NODE", "2", 1, MAX_GPUS_PER_NODE)
    tp = _int(env, "TP", "1", 1, MODEL.num_attention_heads)
    pp = _int(env, "PP", "1", 1, MODEL.num_layers)
    injections, fault_timing, checkpoint_load = _fault_plan(env, fault)
    train_iters, save_interval = _iterations(env, fault, injections)

    world = nnodes * gpus_per_node
    _refuse(constraints.world_not_divisible(constraints.ENVIRONMENT, world, tp, pp))
    campaign = None
    stray = [name for name in campaign_setup.VARIABLES if env.get(name) and fault != "campaign"]
    if stray:
        raise SettingsError(f"{stray[0]} applies only to NVRX_DEMO_FAULT=campaign (got {shown(fault)})")
    if fault == "campaign":
        campaign = _campaign(env, workload, world, save_interval, train_iters)
        injections = campaign.count

    if launchers > 1 and not env.get("RDZV_ENDPOINT"):
        raise SettingsError("Set RDZV_ENDPOINT to a common reachable host:port for all nodes")
    run_id = _run_id(env, launchers, now, pid)
    endpoint = parse_endpoint(_get(env, "RDZV_ENDPOINT", "localhost:0"), launchers > 1)

    ckpt_raw = env.get("NVRX_CHECKPOINT_DIR", "")
    checkpoint_dir = (
        _path("NVRX_CHECKPOINT_DIR", ckpt_raw) if ckpt_raw else work_dir / "runs" / run_id / "checkpoints"
    )

    fault_rank = None
    if fault not in ("none", "campaign"):  # a campaign's ranks are its plan's
        fault_rank = _int(env, "NVRX_FAULT_RANK", "1", 0, 10**12)
        _refuse(constraints.rank_outside_world(constraints.ENVIRONMENT, fault_rank, world))

    if fault == "node_loss":
        problems = constraints.node_loss_problems(
            constraints.ENVIRONMENT, nnodes, gpus_per_node, fault_rank, injections, fault_timing
        )
        _refuse(problems[0] if problems else None)
    join_timeout = None
    if env.get("NVRX_RDZV_JOIN_TIMEOUT"):
        join_timeout = _int(env, "NVRX_RDZV_JOIN_TIMEOUT", "600", 1, MAX_STOP_TIMEOUT_S)

    dry_raw = env.get("NVRX_DRY_RUN", "0") or "0"
    if dry_raw not in ("0", "1"):
        raise SettingsError(f"NVRX_DRY_RUN must be 0 or 1 (got {shown(dry_raw)})")

    scenario = _get(env, "NVRX_SCENARIO", fault)
    if not SCENARIO_RE.fullmatch(scenario):
        raise SettingsError(
            "Use letters, digits, underscores or hyphens in NVRX_SCENARIO, starting with a letter or digit, "
            f"at most {SCENARIO_MAX} (got {shown(scenario)})"
        )
    section_timeouts = parse_section_timeouts(_get(env, "NVRX_SECTION_TIMEOUTS", DEFAULT_SECTION_TIMEOUTS))
    out_of_section = _seconds(_get(env, "NVRX_OUT_OF_SECTION_TIMEOUT", "180"), "NVRX_OUT_OF_SECTION_TIMEOUT")
    max_restarts = _int(env, "NVRX_MAX_RESTARTS", "3", 0, MAX_RESTARTS)
    if campaign is not None:  # one restart per fault: the default follows from K
        max_restarts = _int(env, "NVRX_MAX_RESTARTS", str(campaign.count), 0, MAX_RESTARTS)
        _refuse(campaign_setup.restarts_problem(campaign.count, max_restarts))
    term_timeout = _int(env, "NVRX_TERM_TIMEOUT", "15", 1, MAX_STOP_TIMEOUT_S)
    workers_stop_timeout = _int(env, "NVRX_WORKERS_STOP_TIMEOUT", "15", 1, MAX_STOP_TIMEOUT_S)
    log_server_port = _log_server_port(env)
    transformer_impl = _choice(env, "NVRX_TRANSFORMER_IMPL", "auto", stack.TRANSFORMER_IMPLS)
    dist_optimizer = _choice(env, "NVRX_DIST_OPTIMIZER", "auto", stack.DIST_OPTIMIZER_MODES)
    hang_placement = _choice(env, "NVRX_HANG_PLACEMENT", "step", HANG_PLACEMENTS)
    _refuse(
        constraints.setup_placement_problem(
            constraints.ENVIRONMENT, fault, hang_placement, injections, fault_timing
        )
    )
    node_rank_name = "NVRX_NODE_RANK" if env.get("NVRX_NODE_RANK") else "SLURM_NODEID"
    node_rank = _int(env, node_rank_name, "0", 0, MAX_NNODES)
    if node_rank >= launchers:
        spares = f"+NVRX_SPARE_NODES={launchers}" if spare_nodes else f"={nnodes}"
        raise SettingsError(f"{node_rank_name}={node_rank} must be below NNODES{spares}")
    fingerprint = _fingerprint(env)
    timeouts_from = parse_timeouts_from(env["NVRX_TIMEOUTS_FROM"]) if env.get("NVRX_TIMEOUTS_FROM") else None
    calc_raw = env.get("NVRX_CALC_FT_TIMEOUTS", "0") or "0"
    if calc_raw not in ("0", "1"):
        raise SettingsError(f"NVRX_CALC_FT_TIMEOUTS must be 0 or 1 (got {shown(calc_raw)})")
    if calc_raw == "1" and timeouts_from is not None:
        raise SettingsError(
            "NVRX_CALC_FT_TIMEOUTS=1 and NVRX_TIMEOUTS_FROM: calculated timeouts are no recommendation"
        )

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
        settings_fingerprint=fingerprint,
        injections=injections,
        fault_timing=fault_timing,
        checkpoint_load=checkpoint_load,
        join_timeout=join_timeout,
        spare_nodes=spare_nodes,
        timeouts_from=timeouts_from,
        calc_ft_timeouts=calc_raw == "1",
        campaign=campaign,
    )
