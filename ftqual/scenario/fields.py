"""The one table of run settings (`RunSettings`): the config, the launcher's environment and its parser.

The run settings: one table, from which the launcher's environment, its parser and the scenario model
are made.

`RunSettings` is the table: each of its fields is one setting (name and type), its dataclass default (the
scenario's, for a setting a scenario may leave out) and its `Spec`: the launcher variable(s), how they are
parsed (with the walkthrough's defaults, for scripts/run_megatron_gpt.sh on its own) and formatted, and
where the workflow config holds it. `ftqual.scenario.model.Scenario` and `ftqual.launch.settings.Settings`
both extend it, so a setting added here is a field of both; `launcher_env` writes, `load_settings` reads and
`from_resolved` reads back every field of the table without naming it. Adding a setting therefore touches
config/schema.yaml (where the config holds it), this table and the code that uses it.

This module runs inside training jobs (the launcher): it imports neither snakemake, jsonschema nor yaml.
Parsing is exact and bounded (see ftqual.launch.settings): `re.fullmatch` over ASCII classes, digits
counted before `int()` sees them, one line per problem (SettingsError, exit 2).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from ftqual.contract import FAULTS
from ftqual.rank.ids import CHECKPOINT_DAMAGES, PLACEMENTS, TIMINGS
from ftqual.scenario import campaign_setup
from ftqual.scenario import job as jobshape
from ftqual.stack import resolve as stack

SECTIONS = ("setup", "step", "checkpointing")
HANG_PLACEMENTS = PLACEMENTS  # the wrapper's (ftqual.rank.ids)
MAX_STORAGE_CAP_MB = 1 << 20  # 1 TiB: a sparse file, but a bound on a typo
FAULT_TIMINGS = TIMINGS  # the wrapper's (ftqual.rank.ids)
REPLAY_MODES = ("exact", "tolerance")  # ftqual.launch.run_schema.REPLAY_MODES
DAMAGES = ("none", *CHECKPOINT_DAMAGES)
RESTART_AGENT_MODES = ("off", "log", "stop")  # ftqual.launch.restart_agent.MODES

INT_RE = re.compile(r"0|[1-9][0-9]{0,11}")  # the digit cap keeps int() far from its 4,300-digit limit
SECONDS_RE = re.compile(r"(0|[1-9][0-9]{0,11})(\.[0-9]{1,17})?")  # what repr(float) writes, bounded

# Upper bounds: generous for any real run, small enough that a typo (or an attack) is caught here rather
# than by a traceback or an hour-long launch.
MAX_NNODES = 4096
MAX_GPUS_PER_NODE = 64
MAX_TRAIN_ITERS = 10_000_000
MAX_RESTARTS = 1000
MAX_INJECTIONS = 1000
MAX_STOP_TIMEOUT_S = 3600
MAX_SECTION_TIMEOUT_S = 7 * 24 * 3600
MAX_PARALLEL = 1024  # TP and PP; the job's heads and layers bound them first
MAX_CHECKPOINT_PAYLOAD_MB = 65536  # 64 GiB per save: the largest checkpoint a smoke rank writes

DEFAULT_SECTION_TIMEOUTS = "setup:900,step:120,checkpointing:600"  # the walkthrough's


class SettingsError(Exception):
    """A setting is missing or invalid; the message is the one line printed on stderr."""


def plain_number(value: float) -> float | int:
    """`value` as an int when it is whole: run.json, the launcher's variables and command lines say 300, not
    300.0."""
    return int(value) if float(value).is_integer() else value


def shown(raw: str, limit: int = 40) -> str:
    """A value for a one-line message: repr (escapes newlines and unprintables), long ones cut short."""
    if len(raw) <= limit:
        return repr(raw)
    return f"{raw[:limit]!r}... ({len(raw)} characters)"


def get(env: Mapping[str, str], name: str, default: str) -> str:
    """An empty variable counts as unset, as `${VAR:-default}` in the walkthrough's script did."""
    value = env.get(name)
    return default if value is None or value == "" else value


def parse_int(raw: str, name: str, low: int, high: int) -> int:
    kind = "positive" if low >= 1 else "non-negative"
    if not INT_RE.fullmatch(raw) or int(raw) < low:
        raise SettingsError(f"{name} must be a {kind} integer (got {shown(raw)})")
    value = int(raw)
    if value > high:
        raise SettingsError(f"{name} must be at most {high} (got {value})")
    return value


