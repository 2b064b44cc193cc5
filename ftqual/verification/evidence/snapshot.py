"""Build one immutable RunSnapshot from a run directory: every source parsed once, each with its status.

A source that cannot be read is recorded as missing (with the reason) and its facts are None; checks that
need it report "inconclusive". Only an unusable run.json stops the build (RunMetaError): without it nothing
is known about what was expected.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

from ftqual.contract import family_of
from ftqual.launch.checkpoint_digest import Digests, read_digests
from ftqual.launch.checkpoint_record import record_path
from ftqual.scenario import campaign_plan
from ftqual.scenario.campaign_plan import CampaignPlan, PlannedFault
from ftqual.verification.evidence.checkpoints import Checkpoints, read_checkpoints
from ftqual.verification.evidence.clock import Clock, clock_from_meta
from ftqual.verification.evidence.cycles import CycleInfos, read_cycle_infos
from ftqual.verification.evidence.dumps import StackDumps, read_dumps
from ftqual.verification.evidence.launcher_log import LauncherLog, read_launcher_log
from ftqual.verification.evidence.leftovers import Leftovers, read_leftovers
from ftqual.verification.evidence.model import SourceStatus, missing
from ftqual.verification.evidence.nodes import NodeRecord, read_nodes
from ftqual.verification.evidence.run_meta import (
    FaultMarker,
    RunMeta,
    RunMetaError,
    read_markers,
    read_run_meta,
)
from ftqual.verification.evidence.safeio import inside
from ftqual.verification.evidence.train_log import (
    TRAIN_LOG,
    Injection,
    IterationLine,
    TrainLog,
    parse_train_log,
)

LOGS = "logs"
# "leftovers" is a source only of runs whose run.json names `injections` (their launcher samples leftovers):
# an older run's report lists the sources it always did.
SOURCES = ("run_meta", "marker", "cycle_infos", "launcher_log", "train_logs", "checkpoints", "leftovers")
MAX_TRAIN_LOGS = 1000  # cycles: max_restarts is a handful


@dataclass(frozen=True)
class RunSnapshot:
    run_dir: Path
    meta: RunMeta
    clock: Clock
    marker: FaultMarker | None
    cycles: CycleInfos | None
    launcher: LauncherLog | None
    train_logs: tuple[TrainLog, ...]
    checkpoints: Checkpoints | None
    sources: Mapping[str, SourceStatus] = field(default_factory=dict)
    markers: tuple[FaultMarker, ...] = ()  # every marker in order of k; `marker` is the first (k = 1)
    leftovers: Leftovers | None = None
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)  # node_loss runs: nodes/<host>.json
    campaign: CampaignPlan | None = None  # campaign runs: campaign_plan.json
    dumps: StackDumps | None = None  # runs whose ranks had sentinels (run.json names stack_dump_tool)
    # checkpoint_record/digests/ (ftqual.launch.checkpoint_digest): None for a run recorded before digests
    digests: Digests | None = None

    def campaign_entry(self, number: int | None) -> PlannedFault | None:
        """The campaign plan's entry `number` (1-based), None outside the plan or without one."""
        if self.campaign is None or number is None or not 1 <= number <= self.campaign.count:
            return None
        entry = self.campaign.faults[number - 1]
        return entry if entry.index == number else None

    def ok(self, name: str) -> bool:
        status = self.sources.get(name)
        return status is not None and status.ok

    def reason(self, *names: str) -> str:
        """Why the named sources are missing, joined (for an inconclusive detail)."""
        out = [self.sources[n].reason for n in names if n in self.sources and not self.sources[n].ok]
        return "; ".join(out) or "evidence missing"

    def train_log(self, cycle: int) -> TrainLog | None:
        for log in self.train_logs:
            if log.cycle == cycle:
                return log
        return None

    @property
    def injections(self) -> tuple[Injection, ...]:
        return tuple(item for log in self.train_logs for item in log.injections)

    @property
    def iterations(self) -> Iterator[IterationLine]:
        """Every iteration line of every log, materialized one by one (small runs and tests only)."""
        return (item for log in self.train_logs for item in log.iterations)


