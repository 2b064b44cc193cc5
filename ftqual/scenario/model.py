"""The one scenario model: the workflow config resolved into scenarios, and everything derived from them.

Defaults live only in config/schema.yaml; this module fills them in with the schema itself, applies each
scenario's overrides over the top level, checks the rules the schema cannot express, and derives what the
later stages need: the launcher's environment (one function for the workflow and the preflight), the smoke
workload's arguments, and a fingerprint of the settings that shape a run. The Snakefile, the preflight and
the launcher environment all come from here, so they cannot drift apart.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ftqual.contract import family_of, gpu_only_problem, is_fault
from ftqual.scenario import constraints, fields, launch_script, team_args
from ftqual.scenario import job as jobshape
from ftqual.scenario.fields import RunSettings, Timeouts

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"
DEFAULT_FAULT_RANK = 1  # the walkthrough's NVRX_FAULT_RANK default
SECTIONS = ("setup", "step", "checkpointing")
# Every variable the launcher reads (ftqual/launch/settings.py) but Slurm's own. The workflow sets those it
# needs and removes the rest from the environment it inherits, so a stray NVRX_CHECKPOINT_DIR in a user's
# shell can never make two scenarios share checkpoints.
LAUNCHER_VARIABLES = tuple(name for name in fields.INTERFACE_VARIABLES if not name.startswith("SLURM_"))


class ConfigError(ValueError):
    """The config cannot be read or breaks rules; the message says what and how to fix it. `problems`: one
    line per mistake (the message itself when there is one)."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems) or (message,)

    @classmethod
    def of(cls, problems: Sequence[str]) -> ConfigError:
        """One error for every mistake, a line each, each saying it is one."""
        lines = [p if p.startswith("invalid config") else f"invalid config: {p}" for p in problems]
        return cls("\n".join(lines), lines)


@dataclass(frozen=True)
class SmokeOptions:
    step_seconds: float
    save_seconds: float