def parse_seconds(raw: str, name: str) -> float:
    """Plain decimal seconds (no sign, exponent, `nan`, `inf`, underscores or spaces), within bounds."""
    if not SECONDS_RE.fullmatch(raw) or not float(raw) > 0:
        raise SettingsError(f"{name} must be a positive number of seconds (got {shown(raw)})")
    value = float(raw)
    if value > MAX_SECTION_TIMEOUT_S:
        raise SettingsError(f"{name} must be at most {MAX_SECTION_TIMEOUT_S} seconds (got {shown(raw)})")
    return value


def parse_choice(raw: str, name: str, choices: Sequence[str]) -> str:
    if raw not in choices:
        listed = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        raise SettingsError(f"{name} must be {listed} (got {shown(raw)})")
    return raw


# ---------------------------------------------------------------------------------------------
# timeouts: one type from the config's map to ft_launcher's flags


@dataclass(frozen=True)
class Timeouts:
    """The section timeouts and the out-of-section timeout, in seconds: the config's `timeouts` map, the
    launcher's NVRX_SECTION_TIMEOUTS + NVRX_OUT_OF_SECTION_TIMEOUT (or NVRX_TIMEOUTS_FROM) and ft_launcher's
    flags are all formatted by its methods."""

    setup: float
    step: float
    checkpointing: float
    out_of_section: float

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any]) -> Timeouts:
        """The config's (or the resolved JSON's) map."""
        return cls(**{k: float(v) for k, v in value.items()})

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def record(self) -> dict[str, float | int]:
        """run.json's `timeouts` (and `timeouts_from`): plain numbers."""
        return {k: plain_number(v) for k, v in asdict(self).items()}

    def sections_arg(self) -> str:
        """NVRX_SECTION_TIMEOUTS and --ft-rank-section-timeouts: setup:S,step:S,checkpointing:S."""
        return ",".join(f"{name}:{plain_number(getattr(self, name))}" for name in SECTIONS)

    def out_of_section_arg(self) -> str:
        """NVRX_OUT_OF_SECTION_TIMEOUT and --ft-rank-out-of-section-timeout."""
        return str(plain_number(self.out_of_section))

    def full_arg(self) -> str:
        """NVRX_TIMEOUTS_FROM: the sections and out_of_section in one value."""
        return f"{self.sections_arg()},out_of_section:{self.out_of_section_arg()}"


def parse_section_timeouts(raw: str, name: str = "NVRX_SECTION_TIMEOUTS") -> dict[str, float]:
    """`setup:900,step:120,checkpointing:600` -> dict; every one of Megatron's three sections, once."""
    timeouts: dict[str, float] = {}
    for item in raw.split(","):
        section, sep, value = item.partition(":")
        if not sep or section not in SECTIONS:
            raise SettingsError(
                f"{name} must be setup:S,step:S,checkpointing:S in seconds (got {shown(raw)})"
            )
        if section in timeouts:
            raise SettingsError(f"{name} names section {section!r} twice (got {shown(raw)})")
        timeouts[section] = parse_seconds(value, f"{name} {section}")
    missing = [s for s in SECTIONS if s not in timeouts]
    if missing:
        raise SettingsError(
            f"{name} must give all of setup, step and checkpointing (missing {', '.join(missing)})"
        )
    return {s: timeouts[s] for s in SECTIONS}


def parse_full_timeouts(raw: str, name: str = "NVRX_TIMEOUTS_FROM") -> Timeouts:
    """`setup:120,step:10,checkpointing:60,out_of_section:30`: each of the four, once."""
    wanted = (*SECTIONS, "out_of_section")
    timeouts: dict[str, float] = {}
    for item in raw.split(","):
        section, sep, value = item.partition(":")
        if not sep or section not in wanted or section in timeouts:
            raise SettingsError(
                f"{name} must be setup:S,step:S,checkpointing:S,out_of_section:S in seconds, each once "
                f"(got {shown(raw)})"
            )
        timeouts[section] = parse_seconds(value, f"{name} {section}")
    missing = [s for s in wanted if s not in timeouts]
    if missing:
        raise SettingsError(f"{name} must give all four timeouts (missing {', '.join(missing)})")
    return Timeouts(**timeouts)


# ---------------------------------------------------------------------------------------------
# the specification of one setting


