#!/usr/bin/env python3
"""Where the time between a fault and the first step after recovery goes, from a run directory's evidence.

    python tools/gpu/restart_breakdown.py RUN_DIR [RUN_DIR ...] [--gpu-csv CSV] [--json PATH]

Reads fault_injected.json, logs/launcher.log (every node's launcher writes into it: NVRx's profiling events
`Cycle: N Event: ...`, the rank monitor's `Section '...' has been open`, torch's `failed (exitcode: N)`) and
logs/train_cycle<N>.log of the first cycle after the fault (Megatron's `[...] datetime:` marks and the first
`iteration` line). Where several nodes report an event, the last one counts (the restart waits for every
node). --gpu-csv takes `nvidia-smi --query-gpu=timestamp,index,memory.used --format=csv,noheader -lms 250`
output and adds when every GPU's memory fell to --gpu-limit-mib or less (default 0: all freed) after the
launcher saw the worker exit.

Prints one Markdown table per run (phase, from, to, seconds). All times are UTC (the launcher sets TZ=UTC).
A tool for measurements, not part of the verifier: a missing mark leaves its phase empty.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

LAUNCHER_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \[\w+\] \[([^\]]*)\]")
GLOG_TS = re.compile(r"^[EWI](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+) ")
EVENT = re.compile(r"Cycle: (\d+) Event: (\w+) Node: (\S+)")
SECTION = re.compile(r"Section '(\w+)' has been open for ([0-9.]+) seconds")
EXITCODE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+)")
MEGATRON_MARK = re.compile(r"^\d+: \[([^\]]+)\] datetime: (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)")
ITERATION = re.compile(r"^\d+: +\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\] iteration +(\d+)/")
MARKS = (
    ("after library-setup", "imports and library set-up"),
    ("after megatron is initialized", "NVRx in-job set-up, distributed and Megatron init"),
    ("after model, optimizer, and learning rate scheduler are built", "model, optimizer, checkpoint load"),
    ("before the start of training step", "data loaders"),
)


def parse_utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00").replace(",", ".")).replace(tzinfo=UTC)


def launcher_events(path: Path, year: int, after: datetime, cycle: int) -> dict[str, datetime]:
    """First occurrence after `after` of the failure marks; the last node's time of each restart event of
    `cycle` (the cycle that follows the fault)."""
    found: dict[str, datetime] = {}
    for line in path.read_text(errors="replace").splitlines():
        m = LAUNCHER_TS.match(line)
        if m:
            ts = parse_utc(m[1])
        else:
            g = GLOG_TS.match(line)
            if not g:
                continue
            ts = parse_utc(f"{year}-{g[1]}-{g[2]} {g[3]}")
        if ts < after:
            continue
        if SECTION.search(line) and "monitor_fired" not in found:
            found["monitor_fired"] = ts
        elif EXITCODE.search(line) and "exit_seen" not in found:
            found["exit_seen"] = ts
        elif "Stopping workers" in line and "stop_started" not in found:
            found["stop_started"] = ts
        elif (e := EVENT.search(line)) and int(e[1]) == cycle:
            key = e[2]
            if key == "failure_detected":
                found.setdefault(key, ts)
            elif key in (
                "worker_terminated",
                "rendezvous_started",
                "rendezvous_completed",
                "worker_start_completed",
            ):
                found[key] = max(found.get(key, ts), ts)
    return found


def train_marks(path: Path) -> dict[str, datetime]:
    marks: dict[str, datetime] = {}
    if not path.is_file():
        return marks
    for line in path.read_text(errors="replace").splitlines():
        if m := MEGATRON_MARK.match(line):
            marks.setdefault(m[1].strip(), parse_utc(m[2]))
        elif (it := ITERATION.match(line)) and "first_iteration" not in marks:
            marks["first_iteration"] = parse_utc(it[1])
            marks["_first_iteration_no"] = int(it[2])  # type: ignore[assignment]
    return marks


def gpu_release(csv: Path, after: datetime, limit_mib: int = 0) -> datetime | None:
    """First sample time after `after` when every GPU listed uses limit_mib or less."""
    latest: dict[str, int] = {}
    for line in csv.read_text(errors="replace").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 3 or not parts[2].endswith("MiB"):
            continue
        ts = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=UTC)
        latest[parts[1]] = int(parts[2].split()[0])
        if ts >= after and latest and all(v <= limit_mib for v in latest.values()):
            return ts
    return None


def breakdown(run: Path, gpu_csv: Path | None, gpu_limit_mib: int = 0) -> dict:
    marker = json.loads((run / "fault_injected.json").read_text())
    injected = parse_utc(marker["injected_at"])
    cycle = int(marker.get("cycle", 0)) + 1
    ev = launcher_events(run / "logs" / "launcher.log", injected.year, injected, cycle)
    tm = train_marks(run / "logs" / f"train_cycle{cycle}.log")
    seen = ev.get("monitor_fired") if marker["fault"] == "hang" else ev.get("exit_seen")
    points = [
        ("fault injected", injected),
        ("failure seen (rank monitor fired / worker exit)", seen),
        ("worker exit seen by the launcher", ev.get("exit_seen")),
        ("launcher: failure_detected", ev.get("failure_detected")),
        ("launcher: workers stopped (worker_terminated, last node)", ev.get("worker_terminated")),
        ("launcher: rendezvous_started (last node)", ev.get("rendezvous_started")),
        ("launcher: rendezvous_completed (last node)", ev.get("rendezvous_completed")),
        ("launcher: worker_start_completed (last node)", ev.get("worker_start_completed")),
    ]
    points += [(f"worker: {label} done", tm.get(mark)) for mark, label in MARKS]
    points.append(
        (f"first step logged (iteration {tm.get('_first_iteration_no', '?')})", tm.get("first_iteration"))
    )
    rows = []
    prev_label, prev = points[0]
    for label, ts in points[1:]:
        if ts is None:
            rows.append({"to": label, "from": prev_label, "s": None})
            continue
        rows.append({"to": label, "from": prev_label, "s": round((ts - prev).total_seconds(), 3)})
        prev_label, prev = label, ts
    result = {
        "run_id": marker.get("run_id"),
        "fault": marker["fault"],
        "section": marker.get("section"),
        "rows": rows,
        "stop_started": ev.get("stop_started").isoformat() if ev.get("stop_started") else None,
    }
    if gpu_csv and ev.get("exit_seen"):
        released = gpu_release(gpu_csv, ev["exit_seen"], gpu_limit_mib)
        result["gpu_memory_released_after_exit_s"] = (
            round((released - ev["exit_seen"]).total_seconds(), 3) if released else None
        )
    if tm.get("first_iteration"):
        result["fault_to_first_step_s"] = round((tm["first_iteration"] - injected).total_seconds(), 3)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--gpu-csv", type=Path)
    ap.add_argument("--gpu-limit-mib", type=int, default=0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    out = []
    for run in args.runs:
        b = breakdown(run, args.gpu_csv, args.gpu_limit_mib)
        out.append(b)
        print(f"\n{b['run_id']} ({b['fault']}, injected in section {b['section']})\n")
        print("| phase ends with | seconds |\n|---|---:|")
        for row in b["rows"]:
            seconds = "" if row["s"] is None else f"{row['s']:.3f}"
            print(f"| {row['to']} | {seconds} |")
        for key in ("gpu_memory_released_after_exit_s", "fault_to_first_step_s"):
            if key in b:
                print(f"| **{key}** | {b[key]} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