def _read_train_logs(run_dir: Path, clock: Clock) -> tuple[tuple[TrainLog, ...], SourceStatus]:
    folder = run_dir / LOGS
    if not folder.is_dir():
        return (), missing("train_logs", f"{LOGS}/ is absent")
    if not inside(folder, run_dir):
        return (), missing("train_logs", f"{LOGS}/ resolves outside the run directory")
    try:
        names = os.listdir(folder)
    except OSError as exc:
        return (), missing("train_logs", f"{LOGS}/ cannot be listed: {exc.strerror or exc}")
    found = sorted((int(m[1]), name) for name in names if (m := TRAIN_LOG.fullmatch(name)) and len(m[1]) <= 9)
    if not found:
        return (), missing("train_logs", f"no {LOGS}/train_cycle<N>.log")
    if len(found) > MAX_TRAIN_LOGS:
        return (), missing("train_logs", f"{len(found)} train_cycle<N>.log files: not a real run")
    logs: list[TrainLog] = []
    for cycle, name in found:
        rel = f"{LOGS}/{name}"
        try:
            logs.append(parse_train_log(folder / name, rel, cycle, clock, run_dir))
        except OSError as exc:
            return (), missing("train_logs", f"{rel} unreadable: {exc}", rel)
    cut = [log.path for log in logs if not log.complete]
    reason = f"cut short (last line without newline): {', '.join(cut)}" if cut else ""
    status = SourceStatus(
        "train_logs", ok=True, complete=not cut, reason=reason, paths=tuple(log.path for log in logs)
    )
    return tuple(logs), status


def _cut_by_the_stop(
    signal: str, train_logs: tuple[TrainLog, ...], sources: dict[str, SourceStatus]
) -> tuple[tuple[TrainLog, ...], dict[str, SourceStatus]]:
    """A launcher stopped from outside (run.json `interrupted_by`) cut its last cycle's log and its own short:
    what they lack after the stop is unknown, never a fact that the run failed."""
    why = f"cut short by {signal}, which stopped the launcher from outside"
    if train_logs:
        train_logs = (*train_logs[:-1], dataclasses.replace(train_logs[-1], complete=False))
        status = sources["train_logs"]
        sources["train_logs"] = dataclasses.replace(
            status, complete=False, reason="; ".join(filter(None, (status.reason, why)))
        )
    status = sources["launcher_log"]
    if status.ok:
        sources["launcher_log"] = dataclasses.replace(
            status, complete=False, reason="; ".join(filter(None, (status.reason, why)))
        )
    return train_logs, sources


def build_snapshot(run_dir: Path) -> RunSnapshot:
    """Read every source of `run_dir`. Raises RunMetaError when run.json is absent or unusable."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunMetaError(f"{run_dir}: not a directory")
    run_dir = Path(os.path.realpath(run_dir))  # links inside are judged against where the run really lies
    meta = read_run_meta(run_dir)
    clock = clock_from_meta(meta.tz_offset_s)
    sources: dict[str, SourceStatus] = {"run_meta": SourceStatus("run_meta", ok=True, paths=("run.json",))}
    markers, sources["marker"] = read_markers(run_dir)
    marker = markers[0] if markers and markers[0].number == 1 else None
    cycles, sources["cycle_infos"] = read_cycle_infos(run_dir)
    year = (meta.started_at or datetime.now(UTC)).year
    launcher, sources["launcher_log"] = read_launcher_log(run_dir, clock, year)
    train_logs, sources["train_logs"] = _read_train_logs(run_dir, clock)
    checkpoints, sources["checkpoints"] = read_checkpoints(run_dir, meta.checkpoint_dir)
    if meta.interrupted_by:
        train_logs, sources = _cut_by_the_stop(meta.interrupted_by, train_logs, sources)
    leftovers = None
    if meta.leftovers_recorded:
        leftovers, sources["leftovers"] = read_leftovers(run_dir)
    dumps = None
    if meta.dumps_recorded:  # a source of runs whose ranks had sentinels only (older reports are unchanged)
        dumps, sources["stack_dumps"] = read_dumps(run_dir)
    nodes: dict[str, NodeRecord] = {}
    if family_of(meta.fault) == "node":  # a source of node runs only: other reports list what they always did
        nodes, sources["nodes"] = read_nodes(run_dir)
    campaign = None
    if family_of(meta.fault) == "campaign":  # a source of campaign runs only
        try:
            campaign = campaign_plan.read(run_dir)
            sources["campaign_plan"] = SourceStatus(
                "campaign_plan", ok=True, paths=(campaign_plan.PLAN_JSON,)
            )
        except campaign_plan.PlanError as exc:
            sources["campaign_plan"] = missing("campaign_plan", str(exc), campaign_plan.PLAN_JSON)
    # read only where the record holds them: older reports list the sources they always did
    digests = read_digests(record_path(run_dir))
    if digests is not None:
        sources["checkpoint_digests"] = (
            SourceStatus("checkpoint_digests", ok=True, paths=("checkpoint_record/digests/index.json",))
            if digests.problem is None
            else missing("checkpoint_digests", digests.problem, "checkpoint_record/digests/index.json")
        )
    return RunSnapshot(
        run_dir=run_dir,
        meta=meta,
        clock=clock,
        marker=marker,
        cycles=cycles,
        launcher=launcher,
        train_logs=train_logs,
        checkpoints=checkpoints,
        sources=MappingProxyType(sources),
        markers=markers,
        leftovers=leftovers,
        nodes=MappingProxyType(nodes),
        campaign=campaign,
        digests=digests,
        dumps=dumps,
    )