@dataclass(frozen=True)
class Spec:
    """How one setting travels. `read(env, default)` parses the launcher's variables (`default` overrides the
    walkthrough's, e.g. a campaign's max_restarts); `write(value)` gives the variables for a value ({}: left
    unset, the launcher's default means the same); `from_config` turns a config or resolved-JSON value into
    the field's type. `source`: `run` (top level, overridable per scenario), `scenario` (a scenario's own
    key), or `workflow` (set by ftqual.scenario.model.resolve from the top level). `fingerprinted_at_default`
    false: the setting enters a scenario's fingerprint only away from its default, so the attempts recorded
    before it existed keep theirs."""

    env: tuple[str, ...]
    read: Callable[[Mapping[str, str], str | None], Any]
    write: Callable[[Any], dict[str, str]]
    source: str
    from_config: Callable[[Any], Any] = lambda value: value
    fingerprinted_at_default: bool = False

    def convert(self, value: Any) -> Any:
        """A config or resolved-JSON value as the field's type (None stays None: an optional setting)."""
        return None if value is None else self.from_config(value)


def _simple(
    name: str,
    default: str | None,
    parse: Callable[[str, str], Any],
    fmt: Callable[[Any], str | None],
    source: str,
    from_config: Callable[[Any], Any] = lambda value: value,
    fingerprinted_at_default: bool = False,
) -> Spec:
    """One variable. `default` None: unset means None (the value is then not written)."""

    def read(env: Mapping[str, str], override: str | None = None) -> Any:
        fallback = override if override is not None else default
        if fallback is None and not env.get(name):
            return None
        return parse(get(env, name, fallback or ""), name)

    def write(value: Any) -> dict[str, str]:
        text = None if value is None else fmt(value)
        return {} if text is None else {name: text}

    return Spec((name,), read, write, source, from_config, fingerprinted_at_default)


def integer(
    name: str, default: str | None, low: int, high: int, source: str, omit: int | None = None, **kw: Any
) -> Spec:
    """An integer; `omit`: the value left unset in the environment (the launcher's default)."""
    return _simple(
        name,
        default,
        lambda raw, n: parse_int(raw, n, low, high),
        lambda v: None if v == omit else str(v),
        source,
        int,
        **kw,
    )


def choice(name: str, default: str, choices: Sequence[str], source: str, **kw: Any) -> Spec:
    kw.setdefault("from_config", str)
    return _simple(name, default, lambda raw, n: parse_choice(raw, n, choices), str, source, **kw)


def flag(name: str, default: bool, source: str, write_false: bool = True, **kw: Any) -> Spec:
    """0 or 1; `write_false` false: 0 is left unset."""
    return _simple(
        name,
        "1" if default else "0",
        lambda raw, n: parse_choice(raw, n, ("0", "1")) == "1",
        lambda v: "1" if v else ("0" if write_false else None),
        source,
        bool,
        **kw,
    )


def _parse_fault(raw: str, name: str) -> str:
    if raw not in FAULTS:
        raise SettingsError(f"{name} must be one of {', '.join(FAULTS)} (got {shown(raw)})")
    return raw


def _parse_agent(raw: str, name: str) -> str:
    return parse_choice(raw, name, RESTART_AGENT_MODES)


