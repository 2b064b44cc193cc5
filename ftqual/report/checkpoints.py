"""The report's "Checkpoints and restarts": each scenario's account against the storage floor.

The report's "Checkpoints and restarts": each scenario's checkpoint and restart account (verify.json's
`checkpoint_account`, ftqual/verification/checkpoint_account.py) next to the storage floor the preflight
measured (preflight.json's `storage`, ftqual/preflight/storage.py); summary.json's `checkpoints` (pure).

A save's GB/s is set against the write floor, a load's against the read floor (`*_of_floor`: the share of
the floor reached; above 1 means the figure beat the probe, e.g. a page cache the probe bypassed). A figure
the account has as null stays null: nothing is estimated here.
"""

from __future__ import annotations

from ftqual.report.inputs import ScenarioInput
from ftqual.report.ran import Ran

PHASES = (  # the restart phases, in the order they happen: (key, label)
    ("detection_s", "detection"),
    ("worker_stop_s", "worker stop"),
    ("gpu_reclaim_s", "GPU memory reclaim"),
    ("process_start_s", "process start"),
    ("init_s", "Megatron init"),
    ("load_s", "checkpoint load"),
    ("first_step_s", "first step"),
)
# A run without a GPU reclaims no GPU memory; one without Megatron initialises its own workload.
NO_GPU_PHASES = ("gpu_reclaim_s",)
NO_MODEL_LABELS = {"init_s": "initialisation"}
FLOOR_KEYS = ("path", "filesystem", "bytes", "write_gbps", "read_gbps", "method")
# the filesystem measured, in preflight reports that name it (ftqual/preflight/mounts.py)
FLOOR_PLACE_KEYS = ("mount_point", "device", "free_bytes")


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _ratio(value: object, floor: float | None) -> float | None:
    number = _num(value)
    return round(number / floor, 3) if number is not None and floor else None


def storage_floor(preflight_doc: dict | None) -> dict | None:
    """preflight.json's `storage` when it holds a measurement (skipped or failed probes: None)."""
    storage = (preflight_doc or {}).get("storage")
    if not isinstance(storage, dict) or _num(storage.get("write_gbps")) is None:
        return None
    return {key: storage.get(key) for key in FLOOR_KEYS} | {
        key: storage[key] for key in FLOOR_PLACE_KEYS if key in storage
    }


def build_checkpoints(inputs: list[ScenarioInput], preflight_doc: dict | None) -> dict:
    """summary.json's `checkpoints`: {"floor": {...} | None, "by_scenario": {name: {"saves", "restarts"}}};
    a scenario whose verify report has no account (written before it existed) is left out."""
    floor = storage_floor(preflight_doc)
    write = _num(floor["write_gbps"]) if floor else None
    read = _num(floor["read_gbps"]) if floor else None
    by_scenario: dict[str, dict] = {}
    for item in inputs:
        account = (item.doc or {}).get("checkpoint_account")
        if not isinstance(account, dict):
            continue
        saves = [
            {**save, "of_write_floor": _ratio(save.get("gbps"), write)}
            for save in account.get("saves") or []
            if isinstance(save, dict)
        ]
        restarts = [
            {**restart, "load_of_read_floor": _ratio(restart.get("load_gbps"), read)}
            for restart in account.get("restarts") or []
            if isinstance(restart, dict)
        ]
        by_scenario[item.name] = {"saves": saves, "restarts": restarts}
    return {"floor": floor, "by_scenario": by_scenario}


def _s(value: object) -> str:
    number = _num(value)
    return "—" if number is None else f"{number:.3f} s"


def _gb(value: object) -> str:
    """Bytes in decimal units (GB/s are 10^9 bytes per second too): GB from 1 GB, else MB."""
    number = _num(value)
    if number is None:
        return "—"
    return f"{number / 1e9:.3f} GB" if number >= 1e9 else f"{number / 1e6:.3f} MB"


