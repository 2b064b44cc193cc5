"""node_loss: a whole node's ft_launcher was killed; NVRx must end the job, or promote a spare.

NVRx's documented behaviour for `--nnodes=N` (no spare): the survivors' workers fail once their peers are
gone, their launchers stop them and open a new rendezvous round, which cannot gather N nodes; after the
rendezvous `join_timeout` every survivor gives up (RendezvousTimeoutError) and exits non-zero. With
`--nnodes=N:N+S` and a standby node, the new round promotes the standby into the lost node's place and
training goes on (the recovery checks judge the rest). Judged from both sides: the lost node's own record
(nodes/<host>.json: SIGKILL), the marker (what the wrapper killed), and the survivors' records and launcher
lines.
"""

from __future__ import annotations

from collections.abc import Iterator

from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, Waiver, plain
from ftqual.verification.checks.world import names
from ftqual.verification.evidence.nodes import NodeRecord
from ftqual.verification.evidence.snapshot import RunSnapshot

NODE_LOSS_OUTCOME = "node_loss_outcome"
# The lost node's launcher wrapper records the kill when ft_launcher's exit reaches it: a second or so.
LOSS_RECORDED_WITHIN_S = 30.0
# After the rendezvous gave up: the survivors stopped their workers first (--workers-stop-timeout, 15 s by
# default), the store host waits 3 s for the others to read the final state, our launcher cleans up.
END_SLACK_S = 60.0
# What the recovery checks say without a spare node (their specs name node_loss_outcome in `waived_by`).
NO_RECOVERY = (
    "node_loss with no spare node: NVRx ends the job once the rendezvous cannot gather the nodes it needs, "
    "so there is no recovery to verify (node_loss_outcome judges the ending)"
)