def _on_off(value: Any) -> str:
    """dist_optimizer as auto|on|off (YAML 1.1 reads a bare on/off as a boolean)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _read_timeouts(env: Mapping[str, str], override: str | None = None) -> Timeouts:
    sections = parse_section_timeouts(get(env, "NVRX_SECTION_TIMEOUTS", DEFAULT_SECTION_TIMEOUTS))
    out = parse_seconds(get(env, "NVRX_OUT_OF_SECTION_TIMEOUT", "180"), "NVRX_OUT_OF_SECTION_TIMEOUT")
    return Timeouts(**sections, out_of_section=out)


def _write_timeouts(t: Timeouts) -> dict[str, str]:
    return {"NVRX_SECTION_TIMEOUTS": t.sections_arg(), "NVRX_OUT_OF_SECTION_TIMEOUT": t.out_of_section_arg()}


TIMEOUTS = Spec(
    ("NVRX_SECTION_TIMEOUTS", "NVRX_OUT_OF_SECTION_TIMEOUT"),
    _read_timeouts,
    _write_timeouts,
    "run",
    Timeouts.from_mapping,
    fingerprinted_at_default=True,
)
TIMEOUTS_FROM = _simple(
    "NVRX_TIMEOUTS_FROM",
    None,
    parse_full_timeouts,
    Timeouts.full_arg,
    "workflow",
    Timeouts.from_mapping,
)


def _parse_model(raw: str, name: str) -> str:
    return parse_choice(raw, name, tuple(jobshape.PRESETS))


def _parse_megatron_args(raw: str, name: str) -> tuple[str, ...]:
    """Shell-quoted arguments (shlex.join), the team's whole: the flags ftqual controls are replaced when the
    job is resolved (ftqual.scenario.team_args), what cannot stand is refused there in one line."""
    try:
        args = jobshape.args_from_env(raw)
        jobshape.groups(args)
    except jobshape.JobError as exc:
        raise SettingsError(str(exc).replace("megatron_args", name, 1)) from exc
    if not args:
        raise SettingsError(f"{name} holds no arguments (got {shown(raw)}); leave it unset for none")
    return tuple(args)


def _parse_text(raw: str, name: str) -> str:
    return raw


MODEL_SPEC = _simple(
    "NVRX_MODEL",
    jobshape.DEFAULT_MODEL,
    _parse_model,
    lambda v: None if v == jobshape.DEFAULT_MODEL else str(v),
    "run",
    str,
)
MEGATRON_ARGS = _simple(
    "NVRX_MEGATRON_ARGS", None, _parse_megatron_args, lambda v: shlex.join(v) if v else None, "run", tuple
)


def _parse_where(raw: str, name: str) -> tuple[str, ...]:
    try:
        where = tuple(shlex.split(raw))
    except ValueError as exc:
        raise SettingsError(f"{name} cannot be split ({exc})") from exc
    if not where:
        raise SettingsError(f"{name} holds no file:line (got {shown(raw)}); leave it unset")
    return where


# Where each of the team's arguments was written ("file:line"), for run.json's list of replaced flags; set by
# the plan from megatron_args_file, never part of a fingerprint (a comment added to the script moves lines).
MEGATRON_ARGS_WHERE = _simple(
    "NVRX_MEGATRON_ARGS_WHERE", None, _parse_where, lambda v: shlex.join(v) if v else None, "workflow", tuple
)
# validated as a path by ftqual.launch.settings (absolute, safe characters)
CHECKPOINT_ROOT = _simple("NVRX_CHECKPOINT_ROOT", None, _parse_text, str, "workflow", str)


def _replay(raw: str, name: str) -> str:
    return parse_choice(raw, name, REPLAY_MODES)


def _replay_written(value: str) -> str | None:
    return None if value == "tolerance" else value  # unset: every earlier fingerprint stays as it was


def setting(spec: Spec, default: Any = MISSING) -> Any:
    """A field of the table: its Spec in the metadata; `default`: the scenario's when it leaves it out."""
    if default is MISSING:
        return field(metadata={"spec": spec})
    return field(default=default, metadata={"spec": spec})


