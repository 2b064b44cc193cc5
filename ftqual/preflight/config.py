"""The preflight's view of the workflow config: read YAML or JSON, fill defaults, expand scenarios.

Type errors (a string where a number belongs, an unreadable file) raise ConfigError: the command exits 2
with one line. Values that are well-typed but wrong for this stack or run (rank outside the world, too few
iterations) are left to the checks, which say what to change.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUTS = {"setup": 900.0, "step": 120.0, "checkpointing": 600.0, "out_of_section": 180.0}
DEFAULT_SCENARIOS: dict[str, dict[str, Any]] = {
    "baseline": {"fault": "none"},
    "kill": {"fault": "kill", "rank": 1},
    "hang": {"fault": "hang", "rank": 1},
}
CHOICES = {
    "workload": ("smoke", "megatron"),
    "transformer_impl": ("auto", "local", "transformer_engine"),
    "dist_optimizer": ("auto", "on", "off"),
}
# The seed's model (4 layers, hidden 512, 8 heads, seq 256, vocab 1024); only used for the disk estimate.
DEFAULT_MODEL = {"num_layers": 4, "hidden_size": 512, "seq_length": 256, "vocab_size": 1024}


SCHEMA = Path(__file__).resolve().parents[2] / "config" / "schema.yaml"


def schema_defaults(schema: Path = SCHEMA) -> dict:
    """Top-level defaults of the workflow's config/schema.yaml: a partial config reads as the workflow's."""
    try:
        import yaml

        props = yaml.safe_load(schema.read_text(encoding="utf-8")).get("properties", {})
    except Exception:  # noqa: BLE001 - no schema beside the package: the built-in defaults apply
        return {}
    return {k: v["default"] for k, v in props.items() if isinstance(v, dict) and "default" in v}


class ConfigError(ValueError):
    """The config cannot be read or has the wrong type somewhere; the message is one line."""


@dataclass(frozen=True)
class Timeouts:
    setup: float
    step: float
    checkpointing: float
    out_of_section: float

    def as_dict(self) -> dict[str, float]:
        return {
            "setup": self.setup,
            "step": self.step,
            "checkpointing": self.checkpointing,
            "out_of_section": self.out_of_section,
        }


@dataclass(frozen=True)
class Scenario:
    """One scenario with every run setting resolved (its overrides over the top level)."""

    name: str
    fault: str
    rank: int | None
    nnodes: int
    gpus_per_node: int
    tp: int
    pp: int
    train_iters: int
    save_interval: int
    timeouts: Timeouts
    max_restarts: int
    term_timeout: int
    transformer_impl: str
    dist_optimizer: str
    hang_placement: str
    checkpoint_dir: str | None

    @property
    def world_size(self) -> int:
        return self.nnodes * self.gpus_per_node


@dataclass(frozen=True)
class PreflightConfig:
    workload: str
    megatron_path: str | None
    megatron_path_source: str  # "config", "env MEGATRON_PATH" or "unset"
    work_dir: str | None  # None: the working directory (the workflow's --directory)
    nnodes: int
    gpus_per_node: int
    tp: int
    pp: int
    train_iters: int
    save_interval: int
    timeouts: Timeouts
    max_restarts: int
    term_timeout: int
    transformer_impl: str
    dist_optimizer: str
    hang_placement: str
    checkpoint_dir: str | None
    checkpoint_dir_source: str
    log_server_port: int | None
    model: dict[str, int]
    scenarios: tuple[Scenario, ...]

    @property
    def world_size(self) -> int:
        return self.nnodes * self.gpus_per_node


def read_mapping(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML or JSON file holding one mapping."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc.strerror or exc}") from exc
    try:
        if p.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml  # JSON is YAML too, so any other suffix goes through the YAML parser

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - any parse error is one line of bad input
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"config {p} is not valid {'JSON' if p.suffix == '.json' else 'YAML'}: {first}"
        ) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {p} must hold a mapping at the top, not {type(data).__name__}")
    return data


def read_scenario_table(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """Scenarios from a TSV/CSV sheet (`name` or `scenario`, fault, rank, overrides ...) or YAML/JSON."""
    p = Path(path)
    if p.suffix in (".tsv", ".csv"):
        try:
            with p.open(newline="", encoding="utf-8") as fh:
                rows = list(csv.DictReader(fh, delimiter="\t" if p.suffix == ".tsv" else ","))
        except OSError as exc:
            raise ConfigError(f"cannot read scenario table {p}: {exc.strerror or exc}") from exc
        table: dict[str, dict[str, Any]] = {}
        for row in rows:
            name = (row.pop("name", None) or row.pop("scenario", None) or "").strip()
            if not name:
                raise ConfigError(f"scenario table {p}: a row has no name/scenario column value")
            table[name] = {k.strip(): _cell(v) for k, v in row.items() if k and v not in (None, "")}
        return table
    data = read_mapping(p)
    return data.get("scenarios", data)


def _cell(value: str) -> Any:
    value = value.strip()
    if value.lower() in ("null", "na", "-"):  # not "none": that is a fault value
        return None
    try:
        return int(value)
    except ValueError:
        return value


def _int(raw: Mapping[str, Any], key: str, default: int | None, where: str = "") -> int | None:
    value = raw.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{where}{key} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise ConfigError(f"{where}{key} must be an integer, got {value!r}") from exc


def _str(raw: Mapping[str, Any], key: str, default: str | None, where: str = "") -> str | None:
    value = raw.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool):  # YAML turns on/off into booleans
        return "on" if value else "off"
    if not isinstance(value, str | int | float):
        raise ConfigError(f"{where}{key} must be a string, got {value!r}")
    return str(value)


def _timeouts(raw: Any, base: Mapping[str, float], where: str = "") -> Timeouts:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}timeouts must be a mapping of section -> seconds, got {raw!r}")
    merged = dict(base)
    for key, value in raw.items():
        if key not in DEFAULT_TIMEOUTS:
            raise ConfigError(f"{where}timeouts.{key} is not one of {', '.join(DEFAULT_TIMEOUTS)}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}timeouts.{key} must be a number of seconds, got {value!r}")
        merged[key] = float(value)
    return Timeouts(**merged)


def parse_config(
    raw: Mapping[str, Any],
    env: Mapping[str, str] | None = None,
    scenario_table: Mapping[str, Any] | None = None,
) -> PreflightConfig:
    """Defaults + the workflow config (+ a scenario table that replaces config's `scenarios`)."""
    env = os.environ if env is None else env
    raw = {**schema_defaults(), **raw}
    # Empty strings mean "not set" (config.yaml's defaults); the launcher's environment variables fill in.
    megatron_path, source = _from_env(_str(raw, "megatron_path", None), env, "MEGATRON_PATH")
    checkpoint_dir, ckpt_source = _from_env(_str(raw, "checkpoint_dir", None), env, "NVRX_CHECKPOINT_DIR")
    model = dict(DEFAULT_MODEL)
    if isinstance(raw.get("model"), Mapping):
        model.update({k: int(v) for k, v in raw["model"].items() if k in DEFAULT_MODEL})
    timeouts = _timeouts(raw.get("timeouts"), DEFAULT_TIMEOUTS)
    cfg = PreflightConfig(
        workload=_str(raw, "workload", "smoke"),
        megatron_path=megatron_path,
        megatron_path_source=source,
        work_dir=_str(raw, "work_dir", None) or None,
        nnodes=_int(raw, "nnodes", 1),
        gpus_per_node=_int(raw, "gpus_per_node", 2),
        tp=_int(raw, "tp", 1),
        pp=_int(raw, "pp", 1),
        train_iters=_int(raw, "train_iters", 30),
        save_interval=_int(raw, "save_interval", 5),
        timeouts=timeouts,
        max_restarts=_int(raw, "max_restarts", 3),
        term_timeout=_int(raw, "term_timeout", 15),
        transformer_impl=_str(raw, "transformer_impl", "auto"),
        dist_optimizer=_str(raw, "dist_optimizer", "auto"),
        hang_placement=_str(raw, "hang_placement", "step"),
        checkpoint_dir=checkpoint_dir,
        checkpoint_dir_source=ckpt_source,
        log_server_port=_int(raw, "log_server_port", None),
        model=model,
        scenarios=(),
    )
    for key, allowed in CHOICES.items():
        if getattr(cfg, key) not in allowed:
            raise ConfigError(f"{key} must be one of {'|'.join(allowed)}, got {getattr(cfg, key)!r}")
    for key in ("nnodes", "gpus_per_node", "tp", "pp"):
        if getattr(cfg, key) < 1:
            raise ConfigError(f"{key} must be a positive integer, got {getattr(cfg, key)}")
    table = scenario_table if scenario_table is not None else raw.get("scenarios", DEFAULT_SCENARIOS)
    if table is None:
        table = {}
    if isinstance(table, list):  # a list of {name: ..., fault: ...} is accepted too
        table = {str(item.get("name")): item for item in table if isinstance(item, Mapping)}
    if not isinstance(table, Mapping):
        raise ConfigError(f"scenarios must be a mapping of name -> {{fault, rank, ...}}, got {table!r}")
    scenarios = tuple(
        _scenario(str(n), s, cfg)
        for n, s in table.items()
        if not (isinstance(s, Mapping) and s.get("enabled", True) is False)
    )
    return replace(cfg, scenarios=scenarios)


def _from_env(value: str | None, env: Mapping[str, str], name: str) -> tuple[str | None, str]:
    if value:
        return value, "config"
    if env.get(name):
        return env[name], f"env {name}"
    return None, "unset"


def _scenario(name: str, raw: Any, cfg: PreflightConfig) -> Scenario:
    where = f"scenarios.{name}."
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"scenarios.{name} must be a mapping with fault, rank and overrides, got {raw!r}")
    fault = _str(raw, "fault", "none", where)
    rank_key = "rank" if "rank" in raw else "fault_rank"
    rank = _int(raw, rank_key, None if fault == "none" else 1, where)

    def num(key: str) -> int:
        return _int(raw, key, getattr(cfg, key), where)

    def text(key: str) -> str:
        return _str(raw, key, getattr(cfg, key), where)

    return Scenario(
        name=name,
        fault=fault,
        rank=None if fault == "none" else rank,
        nnodes=num("nnodes"),
        gpus_per_node=num("gpus_per_node"),
        tp=num("tp"),
        pp=num("pp"),
        train_iters=num("train_iters"),
        save_interval=num("save_interval"),
        timeouts=_timeouts(raw.get("timeouts"), cfg.timeouts.as_dict(), where),
        max_restarts=num("max_restarts"),
        term_timeout=num("term_timeout"),
        transformer_impl=text("transformer_impl"),
        dist_optimizer=text("dist_optimizer"),
        hang_placement=text("hang_placement"),
        checkpoint_dir=_str(raw, "checkpoint_dir", cfg.checkpoint_dir, where) or None,
    )


def load_config(
    path: str | os.PathLike,
    scenario_table: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
) -> PreflightConfig:
    raw = read_mapping(path)
    table = read_scenario_table(scenario_table) if scenario_table else None
    return parse_config(raw, env=env, scenario_table=table)
