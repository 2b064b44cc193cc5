"""The at-scale model's inputs read from a qualification's summary.json, each cited to where it was read.

Every figure is the median over what the runs measured (a save's blocked and durable time over every save
of every scenario; each restart phase over every restart; a crash's detection over the restarts of faults
ft_launcher detects by the rank's exit), so that one slow outlier does not decide a month's projection.
What the runs did not measure is a problem (one line each): the model never fills a measurement in.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ftqual.contract import detection_path
from ftqual.report.at_scale import Figure, Inputs

PHASES = ("worker_stop_s", "gpu_reclaim_s", "process_start_s", "init_s", "first_step_s")


@dataclass(frozen=True)
class Read:
    inputs: Inputs | None
    problems: tuple[str, ...]
    job: str | None  # the job's description, from summary.json `job`


def _numbers(values: Iterable[object]) -> list[float]:
    return [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0]


def _median(values: list[float], source: str, problems: list[str], what: str) -> Figure:
    if not values:
        problems.append(f"{what}: not measured by these runs ({source})")
        return Figure(0.0, source)
    return Figure(round(statistics.median(values), 4), f"{source}, median of {len(values)}")


def _restarts(summary: Mapping) -> list[tuple[str, Mapping]]:
    by_scenario = (summary.get("checkpoints") or {}).get("by_scenario") or {}
    return [
        (name, r)
        for name, part in by_scenario.items()
        if isinstance(part, Mapping)
        for r in part.get("restarts") or []
        if isinstance(r, Mapping)
    ]


def _saves(summary: Mapping) -> list[Mapping]:
    by_scenario = (summary.get("checkpoints") or {}).get("by_scenario") or {}
    return [
        s
        for part in by_scenario.values()
        if isinstance(part, Mapping)
        for s in part.get("saves") or []
        if isinstance(s, Mapping)
    ]


def read_inputs(summary: Mapping) -> Read:
    """The inputs of a qualified summary.json, or the problems (one line each) that keep it from one."""
    problems: list[str] = []
    if summary.get("verdict") != "pass":
        problems.append(
            f"the qualification did not pass ({summary.get('headline') or summary.get('verdict')}): "
            "project a qualified stack only"
        )
    job = summary.get("job") if isinstance(summary.get("job"), Mapping) else {}
    if job and job.get("digest") is None:
        problems.append(
            "the runs trained different job shapes (summary.json job.digest is null): project one job"
        )
    faults = {
        sc.get("name"): sc.get("fault") for sc in summary.get("scenarios") or [] if isinstance(sc, Mapping)
    }
    restarts = _restarts(summary)
    where = "summary.json checkpoints.by_scenario.*.restarts"
    crash = [r.get("detection_s") for name, r in restarts if detection_path(str(faults.get(name))) == "exit"]
    crash_values = _numbers(crash)
    crash_detect = (
        _median(crash_values, f"{where}[].detection_s of crashes", problems, "a crash's detection")
        if crash_values
        else None  # assumed below: the launcher's monitor interval, where a dead rank is seen
    )
    # A phase no restart of these runs had (no GPU memory to reclaim on a CPU machine) took 0 s; a phase
    # none of the restarts reports at all cannot be projected.
    phases = {}
    for p in PHASES:
        values = _numbers(r.get(p) for _, r in restarts)
        if not values and restarts and p == "gpu_reclaim_s":
            phases[p] = Figure(0.0, f"{where}[].{p}: none of these runs' restarts waited for GPU memory")
        else:
            phases[p] = _median(values, f"{where}[].{p}", problems, p)
    rates = _numbers(r.get("load_gbps") for _, r in restarts if (r.get("load_gbps") or 0) > 0)
    load_gbps = _median(rates, f"{where}[].load_gbps", [], "") if rates else None
    load_times = _numbers(r.get("load_s") for _, r in restarts)
    load_s = _median(load_times, f"{where}[].load_s", [], "") if load_times else None
    if load_gbps is None and load_s is None:
        problems.append(f"the checkpoint load: not measured by these runs ({where}[].load_s, load_gbps)")
    saves = _saves(summary)
    saves_at = "summary.json checkpoints.by_scenario.*.saves"
    blocked = _median(
        _numbers(s.get("blocked_s") for s in saves), f"{saves_at}[].blocked_s", problems, "a save"
    )
    durable = _median(
        _numbers(s.get("durable_s") for s in saves), f"{saves_at}[].durable_s", problems, "a save"
    )
    size = _numbers(s.get("bytes") for s in saves if (s.get("bytes") or 0) > 0)
    checkpoint = (
        Figure(statistics.median(size), f"{saves_at}[].bytes, median of {len(size)}")
        if size
        else _median(
            _numbers([job.get("checkpoint_bytes_estimate")]),
            "summary.json job.checkpoint_bytes_estimate",
            problems,
            "the checkpoint's size",
        )  # fmt: skip
    )
    step_row = next(
        (r for r in (summary.get("timeouts") or {}).get("rows") or [] if r.get("section") == "step"), {}
    )
    timeout = step_row.get("timeout_s")
    step_timeout = _median(
        _numbers([timeout]), "summary.json timeouts.rows[step].timeout_s", problems, "the step timeout"
    )
    interval = (step_row.get("detection_s") or 0) - (timeout or 0) if timeout else 0.0
    baseline = next(
        (sc for sc in summary.get("scenarios") or [] if sc.get("name") == summary.get("baseline")), {}
    )
    rate = (baseline.get("metrics") or {}).get("iterations_per_s")
    step_s = (
        Figure(round(1.0 / rate, 4), "summary.json scenarios[baseline].metrics.iterations_per_s")
        if rate
        else None
    )
    if step_s is None:
        problems.append("the step time: the baseline measured no iterations per second")
    expected = baseline.get("expected") or {}
    save_interval, max_restarts = expected.get("save_interval"), expected.get("max_restarts")
    if not isinstance(save_interval, int) or save_interval < 1:
        problems.append("the save interval: the baseline's report names none (scenarios[baseline].expected)")
    if crash_detect is None:
        crash_detect = Figure(
            round(max(0.0, float(interval)), 4),
            "assumed: no crash ran; ft_launcher sees a dead rank within its monitor interval "
            "(summary.json timeouts.rows[step]: detection_s - timeout_s)",
        )
    if problems:
        return Read(None, tuple(problems), job.get("describe"))
    return Read(
        Inputs(
            crash_detect=crash_detect,
            step_timeout=step_timeout,
            monitor_interval_s=max(0.0, float(interval)),
            worker_stop=phases["worker_stop_s"],
            gpu_reclaim=phases["gpu_reclaim_s"],
            process_start=phases["process_start_s"],
            init=phases["init_s"],
            first_step=phases["first_step_s"],
            load_gbps=load_gbps,
            checkpoint_bytes=checkpoint,
            save_blocked=blocked,
            save_durable=durable,
            step_s=step_s,  # type: ignore[arg-type]
            save_interval_iters=int(save_interval),
            max_restarts=int(max_restarts) if isinstance(max_restarts, int) else 3,
            recommended_step_timeout_s=step_row.get("recommended_s"),
            load_s=load_s,
        ),
        (),
        job.get("describe"),
    )
