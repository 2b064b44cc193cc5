"""Latency budgets a run's configured timeouts imply, next to what the verifier measured (pure).

Every budget states its formula. The constants are ft_launcher's mechanics (NVRx 0.7.0 defaults) and our
margins; a run can override the launcher ones through verify.json's `expected` (`monitor_interval_s`,
`rank_monitor_interval_s`, `workers_stop_timeout_s`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ftqual.contract import CATALOG_FAULTS, LIVE_FAULTS, UNWINDING_FAULTS, detection_path, is_fault
from ftqual.verification.evidence.sections import RANK_MONITOR_INTERVAL_S

MONITOR_INTERVAL_S = 0.3  # ft_launcher polls its workers' exit status this often
KILL_MARGIN_S = 0.7  # ours: signal delivery, reaping, logging
# A rank that dies through Python's exception machinery (an exception, SIGINT's KeyboardInterrupt) exits only
# after the interpreter unwinds, prints the traceback, runs its exit handlers (torch's among them) and joins
# what it waits for at shutdown: 1.2 s on CPU with the smoke workload, 37.4 s on one H200 with Megatron-LM
# (the DataLoader's worker processes joined), unless the open section's timeout ends it first. Its detection
# costs that linger, bounded by the open section's timeout: the budget is that timeout's.
WORKERS_STOP_TIMEOUT_S = (
    15.0  # --workers-stop-timeout default (SIGTERM -> SIGKILL); a stopped rank takes all of it
)
# After the workers are gone, a restart is (measured on 2 x H200, docs/benchmarks.md): NVRx's GPU-memory
# reclaim check, which polls every --ft-gpu-memory-poll-interval (the launcher sets 0.25 s; NVRx's default is
# 2 s) until each GPU holds <= 512 MB; a fixed 0.3 s drain and 1.0 s wait for the next rendezvous round; the
# rendezvous itself (0.05-0.16 s measured, 1 s allowed). Teardown before it is bounded by the workers-stop
# timeout (SIGTERM, then SIGKILL). So restart <= workers-stop timeout + poll + 1.3 s + 1 s: 17.55 s with the
# defaults, where 2.7-4.5 s were measured; another process holding GPU memory shows up as over budget.
GPU_MEMORY_POLL_S = 0.25
NVRX_FIXED_RESTART_S = 1.3
RENDEZVOUS_ALLOWANCE_S = 1.0
LOST_SAVE_INTERVALS = 2  # one interval of work, plus one async save that had not finalized yet

DETECTED_BY_SECTION = {"out_of_section": "out_of_section"}


@dataclass(frozen=True)
class Budget:
    measure: str  # metric key in verify.json
    label: str
    unit: str  # "s" or "iterations"
    measured: float | None
    budget: float | None
    formula: str
    within: bool | None  # None: not measured or no budget

    def to_dict(self) -> dict:
        return asdict(self)


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _budget(
    measure: str, label: str, unit: str, measured: object, budget: float | None, formula: str
) -> Budget:
    value = _num(measured)
    within = None if value is None or budget is None else value <= budget + 1e-9
    return Budget(measure, label, unit, value, budget, formula, within)


def detection_budget(
    fault: str, detected_by: str | None, timeouts: dict, expected: dict, section: str | None = None
) -> tuple[float | None, str]:
    """Budget for fault -> detection, and its formula. The budget follows the path the fault must be detected
    by (ftqual.contract.detection_path): a fault the rank dies of at once within the launcher's monitor
    interval, whatever fired; an unwinding one (exception, sigint) its linger, bounded by the timeout of the
    section open at the fault (`section`: the linger's, or the one whose timeout caught it); a live one
    (hang, gil_lock, gpu_hang) by the timeout of the section that caught it. kill and hang keep their
    budget by what fired (their recorded reports compare equal)."""
    monitor = _num(expected.get("monitor_interval_s")) or MONITOR_INTERVAL_S
    check = _num(expected.get("rank_monitor_interval_s")) or RANK_MONITOR_INTERVAL_S
    by = detected_by or ""
    path = detection_path(fault)
    catalog = fault in CATALOG_FAULTS  # the paths below are a rank fault's: the catalog's, or kill and hang
    if catalog and path == "exit" and fault in UNWINDING_FAULTS:
        return _linger_budget(fault, by, section, timeouts, check)
    if catalog and path == "exit":
        return (
            monitor + KILL_MARGIN_S,
            f"launcher monitor interval {monitor:g} s + {KILL_MARGIN_S:g} s margin (a {fault} ends the rank)",
        )
    if catalog and path == "timeout" and by == "exit":
        by = ""  # a live fault's exit is not its detection path: the largest timeout bounds it
    # undetected: a rank fault that ends its rank (the catalog's returned above: the walkthrough's kill)
    if by == "exit" or (not by and is_fault(fault, lambda f: f.family == "rank" and f.detection == "exit")):
        return (
            monitor + KILL_MARGIN_S,
            f"launcher monitor interval {monitor:g} s + {KILL_MARGIN_S:g} s margin",
        )
    section = by.removeprefix("section:") if by.startswith("section:") else DETECTED_BY_SECTION.get(by)
    if section is not None:
        timeout = _num(timeouts.get(section))
        if timeout is None:
            return None, f"timeout of section '{section}' unknown"
        name = "out-of-section timeout" if section == "out_of_section" else f"'{section}' section timeout"
        return timeout + check, f"{name} {timeout:g} s + rank monitor check interval {check:g} s"
    if fault in LIVE_FAULTS:
        known = [v for v in (_num(x) for x in timeouts.values()) if v is not None]
        if not known:
            return None, "section unknown and no timeouts configured"
        worst = max(known)
        return worst + check, (
            f"section unknown: largest configured timeout {worst:g} s"
            f" + rank monitor check interval {check:g} s"
        )
    return None, f"no budget for detection by {by or 'unknown'}"


def _linger_budget(
    fault: str, by: str, section: str | None, timeouts: dict, check: float
) -> tuple[float | None, str]:
    """An unwinding fault's detection: its rank's own exit, or the open section's timeout where it lingers
    longer; that timeout bounds what the fault costs."""
    caught = by.removeprefix("section:") if by.startswith("section:") else DETECTED_BY_SECTION.get(by)
    section = caught or section
    article = "an" if fault[:1] in "aeiou" else "a"
    why = (
        f"{article} {fault} costs its linger (the rank lives until its interpreter has shut down), "
        "bounded by the open section's timeout"
    )
    timeout = _num(timeouts.get(section)) if section else None
    if timeout is not None:
        name = "out-of-section timeout" if section == "out_of_section" else f"'{section}' section timeout"
        return timeout + check, f"{why}: {name} {timeout:g} s + rank monitor check interval {check:g} s"
    known = [v for v in (_num(x) for x in timeouts.values()) if v is not None]
    if not known:
        return None, f"{why}; section unknown and no timeouts configured"
    worst = max(known)
    return worst + check, (
        f"{why}; section unknown: largest configured timeout {worst:g} s + rank monitor check interval "
        f"{check:g} s"
    )


def _linger_said(metrics: dict) -> str:
    """' (linger at least 11.4 s, cut by the timeout; what held the rank: ...)' where the metrics have one."""
    seconds = _num(metrics.get("linger_s"))
    if seconds is None:
        return ""
    cut = metrics.get("linger_ended_by") not in (None, "exit") or metrics.get("linger_cut_by_timeout") is True
    held = metrics.get("held_by")
    how = "at least " if cut else ""
    end = ", cut by the timeout" if metrics.get("linger_cut_by_timeout") is True else ""
    what = held if isinstance(held, str) and held else "unknown (no stack dump of the rank)"
    return f" (linger {how}{seconds:.1f} s{end}; what held the rank: {what})"


def budgets_for(fault: str, metrics: dict, expected: dict) -> list[Budget]:
    """The latency table of one fault scenario."""
    timeouts = expected.get("timeouts") or {}
    section = metrics.get("linger_section") if isinstance(metrics.get("linger_section"), str) else None
    detect_budget, detect_formula = detection_budget(
        fault, metrics.get("detected_by"), timeouts, expected, section
    )
    if fault in UNWINDING_FAULTS:
        detect_formula += _linger_said(metrics)
    stop = _num(expected.get("workers_stop_timeout_s")) or WORKERS_STOP_TIMEOUT_S
    poll = _num(expected.get("gpu_memory_poll_interval_s")) or GPU_MEMORY_POLL_S
    restart_budget = stop + poll + NVRX_FIXED_RESTART_S + RENDEZVOUS_ALLOWANCE_S
    restart_formula = (
        f"workers-stop timeout {stop:g} s + GPU-memory poll {poll:g} s"
        f" + NVRx's drain and round wait {NVRX_FIXED_RESTART_S:g} s + rendezvous {RENDEZVOUS_ALLOWANCE_S:g} s"
    )
    setup = _num(timeouts.get("setup"))
    load_formula = (
        f"'setup' section timeout {setup:g} s (the load happens before the first step)"
        if setup is not None
        else "'setup' section timeout unknown"
    )
    if None not in (detect_budget, setup):
        first_budget: float | None = detect_budget + restart_budget + setup
        first_formula = "detection budget + restart budget + 'setup' timeout"
    else:
        first_budget, first_formula = None, "needs the detection budget and the 'setup' timeout"
    save_interval = _num(expected.get("save_interval"))
    lost_budget = None if save_interval is None else LOST_SAVE_INTERVALS * save_interval
    lost_formula = (
        f"{LOST_SAVE_INTERVALS} × save interval {save_interval:g}"
        " (one interval of work + one unfinished async save)"
        if save_interval is not None
        else "save interval unknown"
    )
    return [
        _budget(
            "detection_s",
            "detection (fault → detected)",
            "s",
            metrics.get("detection_s"),
            detect_budget,
            detect_formula,
        ),
        _budget(
            "restart_s",
            "restart (detected → new cycle)",
            "s",
            metrics.get("restart_s"),
            restart_budget,
            restart_formula,
        ),
        _budget(
            "checkpoint_load_s", "checkpoint load", "s", metrics.get("checkpoint_load_s"), setup, load_formula
        ),
        _budget(
            "failure_to_first_step_s",
            "fault → first committed step",
            "s",
            metrics.get("failure_to_first_step_s"),
            first_budget,
            first_formula,
        ),
        _budget(
            "lost_iterations",
            "lost iterations (redone)",
            "iterations",
            metrics.get("lost_iterations"),
            lost_budget,
            lost_formula,
        ),
    ]
