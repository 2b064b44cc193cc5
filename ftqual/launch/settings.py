"""The launcher's settings: the walkthrough's environment interface plus ours, validated into one dataclass.

Every rule has its own one-line message (raised as SettingsError, printed on stderr, exit 2), and nothing
here creates a file: validation runs before any directory exists. Patterns are matched with
`re.fullmatch` over ASCII classes (`$` would match before a trailing newline, `\\d` would take Unicode
digits), every value has a length limit and must be printable, and every integer has bounds checked on
its digits before `int()` sees it (Python refuses more than 4,300 digits with a traceback).

`load_settings` reads only the environment (and whether pretrain_gpt.py exists); ftqual.launch.runstate
then proves that every directory the run needs can be created and written, and refuses to reuse
evidence or to resume a checkpoint that is not ours.

The run settings that a scenario also has are ftqual.scenario.fields' table (`RunSettings`, which `Settings`
extends): their variables, parsing, formatting and defaults live there; this module reads them in the
walkthrough's order with the rules that tie them together, and the settings only the launcher has.

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
from typing import Any

from ftqual.contract import FAULTS, family_of, gpu_only_problem, is_fault
from ftqual.rank.tracker import TRACKER_NAME
from ftqual.scenario import campaign_setup, constraints, fields
from ftqual.scenario import job as jobshape
from ftqual.scenario.campaign_plan import CampaignPlan, PlanError
from ftqual.scenario.fields import (
    DEFAULT_SECTION_TIMEOUTS,
    FAULT_TIMINGS,
    HANG_PLACEMENTS,
    INT_RE,
    MAX_NNODES,
    MAX_STOP_TIMEOUT_S,
    SECTIONS,
    RunSettings,
    SettingsError,
    Timeouts,
    parse_section_timeouts,
    plain_number,
    shown,
)

__all__ = [
    "DEFAULT_SECTION_TIMEOUTS",
    "FAULTS",
    "FAULT_TIMINGS",
    "HANG_PLACEMENTS",
    "INT_RE",
    "SECTIONS",
    "TRACKER_NAME",
    "Settings",
    "SettingsError",
    "Timeouts",
    "load_settings",
    "parse_section_timeouts",
    "plain_number",
    "shown",
]

WORKLOADS = ("megatron", "smoke")

RUN_ID_MAX = 128  # a directory name and part of every pid record's name; 255 bytes is the file name limit
SCENARIO_MAX = 64
RUN_ID_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{RUN_ID_MAX - 1}}}")
SCENARIO_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_-]{{0,{SCENARIO_MAX - 1}}}")
FINGERPRINT_RE = re.compile(r"[0-9a-f]{8,64}")
# One DNS label (letters, digits, hyphens inside; underscores, which some cluster node names use).
HOST_LABEL_RE = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
ENDPOINT_RE = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]{2,45}\]|[^:\[\]]{1,253}):(?P<port>[0-9]{1,5})")
# Paths are handed to ft_launcher, Megatron and shell-quoted into command.txt: keep to characters that no
# shell, log parser or Slurm script treats specially.
PATH_CHARS_RE = re.compile(r"[A-Za-z0-9._+,@%=~/-]+")
PATH_MAX = 1024
NAME_MAX = 255
VALUE_MAX = 256

# The launcher's whole environment interface (ftqual.scenario.fields, where the scenario model reads it too).
PATH_VARIABLES, LONG_VARIABLES, VARIABLES = (
    fields.PATH_VARIABLES,
    fields.LONG_VARIABLES,
    fields.INTERFACE_VARIABLES,
)


@dataclass(frozen=True, kw_only=True)
class Settings(RunSettings):
    """The table's run settings (RunSettings) and those only the launcher has."""

    workload: str
    megatron_path: Path | None
    work_dir: Path
    run_id: str
    checkpoint_dir: Path
    checkpoint_dir_is_default: bool
    fault_rank: int | None  # None when fault is "none"
    rdzv_endpoint: str
    dry_run: bool
    scenario: str
    workers_stop_timeout: int
    log_server_port: int | None  # None: pick a free port at launch
    node_rank: int
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    settings_fingerprint: str | None = None  # NVRX_SETTINGS_FINGERPRINT, from the workflow
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
    def data_parallel_size(self) -> int:
        return max(1, self.world_size // (self.tp * self.pp * self.job.context_parallel))

    @property
    def micro_batch_size(self) -> int:
        return self.job.micro_batch_size  # the team's; 1 (the walkthrough's) when it sets none

    @property
    def global_batch_size(self) -> int:
        """The team's global batch; without one, the walkthrough's: a micro batch on every rank."""
        return self.job.global_batch_size(self.data_parallel_size) if self.job.sorted.taken.get(
            "global_batch_size") else self.world_size * self.micro_batch_size  # fmt: skip

    def batch_record(self) -> dict[str, int]:
        """run.json's `batch`: Megatron's global batch = micro batch x data-parallel size x accumulation."""
        dp, micro = self.data_parallel_size, self.micro_batch_size
        return {
            "world_size": self.world_size,
            "data_parallel_size": dp,
            "micro_batch_size": micro,
            "global_batch_size": self.global_batch_size,
            "accumulation_steps": max(1, self.global_batch_size // (micro * dp)),
        }

    def evaluation_record(self) -> dict[str, int] | None:
        """run.json's `evaluation`: every `interval` iterations, `iters` forward-only steps; None: none."""
        evaluation = self.job.evaluation
        return None if evaluation is None else {"interval": evaluation[0], "iters": evaluation[1]}

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

    @property
    def job(self) -> jobshape.Job:
        """The model preset with the team's arguments over it (checked when the settings were read)."""
        return jobshape.resolve_job(self.model, self.megatron_args or (), self.megatron_args_where or ())

    @property
    def checkpoint_from_root(self) -> bool:
        """The checkpoint directory is <NVRX_CHECKPOINT_ROOT>/<run-id>, this run's own."""
        return (
            self.checkpoint_root is not None
            and self.checkpoint_dir == Path(self.checkpoint_root) / self.run_id
        )

    def timeouts_record(self) -> dict[str, float | int]:
        """run.json's `timeouts`: the section timeouts plus out_of_section, in seconds."""
        return self.timeouts.record()

    @property
    def timeouts_source(self) -> str:
        """run.json's `timeouts_source`: `recommended` when the timeouts came from a recommendation."""
        return "configured" if self.timeouts_from is None else "recommended"

    def timeouts_from_record(self) -> dict[str, float | int] | None:
        return None if self.timeouts_from is None else self.timeouts_from.record()


def _check_values(env: Mapping[str, str]) -> None:
    """Length and printability of every variable we read, before any rule looks at its meaning."""
    for name in VARIABLES:
        raw = env.get(name)
        if raw is None:
            continue
        limit = PATH_MAX if name in PATH_VARIABLES else LONG_VARIABLES.get(name, VALUE_MAX)
        if len(raw) > limit:
            raise SettingsError(f"{name} is too long ({len(raw)} characters, at most {limit})")
        if not raw.isprintable():
            raise SettingsError(f"{name} holds a control or unprintable character (got {shown(raw)})")


def _get(env: Mapping[str, str], name: str, default: str) -> str:
    return fields.get(env, name, default)


def _int(env: Mapping[str, str], name: str, default: str, low: int, high: int) -> int:
    return fields.parse_int(_get(env, name, default), name, low, high)


def _choice(env: Mapping[str, str], name: str, default: str, choices: Sequence[str]) -> str:
    return fields.parse_choice(_get(env, name, default), name, choices)


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


def parse_timeouts_from(raw: str) -> dict[str, float]:
    """NVRX_TIMEOUTS_FROM as a map (ftqual.scenario.fields.parse_full_timeouts, for the recommendation's
    callers)."""
    return fields.parse_full_timeouts(raw).as_dict()


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


def _read(values: dict[str, Any], env: Mapping[str, str], name: str, default: str | None = None) -> Any:
    """The table's setting `name` (ftqual.scenario.fields), read now: the launcher checks in the walkthrough's
    order and stops at the first problem."""
    values[name] = fields.SPECS[name].read(env, default)
    return values[name]


def _iterations(values: dict[str, Any], env: Mapping[str, str], fault: str, injections: int) -> None:
    train_iters = _read(values, env, "train_iters")
    save_interval = _read(values, env, "save_interval")
    # A fault is injected when a checkpoint completes, and recovery needs one before the last iteration;
    # a baseline may save only at its end, but a SAVE_INTERVAL past TRAIN_ITERS is always a mistake.
    if family_of(fault) != "none" and save_interval >= train_iters:
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


def _fault_plan(values: dict[str, Any], env: Mapping[str, str], fault: str) -> None:
    """NVRX_INJECTIONS, NVRX_FAULT_TIMING and NVRX_LOAD_CHECKPOINTS, checked against the fault."""
    injections = _read(values, env, "injections")
    if family_of(fault) == "none" and injections != 1:
        raise SettingsError(f"NVRX_INJECTIONS must be 1 with NVRX_DEMO_FAULT=none (got {injections})")
    _refuse(constraints.recurring_problem(constraints.ENVIRONMENT, fault, injections))
    fault_timing = _read(values, env, "fault_timing")
    _refuse(constraints.in_save_needs_kill(constraints.ENVIRONMENT, fault, fault_timing))
    damage = _read(values, env, "checkpoint_damage")
    _refuse(constraints.damage_problem(constraints.ENVIRONMENT, fault, damage, injections, fault_timing))
    nnodes, async_save = _read(values, env, "nnodes"), _read(values, env, "async_save")
    _refuse(
        constraints.storage_problem(
            constraints.ENVIRONMENT, fault, fault_timing, injections, nnodes, async_save
        )
    )
    _read(values, env, "checkpoint_load")


def _job(values: dict[str, Any], env: Mapping[str, str]) -> jobshape.Job:
    """NVRX_MODEL and NVRX_MEGATRON_ARGS: the job whose shape bounds TP and PP."""
    model = _read(values, env, "model")
    args = _read(values, env, "megatron_args") or ()
    values["megatron_args"] = tuple(args)
    where = _read(values, env, "megatron_args_where")
    if where is not None and (len(where) != len(args) or not all(WHERE_RE.fullmatch(w) for w in where)):
        raise SettingsError(
            f"NVRX_MEGATRON_ARGS_WHERE must name a file:line for each of NVRX_MEGATRON_ARGS's {len(args)} "
            f"arguments (got {len(where)} names); leave it unset"
        )
    try:
        return jobshape.resolve_job(model, args)
    except jobshape.JobError as exc:
        raise SettingsError(str(exc).replace("megatron_args", "NVRX_MEGATRON_ARGS", 1)) from exc


# The launcher's variable for each setting the team's flags also decide (ftqual.scenario.team_args.TAKEN).
TAKEN_VARIABLES = {"tp": "TP", "pp": "PP", "transformer_impl": "NVRX_TRANSFORMER_IMPL",
                   "dist_optimizer": "NVRX_DIST_OPTIMIZER"}  # fmt: skip


WHERE_RE = re.compile(r"[^\s:]{1,4096}:[1-9][0-9]{0,8}")


def with_job_settings(env: Mapping[str, str], job: jobshape.Job) -> Mapping[str, str]:
    """The environment with the job's own TP, PP, transformer implementation and distributed optimizer where
    their variables are unset; a variable that says otherwise is refused in one line naming both."""
    out = dict(env)
    for key, variable in TAKEN_VARIABLES.items():
        taken = job.sorted.taken.get(key)
        if taken is None:
            continue
        value = "on" if key == "dist_optimizer" else str(taken.value)
        given = env.get(variable, "")
        if not given:
            out[variable] = value
        elif given != value and not (key == "dist_optimizer" and given in ("1", "true")):
            raise SettingsError(
                f"{variable}={given} contradicts NVRX_MEGATRON_ARGS {taken.flag} {taken.value}; "
                "make them agree or unset one"
            )
    return out


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
    values: dict[str, Any] = {}  # the table's settings, as they are read

    fault = _read(values, env, "fault")
    _refuse(gpu_only_problem(fault, workload, "NVRX_DEMO_FAULT", "="))

    nnodes = _read(values, env, "nnodes")
    spare_nodes = _read(values, env, "spare_nodes")
    launchers = nnodes + spare_nodes
    gpus_per_node = _read(values, env, "gpus_per_node")
    job = _job(values, env)
    shape = job.shape
    env = with_job_settings(env, job)
    tp = _read(values, env, "tp")
    if tp > shape.num_attention_heads:
        raise SettingsError(f"TP must be at most {shape.num_attention_heads} (got {tp})")
    pp = _read(values, env, "pp")
    if pp > shape.num_layers:
        raise SettingsError(f"PP must be at most {shape.num_layers} (got {pp})")
    _fault_plan(values, env, fault)
    _iterations(values, env, fault, values["injections"])
    train_iters, save_interval = values["train_iters"], values["save_interval"]
    injections, fault_timing = values["injections"], values["fault_timing"]

    world = nnodes * gpus_per_node
    _refuse(constraints.world_not_divisible(constraints.ENVIRONMENT, world, tp, pp, shape))
    campaign = None
    is_campaign = family_of(fault) == "campaign"
    stray = [name for name in campaign_setup.VARIABLES if env.get(name) and not is_campaign]
    if stray:
        raise SettingsError(f"{stray[0]} applies only to NVRX_DEMO_FAULT=campaign (got {shown(fault)})")
    if is_campaign:
        campaign = _campaign(env, workload, world, save_interval, train_iters)
        injections = values["injections"] = campaign.count

    if launchers > 1 and not env.get("RDZV_ENDPOINT"):
        raise SettingsError("Set RDZV_ENDPOINT to a common reachable host:port for all nodes")
    run_id = _run_id(env, launchers, now, pid)
    endpoint = parse_endpoint(_get(env, "RDZV_ENDPOINT", "localhost:0"), launchers > 1)

    ckpt_raw = env.get("NVRX_CHECKPOINT_DIR", "")
    root = _read(values, env, "checkpoint_root")
    if root is not None:
        values["checkpoint_root"] = root = str(_path("NVRX_CHECKPOINT_ROOT", root))
    if ckpt_raw:  # the walkthrough's: an existing checkpoint to resume (it wins over the root)
        checkpoint_dir = _path("NVRX_CHECKPOINT_DIR", ckpt_raw)
    elif root is not None:
        checkpoint_dir = Path(root) / run_id
    else:
        checkpoint_dir = work_dir / "runs" / run_id / "checkpoints"

    fault_rank = None
    if is_fault(fault, lambda f: f.has_rank):  # a campaign's ranks are its plan's
        fault_rank = _int(env, "NVRX_FAULT_RANK", "1", 0, 10**12)
        _refuse(constraints.rank_outside_world(constraints.ENVIRONMENT, fault_rank, world))

    if family_of(fault) == "node":
        problems = constraints.node_loss_problems(
            constraints.ENVIRONMENT, nnodes, gpus_per_node, fault_rank, injections, fault_timing
        )
        _refuse(problems[0] if problems else None)
    _read(values, env, "join_timeout")

    dry_raw = env.get("NVRX_DRY_RUN", "0") or "0"
    if dry_raw not in ("0", "1"):
        raise SettingsError(f"NVRX_DRY_RUN must be 0 or 1 (got {shown(dry_raw)})")

    scenario = _get(env, "NVRX_SCENARIO", fault)
    if not SCENARIO_RE.fullmatch(scenario):
        raise SettingsError(
            "Use letters, digits, underscores or hyphens in NVRX_SCENARIO, starting with a letter or digit, "
            f"at most {SCENARIO_MAX} (got {shown(scenario)})"
        )
    _read(values, env, "timeouts")
    # a campaign has one restart per fault: the default follows from K
    max_restarts = _read(values, env, "max_restarts", str(campaign.count) if campaign else None)
    if campaign is not None:
        _refuse(campaign_setup.restarts_problem(campaign.count, max_restarts))
    _read(values, env, "term_timeout")
    workers_stop_timeout = _int(env, "NVRX_WORKERS_STOP_TIMEOUT", "15", 1, MAX_STOP_TIMEOUT_S)
    log_server_port = _log_server_port(env)
    _read(values, env, "transformer_impl")
    _read(values, env, "dist_optimizer")
    hang_placement = _read(values, env, "hang_placement")
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
    timeouts_from = _read(values, env, "timeouts_from")
    if _read(values, env, "calc_ft_timeouts") and timeouts_from is not None:
        raise SettingsError(
            "NVRX_CALC_FT_TIMEOUTS=1 and NVRX_TIMEOUTS_FROM: calculated timeouts are no recommendation"
        )

    return Settings(
        **fields.read_all(env, values),  # the table's settings not read above are read here, in its order
        workload=workload,
        megatron_path=megatron_path,
        work_dir=work_dir,
        run_id=run_id,
        checkpoint_dir=checkpoint_dir,
        checkpoint_dir_is_default=not ckpt_raw and root is None,
        fault_rank=fault_rank,
        rdzv_endpoint=endpoint,
        dry_run=dry_raw == "1",
        scenario=scenario,
        workers_stop_timeout=workers_stop_timeout,
        log_server_port=log_server_port,
        node_rank=node_rank,
        extra_args=tuple(argv),
        settings_fingerprint=fingerprint,
        campaign=campaign,
    )
