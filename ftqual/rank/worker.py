"""ft_launcher's entrypoint on every rank: run the workload in-process, inject up to N faults, one per cycle.

    megatron_gpt_worker.py --entrypoint FILE --checkpoint-dir DIR --fault-marker FILE
        --fault none|kill|hang|node_loss|segfault|abort|exception|sigterm|sigint|gil_lock|gpu_error|gpu_hang
        [--fault-rank N] [--run-id ID] [--hang-placement step|immediate|checkpointing|out_of_section|setup]
        [--injections N] [--pid-dir DIR] [--leftovers-dir DIR]
        [--fault-timing checkpoint|in_save|save_staged|save_shards_partial|save_shards_complete|
                        save_finalized]
        [--checkpoint-damage none|tracker_not_a_number|tracker_missing_iteration|tracker_removed|
                             shard_truncated|shard_corrupted]
        -- <workload args>
    (--megatron-path DIR is accepted as --entrypoint DIR/pretrain_gpt.py)

The workload runs in this process (runpy, as `__main__`), so the pid that NVRx's rank monitor watches is the
pid we signal. Injection k of N (--injections, default 1) is recorded in its own marker: the first in
--fault-marker (fault_injected.json), the k-th in fault_injected.<k>.json beside it. A worker counts the
markers at its start; on the fault rank, while fewer than N exist, it arms injection count+1 with the
tracker's value at its start as baseline, so each injection follows a checkpoint completed in its own cycle.
Once armed, the rank claims that marker (O_CREAT|O_EXCL, fsynced) and then injects the fault: SIGKILL
(kill), SIGSTOP (hang), a segmentation fault, os.abort(), an exception raised on the training thread, SIGTERM
or SIGINT to itself, a thread that holds the GIL forever (gil_lock), or on a GPU an illegal device access
(gpu_error) or a kernel that never ends (gpu_hang); the marker's `method` says how (Injector.action).
Once N markers exist, replacement workers never inject again; a recurring fault (recurring_exception,
nan_loss, setup_crash: ftqual.rank.recurring) is armed in every cycle, whatever N says, and lands where
recurring.trigger places it: after the first checkpoint, then at the same iteration (or in setup) again.
node_loss takes the whole node: the node's ft_launcher (from --pid-dir's <host>.launcher.json, proven this
worker's live ancestor) is stopped, every process below it listed in the marker's `node`, then all of them,
ft_launcher and this rank are SIGKILLed.

A requested injection that never happened fails the fault rank at exit (exit 3), so an uninterrupted cycle
cannot pass as a recovery.

The entry script workloads/megatron_gpt_worker.py calls `main` (ft_launcher runs that script; NVRx's
persistent checkpoint worker is started with `spawn`, which re-imports it, so it does nothing at import)."""

from __future__ import annotations

import argparse
import json
import os
import runpy
import socket
import sys
from pathlib import Path

from ftqual.contract import FAULT_KINDS, FAULTS, GPU_ONLY_FAULTS, faults_where, is_fault
from ftqual.rank import exactness, recurring
from ftqual.rank.ids import (
    CAMPAIGN_PLAN_SCHEMA,
    CHECKPOINT_DAMAGES,
    EXIT_BAD_PLAN,
    EXIT_BAD_TRACKER,
    EXIT_FAULT_NEVER_INJECTED,
    PLACEMENTS,
    SAVE_PHASES,
    TIMINGS,
)
from ftqual.rank.injector import Injector
from ftqual.rank.leftovers import write_leftovers, write_pid_record
from ftqual.rank.markers import count_markers, log, marker_damage, marker_path
from ftqual.rank.sections import SectionWatch, install_section_hooks, start_sentinel
from ftqual.rank.tracker import TRACKER_NAME, TrackerError, read_tracker_baseline

SMOKE_ENTRYPOINT = "smoke_train.py"
# Where each trigger of a recurring fault lands, as the injector's placements say it.
RECURRING_PLACEMENTS = {
    recurring.CHECKPOINT: "step",
    recurring.FIRST_STEP: "setup",
    recurring.SETUP: "setup_start",
}