RUN, SCENARIO, WORKFLOW = "run", "scenario", "workflow"
ALWAYS = {"fingerprinted_at_default": True}  # the settings the walkthrough's fingerprints were made of


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """The table. Comments: what the setting is; config/schema.yaml and docs/interfaces.md say more."""

    fault: str = setting(_simple("NVRX_DEMO_FAULT", "kill", _parse_fault, str, SCENARIO, str, True), "none")
    nnodes: int = setting(integer("NNODES", "1", 1, MAX_NNODES, RUN, **ALWAYS))
    gpus_per_node: int = setting(integer("GPUS_PER_NODE", "2", 1, MAX_GPUS_PER_NODE, RUN, **ALWAYS))
    # bounded generously here; the job's shape bounds them (launch.settings, scenario.constraints)
    tp: int = setting(integer("TP", "1", 1, MAX_PARALLEL, RUN, **ALWAYS))
    pp: int = setting(integer("PP", "1", 1, MAX_PARALLEL, RUN, **ALWAYS))
    train_iters: int = setting(integer("TRAIN_ITERS", "100", 1, MAX_TRAIN_ITERS, RUN, **ALWAYS))
    save_interval: int = setting(integer("SAVE_INTERVAL", "5", 1, MAX_TRAIN_ITERS, RUN, **ALWAYS))
    timeouts: Timeouts = setting(TIMEOUTS)
    max_restarts: int = setting(integer("NVRX_MAX_RESTARTS", "3", 0, MAX_RESTARTS, RUN, **ALWAYS))
    term_timeout: int = setting(integer("NVRX_TERM_TIMEOUT", "15", 1, MAX_STOP_TIMEOUT_S, RUN, **ALWAYS))
    transformer_impl: str = setting(
        choice("NVRX_TRANSFORMER_IMPL", "auto", stack.TRANSFORMER_IMPLS, RUN, **ALWAYS)
    )
    dist_optimizer: str = setting(  # auto | on | off
        choice("NVRX_DIST_OPTIMIZER", "auto", stack.DIST_OPTIMIZER_MODES, RUN, from_config=_on_off, **ALWAYS)
    )
    hang_placement: str = setting(choice("NVRX_HANG_PLACEMENT", "step", HANG_PLACEMENTS, RUN, **ALWAYS))
    # faults in one run, one per cycle, each after a new checkpoint completed
    injections: int = setting(integer("NVRX_INJECTIONS", "1", 1, MAX_INJECTIONS, SCENARIO), 1)
    # checkpoint | in_save (SIGKILL while an async save is in flight) | a save phase (rank.ids.SAVE_PHASES)
    fault_timing: str = setting(
        choice("NVRX_FAULT_TIMING", "checkpoint", FAULT_TIMINGS, SCENARIO), "checkpoint"
    )
    # what the fault rank breaks in the checkpoint it just completed before it kills itself (kill only):
    # none | tracker_not_a_number | tracker_missing_iteration | tracker_removed | shard_truncated
    # | shard_corrupted
    checkpoint_damage: str = setting(choice("NVRX_CHECKPOINT_DAMAGE", "none", DAMAGES, SCENARIO), "none")
    # false: saves are synchronous (no --async-save, no persistent checkpoint worker): the training waits
    async_save: bool = setting(flag("NVRX_ASYNC_SAVE", True, SCENARIO), True)
    # true: Megatron's --verify-integrity (torch_dist): each save hashes its files into integrity.json, each
    # load re-hashes them first and raises on a mismatch
    verify_integrity: bool = setting(flag("NVRX_VERIFY_INTEGRITY", False, SCENARIO, write_false=False), False)
    # fault disk_full: the size (MiB) of the ext4 filesystem the launcher mounts (a loop device over a sparse
    # file) at the run's checkpoint directory for the run; it must hold every checkpoint of the run before the
    # fault fills it, and costs only the bytes written
    storage_cap_mb: int = setting(
        integer("NVRX_STORAGE_CAP_MB", "4096", 64, MAX_STORAGE_CAP_MB, SCENARIO, omit=4096), 4096
    )
    # false: relaunches do not load (no --load): the no_resume control
    checkpoint_load: bool = setting(flag("NVRX_LOAD_CHECKPOINTS", True, SCENARIO), True)
    # ft_launcher --ft-max-no-progress-cycles: consecutive cycles without a new checkpoint before NVRx stops
    # the job (exit 93); None: NVRx's default (3), the flag not given; 0 turns the tracking off
    max_no_progress_cycles: int | None = setting(
        integer("NVRX_MAX_NO_PROGRESS_CYCLES", None, 0, MAX_RESTARTS, RUN), None
    )
    # NVRx's restart agent: off | log (its verdicts recorded) | stop (a STOP ends the job, exit 93);
    # ftqual.launch.restart_agent; "off" is left unset, so every earlier fingerprint stays as it was
    restart_agent: str = setting(
        _simple("NVRX_RESTART_AGENT", "off", _parse_agent, lambda v: None if v == "off" else v, RUN, str),
        "off",
    )
    # rendezvous join timeout (s), --rdzv-conf join_timeout; None: NVRx's default (600)
    join_timeout: int | None = setting(
        integer("NVRX_RDZV_JOIN_TIMEOUT", None, 1, MAX_STOP_TIMEOUT_S, SCENARIO), None
    )
    # standby nodes beyond nnodes (ft_launcher --nnodes=N:N+S), node_loss only
    spare_nodes: int = setting(integer("NVRX_SPARE_NODES", "0", 0, MAX_NNODES, SCENARIO, omit=0), 0)
    # the configured timeouts `timeouts` were recommended from; None: they are the configured ones
    timeouts_from: Timeouts | None = setting(TIMEOUTS_FROM, None)
    # NVRx calculates the timeouts (--calc-ft-timeouts) and persists them in ft_state.json
    calc_ft_timeouts: bool = setting(flag("NVRX_CALC_FT_TIMEOUTS", False, WORKFLOW, write_false=False), False)
    # exact: the run trains deterministically and the recovery is judged bitwise against the baseline
    # (checks/exact.py); tolerance: the losses within the tolerances. The environment's default stays
    # tolerance (the seed's command unchanged, every earlier fingerprint as it was), and so is the config's
    replay: str = setting(
        _simple("NVRX_REPLAY", "tolerance", lambda raw, n: _replay(raw, n), _replay_written, RUN, str),
        "tolerance",
    )
    # smoke workload only: MB of real random bytes every save writes (fsync'd) into its iteration directory,
    # so a checkpoint takes the time a real one of that size does; 0: none
    checkpoint_payload_mb: int = setting(
        integer("NVRX_SMOKE_CHECKPOINT_MB", "0", 0, MAX_CHECKPOINT_PAYLOAD_MB, RUN, omit=0), 0
    )

    # the job: a model preset (ftqual.scenario.job.PRESETS), the team's Megatron arguments over it, and the
    # directory each run's checkpoints go below (None: the run directory's checkpoints/)
    model: str = setting(MODEL_SPEC, jobshape.DEFAULT_MODEL)
    megatron_args: tuple[str, ...] = setting(MEGATRON_ARGS, ())
    megatron_args_where: tuple[str, ...] = setting(MEGATRON_ARGS_WHERE, ())
    checkpoint_root: str | None = setting(CHECKPOINT_ROOT, None)


