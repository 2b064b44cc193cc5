#!/usr/bin/env python3
"""Generate a large, realistic ftqual run directory in the formats recorded on H200 (stdlib only).

    python bench/make_run.py --ranks 1024 --iters 200 --restarts 1 --seed 7 \
        --out bench/out/run --target-mb 500

What it writes (the run directory of docs/architecture.md, in the formats of the recorded fixtures):
run.json, fault_injected.json (fault runs), cycle_infos/cycle_info.<job>.0.<N> + .current,
logs/launcher.log (every node's launcher: rendezvous, exits, restarts, progress), logs/train_cycle<N>.log
(every rank's lines prefixed "<rank>: ", right-aligned to the width of world_size-1), checkpoints/
(tracker and iter_XXXXXXX folders holding a tiny `.metadata` and `metadata.json`) and bench_expect.json,
the verdict this run should get. The same arguments give byte-identical output.

Scenario: cycle c < K ends with a fault a few iterations after checkpoint F_c completed (the marker names
F_0, the tracker value that triggered the injection); cycle c+1 resumes from F_c. The last cycle runs to
the final iteration. Log size comes from per-rank chatter (Python warnings and NCCL INFO lines every rank
prints at start, the bulk of a real multi-thousand-rank log); `--target-mb` sets how much.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tests.support.synthetic import megatron_text as T
from tests.support.synthetic.writers import LogWriter, Node, fmt_iso, fmt_mt, launcher_log, write_tree

DEFECTS = (
    "resumed_from_zero_on_one_rank",
    "no_later_checkpoint",
    "final_iteration_missing",
    "loss_divergence",
)
# The verifier check each defect must fail (bench_expect.json); other checks may fail alongside.
DEFECT_CHECK = {
    "resumed_from_zero_on_one_rank": "resumed_from_checkpoint",
    "no_later_checkpoint": "progress_after_resume",
    "final_iteration_missing": "progress_after_resume",
    "loss_divergence": "replay_consistency",
}
BASE_US = int(datetime(2026, 11, 29, 14, 18, 37, 80687, tzinfo=UTC).timestamp()) * 1_000_000 + 80687
CHUNK_LINES = 48  # lines per gRPC chunk when per-rank chatter is interleaved


@dataclass(frozen=True)
class Spec:
    ranks: int
    iters: int
    restarts: int = 1
    seed: int = 0
    save_interval: int = 0  # 0: derived from iters
    fault: str = "kill"
    defect: str | None = None
    noise_per_iter: int = 0
    chatter_per_rank: int = 40
    fault_rank: int | None = None
    job_id: str | None = None
    gpus_per_node: int = 8
    current_symlink: bool = False
    legacy_inject_line: bool = False

    @property
    def interval(self) -> int:
        if self.save_interval:
            return self.save_interval
        return 5 if self.iters <= 60 else max(5, self.iters // 10)

    @property
    def gpn(self) -> int:
        return min(self.gpus_per_node, self.ranks)

    @property
    def nnodes(self) -> int:
        return self.ranks // self.gpn

    @property
    def scenario(self) -> str:
        return "baseline" if self.restarts == 0 else self.fault

    @property
    def run_id(self) -> str:
        return f"{self.scenario}-r{self.ranks}-s{self.seed}"

    @property
    def frank(self) -> int:
        if self.fault_rank is not None:
            return self.fault_rank
        return 1 if self.ranks > 1 else 0

    @property
    def job(self) -> str:
        return str(1_000_000 + self.seed) if self.job_id is None else self.job_id

    @property
    def max_restarts(self) -> int:
        return max(3, self.restarts)


@dataclass
class CycleResult:
    number: int
    start_us: int
    end_us: int = 0
    resumed_from: int = 0
    fault_us: int | None = None  # fault (kill) or SIGSTOP time
    fault_rank: int | None = None
    fault_iteration: int | None = None  # last iteration printed before the fault
    tracker_at_fault: int = 0
    finished: bool = False
    first_step_us: int | None = None
    completed: list[int] = field(default_factory=list)  # checkpoints completed in this cycle
    scheduled_open: list[int] = field(default_factory=list)  # scheduled, never completed in this cycle


def plan_faults(spec: Spec, saves: list[int]) -> list[int]:
    """Checkpoint iterations F_c after which cycle c fails: spread over the run, one in the middle for K=1."""
    if spec.restarts == 0:
        return []
    usable = [s for s in saves if s + min(spec.interval, 4) + 1 < spec.iters]
    if len(usable) < spec.restarts:
        raise SystemExit(
            f"make_run: {spec.restarts} fault(s) need {spec.restarts} checkpoints before the last few "
            f"iterations; {spec.iters} iterations with save interval {spec.interval} give {len(usable)}: "
            "raise --iters or lower --save-interval"
        )
    picks: list[int] = []
    for c in range(spec.restarts):
        idx = min(len(usable) - 1, max(0, round((c + 1) * len(usable) / (spec.restarts + 1)) - 1))
        while picks and usable[idx] <= picks[-1]:
            idx += 1
        picks.append(usable[idx])
    return picks


class Losses:
    """Deterministic loss / grad norm per iteration; a replay repeats them (one isolated reporting
    difference at the second replayed iteration, as recorded on H200)."""

    def __init__(self, iters: int, rng: random.Random) -> None:
        self.loss = [0.0] * (iters + 1)
        self.gnorm = [0.0] * (iters + 1)
        for i in range(1, iters + 1):
            self.loss[i] = 4.6 + 2.5 * math.exp(-i / max(20.0, iters / 6)) + rng.uniform(-0.35, 0.35)
            self.gnorm[i] = rng.uniform(3.5, 8.0)


def iteration_line(spec: Spec, us: int, i: int, elapsed_ms: float, loss: float, gnorm: float) -> str:
    gbs = spec.ranks
    return (
        f" [{fmt_mt(us)}] iteration {i:8d}/{spec.iters:8d} | consumed samples: {i * gbs:12d} |"
        f" elapsed time per iteration (ms): {elapsed_ms:.1f} | learning rate: {1e-4:.6E} |"
        f" global batch size: {gbs:5d} | lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: {gnorm:.3f} |"
        f" number of skipped iterations: {0:3d} | number of nan iterations: {0:3d} |"
    )


def subst(lines: tuple[str, ...], spec: Spec, ckpt: str, it: int = 0) -> list[str]:
    samples = str(spec.iters * spec.ranks)
    out = []
    for line in lines:
        if "@" in line:
            line = (
                line.replace("@CKPT@", ckpt)
                .replace("@WS@", str(spec.ranks))
                .replace("@DP@", str(spec.ranks))
                .replace("@GBS@", str(spec.ranks))
                .replace("@SI@", str(spec.interval))
                .replace("@ITERS@", str(spec.iters))
                .replace("@SAMPLES@", samples)
                .replace("@IT@", str(it))
            )
        out.append(line)
    return out


def argument_lines(spec: Spec, ckpt: str) -> list[str]:
    out = []
    for name, value in T.ARGUMENTS:
        value = subst((value,), spec, ckpt)[0]
        out.append(f"  {name} {'.' * (48 - len(name))} {value}")
    return out


class CycleWriter:
    """Writes one logs/train_cycle<N>.log while simulating the cycle's clock."""

    def __init__(
        self, spec: Spec, rng: random.Random, losses: Losses, log: LogWriter, nodes: list[Node]
    ) -> None:
        self.spec, self.rng, self.losses, self.log, self.nodes = spec, rng, losses, log, nodes
        self.ckpt = f"/lus/nvrx/runs/{spec.run_id}/checkpoints"
        self.last = spec.ranks - 1

    def r0(self, lines: list[str] | tuple[str, ...]) -> None:
        self.log.rank_lines(0, lines)

    def dt(self, label: str, us: int) -> str:
        return f"[{label}] datetime: {fmt_mt(us)} "

    def startup(self, c: int, start: int, resume: int | None) -> int:
        """Everything before the first iteration; returns the time training starts."""
        spec, rng = self.spec, self.rng
        lib = start + rng.randint(12_000_000, 15_000_000)
        init0 = lib + rng.randint(3_200_000, 3_600_000)
        ready = init0 + rng.randint(11_000_000, 14_000_000)
        self.log.all_ranks_block(list(T.IMPORT_WARNINGS), rng)
        self.r0(subst(T.ARGS_HEADER, spec, self.ckpt))
        self.r0(argument_lines(spec, self.ckpt))
        self.r0(subst(T.ARGS_END, spec, self.ckpt))
        self.log.rank_lines(self.last, T.LAST_RANK_ONE_LOGGER)
        self.r0(T.FT_INIT)
        self.r0(T.MAKE_FIRST if c == 0 else T.MAKE_AGAIN)
        self.log.chatter_phase(self.nodes, spec.chatter_per_rank, init0, rng)
        self.r0(T.BARRIER_WARNING + T.REIMPORT_WARNINGS)
        self.r0([f"time to initialize megatron (seconds): {(ready - init0) / 1e6:.3f}", *T.INIT_DONE[1:]])
        self.r0(
            [
                self.dt("after in-process setup and before initialize_megatron", init0),
                self.dt("after in-job setup and before initialize_megatron", init0 + 150_000),
                self.dt("before library-setup", start + 93_000).rstrip(),
                self.dt("after library-setup", lib).rstrip(),
                self.dt("before megatron-init", init0 - 1).rstrip(),
            ]
        )
        self.log.rank_lines(self.last, T.STARTUP_TIMERS)
        self.r0([self.dt("after megatron is initialized", ready), *T.MODEL_SETUP])
        if resume is None:
            self.r0(subst(T.LOAD_FRESH, spec, self.ckpt))
            load_ms = rng.uniform(0.5, 0.8)
        else:
            self.r0(subst(T.LOAD_RESUME, spec, self.ckpt, resume))
            load_ms = rng.uniform(250.0, 400.0)
        self.log.rank_lines(
            self.last,
            [T.LOAD_TIMER_LAST[0], f"    load-checkpoint {'.' * 32}: ({load_ms:.2f}, {load_ms:.2f})"],
        )
        built = ready + 93_000 + int(load_ms * 1000)
        loaders = built + rng.randint(250_000, 300_000)
        train = loaders + rng.randint(5_000, 6_000)
        self.r0([self.dt("after model, optimizer, and learning rate scheduler are built", built)])
        self.r0(subst(T.DATASETS, spec, self.ckpt) + list(T.CKPT_WORKER_STARTED))
        self.r0([self.dt("after dataloaders are built", loaders), "done with setup ..."])
        self.log.rank_lines(self.last, T.SETUP_TIMERS)
        it0 = 0 if resume is None else resume
        self.r0(
            [
                "training ...",
                f"Overwriting rerun_state_machine.current_iteration from -1 to {it0}...",
                self.dt("before the start of training step", train),
                *T.TRAIN_START,
            ]
        )
        return train

    def memory(self, when: str) -> str:
        return (
            f"[Rank 0] ({when}) memory (MB) | allocated: 293.73 | max allocated: 346.23 | reserved: 386.00"
            " | max reserved: 386.00"
        )

    def run(
        self,
        res: CycleResult,
        stop: int,
        fault_after: int | None,
        saves_on: bool,
        prev_open: set[int],
        divergence_from: int | None,
        isolated: int | None,
        inject: dict | None,
    ) -> CycleResult:
        """Iterations resumed_from+1 .. stop; a fault right after checkpoint `fault_after` completed."""
        spec, rng, log = self.spec, self.rng, self.log
        resume = None if res.resumed_from == 0 else res.resumed_from
        t = self.startup(res.number, res.start_us, resume)
        interval = spec.interval
        pending: list[tuple[int, int]] = []  # (completion iteration, checkpoint iteration)
        completed_at: dict[int, int] = {}
        kill_iter = None
        noise = log.noise_pool_size()
        for n, i in enumerate(range(res.resumed_from + 1, stop + 1)):
            if n == 0:
                step_us = rng.randint(1_200_000, 1_500_000)
            elif n == 1:
                step_us = rng.randint(600_000, 800_000)
            else:
                step_us = rng.randint(34_000, 50_000)
            t += step_us
            loss = self.losses.loss[i]
            if divergence_from is not None and i > divergence_from:
                loss += 0.15 + 0.01 * (i - divergence_from)
            elif i == isolated:
                loss += rng.choice((-0.17, 0.12))
            if n == 1:
                self.r0(T.TRAIN_START[3:] + T.MEMORY_REPORT)
            log.rank_lines(
                self.last, [iteration_line(spec, t, i, step_us / 1000, loss, self.losses.gnorm[i])]
            )
            if res.first_step_us is None:
                res.first_step_us = t
            if n < 2:
                self.r0((T.MEMORY_REPORT if n == 0 else ()) + (self.memory(f"after {i} iterations"),))
            if spec.noise_per_iter:
                log.noise_lines(spec.noise_per_iter, noise, t, rng)
            while pending and pending[0][0] == i:
                _, j = pending.pop(0)
                t += rng.randint(2_000, 12_000)
                self.r0(
                    [
                        f"  [{fmt_mt(t)}] successfully saved checkpoint from iteration {j:7d} to {self.ckpt}"
                        " [ t 1/1, gtp_remat 1/1, p 1/1 ]"
                    ]
                )
                res.completed.append(j)
                completed_at[j] = i
            if fault_after is not None and fault_after in completed_at and kill_iter is None:
                nxt = [p for p, _ in pending]
                cap = min([stop - 1, *(p - 1 for p in nxt)])
                kill_iter = min(
                    max(completed_at[fault_after] + rng.randint(0, 2), fault_after + 3), max(cap, i)
                )
            if kill_iter is not None and i >= kill_iter:
                t += rng.randint(30_000, 60_000)
                res.fault_us, res.fault_iteration = t, i
                res.tracker_at_fault = max(res.completed, default=res.resumed_from)
                if inject is not None:
                    inject["time_us"] = t
                    log.rank_lines(
                        res.fault_rank if res.fault_rank is not None else 0, [inject_line(spec, inject)]
                    )
                res.scheduled_open = [j for _, j in pending]
                return res
            if saves_on and (i % interval == 0 or i == spec.iters):
                final = i == spec.iters
                lines = [] if final else [self.memory(f"before save_checkpoint for iteration {i}")]
                if pending:
                    lines.append(
                        "WARNING: Starting a checkpoint save before previous has finished. "
                        "Consider increasing the checkpoint interval."
                    )
                lines.append(
                    f"[{fmt_mt(t + 2_500)}] saving checkpoint at iteration {i:7d} to {self.ckpt} "
                    "in torch_dist format"
                )
                if i in prev_open:
                    lines.append(
                        "WARNING:megatron.core.dist_checkpointing.serialization:"
                        "Overwriting old incomplete / corrupted checkpoint..."
                    )
                save_us = rng.randint(160_000, 560_000)
                t += save_us
                lines.append(
                    f"  [{fmt_mt(t)}] scheduled an async checkpoint save at iteration {i:7d} to {self.ckpt}"
                )
                if not final:
                    lines.append(self.memory(f"after save_checkpoint for iteration {i}"))
                self.r0(lines)
                ms = save_us / 1000
                log.rank_lines(
                    self.last,
                    [T.SETUP_TIMERS[0], f"    save-checkpoint {'.' * 32}: ({ms * 0.98:.2f}, {ms:.2f})"],
                )
                done = max([i + rng.randint(1, max(1, min(interval, 4))), *(p + 1 for p, _ in pending)])
                pending.append((done, i))
        # normal end of training: finalize what is still pending, shut down
        if pending:
            self.r0(["Unfinalized async checkpoint saves. Finalizing them synchronously now."])
        for _, j in pending:
            t += rng.randint(150_000, 400_000)
            self.r0(
                [
                    f"  [{fmt_mt(t)}] successfully saved checkpoint from iteration {j:7d} to {self.ckpt}"
                    " [ t 1/1, gtp_remat 1/1, p 1/1 ]"
                ]
            )
            res.completed.append(j)
        t += rng.randint(1_000_000, 2_000_000)
        self.r0(
            [*T.CKPT_WORKER_STOPPED, self.dt("after training is done", t), "FT: closing...", "FT: closed."]
        )
        t += rng.randint(1_000_000, 1_500_000)
        log.teardown(self.nodes, t, rng)
        res.finished = True
        res.end_us = t + rng.randint(5_000_000, 7_000_000)
        return res