def read_campaign_plan(path: Path) -> list[dict]:
    """The campaign plan's faults (ftqual.scenario.campaign_plan writes it), in order of their index 1..K."""
    data = json.loads(path.read_text())
    if data["schema"] != CAMPAIGN_PLAN_SCHEMA:
        raise ValueError(f"not a {CAMPAIGN_PLAN_SCHEMA} plan")
    faults = []
    for number, item in enumerate(data["faults"], start=1):
        entry = {
            "index": int(item["index"]),
            "fault": str(item["fault"]),
            "rank": int(item["rank"]),
            "placement": str(item["placement"]),
            "arm_iteration": int(item["arm_iteration"]),
        }
        if (
            entry["index"] != number
            or entry["fault"] not in FAULTS[1:]
            or entry["placement"] not in PLACEMENTS
        ):
            raise ValueError(f"entry {number} is malformed")
        faults.append(entry)
    return faults


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        cut = argv.index("--")
        own, workload = argv[:cut], argv[cut + 1 :]
    else:
        own, workload = argv, []
    parser = argparse.ArgumentParser(prog="megatron_gpt_worker.py", description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--entrypoint", type=Path, help="the training script to run (e.g. pretrain_gpt.py)")
    where.add_argument("--megatron-path", type=Path, help="a Megatron-LM checkout: runs its pretrain_gpt.py")
    parser.add_argument("--checkpoint-dir", type=Path, required=True)
    parser.add_argument("--fault-marker", type=Path, required=True)
    parser.add_argument("--fault", choices=FAULTS, required=True)
    parser.add_argument("--fault-rank", type=int, default=None)
    parser.add_argument("--run-id", default=None, help="default: TORCHELASTIC_RUN_ID")
    parser.add_argument("--hang-placement", choices=PLACEMENTS, default="step")
    parser.add_argument("--pid-dir", type=Path, default=None)
    parser.add_argument("--injections", type=positive_int, default=1, help="faults in the run, one per cycle")
    parser.add_argument("--fault-timing", choices=TIMINGS, default="checkpoint")
    parser.add_argument("--leftovers-dir", type=Path, default=None)
    parser.add_argument(
        "--checkpoint-damage",
        choices=("none", *CHECKPOINT_DAMAGES),
        default="none",
        help="with --fault kill: damage the checkpoint that armed the fault before the kill",
    )
    parser.add_argument("--campaign-plan", type=Path, default=None, help="with --fault campaign: the plan")
    parser.add_argument("--dump-dir", type=Path, default=None, help="stack dumps of this rank (its sentinel)")
    parser.add_argument("--dump-tool", default=None, help="py-spy's path; without it, faulthandler only")
    parser.add_argument(
        "--dump-timeouts", type=json.loads, default={}, help="JSON {section: s, out_of_section: s}"
    )
    args = parser.parse_args(own)
    if args.megatron_path is not None:
        args.entrypoint = args.megatron_path / "pretrain_gpt.py"
    kind = FAULT_KINDS[args.fault]  # one of the choices: the registry's
    if kind.family == "campaign" and args.campaign_plan is None:
        parser.error(f"--fault {args.fault} needs --campaign-plan")
    if kind.has_rank and args.fault_rank is None:
        parser.error(f"--fault-rank is required with --fault {args.fault}")
    if kind.injected and args.fault_timing not in kind.timings:  # the timings its entry takes
        if "checkpoint" in kind.timings:
            takers = faults_where(lambda f: args.fault_timing in f.timings)
            parser.error(f"--fault-timing {args.fault_timing} needs --fault {' or '.join(takers)}")
        parser.error(f"--fault {args.fault} needs --fault-timing {' or '.join(kind.timings)}")
    if args.checkpoint_damage != "none" and not kind.damages_checkpoint:
        takers = faults_where(lambda f: f.damages_checkpoint)
        parser.error(f"--checkpoint-damage needs --fault {' or '.join(takers)}")
    if args.checkpoint_damage != "none" and args.fault_timing != "checkpoint":
        parser.error("--checkpoint-damage needs --fault-timing checkpoint")
    if args.fault in GPU_ONLY_FAULTS and args.entrypoint.name == SMOKE_ENTRYPOINT:
        parser.error(f"--fault {args.fault} is GPU-only: the smoke workload runs on CPU and has no GPU")
    return args, workload


def positive_int(text: str) -> int:
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (got {text!r})")
    return int(text)


def run_entrypoint(entrypoint: Path, workload_args: list[str]) -> int:
    """Run the workload as `__main__` in this process; returns its exit status."""
    sys.argv = [str(entrypoint), *workload_args]
    sys.path[0] = str(entrypoint.parent)  # what `python entrypoint` would put there
    try:
        runpy.run_path(str(entrypoint), run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    args, workload_args = parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    cycle = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    host = socket.gethostname()
    if args.pid_dir is not None:
        write_pid_record(args.pid_dir, host, cycle, rank, local_rank)
    if cycle >= 1 and local_rank == 0 and args.pid_dir is not None and args.leftovers_dir is not None:
        try:
            path = write_leftovers(args.leftovers_dir, args.pid_dir, host, cycle)
            log(f"leftovers of earlier cycles on {host} recorded in {path}")
        except OSError as exc:  # evidence, not a reason to stop training: the verifier reports it missing
            log(f"cannot record leftovers of earlier cycles: {exc}")

    tracker = args.checkpoint_dir / TRACKER_NAME
    try:
        baseline = read_tracker_baseline(tracker)
    except TrackerError as exc:
        damage = marker_damage(args.fault_marker)
        if damage is None:
            log(f"{exc}; refusing to start the workload (fix or archive the tracker)")
            return EXIT_BAD_TRACKER
        # This run broke the tracker on purpose: what the workload (Megatron) does with it is under test.
        log(
            f"the tracker was damaged by this run's injection ({damage['kind']}); "
            "the workload meets it as it is"
        )
        baseline = 0

    sentinel = None
    if args.dump_dir is not None:
        sentinel = start_sentinel(args.dump_dir, args.dump_tool, args.dump_timeouts, host, cycle, rank)
    injector = None
    fault, fault_rank, placement, entry = args.fault, args.fault_rank, args.hang_placement, None
    if FAULT_KINDS[fault].family == "campaign":  # this cycle's fault is its plan's
        try:
            planned = read_campaign_plan(args.campaign_plan)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log(f"cannot read the campaign plan {args.campaign_plan}: {exc}; refusing to start the workload")
            return EXIT_BAD_PLAN
        args.injections = len(planned)
        made = count_markers(args.fault_marker)
        entry = planned[made] if made < len(planned) else None
        if entry is not None:  # this cycle's fault is the plan's next entry
            fault, fault_rank, placement = entry["fault"], entry["rank"], entry["placement"]
    fault_here = is_fault(fault, lambda f: f.injected) and rank == fault_rank
    made = count_markers(args.fault_marker) if fault_here else 0
    if fault_here and not recurring.injects_now(fault, made, args.injections):
        log(
            f"{made} of {args.injections} injection marker(s) exist (earlier cycles injected); "
            "not injecting again"
        )
        fault_here = False
    watch = SectionWatch() if fault_here or sentinel is not None else None
    hooked = False
    if watch is not None:
        watch.sentinel = sentinel
        hooked = install_section_hooks(watch)
    if fault_here:
        injection = made + 1
        if placement == "setup" and injection == 1:
            placement = "step"  # a replacement's setup needs an earlier fault: the first lands in a step
        trigger = recurring.trigger(fault, made, baseline) if recurring.is_recurring(fault) else None
        if trigger is not None:  # hang_placement is not a recurring fault's: its trigger places it
            placement = RECURRING_PLACEMENTS[trigger]
        if not hooked:
            if args.fault_timing == "in_save":
                log("NVRx is not importable here: sections are unknown, an in_save injection cannot happen")
            elif args.fault_timing in SAVE_PHASES:
                log(f"NVRx is not importable here: no sections known; {args.fault_timing} watches the disk")
            else:
                log(
                    "NVRx is not importable here: sections are unknown, "
                    "injecting as soon as the tracker advances"
                )
            watch = None
        injector = Injector(
            fault=fault,
            placement=placement,
            tracker=tracker,
            marker=marker_path(args.fault_marker, injection),
            baseline=baseline,
            identity={
                "run_id": args.run_id or os.environ.get("TORCHELASTIC_RUN_ID", ""),
                "rank": rank,
                "local_rank": local_rank,
                "host": host,
                "cycle": cycle,
            },
            watch=watch,
            injection=injection,
            injections=args.injections,
            timing=args.fault_timing,
            pid_dir=args.pid_dir,
            arm_iteration=entry["arm_iteration"] if entry else None,
            plan_index=entry["index"] if entry else None,
            damage=None if args.checkpoint_damage == "none" else args.checkpoint_damage,
            trigger=trigger,
        )
        injector.sentinel = sentinel
        log(
            f"fault {fault} injection {injection} of "
            f"{'every cycle' if trigger is not None else args.injections} armed on rank {rank} "
            f"(cycle {cycle}): waiting for the tracker to pass {baseline}, timing {args.fault_timing}, "
            f"placement {injector.placement}"
            + (f", checkpoint damage {injector.damage}" if injector.damage else "")
        )
        injector.start()

    # An exactness fault changes the whole job's save or restore: armed in every rank's process, before the
    # workload's first save (stale_save) or in the replacement after the injection (ftqual.rank.exactness).
    tamper = exactness.tampers_of(args.fault)
    if exactness.arms_now(tamper, count_markers(args.fault_marker)):
        exactness.arm(tamper)
    status = run_entrypoint(args.entrypoint, workload_args)
    if injector is not None:
        injector.finish()
        if status == 0 and not injector.claimed:
            log(
                f"the requested {fault} fault (injection {injector.injection} of {args.injections}) "
                f"was never injected (tracker stayed at or below {baseline} while a step could follow, or "
                "no save was in flight at a checkpointing section's end, or no save newer than the tracker "
                "showed the save phase on disk); failing so an uninterrupted "
                "run cannot pass as recovery"
            )
            return EXIT_FAULT_NEVER_INJECTED
    return status