def _rate(value: object, share: object) -> str:
    number = _num(value)
    if number is None:
        return "—"
    ratio = _num(share)
    return f"{number:.3f} GB/s" + (f" ({ratio:.0%} of floor)" if ratio is not None else "")


def _phases(ran: Ran | None) -> list[tuple[str, str]]:
    """The restart phases as this run had them (ftqual.report.ran): no GPU row without a GPU, no Megatron
    row without Megatron; where the summary does not say, all of them."""
    ran = ran or Ran(gpu=None, megatron=None)
    return [
        (key, NO_MODEL_LABELS.get(key, label) if ran.no_model else label)
        for key, label in PHASES
        if not (ran.no_gpu and key in NO_GPU_PHASES)
    ]


def markdown_lines(section: dict | None, plot: str | None = None, ran: Ran | None = None) -> list[str]:
    """The "Checkpoints and restarts" section's lines; `ran` (what the run ran on) leaves out the phases it
    had not, and a run without a model shows no rates (the smoke workload's checkpoint is a few bytes of
    no model: its GB/s say nothing of a checkpoint)."""
    section = section or {}
    rates = not (ran is not None and ran.no_model)
    floor = section.get("floor")
    out = []
    if floor:
        fs = floor.get("filesystem") or "unknown fs"
        if floor.get("mount_point"):
            fs += f" at {floor['mount_point']}" + (
                f" (device {floor['device']})" if floor.get("device") else ""
            )
        out.append(
            f"Storage floor (preflight, {floor.get('path')}, {fs}, "
            f"{_gb(floor.get('bytes'))} probed, read {floor.get('method')}): write "
            f"{_rate(floor.get('write_gbps'), None)}, read {_rate(floor.get('read_gbps'), None)}."
        )
    else:
        out.append("Storage floor: not measured (no preflight `storage`): rates are shown without a floor.")
    out.append("")
    scenarios = section.get("by_scenario") or {}
    if not scenarios:
        return [*out, "No verify report carries a checkpoint and restart account."]
    for name, entry in scenarios.items():
        out += [f"### {name}", ""]
        saves = entry.get("saves") or []
        if saves:
            out += [
                "| save (iteration, cycle) | bytes | blocked | durable | write rate |",
                "|---|---:|---:|---:|---:|",
            ]
            out += [
                f"| {s.get('iteration')}, cycle {s.get('cycle')} | {_gb(s.get('bytes'))} | "
                f"{_s(s.get('blocked_s'))} | {_s(s.get('durable_s'))} | "
                f"{_rate(s.get('gbps'), s.get('of_write_floor')) if rates else '—'} |"
                for s in saves
            ]
            out.append("")
        for r in entry.get("restarts") or []:
            out += [
                f"Restart into cycle {r.get('cycle')}:",
                "",
                "| phase | seconds | floor |",
                "|---|---:|---|",
            ]
            for key, label in _phases(ran):
                floor_text = ""
                if key == "load_s" and rates:
                    rate = _rate(r.get("load_gbps"), r.get("load_of_read_floor"))
                    floor_text = f"{_gb(r.get('load_bytes'))} at {rate}"
                out.append(f"| {label} | {_s(r.get(key))} | {floor_text} |")
            out.append("")
        if not saves and not entry.get("restarts"):
            out += ["No save completed and no restart.", ""]
    if plot:
        out += [f"![checkpoints and restarts]({plot})", ""]
    timer = " (Megatron's `save-checkpoint` timer)" if rates else ""
    rate = "write rate: bytes / durable" if rates else "no rates: the workload saves no model"
    out.append(
        f"blocked: how long the training step was held by the save{timer}; "
        "durable: from `saving checkpoint` to `successfully saved` (after the tracker was written); "
        f"{rate}. Each restart phase is measured from its own evidence (docs/checks.md, "
        '"The checkpoint and restart account"); — where the run left none.'
    )
    return out