def node_loss_outcome(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant (node_loss, no spare): the marker names the lost node and what was killed there; that node's
    record says its ft_launcher (the same pid) died by SIGKILL at the injection; a surviving node saw the
    loss (a worker failure or a section timeout after the injection); no rendezvous round formed after it;
    every survivor's launcher logged the rendezvous timing out after join_timeout and exited non-zero,
    within join_timeout + END_SLACK_S of the injection; every node of the run left its record."""
    cid = NODE_LOSS_OUTCOME
    if not exp.node_loss:
        return skip(cid, "no node_loss in this scenario")
    marker = snap.marker
    if not snap.ok("marker") or marker is None:
        return inconclusive(cid, snap.reason("marker") if not snap.ok("marker") else "no fault_injected.json")
    if not snap.ok("nodes"):
        return inconclusive(cid, snap.reason("nodes"))
    f = Findings(cid)
    node = marker.node or {}
    lost = node.get("host")
    if not isinstance(lost, str) or marker.injected_at is None:
        return inconclusive(cid, f"{marker.ref.path} names no lost node (`node.host`) or no injected_at")
    killed = node.get("processes") if isinstance(node.get("processes"), list) else []
    f.values.update(lost_host=lost, killed_processes=len(killed), join_timeout=exp.join_timeout_s)
    _lost_node(snap, f, lost, node.get("launcher_pid"))
    survivors = _survivors(snap, f, lost)
    if survivors:
        _detected(snap, f, survivors, formed_allowed=bool(exp.spare_nodes))
        if exp.spare_nodes:
            _went_on(snap, f, survivors, lost)
        else:
            _ended(snap, f, survivors, exp)
    return f.result()


def _readable(snap: RunSnapshot, f: Findings, hosts: list[str]) -> Iterator[tuple[str, NodeRecord]]:
    """Each host with its node record, in order; a record that could not be read is reported unknown and
    skipped."""
    for host in hosts:
        record = snap.nodes[host]
        if record.error:
            f.unknown(record.error, record.ref)
            continue
        yield host, record


def _lost_node(snap: RunSnapshot, f: Findings, lost: str, launcher_pid: object) -> None:
    marker = snap.marker
    record = snap.nodes.get(lost)
    if record is None:
        f.unknown(f"no nodes/{lost}.json: how the lost node's launcher ended is not recorded")
        return
    if record.error:
        f.unknown(record.error, record.ref)
        return
    if record.launcher_pid != launcher_pid:
        f.problem(
            f"the marker killed ft_launcher pid {launcher_pid} on {lost}, but nodes/{lost}.json records pid "
            f"{record.launcher_pid}",
            marker.ref,
            record.ref,
        )
    if record.signal != "SIGKILL":
        f.problem(f"{record.describe()}, not SIGKILL: the node was not lost", record.ref)
        return
    if record.finished_at is None:
        f.unknown(f"nodes/{lost}.json has no finished_at", record.ref)
        return
    after = (record.finished_at - marker.injected_at).total_seconds()
    f.values["lost_after_s"] = round(after, 3)
    if not 0 <= after <= LOSS_RECORDED_WITHIN_S:
        f.problem(
            f"{lost}'s ft_launcher ended {after:.1f} s from the injection, not at it "
            f"(within {LOSS_RECORDED_WITHIN_S:g} s)",
            record.ref,
        )
        return
    f.fact(
        f"{lost} lost: its ft_launcher (pid {launcher_pid}) killed by SIGKILL {after:.2f} s after the "
        "injection"
    )
    f.cite(marker.ref, record.ref)


def _survivors(snap: RunSnapshot, f: Findings, lost: str) -> list[str]:
    records = snap.nodes
    expected = snap.meta.nnodes
    if expected is not None and len(records) < expected:
        f.unknown(
            f"{len(records)} of {expected} nodes wrote nodes/<host>.json ({', '.join(sorted(records))})"
        )
    survivors = sorted(h for h in records if h != lost)
    if not survivors:
        f.unknown("no surviving node left a record: whether NVRx ended the job is unknown")
    f.values["survivors"] = survivors
    return survivors


def _detected(snap: RunSnapshot, f: Findings, survivors: list[str], formed_allowed: bool) -> None:
    marker = snap.marker
    if not snap.ok("launcher_log") or snap.launcher is None:
        f.unknown(snap.reason("launcher_log"))
        return
    log = snap.launcher
    seen = [
        (e.t, e.host, f"worker exit {e.exit_code} (local rank {e.local_rank})", e.ref)
        for e in log.exits
        if e.host in survivors and e.t is not None and e.t >= marker.injected_at
    ]
    seen += [
        (t.t, t.host, f"'{t.section or 'out of section'}' timeout", t.ref)
        for t in log.timeouts
        if t.host in survivors and t.t is not None and t.t >= marker.injected_at
    ]
    if not seen:
        f.missing_fact(
            "no surviving node saw a worker fail or a section time out after the loss", log.complete
        )
        return
    t, host, what, where = min(seen, key=lambda item: item[0])
    detected = (t - marker.injected_at).total_seconds()
    f.values.update(detected_on=host, detected_s=round(detected, 3))
    f.fact(f"{host} detected the loss {detected:.2f} s later ({what})", where)
    formed = [j for j in log.joins if j.t is not None and j.t > marker.injected_at]
    if formed and not formed_allowed:
        f.problem(
            f"a rendezvous round formed after the loss ({formed[0].host} joined as rank {formed[0].rank} in "
            f"a world of {formed[0].world_size}): without a spare node it cannot",
            formed[0].ref,
        )


def _went_on(snap: RunSnapshot, f: Findings, survivors: list[str], lost: str) -> None:
    """With a spare: a round after the loss gathered nnodes nodes, a standby (a node that had not joined
    before the loss) among them and the lost node not; every other node, the spare included, exited 0."""
    marker = snap.marker
    log = snap.launcher
    if log is None:
        return  # reported by _detected
    before = {j.host for j in log.joins if j.t is not None and j.t <= marker.injected_at}
    after = [j for j in log.joins if j.t is not None and j.t > marker.injected_at]
    nnodes = snap.meta.nnodes
    promoted = sorted({j.host for j in after} - before - {lost})
    if not after:
        f.missing_fact(
            "no rendezvous round formed after the loss: the spare was never promoted", log.complete
        )
    elif not promoted:
        f.problem(
            f"no spare node joined after {lost} was lost: the round had only earlier nodes", after[0].ref
        )
    else:
        join = next(j for j in after if j.host in promoted)
        f.values["promoted"] = promoted
        f.fact(
            f"{names(promoted)} (spare) promoted: joined as node rank {join.rank} in a world of "
            f"{join.world_size} after the loss",
            join.ref,
        )
        if nnodes is not None and join.world_size != nnodes:
            f.problem(
                f"the round after the loss has {join.world_size} node(s), run.json says {nnodes}", join.ref
            )
    if any(j.host == lost for j in after):
        f.problem(
            f"the lost node {lost} joined a round after the loss",
            next(j.ref for j in after if j.host == lost),
        )
    ended: dict[str, float] = {}
    for host, record in _readable(snap, f, survivors):
        if record.exit_code != 0:
            f.problem(f"{record.describe()}: with a spare node the job must go on and finish", record.ref)
            continue
        if record.finished_at is not None:
            ended[host] = round((record.finished_at - marker.injected_at).total_seconds(), 3)
        f.cite(record.ref)
    if ended and len(ended) == len(survivors):
        f.fact(f"every other node ({names(survivors)}) finished with exit 0")
    f.values["ended_s"] = ended


def _ended(snap: RunSnapshot, f: Findings, survivors: list[str], exp: RunPlan) -> None:
    marker = snap.marker
    log = snap.launcher
    limit = exp.join_timeout_s
    ended: dict[str, float] = {}
    for host, record in _readable(snap, f, survivors):
        if record.exit_code == 0:
            f.problem(f"{record.describe()}: the job went on without the lost node", record.ref)
            continue
        if record.exit_code is None or record.finished_at is None:
            f.unknown(f"nodes/{host}.json has no exit code or finished_at", record.ref)
            continue
        after = (record.finished_at - marker.injected_at).total_seconds()
        ended[host] = round(after, 3)
        if after > limit + END_SLACK_S:
            f.problem(
                f"{host} ended {after:.1f} s after the loss: later than join_timeout {limit} s + "
                f"{END_SLACK_S:g} s",
                record.ref,
            )
        if log is None:
            continue  # reported by _detected
        timeouts = [r for r in log.rendezvous_timeouts if r.host == host and r.t and r.t > marker.injected_at]
        if not timeouts:
            f.missing_fact(f"{host}'s launcher logged no rendezvous timeout after the loss", log.complete)
            continue
        first = timeouts[0]
        if abs(first.timeout_s - limit) > 0.5:
            f.problem(
                f"{host}'s rendezvous timed out after {first.timeout_s:g} s, not join_timeout {limit} s",
                first.ref,
            )
        f.values.setdefault("rendezvous_waited_s", first.waited_s)
        f.fact(
            f"{host}'s rendezvous timed out after {first.waited_s:g} s (join_timeout {limit} s); its "
            f"ft_launcher exited {record.exit_code} {after:.1f} s after the loss",
            first.ref,
            record.ref,
        )
    f.values["ended_s"] = ended


SPEC = CheckSpec(
    NODE_LOSS_OUTCOME,
    "a whole node's ft_launcher was killed; without a spare node every surviving node ended, non-zero, once"
    " its rendezvous had waited join_timeout; with one, the standby was promoted and training went on",
    plain(node_loss_outcome),
    carried=lambda i: i.exp.node_loss,  # only node_loss reports carry it
    waives=Waiver(NO_RECOVERY, lambda i, _: i.exp.job_ends),
)