def marker_record(spec: Spec, inject: dict) -> dict:
    """fault_injected.json (the contract's keys, as in the recorded fixture)."""
    return {
        "schema": "ftqual.fault/v1",
        "run_id": spec.run_id,
        "fault": spec.fault,
        "rank": inject["rank"],
        "local_rank": inject["rank"] % spec.gpn,
        "host": inject["host"],
        "pid": inject["pid"],
        "cycle": 0,
        "baseline_iteration": 0,
        "checkpoint_iteration": inject["checkpoint_iteration"],
        "injected_at": fmt_iso(inject["time_us"]),
    }


def inject_line(spec: Spec, inject: dict) -> str:
    """The injecting rank's line: our wrapper's `[ftqual-inject] {json}` or the recording's legacy one."""
    if spec.legacy_inject_line:
        return (
            f"[inject] {{'fault': '{spec.fault}', 'rank': {inject['rank']}, "
            f"'iteration': {inject['checkpoint_iteration']}, 'baseline': 0, "
            f"'time': {inject['time_us'] / 1e6:.6f}, 'pid': {inject['pid']}, "
            f"'host': '{inject['host']}', 'restart': '0'}}"
        )
    record = {**marker_record(spec, inject), "placement": "step", "section": "step"}
    return f"[ftqual-inject] {json.dumps(record)}"


