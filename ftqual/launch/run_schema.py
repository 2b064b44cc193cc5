"""run.json's schema (`ftqual.run/v1`): its fields' rules and the one check every reader applies.

The launcher's record of a run, `runs/<run-id>/run.json` (`ftqual.run/v1`): its schema string, the rules of
its fields, and the one check every reader applies (`problem`). The launcher writes it (ftqual.launch.run),
the verifier reads it (ftqual.verification.evidence.run_meta); the report and the workflow read verify reports
built from
it. Keys beyond these are extensions (docs/interfaces.md, "Run directory additions"): absent, they take
the defaults named here, so older run directories verify as before.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ftqual.contract import FAULTS
from ftqual.rank.ids import CHECKPOINT_DAMAGES, TIMINGS

SCHEMA = "ftqual.run/v1"
# The counts and the least value each can take (absent: unknown, judged by the checks that need it).
COUNTS = {"train_iters": 1, "save_interval": 1, "world_size": 1, "max_restarts": 0, "nnodes": 1,
          "gpus_per_node": 1}  # fmt: skip
FAULT_TIMINGS = TIMINGS  # the wrapper's (ftqual.rank.ids)
CHECKPOINT_DAMAGE_VALUES = ("none", *CHECKPOINT_DAMAGES)
MAX_INJECTIONS = 1000  # one per cycle: max_restarts is a handful
TIMEOUT_KEYS = ("setup", "step", "checkpointing", "out_of_section")
MAX_TZ_OFFSET_S = 26 * 3600  # UTC-12 .. UTC+14, with room: anything beyond is not a clock offset
# `interrupted_by`: the signal that stopped our launcher from outside (a stopped workflow, a scheduler's time
# limit, scancel), by name; null when nothing did.
SIGNAL_NAME = re.compile(r"SIG[A-Z0-9]{2,10}")


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


def problem(data: Mapping) -> str | None:
    """The first field of `data` (a parsed run.json object) that breaks the schema, said in one sentence
    naming the field; None when every field the verifier relies on is usable."""
    schema = data.get("schema", SCHEMA)
    if schema != SCHEMA:
        return f"'schema' must be {SCHEMA!r} (the run.json this verifier reads), got {short(schema)}"
    for key, least in COUNTS.items():
        value = data.get(key)
        if value is not None and (as_int(value) is None or as_int(value) < least):
            return f"{key!r} must be an integer of at least {least}, got {short(value)}"
    fault = data.get("fault")
    if fault not in FAULTS:
        return f"'fault' must be one of {', '.join(FAULTS)}, got {short(fault)}"
    raw_rank = data.get("fault_rank")
    if raw_rank is not None and as_int(raw_rank) is None:
        return f"'fault_rank' must be an integer or null, got {short(raw_rank)}"
    tz = data.get("tz_offset_s")
    if tz is not None and (as_finite(tz) is None or abs(as_finite(tz)) > MAX_TZ_OFFSET_S):
        return f"'tz_offset_s' must be seconds east of UTC within +-{MAX_TZ_OFFSET_S}, got {tz!r}"
    stopped = data.get("interrupted_by")
    if stopped is not None and not (isinstance(stopped, str) and SIGNAL_NAME.fullmatch(stopped)):
        return f"'interrupted_by' must be a signal's name (e.g. 'SIGTERM') or null, got {short(stopped)}"
    return _extension_problem(data)


def _extension_problem(data: Mapping) -> str | None:
    raw = data.get("injections", 1)
    injections = as_int(raw) if raw is not None else 1
    if injections is None or not 1 <= injections <= MAX_INJECTIONS:
        return f"'injections' must be an integer from 1 to {MAX_INJECTIONS}, got {short(raw)}"
    timing = data.get("fault_timing") or "checkpoint"
    if timing not in FAULT_TIMINGS:
        return f"'fault_timing' must be one of {', '.join(FAULT_TIMINGS)}, got {short(timing)}"
    damage = data.get("checkpoint_damage") or "none"
    if damage not in CHECKPOINT_DAMAGE_VALUES:
        allowed = ", ".join(CHECKPOINT_DAMAGE_VALUES)
        return f"'checkpoint_damage' must be one of {allowed}, got {short(damage)}"
    storage = data.get("storage")
    if storage is not None and not (
        isinstance(storage, Mapping) and as_int(storage.get("cap_bytes")) is not None
    ):
        return (
            f"'storage' must be an object with an integer 'cap_bytes' (fault disk_full) or absent, "
            f"got {short(storage)}"
        )
    for key, default in (("checkpoint_load", True), ("verify_integrity", False)):
        flag = data.get(key, default)
        if flag is not None and not isinstance(flag, bool):
            return f"{key!r} must be true or false, got {short(flag)}"
    raw = data.get("initial_checkpoint_iteration", 0)
    initial = as_int(raw) if raw is not None else 0
    if initial is None or initial < 0:
        return f"'initial_checkpoint_iteration' must be an integer >= 0, got {short(raw)}"
    return _timeouts_source_problem(data)


TIMEOUTS_SOURCES = ("configured", "recommended")
TIMEOUT_KEYS = ("setup", "step", "checkpointing", "out_of_section")


def _timeouts_source_problem(data: Mapping) -> str | None:
    calc = data.get("calc_ft_timeouts", False)
    if calc is not None and not isinstance(calc, bool):
        return f"'calc_ft_timeouts' must be true or false, got {short(calc)}"
    source = data.get("timeouts_source") or "configured"
    if source not in TIMEOUTS_SOURCES:
        return f"'timeouts_source' must be one of {', '.join(TIMEOUTS_SOURCES)}, got {short(source)}"
    given = data.get("timeouts_from")
    if given is None:
        return None if source == "configured" else "'timeouts_from' must name the timeouts recommended from"
    if not isinstance(given, Mapping) or sorted(given) != sorted(TIMEOUT_KEYS):
        return f"'timeouts_from' must map each of {', '.join(TIMEOUT_KEYS)} to seconds, got {short(given)}"
    for key in TIMEOUT_KEYS:
        value = as_finite(given[key])
        if value is None or value <= 0:
            return f"'timeouts_from.{key}' must be positive seconds, got {short(given[key])}"
    return None


def extensions(data: Mapping) -> tuple[int, str, bool, int]:
    """(injections, fault_timing, checkpoint_load, initial_checkpoint_iteration) of a run.json that passed
    `problem`, the defaults where absent."""
    raw = data.get("injections", 1)
    injections = as_int(raw) if raw is not None else 1
    load = data.get("checkpoint_load", True)
    raw_initial = data.get("initial_checkpoint_iteration", 0)
    return (
        injections or 1,
        str(data.get("fault_timing") or "checkpoint"),
        True if load is None else bool(load),
        (as_int(raw_initial) if raw_initial is not None else 0) or 0,
    )