@dataclass(frozen=True, kw_only=True)
class Scenario(RunSettings):
    """One scenario with every run setting resolved (its overrides over the top level): the table's
    (ftqual.scenario.fields.RunSettings) and those only the workflow has."""

    name: str
    rank: int | None  # None for fault "none"
    smoke: SmokeOptions
    # Scenario-only settings (never at the top level); defaults are today's single walkthrough fault.
    resume_from: str | None = None  # the baseline scenario whose completed checkpoint the run starts from
    expect: str = "pass"  # pass | fail: the outcome that qualifies
    expect_failing: tuple[str, ...] = ()  # with expect fail: the checks that must fail
    campaign: CampaignOptions | None = None  # fault: campaign only (ftqual.scenario.campaign_setup)

    @property
    def allocated_nodes(self) -> int:
        """Nodes the run takes: the active nnodes and the spares, one launcher each."""
        return self.nnodes + self.spare_nodes

    @property
    def world_size(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def multinode(self) -> bool:
        return self.allocated_nodes > 1

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["expect_failing"] = list(self.expect_failing)
        out["world_size"] = self.world_size
        return out


@dataclass(frozen=True)
class CampaignOptions:
    """A campaign scenario's `campaign:` block (config/campaign.yaml); kinds empty: the workload's all."""

    faults: int = 10
    seed: int = 0
    mtti: int | None = None  # iterations; None: two save intervals
    kinds: tuple[str, ...] = ()
    placements: tuple[str, ...] = ("step",)
    horizon_faults: int = 1000  # the faults /dev/shm must have room for (ftqual.verification.campaign.shm)

    def env(self) -> dict[str, str]:
        out = {"NVRX_CAMPAIGN_FAULTS": str(self.faults), "NVRX_CAMPAIGN_SEED": str(self.seed)}
        if self.mtti is not None:
            out["NVRX_CAMPAIGN_MTTI"] = str(self.mtti)
        if self.kinds:
            out["NVRX_CAMPAIGN_KINDS"] = ",".join(self.kinds)
        out["NVRX_CAMPAIGN_PLACEMENTS"] = ",".join(self.placements)
        if self.horizon_faults != 1000:  # the default is the launcher's own: the settings' key stays
            out["NVRX_CAMPAIGN_HORIZON"] = str(self.horizon_faults)
        return out


def _campaign_options(value: Mapping[str, Any] | None) -> CampaignOptions | None:
    if value is None:
        return None
    return CampaignOptions(
        faults=int(value.get("faults", 10)),
        seed=int(value.get("seed", 0)),
        mtti=None if value.get("mtti") is None else int(value["mtti"]),
        kinds=tuple(value.get("kinds") or ()),
        placements=tuple(value.get("placements") or ("step",)),
        horizon_faults=int(value.get("horizon_faults", 1000)),
    )


@dataclass(frozen=True)
class WorkflowConfig:
    """The whole resolved config: workflow-wide settings and the enabled scenarios, in config order."""

    workload: str
    megatron_path: str | None
    megatron_path_source: str  # "config", "env MEGATRON_PATH" or "unset"
    work_dir: str | None  # None: the workflow's working directory
    baseline_scenario: str
    preflight_on_node: str | bool
    rerun_failed_verification: bool
    defaults: Scenario  # the top-level settings, as a scenario named "(top level)"
    scenarios: tuple[Scenario, ...] = field(default_factory=tuple)
    storage_probe_mb: int | str = "auto"  # the preflight's storage floor (ftqual/preflight/storage.py)
    checkpoint_payloads: str = "auto"  # keep, drop or auto once a run is verified (launch/payloads.py)

    @property
    def by_name(self) -> dict[str, Scenario]:
        return {s.name: s for s in self.scenarios}

    @property
    def fault_scenarios(self) -> tuple[Scenario, ...]:
        return tuple(s for s in self.scenarios if family_of(s.fault) != "none")

    def fingerprint(self, scenario: Scenario) -> str:
        """Hash of every setting that shapes this scenario's run (never its name or where runs go)."""
        return _digest(self.shaping_settings(scenario))

    def shaping_settings(self, scenario: Scenario) -> dict[str, Any]:
        settings = scenario.to_json()
        del settings["name"]
        # Scenario-only settings at their defaults stay out, so the walkthrough's scenarios keep the
        # fingerprints (and attempt slots) they had before these settings existed.
        for key, default in SCENARIO_ONLY_DEFAULTS.items():
            if settings[key] == default:
                del settings[key]
        settings.pop("megatron_args_where", None)  # where the arguments were written, not what they are
        if self.workload != "smoke":
            del settings["smoke"]  # only the smoke workload reads them
        return {
            "workload": self.workload,
            "megatron_path": self.megatron_path if self.workload == "megatron" else None,
            **settings,
        }

    def preflight_fingerprint(self) -> str:
        """Changes whenever anything the preflight judges changes: every scenario, the workload, its tree."""
        return _digest(
            {
                "workload": self.workload,
                "megatron_path": self.megatron_path,
                "work_dir": self.work_dir,
                "preflight_on_node": self.preflight_on_node,
                "scenarios": {s.name: self.fingerprint(s) for s in self.scenarios},
            }
        )

    def to_json(self) -> dict[str, Any]:
        """The resolved form the preflight reads back (`from_resolved`) and results/ records."""
        return {
            "schema": "ftqual.resolved-config/v1",
            "workload": self.workload,
            "megatron_path": self.megatron_path,
            "megatron_path_source": self.megatron_path_source,
            "work_dir": self.work_dir,
            "baseline_scenario": self.baseline_scenario,
            "preflight_on_node": self.preflight_on_node,
            "rerun_failed_verification": self.rerun_failed_verification,
            "storage_probe_mb": self.storage_probe_mb,
            "checkpoint_payloads": self.checkpoint_payloads,
            "defaults": self.defaults.to_json(),
            "scenarios": {
                s.name: {**s.to_json(), "fingerprint": self.fingerprint(s)} for s in self.scenarios
            },
        }


def _digest(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------
# reading and resolving


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the config schema {path}: {exc.strerror or exc}") from exc


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML or JSON file holding one mapping (JSON is YAML too)."""
    import yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config {p}: {getattr(exc, 'strerror', None) or exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"config {p} is not valid YAML/JSON: {first}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {p} must hold a mapping at the top, not {type(data).__name__}")
    return data


def with_defaults(raw: Mapping[str, Any], schema: dict | None = None) -> dict[str, Any]:
    """`raw` validated against the schema, top-level defaults filled in (as Snakemake's validate does)."""
    from ftqual.scenario import config_problems  # jsonschema: imported only where a config is read

    schema = schema or load_schema()
    config = copy.deepcopy(dict(raw))
    for key, prop in schema.get("properties", {}).items():
        if key not in config and isinstance(prop, dict) and "default" in prop:
            config[key] = copy.deepcopy(prop["default"])
    try:
        problems = config_problems.schema_problems(config, schema)
    except RecursionError as exc:
        raise ConfigError("invalid config: nested too deeply") from exc
    if problems:
        raise ConfigError.of(problems)
    return config


def _merged(base: Any, override: Any) -> Any:
    """`base` updated by `override`, recursing into mappings (timeouts, smoke)."""
    if not isinstance(base, Mapping) or not isinstance(override, Mapping):
        return copy.deepcopy(override)
    out = dict(base)
    for key, value in override.items():
        out[key] = _merged(out.get(key), value)
    return out


# The settings a scenario's fingerprint holds only away from their defaults (as to_json writes them): the
# table's that say so, and the workflow's own scenario-only ones.
SCENARIO_ONLY_DEFAULTS: dict[str, Any] = {
    **{
        name: fields.json_default(name)
        for name, spec in fields.SPECS.items()
        if not spec.fingerprinted_at_default
    },
    "resume_from": None,
    "expect": "pass",
    "expect_failing": [],
    "campaign": None,
}

# The settings at the top level that a scenario may override: the table's and the smoke workload's pace.
RUN_SETTINGS = (*(name for name, spec in fields.SPECS.items() if spec.source == fields.RUN), "smoke")


def _scenario(name: str, top: Mapping[str, Any], raw: Mapping[str, Any]) -> Scenario:
    s = {key: _merged(top[key], raw[key]) if key in raw else copy.deepcopy(top[key]) for key in RUN_SETTINGS}
    # A scenario's own keys, with the table's defaults (a workflow-wide one is set by `resolve`).
    s |= {
        key: raw.get(key, fields.DEFAULTS[key])
        for key, spec in fields.SPECS.items()
        if spec.source == fields.SCENARIO
    }
    fault = s["fault"]
    campaign = _campaign_options(raw.get("campaign", {})) if family_of(fault) == "campaign" else None
    if campaign is not None:
        s["injections"] = campaign.faults
        if "max_restarts" not in raw:
            s["max_restarts"] = campaign.faults  # one restart per fault: follows from K
    table = {key: spec.convert(s[key]) for key, spec in fields.SPECS.items() if key in s}
    return Scenario(
        **table,
        name=name,
        rank=int(raw.get("rank", DEFAULT_FAULT_RANK)) if is_fault(fault, lambda f: f.has_rank) else None,
        smoke=SmokeOptions(float(s["smoke"]["step_seconds"]), float(s["smoke"]["save_seconds"])),
        resume_from=raw.get("resume_from"),
        expect=str(raw.get("expect", "pass")),
        expect_failing=tuple(raw.get("expect_failing", ())),
        campaign=campaign,
    )


def _resume_lengths(scenarios: tuple[Scenario, ...], raw: Mapping[str, Any]) -> tuple[Scenario, ...]:
    """A resume_from scenario that sets no train_iters of its own runs three save intervals past its
    source's final checkpoint: a new checkpoint before the fault even where a save completes only when the
    next one begins (ftqual.scenario.sizing: one H200 finalizes an async save a whole interval late), one
    after the
    restore. The minimum stays two intervals; the baseline's measured lag may ask for more before launch."""
    by_name = {s.name: s for s in scenarios}
    out = []
    for s in scenarios:
        source = by_name.get(s.resume_from) if s.resume_from else None
        if source is not None and "train_iters" not in raw[s.name]:
            s = dataclasses.replace(s, train_iters=source.train_iters + 3 * s.save_interval)
        out.append(s)
    return tuple(out)


def _team_args(
    config: Mapping[str, Any], env: Mapping[str, str]
) -> tuple[list[str], team_args.Sorted | None, list[str]]:
    """megatron_args, or megatron_args_file read (a launch script as the team writes it, its $VARs from the
    script then `env`): the team's arguments whole, their flags sorted (ftqual.scenario.team_args), and every
    problem, each naming its file:line."""
    args, path = list(config.get("megatron_args") or ()), config.get("megatron_args_file") or ""
    try:
        if path and args:
            raise jobshape.JobError("give megatron_args or megatron_args_file, not both")
        if path:
            read = jobshape.read_args_file(os.path.expanduser(path), env)
        else:
            read = launch_script.from_list(args)
    except jobshape.JobError as exc:
        return [], None, [f"invalid config: {exc}"]
    sorted_ = team_args.sort_args(read.tokens)
    problems = [f"invalid config: {p}" for p in (*read.problems, *sorted_.problems)]
    texts = [t.text for t in read.tokens]
    if not problems:
        try:
            jobshape.resolve_job(config.get("model", jobshape.DEFAULT_MODEL), texts)
        except jobshape.JobError as exc:
            problems.append(f"invalid config: {exc}")
    return (texts if not problems else []), (sorted_ if read.tokens else None), problems


# The config settings a team's flag also decides: setting -> (the Sorted field, the value that means "not
# set": the schema's default, which the job's value replaces).
TAKEN_SETTINGS = {"tp": ("tp", 1), "pp": ("pp", 1), "transformer_impl": ("transformer_impl", "auto"),
                  "dist_optimizer": ("dist_optimizer", "auto")}  # fmt: skip


def _setting_value(key: str, value: Any) -> Any:
    if key == "dist_optimizer":
        return {True: "on", False: "off"}.get(value, value)
    return value


def _scripted(config: Mapping[str, Any], sorted_: team_args.Sorted | None) -> dict[str, str]:
    """The settings the team's launch script decides (the config leaves them at their default), each with
    its file:line and flag: a problem they make is the script's line."""
    out = {}
    for key, (field_name, unset) in TAKEN_SETTINGS.items():
        taken = sorted_.taken.get(field_name) if sorted_ is not None else None
        if taken is not None and _setting_value(key, config.get(key, unset)) == unset:
            given = f"{taken.flag} {taken.value}" if key != "dist_optimizer" else taken.flag
            out[key] = f"{taken.where}: {given}"
    return out


def _take_job_settings(config: dict[str, Any], sorted_: team_args.Sorted | None) -> list[str]:
    """The job's own TP, PP, transformer implementation and distributed optimizer become the config's where
    the config leaves them at their default; a config (or scenario) value that says otherwise is one problem
    naming both."""
    if sorted_ is None:
        return []
    problems = []
    for key, (field_name, unset) in TAKEN_SETTINGS.items():
        taken = sorted_.taken.get(field_name)
        if taken is None:
            continue
        value = "on" if key == "dist_optimizer" else taken.value
        given = f"{taken.flag} {taken.value}" if key != "dist_optimizer" else taken.flag
        top = _setting_value(key, config.get(key, unset))
        if top == unset:
            config[key] = value
        elif top != value:
            problems.append(
                f"invalid config: {taken.where}: {given} contradicts the config's {key}: {top}; "
                "make them agree or remove one"
            )
        for name, entry in config["scenarios"].items():
            if key in entry and _setting_value(key, entry[key]) != value:
                problems.append(
                    f"invalid config at scenarios.{name}.{key}: {_setting_value(key, entry[key])} "
                    f"contradicts {taken.where}: {given}; make them agree or remove one"
                )
    return problems


def batch_problems(scenarios: Sequence[Scenario], sorted_: team_args.Sorted | None) -> list[str]:
    """The team's global batch on each scenario's world (Megatron asserts it divides); one line per problem,
    naming the scenarios it holds for unless it holds for all."""
    where = "megatron_args"
    if sorted_ is not None and "global_batch_size" in sorted_.taken:
        where = sorted_.taken["global_batch_size"].where
    found: dict[str, list[str]] = {}
    for s in scenarios:
        job = jobshape.resolve_job(s.model, s.megatron_args)
        micro, cp = job.micro_batch_size, job.context_parallel
        dp = max(1, s.world_size // max(1, s.tp * s.pp * cp))
        problem = team_args.accumulation_problem(
            s.world_size, s.tp, s.pp, cp, micro, job.global_batch_size(dp), where
        )
        if problem:
            found.setdefault(problem, []).append(s.name)
    return [
        f"invalid config: {problem}"
        if len(names) == len(scenarios)
        else f"invalid config at {', '.join(f'scenarios.{name}' for name in names)}: {problem}"
        for problem, names in found.items()
    ]


def in_config_order(cfg: WorkflowConfig, reference: list[str]) -> WorkflowConfig:
    """The scenarios in the order a reader expects, whatever order config merging left them in: the
    baseline, then those of the reference config (config/config.yaml) in its order, then the added ones in
    the order they came."""
    position = {name: i for i, name in enumerate(reference)}
    given = [s.name for s in cfg.scenarios]

    def key(s: Scenario) -> tuple[int, int]:
        if s.name == cfg.baseline_scenario:
            return (0, 0)
        if s.name in position:
            return (1, position[s.name])
        return (2, given.index(s.name))

    return dataclasses.replace(cfg, scenarios=tuple(sorted(cfg.scenarios, key=key)))


def resolve(raw: Mapping[str, Any], env: Mapping[str, str] | None = None) -> WorkflowConfig:
    """The workflow config (as written or as Snakemake holds it) resolved into scenarios; ConfigError if not
    valid. `env` supplies MEGATRON_PATH when the config leaves megatron_path empty."""
    env = os.environ if env is None else env
    schema = load_schema()
    config = with_defaults(raw, schema)
    # A partial top-level `smoke` keeps the schema's value for the option it leaves out.
    config["smoke"] = _merged(schema["properties"]["smoke"]["default"], config["smoke"])
    megatron_path, source = config["megatron_path"] or None, "config"
    if not megatron_path:
        megatron_path, source = (env.get("MEGATRON_PATH") or None), "env MEGATRON_PATH"
        if not megatron_path:
            source = "unset"
    # Every mistake at once: the team's arguments, settings that exclude each other, cross-field rules.
    problems: list[str] = []
    config["megatron_args"], sorted_, problems = _team_args(config, env)
    where = tuple(t.where for t in sorted_.tokens) if sorted_ is not None and not problems else ()
    scripted = _scripted(config, sorted_)
    problems += _take_job_settings(config, sorted_)
    top = {key: config[key] for key in RUN_SETTINGS}
    defaults = _scenario("(top level)", top, {"fault": "none"})
    scenarios = tuple(
        _scenario(name, top, entry)
        for name, entry in config["scenarios"].items()
        if entry.get("enabled", True)
    )
    scenarios = _resume_lengths(scenarios, config["scenarios"])
    if config.get("calc_ft_timeouts") and config.get("timeouts_from") is not None:
        problems.append(
            "invalid config: calc_ft_timeouts and timeouts_from: NVRx's calculated timeouts are no "
            "recommendation; set one of them"
        )
    if config.get("checkpoint_dir"):
        root = os.path.abspath(os.path.expanduser(config["checkpoint_dir"]))
        scenarios = tuple(dataclasses.replace(s, checkpoint_root=root) for s in scenarios)
        defaults = dataclasses.replace(defaults, checkpoint_root=root)
    if where and config.get("megatron_args_file"):
        scenarios = tuple(dataclasses.replace(s, megatron_args_where=where) for s in scenarios)
    if config.get("calc_ft_timeouts"):
        scenarios = tuple(dataclasses.replace(s, calc_ft_timeouts=True) for s in scenarios)
    if config.get("timeouts_from") is not None:
        recommended_from = Timeouts.from_mapping(config["timeouts_from"])
        # A scenario with timeouts of its own does not run under the recommendation.
        scenarios = tuple(
            s
            if "timeouts" in config["scenarios"][s.name]
            else dataclasses.replace(s, timeouts_from=recommended_from)
            for s in scenarios
        )
    cfg = WorkflowConfig(
        workload=config["workload"],
        megatron_path=megatron_path,
        megatron_path_source=source,
        work_dir=config["work_dir"] or None,
        baseline_scenario=config["baseline_scenario"],
        preflight_on_node=config["preflight_on_node"],
        rerun_failed_verification=bool(config["rerun_failed_verification"]),
        defaults=defaults,
        scenarios=scenarios,
        storage_probe_mb=config["storage_probe_mb"],
        checkpoint_payloads=config["checkpoint_payloads"],
    )
    own = {name: set(entry) for name, entry in config["scenarios"].items()}
    problems += [
        p if p.startswith("invalid config") else f"invalid config: {p}"
        for p in cross_field_problems(cfg, own, scripted)
    ]
    if not problems:
        problems += batch_problems(scenarios, sorted_)
    if problems:
        raise ConfigError.of(problems)
    return cfg


def cross_field_problems(
    cfg: WorkflowConfig,
    own: Mapping[str, Collection[str]] | None = None,
    scripted: Mapping[str, str] | None = None,
) -> list[str]:
    """Rules the schema cannot express; one line per problem, each saying what to change, at the settings it
    names (`own`: the keys each scenario sets itself; `scripted`: the settings the team's launch script
    decided, by its file:line): a problem the same top-level values make in every scenario is said once."""
    from ftqual.scenario import config_problems  # jsonschema: imported only where a config is read

    problems = []
    names = [s.name for s in cfg.scenarios]
    baseline = cfg.by_name.get(cfg.baseline_scenario)
    if baseline is None:
        problems.append(
            f"baseline_scenario {cfg.baseline_scenario!r} is not an enabled scenario "
            f"(enabled: {', '.join(names) or 'none'})"
        )
    elif family_of(baseline.fault) != "none":
        problems.append(f"baseline_scenario {cfg.baseline_scenario!r} must have fault: none")
    found: list[config_problems.Found] = []
    for s in cfg.scenarios:
        v = config_problems.recording(constraints.CONFIG)
        shape = [
            constraints.rank_outside_world(v, s.rank, s.world_size),
            constraints.world_not_divisible(
                v,
                s.world_size,
                s.tp,
                s.pp,
                jobshape.resolve_job(s.model, s.megatron_args).shape,
            ),
        ]
        said = [*shape, *_fault_problems(s, cfg.workload, v), gpu_only_problem(s.fault, cfg.workload)]
        if s.resume_from is not None:
            said += _resume_problems(cfg, s)
        found += [config_problems.Found(s.name, p, config_problems.named_in(v, p)) for p in said if p]
    return problems + config_problems.said_once(found, own or {}, scripted or {})


def _fault_problems(
    s: Scenario, workload: str = "smoke", v: constraints.Vocabulary = constraints.CONFIG
) -> list[str]:
    problems = []
    if family_of(s.fault) == "none":
        changed = [
            key
            for key in ("injections", "fault_timing", "checkpoint_load", "checkpoint_damage")
            if getattr(s, key) != SCENARIO_ONLY_DEFAULTS[key]
        ]
        if changed:
            problems.append(f"{', '.join(changed)} need a fault (kill or hang); remove them or set fault")
    if family_of(s.fault) == "campaign":
        return problems + _campaign_problems(s, workload)
    fit = constraints.injections_do_not_fit(v, s.fault, s.injections, s.save_interval, s.train_iters)
    problems += [fit] if fit else []
    if family_of(s.fault) == "node":
        problems += _node_loss_problems(s, v)
    elif s.spare_nodes:
        problems.append("spare_nodes is for fault: node_loss (a spare replaces a lost node); remove it")
    in_save = constraints.in_save_needs_kill(v, s.fault, s.fault_timing)
    problems += [in_save] if in_save else []
    setup = constraints.setup_placement_problem(v, s.fault, s.hang_placement, s.injections, s.fault_timing)
    problems += [setup] if setup else []
    damage = constraints.damage_problem(v, s.fault, s.checkpoint_damage, s.injections, s.fault_timing)
    problems += [damage] if damage else []
    storage = constraints.storage_problem(v, s.fault, s.fault_timing, s.injections, s.nnodes, s.async_save)
    problems += [storage] if storage else []
    recurring = constraints.recurring_problem(v, s.fault, s.injections)
    problems += [recurring] if recurring else []
    if s.expect == "fail" and not s.expect_failing:
        problems.append(
            "expect: fail needs expect_failing: the check ids that must fail (e.g. [clean_finish])"
        )
    if s.expect == "pass" and s.expect_failing:
        problems.append("expect_failing is only for expect: fail; remove it or set expect: fail")
    return problems


def _campaign_problems(s: Scenario, workload: str = "smoke") -> list[str]:
    """The plan the campaign block draws must fit the run, and its restarts its faults
    (ftqual.scenario.campaign_setup)."""
    from ftqual.scenario import campaign_setup
    from ftqual.scenario.campaign_plan import PlanError

    assert s.campaign is not None
    env = {k: v for k, v in s.campaign.env().items() if k != "NVRX_CAMPAIGN_KINDS" or s.campaign.kinds}
    try:
        plan = campaign_setup.plan_from_env(env, workload, s.world_size, s.save_interval)
    except PlanError as exc:
        return [str(exc).replace("NVRX_CAMPAIGN_", "campaign.").replace("campaign.FAULTS", "campaign.faults")]
    problems = [campaign_setup.sizing_problem(plan, s.train_iters, "train_iters")]
    problems.append(campaign_setup.restarts_problem(plan.count, s.max_restarts, "max_restarts"))
    if s.expect == "fail" and not s.expect_failing:
        problems.append("expect: fail needs expect_failing: the check ids that must fail")
    return [p for p in problems if p]


def _node_loss_problems(s: Scenario, v: constraints.Vocabulary = constraints.CONFIG) -> list[str]:
    """node_loss kills a whole node's ft_launcher (ftqual.scenario.constraints); the verifier judges its
    outcome."""
    problems = constraints.node_loss_problems(
        v, s.nnodes, s.gpus_per_node, s.rank, s.injections, s.fault_timing
    )
    if s.nnodes < 2:
        return problems
    if s.expect == "fail":
        problems.append(
            "fault node_loss has its outcome judged by the verifier (the job must end within join_timeout); "
            "remove expect: fail"
        )
    return problems


def _resume_problems(cfg: WorkflowConfig, s: Scenario) -> list[str]:
    if s.resume_from != cfg.baseline_scenario:
        return [
            f"resume_from must name the baseline scenario ({cfg.baseline_scenario!r}), whose completed run's "
            f"checkpoint the run starts from (got {s.resume_from!r})"
        ]
    source = cfg.by_name.get(s.resume_from)
    if source is None:
        return []  # reported as the missing baseline
    needed = source.train_iters + 2 * s.save_interval
    if s.train_iters < needed:
        return [
            f"train_iters {s.train_iters} leaves no room after the {s.resume_from} scenario's final "
            f"checkpoint at {source.train_iters}: a fault after a new checkpoint and one more checkpoint "
            f"after the restore need train_iters >= {needed}"
        ]
    if s.checkpoint_load is False:
        return ["resume_from needs checkpoint_load (the run starts by loading the copied checkpoint)"]
    return []


def from_resolved(data: Mapping[str, Any]) -> WorkflowConfig:
    """Read back `WorkflowConfig.to_json()` (the preflight's --config when the workflow calls it)."""

    def scenario(d: Mapping[str, Any]) -> Scenario:
        return Scenario(
            **fields.from_json(d),
            name=d["name"],
            rank=d["rank"],
            smoke=SmokeOptions(**d["smoke"]),
            resume_from=d.get("resume_from"),
            expect=d.get("expect", "pass"),
            expect_failing=tuple(d.get("expect_failing", ())),
            campaign=_campaign_options(d.get("campaign")),
        )

    try:
        return WorkflowConfig(
            workload=data["workload"],
            megatron_path=data["megatron_path"],
            megatron_path_source=data["megatron_path_source"],
            work_dir=data["work_dir"],
            baseline_scenario=data["baseline_scenario"],
            preflight_on_node=data["preflight_on_node"],
            rerun_failed_verification=data["rerun_failed_verification"],
            defaults=scenario(data["defaults"]),
            scenarios=tuple(scenario(s) for s in data["scenarios"].values()),
            storage_probe_mb=data.get("storage_probe_mb", "auto"),  # absent from older resolved configs
            checkpoint_payloads=data.get("checkpoint_payloads", "auto"),
        )
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"resolved config is incomplete or malformed: {exc}") from exc


def load(path: str | os.PathLike, env: Mapping[str, str] | None = None) -> WorkflowConfig:
    """A config file: the resolved form written by the workflow, or a workflow config as a user writes it."""
    data = read_config_file(path)
    if data.get("schema") == "ftqual.resolved-config/v1":
        return from_resolved(data)
    return resolve(data, env)


# ---------------------------------------------------------------------------------------------
# what the launcher gets


def launcher_env(cfg: WorkflowConfig, s: Scenario) -> dict[str, str]:
    """The launcher's environment for one scenario: every setting it reads, nothing left to its defaults.

    The caller adds where the run goes (NVRX_WORK_DIR, NVRX_RUN_ID) and, for several nodes, the rendezvous
    endpoint and the shared log server port.
    """
    env: dict[str, Any] = {
        **fields.write_all(s),  # every setting of the table
        "NVRX_WORKLOAD": cfg.workload,
        "NVRX_SCENARIO": s.name,
        "NVRX_SETTINGS_FINGERPRINT": cfg.fingerprint(s),
    }
    if s.campaign is not None:
        env["NVRX_INJECTIONS"] = 1  # a campaign's count is its plan's
        env.update(s.campaign.env())
    if s.rank is not None:
        env["NVRX_FAULT_RANK"] = s.rank
    if cfg.workload == "megatron" and cfg.megatron_path:
        env["MEGATRON_PATH"] = os.path.abspath(cfg.megatron_path)
    return {key: str(value) for key, value in env.items()}


def workload_args(cfg: WorkflowConfig, s: Scenario) -> list[str]:
    """Extra workload arguments after the launcher's own (the smoke workload's pace only)."""
    if cfg.workload != "smoke":
        return []
    return [
        f"--smoke-save-seconds={fields.plain_number(s.smoke.save_seconds)}",
        f"--smoke-step-seconds={fields.plain_number(s.smoke.step_seconds)}",
    ]


def clean_environment(inherited: Mapping[str, str]) -> dict[str, str]:
    """`inherited` without any launcher variable: only what launcher_env sets reaches the launcher."""
    return {k: v for k, v in inherited.items() if k not in LAUNCHER_VARIABLES}
