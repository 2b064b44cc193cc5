"""The settings two qualifications ran under, what changed, and which figures follow a change (pure).

A summary.json records the settings each scenario ran under in its verify report's `expected` (the run's plan:
timeouts, train_iters, save_interval, world size, global batch, max_restarts, the fault rank and injections,
...) and, for the whole qualification, the workload the preflight resolved (`resolved`) and the job shape
(`job`). `ftqual compare` shows what differs first, and a figure that depends on a changed setting follows it:
shown with the change, never judged as a regression (a hang's detection that grew with its step timeout is
the timeout, not the stack).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# key -> (label, unit); `timeouts.<section>` are the timeouts given to ft_launcher
LABELS = {
    "workload": ("workload", ""),
    "job": ("job shape", ""),
    "transformer_impl": ("transformer_impl", ""),
    "dist_optimizer": ("distributed optimizer", ""),
    "world_size": ("world size", ""),
    "global_batch_size": ("global batch size", ""),
    "train_iters": ("train_iters", ""),
    "save_interval": ("save_interval", ""),
    "max_restarts": ("max_restarts", ""),
    "fault_rank": ("fault rank", ""),
    "injections": ("injections", ""),
    "timeouts.setup": ("setup timeout", "s"),
    "timeouts.step": ("step timeout", "s"),
    "timeouts.checkpointing": ("checkpointing timeout", "s"),
    "timeouts.out_of_section": ("out-of-section timeout", "s"),
    "calc_ft_timeouts": ("calculated timeouts", ""),
    "join_timeout": ("join_timeout", "s"),
    "spare_nodes": ("spare nodes", ""),
    "replay_tolerance": ("replay tolerance", ""),
    "baseline_tolerance": ("baseline tolerance", ""),
}
TIMEOUTS = tuple(k for k in LABELS if k.startswith("timeouts."))
# What every time and rate of a run depends on: the workload, the model, how many ranks, how much they train.
JOB = ("workload", "job", "transformer_impl", "dist_optimizer", "world_size", "global_batch_size")
EVERYTHING = tuple(LABELS)


@dataclass(frozen=True)
class SettingChange:
    key: str
    old: object
    new: object
    scenarios: tuple[str, ...]  # where it changed
    everywhere: bool  # in every scenario both sides ran

    @property
    def text(self) -> str:
        """`step timeout 10 -> 20 s`, with the scenarios where it changed unless it changed in all."""
        label, unit = LABELS.get(self.key, (self.key, ""))
        where = "" if self.everywhere else f" ({', '.join(self.scenarios)})"
        return f"{label} {_shown(self.old)} -> {_shown(self.new)}{' ' + unit if unit else ''}{where}"


def _shown(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def _same(value: object) -> object:
    """10 and 10.0 are one setting (a timeout written as an int by one version, a float by another)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _job(summary: Mapping) -> object:
    job = summary.get("job")
    if not isinstance(job, Mapping) or not job.get("digest"):
        return None
    return f"{job.get('model')} ({job['digest']})" if job.get("model") else job["digest"]


def scenario_settings(summary: Mapping) -> dict[str, dict[str, object]]:
    """{scenario: {setting: value}}: the qualification's own settings with each scenario's plan; a setting
    the summary does not record is left out (never taken as a change)."""
    resolved = summary.get("resolved") if isinstance(summary.get("resolved"), Mapping) else {}
    common = {
        "workload": resolved.get("workload"),
        "job": _job(summary),
        "transformer_impl": resolved.get("transformer_impl"),
        "dist_optimizer": resolved.get("dist_optimizer"),
    }
    out = {}
    for sc in summary.get("scenarios") or []:
        if not isinstance(sc, Mapping) or not sc.get("name"):
            continue
        expected = sc.get("expected") if isinstance(sc.get("expected"), Mapping) else {}
        timeouts = expected.get("timeouts") if isinstance(expected.get("timeouts"), Mapping) else {}
        plan = {k: expected.get(k) for k in LABELS if k in expected and k not in common}
        plan.update({f"timeouts.{k}": v for k, v in timeouts.items() if f"timeouts.{k}" in LABELS})
        out[sc["name"]] = {k: _same(v) for k, v in {**common, **plan}.items() if v is not None}
    return out


def changes(old: Mapping, new: Mapping) -> tuple[list[SettingChange], list[str]]:
    """The settings that differ in the scenarios both ran (a change shared by several scenarios once), and the
    settings recorded on one side only (`job shape (new only)`): unknown, not a change."""
    a, b = scenario_settings(old), scenario_settings(new)
    common = [n for n in a if n in b]
    grouped: dict[tuple[str, object, object], list[str]] = {}
    one_side: dict[str, str] = {}
    for name in common:
        for key in LABELS:
            x, y = a[name].get(key), b[name].get(key)
            if x is None and y is None:
                continue
            if x is None or y is None:
                one_side[key] = "new only" if x is None else "old only"
            elif x != y:
                grouped.setdefault((key, x, y), []).append(name)
    found = [
        SettingChange(key, x, y, tuple(names), set(names) == set(common) and len(common) > 0)
        for (key, x, y), names in grouped.items()
    ]
    lonely = [f"{LABELS[k][0]} ({side})" for k, side in one_side.items()]
    return found, lonely


def _timeouts_of(detected_by: object) -> tuple[str, ...]:
    """The timeout that detected a fault (`section:step` -> the step timeout); none for an exit; every one
    where the report does not say."""
    if detected_by == "exit":
        return ()
    if isinstance(detected_by, str) and detected_by.startswith("section:"):
        return (f"timeouts.{detected_by.split(':', 1)[1]}",)
    if detected_by == "out_of_section":
        return ("timeouts.out_of_section",)
    return TIMEOUTS


def depends_on(metric: str, detected_by: tuple[object, ...] = ()) -> tuple[str, ...]:
    """The settings a scenario's figure (a verify metric, or `save_s`) depends on; `detected_by` are the two
    sides' detection paths (a hang's detection is its section's timeout, a kill's none)."""
    timeouts = tuple(dict.fromkeys(t for d in detected_by or (None,) for t in _timeouts_of(d)))
    return {
        "detection_s": ("fault_rank", *timeouts),
        "failure_to_first_step_s": (*JOB, "fault_rank", *timeouts),
        "iterations_per_s": (*JOB, "save_interval"),
        "wall_time_s": EVERYTHING,
    }.get(metric, JOB)


def pooled_depends_on(key: str, detected_by: tuple[object, ...] = ()) -> tuple[str, ...]:
    """The settings a restart phase or save figure pooled over the scenarios depends on; `detected_by` are
    the detection paths of the scenarios pooled, on both sides."""
    return depends_on("detection_s", detected_by) if key == "detection_s" else JOB


def follows(found: list[SettingChange], keys: tuple[str, ...], scenarios: set[str]) -> tuple[str, ...]:
    """The changes among `found` of a setting in `keys` in one of `scenarios`: what the figure follows."""
    return tuple(c.text for c in found if c.key in keys and scenarios & set(c.scenarios))