def tiny_metadata() -> bytes:
    """A valid pickle (protocol 4) naming torch's Metadata class, with model and optimizer keys, ~3 KB."""

    def u(s: str) -> bytes:
        b = s.encode()
        return b"\x8c" + bytes([len(b)]) + b + b"\x94"

    params = [
        "embedding.word_embeddings.weight",
        "embedding.position_embeddings.weight",
        "decoder.final_layernorm.weight",
        "decoder.final_layernorm.bias",
    ]
    params += [
        f"decoder.layers.{n}"
        for n in (
            "self_attention.linear_qkv.weight",
            "self_attention.linear_qkv.bias",
            "self_attention.linear_proj.weight",
            "mlp.linear_fc1.weight",
            "mlp.linear_fc2.weight",
            "mlp.linear_fc1.layer_norm_weight",
        )
    ]
    keys = params + [
        f"optimizer.state.{k}.{p}" for k in ("exp_avg", "exp_avg_sq", "fp32_param") for p in params
    ]
    keys += ["rng_state/shard_0.0_1.1", "rerun_state_machine_state/shard_0.0_1.1"]
    body = b"".join(u(k) + b"N" for k in keys)
    return (
        b"\x80\x04"
        + u("torch.distributed.checkpoint.metadata")
        + u("Metadata")
        + b"\x93\x94)\x81\x94}\x94("
        + u("state_dict_metadata")
        + b"}\x94("
        + body
        + b"uub."
    )