SPECS: dict[str, Spec] = {f.name: f.metadata["spec"] for f in fields(RunSettings)}
# Each field's default where a scenario (or the resolved JSON) may leave it out; absent: it is required.
DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(RunSettings) if f.default is not MISSING}
VARIABLES: tuple[str, ...] = tuple(name for spec in SPECS.values() for name in spec.env)

# The launcher's whole environment interface (ftqual.launch.settings reads it; the scenario model writes it):
# the walkthrough's paths and names, the table's variables and the campaign's.
PATH_VARIABLES = ("NVRX_WORK_DIR", "NVRX_CHECKPOINT_DIR", "NVRX_CHECKPOINT_ROOT", "MEGATRON_PATH")
# A team's Megatron arguments, shell-quoted into one value: a launch script's worth (Linux takes 128 KiB).
LONG_VARIABLES = {"NVRX_MEGATRON_ARGS": 65536, "NVRX_MEGATRON_ARGS_WHERE": 65536}
# Every variable the launcher reads; each is checked for length and printable characters first.
INTERFACE_VARIABLES = (
    *PATH_VARIABLES,
    "NVRX_WORKLOAD",
    "NVRX_RUN_ID",
    "SLURM_JOB_ID",
    "RDZV_ENDPOINT",
    "NVRX_FAULT_RANK",
    "NVRX_DRY_RUN",
    "NVRX_SCENARIO",
    "NVRX_WORKERS_STOP_TIMEOUT",
    "NVRX_LOG_SERVER_PORT",
    "NVRX_NODE_RANK",
    "SLURM_NODEID",
    "NVRX_SETTINGS_FINGERPRINT",
    *VARIABLES,
    *campaign_setup.VARIABLES,
)


def read_all(env: Mapping[str, str], known: Mapping[str, Any]) -> dict[str, Any]:
    """Every setting of the table: those in `known` (already read, in the launcher's order), the rest read."""
    return {name: known[name] if name in known else spec.read(env, None) for name, spec in SPECS.items()}


def write_all(values: RunSettings) -> dict[str, str]:
    """The launcher variables for every setting of the table."""
    out: dict[str, str] = {}
    for name, spec in SPECS.items():
        out.update(spec.write(getattr(values, name)))
    return out


def from_json(data: Mapping[str, Any]) -> dict[str, Any]:
    """The table's settings of a resolved scenario (`Scenario.to_json()`); KeyError for a required one."""
    return {
        name: spec.convert(data[name] if name in data or name not in DEFAULTS else DEFAULTS[name])
        for name, spec in SPECS.items()
    }


def json_default(name: str) -> Any:
    """A setting's default as to_json writes it (a Timeouts as its map)."""
    default = DEFAULTS[name]
    return asdict(default) if isinstance(default, Timeouts) else default
