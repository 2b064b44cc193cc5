"""run.json (`ftqual.run/v1`) as one record: `RunRecord`, one field per key of the file, each with its rule.

The launcher's record of a run, `runs/<run-id>/run.json`. `RunRecord` is the one statement of its keys: the
launcher builds one and writes `to_json()` (ftqual.launch.run), the verifier reads the file once into one
with `from_json` (ftqual.verification.evidence.run_meta), and `problems` (the schema) is made of the same
fields' rules. Each field's `Key` says how a raw value is read (the reader's default where the key is absent
or null: older run directories verify as before), what makes it unusable, and how it is written. Keys
beyond the contract's are extensions (docs/interfaces.md, "Run directory additions").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Self

from ftqual.contract import FAULTS
from ftqual.rank.ids import CHECKPOINT_DAMAGES, TIMINGS

SCHEMA = "ftqual.run/v1"
FAULT_TIMINGS = TIMINGS  # the wrapper's (ftqual.rank.ids)
CHECKPOINT_DAMAGE_VALUES = ("none", *CHECKPOINT_DAMAGES)
MAX_INJECTIONS = 1000  # one per cycle: max_restarts is a handful
TIMEOUT_KEYS = ("setup", "step", "checkpointing", "out_of_section")
TIMEOUTS_SOURCES = ("configured", "recommended")
REPLAY_MODES = ("exact", "tolerance")  # the setting `replay` (config/schema.yaml)
MAX_TZ_OFFSET_S = 26 * 3600  # UTC-12 .. UTC+14, with room: anything beyond is not a clock offset
# `interrupted_by`: the signal that stopped our launcher from outside (a stopped workflow, a scheduler's time
# limit, scancel), by name; null when nothing did.
SIGNAL_NAME = re.compile(r"SIG[A-Z0-9]{2,10}")


class RunRecordError(ValueError):
    """A run.json that breaks the schema; the message is the first problem, one sentence naming its key."""


# ---------------------------------------------------------------------------------------------
# raw values


def as_int(value: object) -> int | None:
    """An integer, or a string of ASCII digits (`"²"` and `"٣"` are not run.json integers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text.startswith("-") else text
        if digits.isascii() and digits.isdigit() and len(digits) <= 18:
            return int(text)
    return None


def as_finite(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_utc(text: object) -> datetime | None:
    """ISO-8601 UTC (`2026-11-29T14:19:09.744182Z`, `+00:00`, or `... UTC`) -> aware datetime; None if bad."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip()
    if text.endswith(" UTC"):
        text = text[:-4] + "+00:00"
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    if len(text) > 64:  # an ISO time is about 32 characters
        return None
    try:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def iso_z(moment: datetime | None) -> str | None:
    """An aware datetime as run.json writes its times, `YYYY-MM-DDTHH:MM:SS.ffffffZ` (None stays None)."""
    return None if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---------------------------------------------------------------------------------------------
# one key's rule

Check = Callable[[str, Any, Mapping[str, Any]], "str | None"]


@dataclass(frozen=True)
class Key:
    """How one run.json key travels. `read(raw, data)`: the typed value from the raw one (None when the key
    is absent: absent and null read alike); `check(name, raw, data)`: the problem with the raw value, one
    sentence naming the key, or None; `write`: the typed value as the file holds it; `omit_none`: the key
    is left out of the file while None (a key only some runs have)."""

    read: Callable[[Any, Mapping[str, Any]], Any]
    check: Check | None = None
    write: Callable[[Any], Any] = lambda value: value
    omit_none: bool = False


def _key(default: Any, key: Key) -> Any:
    return field(default=default, metadata={"key": key})


def _factory(factory: Callable[[], Any], key: Key) -> Any:
    return field(default_factory=factory, metadata={"key": key})


def _count_check(least: int) -> Check:
    def check(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
        if raw is not None and (as_int(raw) is None or as_int(raw) < least):
            return f"{name!r} must be an integer of at least {least}, got {short(raw)}"
        return None

    return check


def _choice_check(choices: Callable[[], tuple[str, ...]], default: str | None) -> Check:
    """One of `choices` (read at check time: a test may widen the fault list); `default`: what an absent
    or empty value stands for (None: the key is required)."""

    def check(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
        value = raw if default is None else (raw or default)
        if value not in choices():
            return f"{name!r} must be one of {', '.join(choices())}, got {short(raw)}"
        return None

    return check


def _flag_check(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
    if raw is not None and not isinstance(raw, bool):
        return f"{name!r} must be true or false, got {short(raw)}"
    return None


def _check_schema(name: str, _raw: Any, data: Mapping[str, Any]) -> str | None:
    schema = data.get("schema", SCHEMA)  # absent: this schema; null: not it
    if schema != SCHEMA:
        return f"'schema' must be {SCHEMA!r} (the run.json this verifier reads), got {short(schema)}"
    return None


def _check_fault_rank(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
    if raw is not None and as_int(raw) is None:
        return f"'fault_rank' must be an integer or null, got {short(raw)}"
    return None


def _check_tz(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
    if raw is not None and (as_finite(raw) is None or abs(as_finite(raw) or 0) > MAX_TZ_OFFSET_S):
        return f"'tz_offset_s' must be seconds east of UTC within +-{MAX_TZ_OFFSET_S}, got {raw!r}"
    return None


def _check_signal(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
    if raw is not None and not (isinstance(raw, str) and SIGNAL_NAME.fullmatch(raw)):
        return f"'interrupted_by' must be a signal's name (e.g. 'SIGTERM') or null, got {short(raw)}"
    return None


def _check_injections(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
    injections = as_int(raw) if raw is not None else 1
    if injections is None or not 1 <= injections <= MAX_INJECTIONS:
        return f"'injections' must be an integer from 1 to {MAX_INJECTIONS}, got {short(raw)}"
    return None


def _check_storage(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
    if raw is not None and not (isinstance(raw, Mapping) and as_int(raw.get("cap_bytes")) is not None):
        return (
            f"'storage' must be an object with an integer 'cap_bytes' (fault disk_full) or absent, "
            f"got {short(raw)}"
        )
    return None


def _check_initial(name: str, raw: Any, _data: Mapping[str, Any]) -> str | None:
    initial = as_int(raw) if raw is not None else 0
    if initial is None or initial < 0:
        return f"'initial_checkpoint_iteration' must be an integer >= 0, got {short(raw)}"
    return None


def _check_timeouts_from(name: str, raw: Any, data: Mapping[str, Any]) -> str | None:
    if raw is None:
        recommended = (data.get("timeouts_source") or "configured") == "recommended"
        return "'timeouts_from' must name the timeouts recommended from" if recommended else None
    if not isinstance(raw, Mapping) or sorted(raw) != sorted(TIMEOUT_KEYS):
        return f"'timeouts_from' must map each of {', '.join(TIMEOUT_KEYS)} to seconds, got {short(raw)}"
    for key in TIMEOUT_KEYS:
        value = as_finite(raw[key])
        if value is None or value <= 0:
            return f"'timeouts_from.{key}' must be positive seconds, got {short(raw[key])}"
    return None


# The readers: each takes (raw, data) and gives the typed value, its default where the key is absent.
def _int(raw: Any, _data: Mapping[str, Any]) -> int | None:
    return as_int(raw)


def _text(raw: Any, _data: Mapping[str, Any]) -> str | None:
    return raw if isinstance(raw, str) else None


def _obj(raw: Any, _data: Mapping[str, Any]) -> dict | None:
    return dict(raw) if isinstance(raw, dict) else None


def _list(raw: Any, _data: Mapping[str, Any]) -> list | None:
    return list(raw) if isinstance(raw, list) else None


def _scalar(raw: Any, _data: Mapping[str, Any]) -> str | int | float | bool | None:
    return raw if isinstance(raw, str | int | float | bool) else None


def _bool(raw: Any, _data: Mapping[str, Any]) -> bool | None:
    return raw if isinstance(raw, bool) else None


def _true(raw: Any, _data: Mapping[str, Any]) -> bool:
    return raw is True


def _seconds(raw: Any, _data: Mapping[str, Any]) -> float | None:
    return as_finite(raw)


def _time(raw: Any, _data: Mapping[str, Any]) -> datetime | None:
    return parse_utc(raw or "")


def _or(default: Any) -> Callable[[Any, Mapping[str, Any]], Any]:
    """The value as text, `default` where it is absent or empty."""
    return lambda raw, _data: str(raw or default)


def _timeouts(raw: Any, _data: Mapping[str, Any]) -> dict[str, float]:
    given = raw if isinstance(raw, dict) else {}
    return {key: v for key, value in given.items() if (v := as_finite(value)) is not None}


def _timeouts_from(raw: Any, _data: Mapping[str, Any]) -> dict[str, float] | None:
    return {k: float(v) for k, v in raw.items()} if isinstance(raw, dict) else None


def _injections(raw: Any, _data: Mapping[str, Any]) -> int:
    return (as_int(raw) if raw is not None else 1) or 1


def _load(raw: Any, _data: Mapping[str, Any]) -> bool:
    return True if raw is None else bool(raw)


def _count_or_0(raw: Any, _data: Mapping[str, Any]) -> int:
    return as_int(raw) or 0


INT, TEXT, OBJ, LIST, SCALAR = Key(_int), Key(_text), Key(_obj), Key(_list), Key(_scalar)
SECONDS = Key(_seconds)
TIME = Key(_time, write=iso_z)


def _count(least: int) -> Key:
    return Key(_int, _count_check(least))


# ---------------------------------------------------------------------------------------------
# the record


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """run.json, one field per key, in the order the launcher writes them (the contract's keys first).

    A field's default is the reader's value for an absent key; the comments say what the key is
    (docs/interfaces.md says more)."""

    schema: str = _key(SCHEMA, Key(lambda _raw, _data: SCHEMA, _check_schema))
    # absent: the run directory's name (from_json's `run_id`)
    run_id: str = _key("", Key(_or("")))
    # absent: the fault's name
    scenario: str = _key("", Key(lambda raw, data: str(raw or data.get("fault"))))
    fault: str = _key("none", Key(lambda raw, _data: raw, _choice_check(lambda: FAULTS, None)))
    fault_rank: int | None = _key(None, Key(_int, _check_fault_rank))  # null for fault none
    world_size: int | None = _key(None, _count(1))
    train_iters: int | None = _key(None, _count(1))
    save_interval: int | None = _key(None, _count(1))
    # absolute, or relative to the run directory
    checkpoint_dir: str = _key("checkpoints", Key(_or("checkpoints")))
    max_restarts: int | None = _key(None, _count(0))
    # the ones given to ft_launcher, in seconds (TIMEOUT_KEYS); absent or not a number: left out
    timeouts: dict[str, float] = _factory(dict, Key(_timeouts))
    started_at: datetime | None = _key(None, TIME)
    finished_at: datetime | None = _key(None, TIME)  # null while running
    exit_code: int | None = _key(None, INT)  # ft_launcher's; null while running
    workload: str | None = _key(None, TEXT)  # smoke | megatron
    hang_placement: str | None = _key(None, TEXT)  # null without a fault
    global_batch_size: int | None = _key(None, INT)
    # {world_size, data_parallel_size, micro_batch_size, global_batch_size, accumulation_steps}
    batch: dict | None = _key(None, OBJ)
    evaluation: dict | None = _key(None, OBJ)  # {interval, iters}
    tz_offset_s: float | None = _key(None, Key(_seconds, _check_tz))  # the workers' clock, east of UTC
    command: list | None = _key(None, LIST)  # ft_launcher's argv
    nnodes: int | None = _key(None, _count(1))
    gpus_per_node: int | None = _key(None, _count(1))
    tp: int | None = _key(None, SCALAR)
    pp: int | None = _key(None, SCALAR)
    megatron_flags: list | None = _key(None, LIST)
    adaptations: list | None = _key(None, LIST)  # what the launcher adapted to the stack found
    dist_optimizer: bool | None = _key(None, SCALAR)
    transformer_impl: str | None = _key(None, SCALAR)  # megatron only
    log_server_port: int | None = _key(None, INT)
    # the ranks' stack dumper (py-spy); the key's presence says the ranks had dump sentinels
    stack_dump_tool: str | None = _key(None, TEXT)
    term_timeout: int | None = _key(None, INT)
    workers_stop_timeout: int | None = _key(None, INT)
    extra_args: list | None = _key(None, LIST)
    host: str | None = _key(None, TEXT)  # the first node's, which wrote this file
    interrupted_by: str | None = _key(None, Key(_text, _check_signal))
    launcher_error: str | None = _key(None, TEXT)  # why the run failed though ft_launcher may say 0
    settings_fingerprint: str | None = _key(None, TEXT)
    # faults the run injects, one per cycle; the key's presence says its launcher samples leftovers
    injections: int = _key(1, Key(_injections, _check_injections))
    # "checkpoint" | "in_save" | a save phase (the wrapper's TIMINGS)
    fault_timing: str = _key(
        "checkpoint", Key(_or("checkpoint"), _choice_check(lambda: FAULT_TIMINGS, "checkpoint"))
    )
    # what the fault rank broke in its checkpoint before dying
    checkpoint_damage: str = _key(
        "none", Key(_or("none"), _choice_check(lambda: CHECKPOINT_DAMAGE_VALUES, "none"))
    )
    async_save: bool | None = _key(None, Key(_bool))
    verify_integrity: bool = _key(False, Key(_true, _flag_check))  # Megatron's --verify-integrity
    # False: launched without --load (the no_resume negative control)
    checkpoint_load: bool = _key(True, Key(_load, _flag_check))
    # the tracker found in the checkpoint directory before the launch
    initial_checkpoint_iteration: int = _key(0, Key(_count_or_0, _check_initial))
    join_timeout: int | None = _key(None, INT)  # --rdzv-conf join_timeout; None: NVRx's default
    max_no_progress_cycles: int | None = _key(None, INT)  # None: NVRx's default
    restart_agent: str | None = _key(None, TEXT)  # off | log | stop
    spare_nodes: int = _key(0, Key(_count_or_0))  # standby nodes beyond nnodes
    timeouts_source: str = _key(
        "configured", Key(_or("configured"), _choice_check(lambda: TIMEOUTS_SOURCES, "configured"))
    )
    # the configured timeouts `timeouts` were recommended from (None: they are the configured ones)
    timeouts_from: dict[str, float] | None = _key(None, Key(_timeouts_from, _check_timeouts_from))
    # NVRx calculated the timeouts (`timeouts` are the initial ones)
    calc_ft_timeouts: bool = _key(False, Key(_true, _flag_check))
    # exact: trained deterministically, the recovery judged bitwise (checks/exact.py); absent: tolerance
    replay: str = _key("tolerance", Key(_or("tolerance"), _choice_check(lambda: REPLAY_MODES, "tolerance")))
    campaign: dict | None = _key(None, OBJ)  # {plan, seed, faults, mtti_iterations}
    job: dict | None = _key(None, OBJ)  # the job shape that ran: model preset, digest, estimates
    scheduler_kill_wait_s: float | None = _key(None, SECONDS)  # Slurm's KillWait, read at the start
    # fault disk_full: the capped filesystem mounted and what its unmount kept; absent otherwise
    storage: dict | None = _key(None, Key(_obj, _check_storage, omit_none=True))

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """run.json's keys, in the order the file has them: the record's fields (RunRecord's own only)."""
        return tuple(f.name for f in fields(RunRecord))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], run_id: str = "", **extra: Any) -> Self:
        """The record of a parsed run.json object, read once: RunRecordError (the first problem) when it
        breaks the schema; every absent key takes its default. `run_id`: where the file names none (the
        run directory's name); `extra`: a subclass's own fields."""
        bad = problems(data)
        if bad:
            raise RunRecordError(bad[0])
        values = {f.name: _rule(f).read(data.get(f.name), data) for f in fields(RunRecord)}
        values["run_id"] = values["run_id"] or run_id
        return cls(**values, **extra)

    def to_json(self) -> dict[str, Any]:
        """The file's object: every key in order, a key of only some runs left out while None."""
        out: dict[str, Any] = {}
        for f in fields(RunRecord):
            value, key = getattr(self, f.name), _rule(f)
            if value is None and key.omit_none:
                continue
            out[f.name] = key.write(value)
        return out


def _rule(f: Any) -> Key:
    return f.metadata["key"]


def problems(data: Mapping[str, Any]) -> list[str]:
    """Every field of `data` (a parsed run.json object) that breaks the schema, each one sentence naming it,
    in the file's order; empty when every field the verifier relies on is usable."""
    found = []
    for f in fields(RunRecord):
        check = _rule(f).check
        if check is not None and (said := check(f.name, data.get(f.name), data)) is not None:
            found.append(said)
    return found


def problem(data: Mapping[str, Any]) -> str | None:
    """The first of `problems`; None when there is none."""
    bad = problems(data)
    return bad[0] if bad else None