def generate(spec: Spec, out: Path, size_only: bool = False) -> dict:
    """Write the run directory (or, with size_only, only count the bytes its logs would take)."""
    if spec.ranks < 1 or spec.iters < 2:
        raise SystemExit("make_run: --ranks must be >= 1 and --iters >= 2")
    if spec.ranks > spec.gpn and spec.ranks % spec.gpn:
        raise SystemExit(f"make_run: --ranks {spec.ranks} is not a multiple of {spec.gpn} GPUs per node")
    if not 0 <= spec.frank < spec.ranks:
        raise SystemExit(f"make_run: --fault-rank {spec.frank} is outside 0..{spec.ranks - 1}")
    if spec.defect and spec.restarts == 0:
        raise SystemExit("make_run: a --defect needs a fault (--restarts >= 1)")
    rng = random.Random(spec.seed)
    saves = list(range(spec.interval, spec.iters + 1, spec.interval))
    faults = plan_faults(spec, saves)
    losses = Losses(spec.iters, rng)
    nodes = [Node.make(n, spec, rng) for n in range(spec.nnodes)]
    logs = out / "logs"
    if not size_only:
        logs.mkdir(parents=True, exist_ok=False)
    results: list[CycleResult] = []
    start = BASE_US + (spec.seed % 97) * 3_600_000_000
    inject: dict | None = None
    prev_open: set[int] = set()
    total_bytes = 0
    lines = 0
    for c in range(spec.restarts + 1):
        last = c == spec.restarts
        defect = spec.defect if last and c > 0 else None
        resume = faults[c - 1] if c > 0 else 0
        if defect == "resumed_from_zero_on_one_rank":
            resume = 0
        res = CycleResult(number=c, start_us=start, resumed_from=resume)
        stop = spec.iters
        if defect == "final_iteration_missing":
            stop = spec.iters - max(1, spec.interval // 2)
        fault_after = None if last else faults[c]
        if not last:
            node_rank = spec.frank if c == 0 else rng.randrange(spec.ranks)
            res.fault_rank = node_rank
            if c == 0:
                node = nodes[node_rank // spec.gpn]
                inject = {
                    "fault": spec.fault,
                    "rank": node_rank,
                    "pid": node.worker_pid(c, node_rank % spec.gpn),
                    "host": node.host,
                    "checkpoint_iteration": faults[0],
                }
        replay_end = results[-1].fault_iteration if results else None
        isolated = resume + 2 if c > 0 and replay_end and resume + 2 < replay_end else None
        divergence = resume if defect == "loss_divergence" else None
        log = LogWriter(None if size_only else logs / f"train_cycle{c}.log", spec.ranks, rng)
        log.cycle, log.nodes = c, nodes
        CycleWriter(spec, rng, losses, log, nodes).run(
            res,
            stop,
            fault_after,
            saves_on=defect != "no_later_checkpoint",
            prev_open=prev_open,
            divergence_from=divergence,
            isolated=None if divergence is not None else isolated,
            inject=inject if c == 0 else None,
        )
        total_bytes += log.close()
        lines += log.lines
        if not res.finished:
            assert res.fault_us is not None
            detect = res.fault_us + (
                rng.randint(80_000, 120_000)
                if spec.fault == "kill"
                else 120_000_000 + rng.randint(0, 5_000_000)
            )
            res.end_us = detect + 1_000
            prev_open = set(res.scheduled_open)
        results.append(res)
        start = res.end_us + rng.randint(4_550_000, 4_750_000)
    text = launcher_log(spec, results, nodes, faults)
    total_bytes += len(text.encode())
    expect = expectations(spec, faults, results, total_bytes, lines)
    if not size_only:
        marker = marker_record(spec, inject) if inject is not None else None
        write_tree(out, spec, results, marker, text, tiny_metadata(), expect)
    return expect


def expectations(spec: Spec, faults: list[int], results: list[CycleResult], size: int, lines: int) -> dict:
    failing: list[str] = []
    tolerated: list[str] = []
    notes = []
    if spec.defect:
        failing = [DEFECT_CHECK[spec.defect]]
        tolerated = ["progress_after_resume", "clean_finish"] if spec.defect.startswith("resumed") else []
        notes.append(f"planted defect {spec.defect} in cycle {spec.restarts}")
    if spec.restarts > 1:
        tolerated += ["clean_finish", "failure_detected_and_restarted"]
        notes.append(
            f"{spec.restarts} failures but one injection (the marker names cycle 0's): a verifier may "
            "count the unexplained failures against clean_finish"
        )
    return {
        "schema": "ftqual.bench_expect/v1",
        "generator": {
            "ranks": spec.ranks,
            "iters": spec.iters,
            "restarts": spec.restarts,
            "seed": spec.seed,
            "save_interval": spec.interval,
            "fault": spec.scenario,
            "defect": spec.defect,
            "noise_per_iter": spec.noise_per_iter,
            "chatter_per_rank": spec.chatter_per_rank,
            "nnodes": spec.nnodes,
            "gpus_per_node": spec.gpn,
        },
        "verdict": "fail" if failing else "pass",
        "failing_checks": failing,
        "tolerated_failing_checks": sorted(set(tolerated) - set(failing)),
        "fault_checkpoints": faults,
        "fault_iterations": [r.fault_iteration for r in results if r.fault_iteration is not None],
        "log_bytes": size,
        "train_log_lines": lines,
        "notes": notes,
    }


def chatter_for_target(spec: Spec, target_mb: float) -> int:
    """Per-rank chatter lines that bring the logs to about target_mb (measured with a dry run)."""
    from dataclasses import replace

    probe = replace(spec, chatter_per_rank=0)
    base = generate(probe, Path("."), size_only=True)["log_bytes"]
    per_line = LogWriter.chatter_line_bytes(spec.ranks)
    want = target_mb * 1_000_000 - base
    return max(0, int(want / (per_line * spec.ranks * (spec.restarts + 1))))


def parse_args(argv: list[str] | None) -> tuple[Spec, Path, float | None]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, required=True, help="world size")
    p.add_argument("--iters", type=int, required=True, help="train_iters")
    p.add_argument("--restarts", type=int, default=1, help="faults/restarts K: cycles 0..K (0: baseline)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True, help="run directory to create (must not exist)")
    p.add_argument("--save-interval", type=int, default=0, help="default: 5, or iters/10 past 60 iterations")
    p.add_argument("--fault", choices=("kill", "hang"), default="kill")
    p.add_argument("--defect", choices=DEFECTS)
    p.add_argument(
        "--noise-lines-per-iter", type=int, default=0, help="chatter lines from random ranks per step"
    )
    p.add_argument(
        "--chatter-per-rank", type=int, default=40, help="NCCL INFO lines every rank prints per cycle"
    )
    p.add_argument("--target-mb", type=float, help="size of all logs; sets --chatter-per-rank")
    p.add_argument("--fault-rank", type=int, help="default 1 (the launcher's)")
    p.add_argument("--job-id", help="Slurm job id in cycle_info names (default as recorded; '' for none)")
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument(
        "--current-symlink",
        action="store_true",
        help="cycle_info.<job>.current as a symlink (NVRx) instead of a file naming it (the fixtures)",
    )
    p.add_argument(
        "--legacy-inject-line",
        action="store_true",
        help="print the recording's `[inject] {...}` line instead of our wrapper's `[ftqual-inject] {json}`",
    )
    a = p.parse_args(argv)
    spec = Spec(
        ranks=a.ranks,
        iters=a.iters,
        restarts=a.restarts,
        seed=a.seed,
        save_interval=a.save_interval,
        fault=a.fault,
        defect=a.defect,
        noise_per_iter=a.noise_lines_per_iter,
        chatter_per_rank=a.chatter_per_rank,
        fault_rank=a.fault_rank,
        job_id=a.job_id,
        gpus_per_node=a.gpus_per_node,
        current_symlink=a.current_symlink,
        legacy_inject_line=a.legacy_inject_line,
    )
    return spec, a.out, a.target_mb


def main(argv: list[str] | None = None) -> int:
    spec, out, target = parse_args(argv)
    if target is not None:
        from dataclasses import replace

        spec = replace(spec, chatter_per_rank=chatter_for_target(spec, target))
    if out.exists():
        print(f"make_run: {out} exists; give a new directory", file=sys.stderr)
        return 2
    expect = generate(spec, out)
    print(
        json.dumps(
            {
                "out": str(out),
                "log_bytes": expect["log_bytes"],
                "lines": expect["train_log_lines"],
                "chatter_per_rank": spec.chatter_per_rank,
                "verdict": expect["verdict"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
