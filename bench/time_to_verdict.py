#!/usr/bin/env python3
"""Time to verdict: the whole ftqual qualification vs. the walkthrough's manual launches.

Run on a GPU machine from the project root (MEGATRON_PATH set, ft_launcher on PATH):

  # ftqual: preflight -> baseline, kill, hang -> verify -> summary, timed end to end
  python bench/time_to_verdict.py workflow --out bench/out/ttv -- \
      --configfile config/megatron-h200.yaml config/megatron-h200-1gpu.yaml --resources gpu=1
  # the walkthrough's way: one manual launch per fault mode, one after another, seed defaults
  python bench/time_to_verdict.py manual --out bench/out/ttv --gpus 1 --fault-rank 0
  # the table of everything measured so far
  python bench/time_to_verdict.py table bench/out/ttv

`manual` runs `scripts/run_megatron_gpt.sh` exactly as the walkthrough's user would (seed defaults:
TRAIN_ITERS=100, the walkthrough's hang placement `immediate`), then `ftqual verify` on each run only to know
whether it recovered: the walkthrough's user reads the logs by eye instead, which no machine can time.
Figures are written as JSON into --out and printed as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

from ftqual.verification.evidence.clock import parse_utc, seconds  # noqa: E402

METRICS = ("detected_by", "detection_s", "restart_s", "failure_to_first_step_s", "lost_iterations")


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_name() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        names = [n.strip() for n in out.stdout.splitlines() if n.strip()]
        return f"{len(names)} x {names[0]}" if names else "no GPU"
    except (OSError, subprocess.TimeoutExpired):
        return "no GPU"


def verify(run_dir: Path, baseline: Path | None = None) -> dict:
    cmd = [sys.executable, "-m", "ftqual", "verify", str(run_dir), "--json", "-"]
    if baseline:
        cmd += ["--baseline", str(baseline)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"verdict": f"unreadable (exit {proc.returncode})", "metrics": {}}
    return {
        "verdict": report.get("verdict"),
        "metrics": {k: report.get("metrics", {}).get(k) for k in METRICS},
    }


def run_workflow(args: argparse.Namespace) -> dict:
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/local", *args.snakemake_args]
    started = time.monotonic()
    rc = subprocess.run(cmd, cwd=ROOT).returncode
    wall = time.monotonic() - started
    scenarios = {}
    results = ROOT / "results"
    for verify_json in sorted(results.glob("*/verify.json")):
        report = json.loads(verify_json.read_text())
        run = json.loads((verify_json.parent / "run.json").read_text())
        run_wall = seconds(parse_utc(run.get("started_at")), parse_utc(run.get("finished_at")))
        scenarios[verify_json.parent.name] = {
            "verdict": report.get("verdict"),
            "run_wall_s": None if run_wall is None else round(run_wall, 1),
            "metrics": {k: report.get("metrics", {}).get(k) for k in METRICS},
        }
    summary = results / "summary.json"
    verdict = json.loads(summary.read_text()).get("verdict") if summary.exists() else None
    return {
        "mode": "workflow",
        "command": cmd[2:],
        "exit_code": rc,
        "wall_s": round(wall, 1),
        "verdict": verdict,
        "scenarios": scenarios,
    }


def run_manual(args: argparse.Namespace) -> dict:
    work = Path(args.out).resolve() / "manual"
    work.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    scenarios, total = {}, 0.0
    baseline_dir = None
    for fault in args.faults.split(","):
        run_id = f"{args.run_prefix}-{fault}-{stamp}"
        env = dict(
            os.environ,
            NVRX_WORK_DIR=str(work),
            NVRX_RUN_ID=run_id,
            NVRX_DEMO_FAULT=fault,
            GPUS_PER_NODE=str(args.gpus),
            NVRX_FAULT_RANK=str(args.fault_rank),
            NVRX_HANG_PLACEMENT=args.hang_placement,
            NVRX_SCENARIO=f"{args.run_prefix}-{fault}",
        )
        if args.train_iters:
            env["TRAIN_ITERS"] = str(args.train_iters)
        if args.section_timeouts:
            env["NVRX_SECTION_TIMEOUTS"] = args.section_timeouts
        if args.dist_optimizer:
            env["NVRX_DIST_OPTIMIZER"] = args.dist_optimizer
        started = time.monotonic()
        rc = subprocess.run(["bash", "scripts/run_megatron_gpt.sh"], cwd=ROOT, env=env).returncode
        wall = time.monotonic() - started
        total += wall
        run_dir = work / "runs" / run_id
        if fault == "none":
            baseline_dir = run_dir
        scenarios[f"{args.run_prefix}-{fault}"] = {
            "exit_code": rc,
            "launch_wall_s": round(wall, 1),
            "run_dir": str(run_dir),
            **verify(run_dir, baseline_dir if fault != "none" else None),
        }
    return {
        "mode": "manual",
        "wall_s": round(total, 1),
        "hang_placement": args.hang_placement,
        "train_iters": args.train_iters or 100,
        "section_timeouts": args.section_timeouts or "seed",
        "scenarios": scenarios,
    }


def table(paths: list[Path]) -> str:
    rows = [
        "| measurement | mode | wall (s) | verdict / exit | detected by | detection (s) | restart (s) "
        "| fault to first step (s) | lost iterations |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        for result_file in sorted(path.glob("ttv-*.json")) if path.is_dir() else [path]:
            result = json.loads(result_file.read_text())
            rows.append(
                f"| {result_file.stem} (total) | {result['mode']} | {result['wall_s']} | "
                f"{result.get('verdict') or result.get('exit_code', '')} | | | | | |"
            )
            for name, sc in result["scenarios"].items():
                m = sc.get("metrics", {})
                wall = sc.get("launch_wall_s", sc.get("run_wall_s"))
                rows.append(
                    f"| {name} | {result['mode']} | {wall} | "
                    f"{sc.get('verdict')} / {sc.get('exit_code', 0)} | "
                    + " | ".join(str(m.get(k, "")) if m.get(k) is not None else "" for k in METRICS)
                    + " |"
                )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    wf = sub.add_parser("workflow", help="time the whole qualification")
    wf.add_argument("--out", required=True)
    wf.add_argument("--name", default="workflow")
    wf.add_argument("snakemake_args", nargs=argparse.REMAINDER)
    man = sub.add_parser("manual", help="time the walkthrough's manual launches")
    man.add_argument("--out", required=True)
    man.add_argument("--name", default="manual")
    man.add_argument("--faults", default="none,kill,hang")
    man.add_argument("--gpus", type=int, default=2)
    man.add_argument("--fault-rank", type=int, default=1)
    man.add_argument("--train-iters", type=int, default=0, help="0: the walkthrough's default (100)")
    man.add_argument("--hang-placement", default="immediate", choices=["immediate", "step"])
    man.add_argument("--section-timeouts", default="", help="e.g. setup:900,step:120,checkpointing:300")
    man.add_argument("--dist-optimizer", default="", choices=["", "auto", "on", "off"])
    man.add_argument("--run-prefix", default="manual")
    tab = sub.add_parser("table", help="print the Markdown table of measured results")
    tab.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)

    if args.mode == "table":
        print(table(args.paths))
        return 0
    if args.mode == "workflow":
        args.snakemake_args = [a for a in args.snakemake_args if a != "--"]
        result = run_workflow(args)
    else:
        result = run_manual(args)
    result.update(gpu=gpu_name(), date=now_iso())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"ttv-{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(table([out / f"ttv-{args.name}.json"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
