"""Buffered writers for make_run: the per-cycle training log, the launcher log, and the rest of the tree.

Speed matters (gigabytes in well under a minute): per-rank text is built from pre-joined blocks whose line
starts carry a \\x00 marker, so adding the `"<rank>: "` prefix is one `str.replace`, and buffers are
written in multi-megabyte pieces.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.synthetic import megatron_text as T

if TYPE_CHECKING:
    from tests.support.synthetic.runs import CycleResult, Spec

FLUSH_BYTES = 8 << 20
CHUNK_LINES = 48
PYTHON = "/opt/torch/.venv/bin/python3"


def _pool(templates: tuple[str, ...], size: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for k in range(size):
        tpl = templates[k % len(templates)]
        p = [rng.randrange(1024) for _ in range(8)]
        out.append(
            tpl.format(
                a=rng.randrange(1, 250),
                b=rng.randrange(1, 99),
                c=rng.randrange(1, 250),
                h=rng.getrandbits(44),
                d=k % 8,
                d1=(k + 1) % 8,
                bus=f"{(k % 8) * 16 + 0x18:x}",
                cid=rng.getrandbits(60),
                ch=k % 32,
                ch1=(k + 1) % 32,
                p0=p[0],
                p1=p[1],
                p2=p[2],
                p3=p[3],
                p4=p[4],
                p5=p[5],
                p6=p[6],
                p7=p[7],
                md="1129 14:19:41.000000000",
            )
        )
    return out


POOL = _pool(T.NCCL_CHATTER, 704, 11)
NOISE = _pool(T.TRAIN_NOISE, 64, 12)


@dataclass(frozen=True)
class Node:
    index: int
    host: str
    node_id: str
    agent_pid: int
    gpn: int

    @classmethod
    def make(cls, index: int, spec: Spec, rng: random.Random) -> Node:
        pid = 19484 + index * 7 if index == 0 else rng.randrange(20_000, 90_000)
        if spec.nnodes == 1:
            return cls(index, "vm", f"localhost_{pid}_0", pid, spec.gpn)
        host = f"gpu-{index + 1:04d}"
        return cls(index, host, f"{host}_{pid}_0", pid, spec.gpn)

    def worker_pid(self, cycle: int, local_rank: int) -> int:
        return self.agent_pid + 44 + cycle * 97 + local_rank

    def header(self, cycle: int, local_rank: int) -> str:
        pid = self.worker_pid(cycle, local_rank)
        return f"{self.host}:{pid}:{pid + 300} [{local_rank}]"


def fmt_mt(us: int) -> str:
    """Megatron's `%Y-%m-%d %H:%M:%S.%f` (the launcher exports TZ=UTC)."""
    return (
        datetime.fromtimestamp(us // 1_000_000, UTC).strftime("%Y-%m-%d %H:%M:%S") + f".{us % 1_000_000:06d}"
    )


def fmt_iso(us: int) -> str:
    return fmt_mt(us).replace(" ", "T") + "Z"


def _glog_time(us: int) -> str:
    d = datetime.fromtimestamp(us // 1_000_000, UTC)
    return d.strftime("%m%d %H:%M:%S")


class LogWriter:
    """One logs/train_cycle<N>.log: rank-prefixed lines, buffered; path None only counts bytes."""

    def __init__(self, path: Path | None, world: int, rng: random.Random) -> None:
        self.path, self.world, self.rng = path, world, rng
        width = len(str(world - 1))
        self.prefix = [f"{r:>{width}}: " for r in range(world)]
        self.buf: list[str] = []
        self.pending = 0
        self.bytes = 0
        self.lines = 0
        self.handle = path.open("wb") if path is not None else None
        self.cycle = 0
        self.nodes: list[Node] = []

    def _add(self, text: str) -> None:
        self.buf.append(text)
        self.pending += len(text)
        if self.pending >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if not self.buf:
            return
        data = "".join(self.buf).encode()
        self.buf, self.pending = [], 0
        self.bytes += len(data)
        self.lines += data.count(b"\n")
        if self.handle is not None:
            self.handle.write(data)

    def close(self) -> int:
        self.flush()
        if self.handle is not None:
            self.handle.close()
        return self.bytes

    def rank_lines(self, rank: int, lines: list[str] | tuple[str, ...]) -> None:
        p = self.prefix[rank]
        self._add("".join(f"{p}{line}\n" for line in lines))

    def all_ranks_block(self, lines: list[str], rng: random.Random) -> None:
        """The same block from every rank, in a shuffled rank order (the gRPC aggregator interleaves them)."""
        block = "".join(f"\x00{line}\n" for line in lines)
        order = list(range(self.world))
        rng.shuffle(order)
        for r in order:
            self._add(block.replace("\x00", self.prefix[r]))

    def _nodes(self, nodes: list[Node]) -> None:
        self.nodes = nodes

    def _hdr(self, r: int) -> str:
        node = self.nodes[r // self.nodes[0].gpn]
        return node.header(self.cycle, r % node.gpn)

    def chatter_phase(self, nodes: list[Node], per_rank: int, t_us: int, rng: random.Random) -> None:
        """Communicator start-up: every rank's device-ID warning and `per_rank` NCCL INFO lines, in chunks."""
        self._nodes(nodes)
        order = list(range(self.world))
        rng.shuffle(order)
        stamp = f"{_glog_time(t_us)}.{(t_us % 1_000_000) * 1000 + 123:09d}"
        for r in order:
            self._add(f"{self.prefix[r]}{T.DEVICE_ID_GUESS.format(r=r, stamp=stamp)}\n")
        if per_rank <= 0:
            return
        n = len(POOL)
        reps = (n + per_rank) // n + 2
        text = "".join(f"\x00{line}\n" for line in POOL) * reps
        offs = [0]
        for line in POOL * reps:
            offs.append(offs[-1] + len(line) + 2)
        starts = {r: rng.randrange(n) for r in order}
        hdrs = {r: self._hdr(r) for r in order}
        ws = str(self.world)
        for lo in range(0, per_rank, CHUNK_LINES):
            hi = min(per_rank, lo + CHUNK_LINES)
            for r in order:
                a = starts[r] + lo
                chunk = text[offs[a] : offs[a + hi - lo]]
                self._add(
                    chunk.replace("\x00", self.prefix[r])
                    .replace("\x01", hdrs[r])
                    .replace("\x02", str(r))
                    .replace("\x03", ws)
                )

    def noise_pool_size(self) -> int:
        return len(NOISE)

    def noise_lines(self, count: int, pool: int, t_us: int, rng: random.Random) -> None:
        ws = str(self.world)
        out = []
        for _ in range(count):
            r = rng.randrange(self.world)
            line = NOISE[rng.randrange(pool)]
            out.append(
                self.prefix[r]
                + line.replace("\x01", self._hdr(r)).replace("\x02", str(r)).replace("\x03", ws)
                + "\n"
            )
        self._add("".join(out))

    def teardown(self, nodes: list[Node], t_us: int, rng: random.Random) -> None:
        """Exit-time warnings every rank prints; every 16th rank also loses the TCPStore first."""
        self._nodes(nodes)
        order = list(range(self.world))
        rng.shuffle(order)
        for k, r in enumerate(order):
            us = t_us + k * 900
            stamp = f"{_glog_time(us)}.{(us % 1_000_000) * 1000 + 31:09d}"
            p = self.prefix[r]
            lines = [T.TEARDOWN_DESTROY.format(r=r, stamp=stamp)]
            if r % 16 == 1:
                lines.append(T.TEARDOWN_RECV.format(r=r, stamp=stamp))
                lines += T.TCPSTORE_TRACE
                lines.append(T.TEARDOWN_DUMP.format(r=r, stamp=stamp))
            lines.append(T.TEARDOWN_IPC.format(r=r, stamp=stamp))
            self._add("".join(f"{p}{line}\n" for line in lines))

    @staticmethod
    def chatter_line_bytes(world: int) -> float:
        width = len(str(world - 1))
        hdr = len("gpu-0001:19528:19828 [1]")
        body = sum(len(line) for line in POOL) / len(POOL)
        return width + 2 + body + (hdr - 1) + len(str(world // 2)) - 1 + 1


# ---------------------------------------------------------------------------------------------- launcher log


def _asctime(us: int) -> str:
    d = datetime.fromtimestamp(us // 1_000_000, UTC)
    return d.strftime("%Y-%m-%d %H:%M:%S") + f",{(us % 1_000_000) // 1000:03d}"


def _utc_ms(us: int) -> str:
    d = datetime.fromtimestamp(us // 1_000_000, UTC)
    return d.strftime("%Y-%m-%d %H:%M:%S") + f".{(us % 1_000_000) // 1000:03d} UTC"


class _Events:
    def __init__(self) -> None:
        self.items: list[tuple[int, int, int, str]] = []

    def nv(
        self, us: int, node: Node, src: str, msg: str, level: str = "INFO", workload: str = "?(?)"
    ) -> None:
        text = f"{_asctime(us)} [{level}] [{node.host}] [workload:{workload} infra:?(?)] {src} {msg}"
        self.items.append((us, node.index, len(self.items), text))

    def glog(self, us: int, node: Node, letter: str, msg: str) -> None:
        text = f"{letter}{_glog_time(us)}.{(us % 1_000_000) // 1000 * 1000:06d} {node.agent_pid} {msg}"
        self.items.append((us, node.index, len(self.items), text))

    def prof(self, us: int, node: Node, cycle: int, event: str, rank: str) -> None:
        self.nv(
            us,
            node,
            "profiling.py:93",
            f"  - Cycle: {cycle} Event: {event} Node: {node.node_id} Rank: {rank} Time: {_utc_ms(us)}",
        )

    def text(self) -> str:
        self.items.sort()
        return "".join(item[3] + "\n" for item in self.items)


def _slurm_range(prefix: str, n: int) -> str:
    return f"{prefix}[0001-{n:04d}]" if n > 1 else f"{prefix}0001"


def launcher_log(spec: Spec, results: list[CycleResult], nodes: list[Node], faults: list[int]) -> str:
    """logs/launcher.log: every node's launcher, merged in time order as the gRPC log server writes it."""
    ev = _Events()
    run = f"/lus/nvrx/runs/{spec.run_id}"
    nn, gpn = spec.nnodes, spec.gpn
    host0 = "localhost" if nn == 1 else nodes[0].host
    t0 = results[0].start_us - 175_000
    for node in nodes:
        t = t0 + node.index * 37
        ev.nv(
            t,
            node,
            "c10d_monkey_patch.py:215",
            "Successfully applied c10d_rendezvous_backend monkey patch for use_libuv support",
        )
        ev.nv(
            t,
            node,
            "launcher.py:2922",
            "--ft-nvrx-logfile is set; enabling --ft-enable-log-server automatically.",
        )
        ev.nv(t, node, "launcher.py:2754", f"Using nproc_per_node={gpn}.")
        ev.nv(
            t,
            node,
            "launcher.py:2940",
            T.LAUNCH_OMP,
            level="WARNING",
        )
        if node.index == 0:
            ev.nv(
                t, node, "launcher.py:3445", f"gRPC log server(s) confined to allowed roots: ['{run}/logs']"
            )
            ev.nv(
                t + 1_000,
                node,
                "launcher.py:3474",
                f"gRPC log server started: PID={node.agent_pid + 32}, "
                f"port=50051, max_workers=100 (for {nn} nodes)",
            )
        ev.nv(t + 89_000, node, "per_cycle_logs.py:649", f"gRPC writer: {host0}:50051")
        ev.nv(
            t + 91_000,
            node,
            "launcher.py:1592",
            "Starting elastic_operator with launch configs:\n"
            "  entrypoint       : /opt/ftqual/workloads/megatron_gpt_worker.py\n"
            f"  min_nodes        : {nn}\n  max_nodes        : {nn}\n  nproc_per_node   : {gpn}\n"
            f"  run_id           : {spec.run_id}\n  rdzv_backend     : c10d\n"
            f"  rdzv_endpoint    : {host0}:29500\n"
            f"  rdzv_configs     : {T.LAUNCH_RDZV_CONFIGS.format(run=run)}\n"
            f"  max_restarts     : {spec.max_restarts}\n"
            "  restart_policy   : any-failed\n  monitor_interval : 0.3\n"
            f"  log_dir          : {run}/logs\n  metrics_cfg      : {{}}\n",
        )
        if node.index == 0:
            ev.nv(
                t + 92_000,
                node,
                "c10d_monkey_patch.py:184",
                f"Process {node.agent_pid} hosts the TCP store for the C10d rendezvous backend.",
            )
        ev.nv(
            t + 96_000,
            node,
            "health_check.py:791",
            "No network devices found for baseline initialization",
            level="WARNING",
        )
        ev.nv(t + 98_000, node, "launcher.py:655", "[default] starting workers for entrypoint: python3")
    prev_tracker = 0
    for res in results:
        c = res.number
        start = res.start_us
        for node in nodes:
            g = node.index
            t = start - 56_000 - (1_000_000 if c else 0) + g * 53
            ev.nv(
                t,
                node,
                "ft_rendezvous_barrier.py:2767",
                f"The node '{node.node_id}' attempts to join the next "
                f"round of the rendezvous '{spec.run_id}'.",
            )
            if c:
                ev.nv(
                    t + 1_000,
                    node,
                    "ft_rendezvous_barrier.py:1372",
                    f"[{node.node_id}] [Step 0] Round {c - 1} "
                    "closed (training in progress), waiting for next round...",
                )
                t += 1_000_000
            ev.prof(t + 1_000, node, c, "rendezvous_started", "None")
            ev.prof(t + 54_000, node, c, "health_check_completed", "None")
            if g == 0:
                ev.nv(
                    start,
                    node,
                    "ft_rendezvous_barrier.py:1650",
                    f"[slot=1] [Step 2] Constraint ok: {nn} "
                    f"participants, min={nn} (fetch 0.1ms, check 0.0ms)",
                )
                ev.nv(
                    start,
                    node,
                    "ft_rendezvous_barrier.py:1023",
                    f"Rank assignment (seg_size=1): {nn} active segs",
                )
                ev.nv(
                    start,
                    node,
                    "ft_rendezvous_barrier.py:1062",
                    "Previous active snapshot is not stable; disabling "
                    "previous-active last-call wait until stable infrastructure ranks are available.",
                    level="WARNING",
                )
            ev.nv(
                start + 1_500, node, "ft_rendezvous_barrier.py:2752", f"Assigned active rank {g} (round={c})"
            )
            ev.nv(
                start + 4_000,
                node,
                "ft_rendezvous_barrier.py:2804",
                f"The node '{node.node_id}' has joined the "
                f"rendezvous '{spec.run_id}' as rank {g} in a world of size {nn}.",
            )
            ev.prof(start + 4_200, node, c, "rendezvous_completed", "None")
            ev.prof(start + 6_500, node, c, "worker_start_started", str(g))
            ev.nv(
                start + 9_500,
                node,
                "per_cycle_logs.py:1560",
                f"Updated reader thread with {gpn} workers for "
                f"cycle, writing to {run}/logs/train_cycle{c}.log (gRPC mode)",
            )
            ev.prof(start + 10_000, node, c, "worker_start_completed", str(g))
            if c == 0 and g == 0:
                ev.nv(
                    start + 2_826_000,
                    node,
                    "per_cycle_logs.py:361",
                    "gRPC server ready (0 clients connected)",
                )
            ev.nv(
                start + 16_700_000 + g * 11,
                node,
                "rank_monitor_server.py:289",
                "Updated num_warmup_iterations to 0 from client",
                workload="?(0)",
            )
        if res.finished:
            for node in nodes:
                done = res.end_us - 1_001_000
                ranks = ", ".join(f"{node.index * gpn + lr}: None" for lr in range(gpn))
                ev.nv(
                    done,
                    node,
                    "launcher.py:672",
                    "[default] worker group successfully finished. Waiting 300 "
                    "seconds for other agents to finish.",
                )
                ev.nv(
                    res.end_us - 1_000,
                    node,
                    "launcher.py:1712",
                    T.LAUNCH_RUN_OK.format(ranks=ranks),
                )
                ev.nv(
                    res.end_us + 3_000,
                    node,
                    "ft_rendezvous_barrier.py:2991",
                    f"The node '{node.node_id}' has permanently closed the rendezvous '{spec.run_id}'.",
                )
                if node.index == 0:
                    ev.nv(
                        res.end_us + 15_000,
                        node,
                        "launcher.py:1775",
                        "Store host waiting 3.0 seconds before exit "
                        "to allow other nodes to read final TCPStore state...",
                    )
            continue
        assert res.fault_us is not None and res.fault_rank is not None
        detect = res.end_us - 1_000
        fnode = nodes[res.fault_rank // gpn]
        lr = res.fault_rank % gpn
        if spec.fault == "hang":
            open_s = (detect - res.fault_us) / 1e6
            ev.nv(
                detect - 2_000,
                fnode,
                "rank_monitor_server.py:522",
                f"[Cycle {c}] Section 'step' has been open for "
                f"{open_s:.2f} seconds. Timeout is {120:.2f} seconds.",
                level="WARNING",
                workload=f"?({lr})",
            )
        ev.glog(
            detect - 1_000,
            fnode,
            "E",
            f"torch/distributed/elastic/multiprocessing/api.py:986] failed (exitcode: "
            f"-9) local_rank: {lr} (pid: {fnode.worker_pid(c, lr)}) of binary: {PYTHON}",
        )
        ev.prof(detect, fnode, c + 1, "failure_detected", str(fnode.index))
        tracker = faults[c]
        ev.nv(
            detect,
            fnode,
            "progress_tracker.py:215",
            f"Training cycle #{c} made progress: {prev_tracker} \u2192 "
            f"{tracker} ({tracker - prev_tracker} iterations)",
        )
        prev_tracker = tracker
        ev.nv(
            detect,
            fnode,
            "launcher.py:636",
            f"[default] Worker group UNHEALTHY. {spec.max_restarts - c}/"
            f"{spec.max_restarts} attempts left; will restart worker group",
        )
        for node in nodes:
            t = detect + 1_000 + node.index * 29
            if node is not fnode:
                ev.nv(
                    t, node, "launcher.py:760", f"[default] Joining cluster restart (group_rank={node.index})"
                )
            ev.nv(t, node, "launcher.py:1002", "Stopping workers... Timeout = 15 sec.")
            for k in range(gpn):
                if node is fnode and k == lr:
                    continue
                ev.glog(
                    t,
                    node,
                    "W",
                    "torch/distributed/elastic/multiprocessing/api.py:1012] Sending process "
                    f"{node.worker_pid(c, k)} closing signal SIGTERM",
                )
            if node is fnode:
                section = "step" if spec.fault == "hang" else "checkpointing"
                ev.nv(
                    t + 56_000,
                    node,
                    "rank_monitor_server.py:379",
                    f"Section(s) ['{section}'] were still open. Use `.end_all_sections()` to avoid this.",
                    level="WARNING",
                    workload="?(0)",
                )
            for k in range(gpn):
                ev.nv(
                    t + 3_141_000,
                    node,
                    "launcher.py:1237",
                    f"GPU {k} memory reclaimed in 2s (2 samples): 528MB@0s, 0MB@2s",
                )
            ev.prof(t + 3_442_000, node, c + 1, "worker_terminated", str(node.index))
    return ev.text()


# ---------------------------------------------------------------------------------------------- the tree


def _cycle_info(spec: Spec, res: CycleResult) -> str:
    nn = spec.nnodes
    fields: dict[str, Any] = {
        "cycle_start_time": fmt_iso(res.start_us),
        "cycle_end_time": fmt_iso(res.end_us),
        "cycle_log_file": f"/lus/nvrx/runs/{spec.run_id}/logs/train_cycle{res.number}.log",
        "active_nodes": "localhost" if nn == 1 else _slurm_range("gpu-", nn),
        "generation": "1",
        "active_ranks": "0" if nn == 1 else f"0-{nn - 1}",
        "job_id": spec.job,
        "attempt_index": 0,
        "cycle_number": res.number,
        "standby_nodes": "",
    }
    if res.number:  # the recorded later cycles list cycle_number first
        fields = {"cycle_number": res.number, **{k: v for k, v in fields.items() if k != "cycle_number"}}
    return json.dumps(fields, indent=2)


def write_tree(
    out: Path,
    spec: Spec,
    results: list[CycleResult],
    marker: dict | None,
    launcher_text: str,
    metadata: bytes,
    expect: dict,
) -> None:
    (out / "logs" / "launcher.log").write_text(launcher_text, encoding="utf-8")
    infos = out / "cycle_infos"
    infos.mkdir()
    names = []
    for res in results:
        name = f"cycle_info.{spec.job}.0.{res.number}"
        names.append(name)
        (infos / name).write_text(_cycle_info(spec, res), encoding="utf-8")
    current = infos / f"cycle_info.{spec.job}.current"
    if spec.current_symlink:
        current.symlink_to(names[-1])
    else:
        current.write_text(names[-1], encoding="utf-8")
    ckpt = out / "checkpoints"
    ckpt.mkdir()
    completed: set[int] = set()
    for res in results:
        completed.update(res.completed)
    for it in sorted(completed):
        d = ckpt / f"iter_{it:07d}"
        d.mkdir()
        (d / ".metadata").write_bytes(metadata)
        (d / "metadata.json").write_text('{"sharded_backend": "torch_dist", "sharded_backend_version": 1}')
    for it in results[-1].scheduled_open + (results[-2].scheduled_open if len(results) > 1 else []):
        if it not in completed:  # scheduled, never finalized: a folder without .metadata
            (ckpt / f"iter_{it:07d}").mkdir(exist_ok=True)
    if completed:
        (ckpt / "latest_checkpointed_iteration.txt").write_text(str(max(completed)))
    run = {
        "schema": "ftqual.run/v1",
        "run_id": spec.run_id,
        "scenario": spec.scenario,
        "fault": "none" if spec.restarts == 0 else spec.fault,
        "fault_rank": None if spec.restarts == 0 else spec.frank,
        "world_size": spec.ranks,
        "train_iters": spec.iters,
        "save_interval": spec.interval,
        "checkpoint_dir": "checkpoints",
        "max_restarts": spec.max_restarts,
        "timeouts": {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180},
        "started_at": fmt_iso(results[0].start_us),
        "finished_at": fmt_iso(results[-1].end_us),
        "exit_code": 0,
        "workload": "megatron",
        "global_batch_size": spec.ranks,
        "nnodes": spec.nnodes,
        "gpus_per_node": spec.gpn,
        "tp": 1,
        "pp": 1,
        "tz_offset_s": 0,
    }
    (out / "run.json").write_text(json.dumps(run, indent=2), encoding="utf-8")
    if marker is not None:
        (out / "fault_injected.json").write_text(json.dumps(marker, indent=2), encoding="utf-8")
    (out / "bench_expect.json").write_text(json.dumps(expect, indent=2) + "\n", encoding="utf-8")
