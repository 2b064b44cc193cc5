"""Fault scenarios: the replacement cycle ran on the same world (every rank, every node) as the first one.

Three sources, each used where it is available:
- the training logs: the global ranks that printed (`"<rank>: "` prefixes) in every `train_cycle<N>.log`;
- launcher.log: `The node '<id>' has joined the rendezvous '<rdzv>' as rank R in a world of size W`, one line
  per node and cycle (R and W count nodes; a multi-node run's log aggregates every node's launcher);
- cycle_infos: `active_nodes` (a Slurm host list) per cycle.

The detail also states the multi-node facts: on which node(s) the failure was detected, that every node
restarted, and that every rank resumed. Megatron prints its load lines on rank 0 only, so "every rank
resumed" means: every rank of the world printed in the replacement cycle, and its iteration lines continue
from the restored iteration K at K+1.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, plain
from ftqual.verification.evidence import derive
from ftqual.verification.evidence.launcher_log import RendezvousJoin, TimeoutFired, WorkerExit
from ftqual.verification.evidence.snapshot import RunSnapshot

ACTIVE_WORLD = "active_world_unchanged"
MAX_CITED = 4  # first lines cited per cycle (lowest and highest ranks): 4 for a world of 1,024, not 1,024
_BRACKET = re.compile(r"^(?P<head>[^\[]*)\[(?P<body>[^\]]*)\](?P<tail>.*)$")


def spans(numbers: Iterable[int]) -> str:
    """`0-3, 7, 9-10`: a sorted set of integers as ranges."""
    items = sorted(set(numbers))
    out: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        out.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ", ".join(out)


MAX_HOSTS = 100000  # a Slurm host list naming more nodes than this is not a real allocation
MAX_BRACKETS = 16


def expand_hostlist(text: str) -> list[str]:
    """A Slurm host list (`n[1-2]`, `gpu-[0001-0004,0007]`, `a,b`) as host names; '' gives [].

    Raises ValueError when the list would name more than MAX_HOSTS hosts or nests too many brackets
    (`n[0-99999999]` is refused before a single name is built)."""
    if text.count("[") > MAX_BRACKETS:
        raise ValueError(f"host list {text[:60]!r} has more than {MAX_BRACKETS} bracket groups")
    hosts = _expand(text)
    return hosts


def _expand(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    hosts: list[str] = []
    for item in (x.strip() for x in items):
        if not item:
            continue
        m = _BRACKET.match(item)
        if not m:
            hosts.append(item)
            continue
        tails = _expand(m["tail"]) or [""]
        for part in m["body"].split(","):
            low, _, high = part.partition("-")
            if not high:
                hosts += [m["head"] + low + tail for tail in tails]
            elif not (low.isascii() and low.isdigit() and high.isascii() and high.isdigit()):
                hosts.append(item)  # not a range we understand: keep the text as one name
                break
            elif len(high) > 9 or (int(high) - int(low) + 1) * len(tails) + len(hosts) > MAX_HOSTS:
                raise ValueError(f"host list {item[:60]!r} names more than {MAX_HOSTS} hosts")
            else:
                for n in range(int(low), int(high) + 1):
                    name = m["head"] + str(n).zfill(len(low))
                    hosts += [name + tail for tail in tails]
        if len(hosts) > MAX_HOSTS:
            raise ValueError(f"host list names more than {MAX_HOSTS} hosts")
    return hosts


def names(hosts: Iterable[str], limit: int = 8) -> str:
    """`n1, n2`, or `gpu-0001, gpu-0002, ..., gpu-0128 (128)` for a long list."""
    items = list(hosts)
    if len(items) <= limit:
        return ", ".join(items)
    return f"{items[0]}, {items[1]}, ..., {items[-1]} ({len(items)})"


def _nodes_of(ranks: Iterable[int], gpus_per_node: int | None, hosts: dict[int, str]) -> str:
    """` (on n2)` for global ranks when the node shape is known (node rank r // gpus_per_node)."""
    if not gpus_per_node:
        return ""
    nodes = sorted({r // gpus_per_node for r in ranks})
    return f" (on {names(hosts.get(n, f'node rank {n}') for n in nodes)})"


def _train_ranks(snap: RunSnapshot, f: Findings, world: int, gpn: int | None, hosts: dict[int, str]) -> None:
    expected = set(range(world))
    fault, repl = derive.fault_cycle(snap), derive.replacement_cycle(snap)
    ok_cycles: list[int] = []
    for log in snap.train_logs:
        ranks = set(log.ranks)
        first = sorted(ranks)
        half = MAX_CITED // 2
        cited = [log.ranks[r] for r in first[:half] + first[-half:]] if first else []
        if not ranks:
            f.unknown(f"{log.path} has no '<rank>: ' lines: the ranks of cycle {log.cycle} are not shown")
            continue
        outside = sorted(ranks - expected)
        if outside:
            f.problem(
                f"cycle {log.cycle}: rank(s) {spans(outside)} printed in {log.path}, "
                f"outside the world of {world}",
                *(log.ranks[r] for r in outside[:MAX_CITED]),
            )
        missing = sorted(expected - ranks)
        if missing:
            f.missing_fact(
                f"cycle {log.cycle}: rank(s) {spans(missing)}{_nodes_of(missing, gpn, hosts)} never "
                f"printed in {log.path} ({len(ranks & expected)} of {world} ranks)",
                log.complete,
                *cited,
            )
        elif not outside:
            ok_cycles.append(log.cycle)
            f.cite(*cited)
    # A rank of cycle 0 that the replacement lacks is either outside the world (flagged in cycle 0) or missing
    # from the replacement (flagged there): checking every cycle against world_size covers "unchanged".
    if snap.train_log(repl) is None:
        f.unknown(f"no logs/train_cycle{repl}.log: the replacement cycle's ranks are not shown")
    if ok_cycles:
        f.fact(
            f"ranks {spans(expected)} ({world} of world_size {world}) printed in cycle(s) {spans(ok_cycles)}"
            + (" (the replacement has every rank of cycle 0)" if {0, repl} <= set(ok_cycles) else "")
        )
    f.values.update(
        ranks_per_cycle={str(log.cycle): len(log.ranks) for log in snap.train_logs},
        fault_cycle=fault,
    )


def _join_hosts(snap: RunSnapshot) -> dict[int, str]:
    """Node rank -> host from the rendezvous lines (cycle 0's assignment first, later cycles fill gaps)."""
    hosts: dict[int, str] = {}
    joins = snap.launcher.joins if snap.launcher is not None else ()
    for item in sorted(joins, key=lambda j: -j.cycle):
        hosts[item.rank] = item.host
    return hosts


def _promoted(snap: RunSnapshot, exp: RunPlan) -> str | None:
    """node_loss with a spare node: the lost host (absent after its cycle by design), else None."""
    if not (exp.node_loss and exp.spare_nodes) or snap.marker is None or not snap.marker.node:
        return None
    lost = snap.marker.node.get("host")
    return lost if isinstance(lost, str) else None


def _joins(snap: RunSnapshot, f: Findings, nnodes: int | None, lost: str | None = None) -> None:
    """Every cycle's rendezvous: a world of nnodes nodes, every node that ever joined joined it (with a
    spare: but the lost node after the fault cycle, and a spare before it was promoted)."""
    launcher = snap.launcher
    joins: tuple[RendezvousJoin, ...] = launcher.joins if launcher is not None else ()
    if not joins:
        why = snap.reason("launcher_log") if launcher is None else "launcher.log has no rendezvous join lines"
        f.note(f"node-level world not checked: {why}")
        return
    by_cycle: dict[int, list[RendezvousJoin]] = {}
    for item in joins:
        by_cycle.setdefault(item.cycle, []).append(item)
    every_node = sorted({j.host for j in joins})
    first_cycle = {h: min(j.cycle for j in joins if j.host == h) for h in every_node}
    fault = derive.fault_cycle(snap)
    complete = launcher is not None and launcher.complete
    ok_cycles: list[int] = []
    for cycle, items in sorted(by_cycle.items()):
        size = nnodes if nnodes is not None else max(j.world_size for j in items)
        wrong = [j for j in items if j.world_size != size]
        if wrong:
            f.problem(
                f"cycle {cycle}: rendezvous world of {wrong[0].world_size} node(s), run.json says {size}",
                wrong[0].ref,
            )
        absent = sorted(set(range(size)) - {j.rank for j in items})
        wanted = set(every_node)
        if lost is not None:
            wanted -= {lost} if cycle > fault else set()
            wanted -= {h for h in every_node if first_cycle[h] > cycle and h != lost}
        gone = sorted(wanted - {j.host for j in items})
        if gone:
            f.missing_fact(
                f"cycle {cycle}: node(s) {names(gone)} did not join the rendezvous "
                f"({len(items)} of {size} node(s) joined)",
                complete,
                *(j.ref for j in items[:MAX_CITED]),
            )
        elif absent:
            f.unknown(
                f"cycle {cycle}: no join line of node rank(s) {spans(absent)} of {size} in launcher.log "
                "(does it aggregate every node's launcher?)"
            )
        elif not wrong:
            ok_cycles.append(cycle)
            f.cite(*(j.ref for j in sorted(items, key=lambda j: j.rank)[:MAX_CITED]))
    if ok_cycles and lost is not None:
        # Membership changed by design: say who was in each cycle's world.
        each = []
        for c in ok_cycles:
            members = ", ".join(
                f"{j.host} (node rank {j.rank})" for j in sorted(by_cycle[c], key=lambda j: j.rank)
            )
            each.append(f"{members} in cycle {c}")
        f.fact(f"rendezvous: {'; '.join(each)}, each a world of {nnodes} node(s)")
    elif ok_cycles:
        hosts = _join_hosts(snap)
        ranked = [f"{hosts[r]} (node rank {r})" for r in sorted(hosts)]
        f.fact(
            f"rendezvous: {names(ranked, 4)} joined cycle(s) {spans(ok_cycles)} "
            f"in a world of {len(hosts)} node(s)"
        )
    f.values["nodes"] = every_node
    if lost is not None:
        spares = sorted(h for h in every_node if first_cycle[h] > fault and h != lost)
        if spares:
            f.fact(f"{names(spares)} (spare) took the place of the lost {lost} from cycle {fault + 1}")
            f.values["promoted"] = spares
        else:
            f.missing_fact(f"no spare node joined after {lost} was lost", complete)


def _active_nodes(snap: RunSnapshot, f: Findings, nnodes: int | None, lost: str | None = None) -> None:
    if snap.cycles is None:
        f.note(f"cycle_infos not checked: {snap.reason('cycle_infos')}")
        return
    records = [snap.cycles.by_cycle(c) for c in snap.cycles.cycle_numbers]
    listed = {}
    for record in records:
        if record is None:
            continue
        try:
            listed[record.cycle] = (record, expand_hostlist(record.active_nodes))
        except ValueError as exc:
            f.unknown(f"cycle {record.cycle}: cycle_infos active_nodes unusable: {exc}", record.ref)
    shown = {c: v for c, v in listed.items() if v[1]}
    if not shown:
        f.note("cycle_infos list no active_nodes")
        return
    ok: list[int] = []
    for cycle, (record, hosts) in sorted(shown.items()):
        if nnodes is not None and len(hosts) != nnodes:
            f.problem(
                f"cycle {cycle}: cycle_infos active_nodes {record.active_nodes!r} is {len(hosts)} node(s), "
                f"run.json says {nnodes}",
                record.ref,
            )
        else:
            ok.append(cycle)
    repl = derive.replacement_cycle(snap)
    allowed = {lost} if lost is not None else set()
    if 0 in shown and repl in shown and (dropped := sorted(set(shown[0][1]) - set(shown[repl][1]) - allowed)):
        f.problem(
            f"cycle_infos: node(s) {names(dropped)} active in cycle 0 are not active in cycle {repl}",
            shown[repl][0].ref,
        )
    elif ok:
        text = ", ".join(sorted({shown[c][0].active_nodes for c in ok}))
        f.fact(f"cycle_infos active_nodes {text} in cycle(s) {spans(ok)}")
        f.cite(*(shown[c][0].ref for c in ok))


def _detected_on(snap: RunSnapshot, f: Findings) -> None:
    """Where the failure was seen first, and where else (a peer node may report a hang first)."""
    found = derive.detection(snap)
    if found is None or found.ref is None or snap.launcher is None:
        return
    source: WorkerExit | TimeoutFired | None = next(
        (x for x in (*snap.launcher.exits, *snap.launcher.timeouts) if x.ref == found.ref), None
    )
    host = source.host if source is not None else None
    marker = snap.marker
    where = f"{marker.host} (rank {marker.rank})" if marker is not None and marker.host else "?"
    if host is None:
        f.note(f"detected by {found.detected_by} (launcher.log:{found.ref.line}); the node is not named")
        return
    start = derive.injected_at(snap)
    seen_on = sorted(
        {
            x.host
            for x in (*snap.launcher.exits, *snap.launcher.timeouts)
            if x.host
            and x.t is not None
            and (start is None or x.t >= start)
            and (isinstance(x, TimeoutFired) or x.exit_code != 0)
        }
    )
    others = [h for h in seen_on if h != host]
    also = f"; later also reported on {names(others)}" if others else ""
    f.fact(
        f"detected on {host} first ({found.detected_by}, launcher.log:{found.ref.line}); "
        f"fault injected on {where}{also}",
        found.ref,
    )
    f.values["detected_on"] = host


def _restarted_and_resumed(snap: RunSnapshot, f: Findings, world: int, hosts: dict[int, str]) -> None:
    repl = derive.replacement_cycle(snap)
    if hosts and snap.launcher is not None:
        back = sorted({j.host for j in snap.launcher.joins if j.cycle == repl})
        if back and set(back) >= set(hosts.values()):
            f.fact(f"restarted on all {len(back)} node(s) ({names(back)}) in cycle {repl}")
    log = snap.train_log(repl)
    load = derive.restore(snap)
    if log is None or load is None or not set(range(world)) <= set(log.ranks):
        return
    step = derive.first_step_after(log, load.ref.line)
    if step is None:
        f.note(f"cycle {repl} shows no iteration after the load at iteration {load.iteration}")
    elif step.iteration == load.iteration + 1:
        f.fact(
            f"every rank resumed: all {world} ranks printed in cycle {repl} and its iterations continue at "
            f"{step.iteration} after the load of iteration {load.iteration} (Megatron prints load lines on "
            "rank 0 only)",
            load.ref,
            step.ref,
        )
    else:
        f.note(
            f"cycle {repl}: the first iteration after the load of {load.iteration} is {step.iteration}, "
            f"not {load.iteration + 1}",
            step.ref,
        )


def active_world_unchanged(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant: every cycle ran on all world_size ranks (each printed, none outside the world) and on
    nnodes nodes (rendezvous joins, cycle_infos active_nodes), and the replacement cycle has every node and
    rank of cycle 0, its iterations continuing at K+1 after the load of K. node_loss with a spare: the lost
    node is replaced by a spare that had not joined before (same node count, same ranks)."""
    cid = ACTIVE_WORLD
    if not exp.faulty:
        return skip(cid, "no fault in this scenario")
    world = exp.world_size
    if world is None or world < 1:
        return inconclusive(cid, "run.json has no world_size")
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    nnodes, gpn = snap.meta.nnodes, snap.meta.gpus_per_node
    if nnodes is None and gpn is not None and gpn > 0 and world % gpn == 0:
        nnodes = world // gpn
    if gpn is None and nnodes:
        gpn = world // nnodes if world % nnodes == 0 else None
    f = Findings(cid)
    f.values.update(world_size=world, nnodes=nnodes, gpus_per_node=gpn)
    if nnodes and gpn and nnodes * gpn != world:
        f.note(f"run.json: nnodes x gpus_per_node = {nnodes} x {gpn} is not world_size {world}")
    hosts = _join_hosts(snap)
    lost = _promoted(snap, exp)
    _train_ranks(snap, f, world, gpn, hosts)
    _joins(snap, f, nnodes, lost)
    _active_nodes(snap, f, nnodes, lost)
    _detected_on(snap, f)
    _restarted_and_resumed(snap, f, world, hosts)
    return f.result()


SPEC = CheckSpec(
    "active_world_unchanged",
    "every cycle, the replacement included, ran on all ranks of the world and on every node: no rank or node"
    " was lost or left out after the restart",
    plain(active_world_unchanged),
    # A stopped loop's and a failed storage's replacements still train: their ranks and nodes are judged.
    waived_by=("node_loss_outcome", "checkpoint_break_outcome"),
)
