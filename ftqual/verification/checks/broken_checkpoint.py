"""A broken checkpoint met at restart: recovered or stopped loudly (`checkpoint_break_outcome`).

checkpoint_damage: the replacement met a checkpoint the fault rank broke before it died; the job must
recover from a complete checkpoint or stop loudly, never end in silence, restart from scratch or loop.

The wrapper (workloads/megatron_gpt_worker.py) breaks the checkpoint whose completion armed the kill, records
what it did in the marker's `damage`, then SIGKILLs its rank. What happens next is the stack's: Megatron-LM
core_v0.19.0 exits 0 on a tracker that is not a number (a silent end), trains from random without a tracker
(a restart from scratch), and raises on a missing directory or a truncated shard, which ft_launcher restarts
until NVRx's progress tracker (exit 93) or --max-restarts (exit 1) ends it; a shard whose tensor bytes
changed loads without an error unless --verify-integrity re-hashes it (then it raises like the others). The
check names which of these happened, with the cycles and GPU-seconds it cost, and a one-line mitigation
where one exists.

Pass: *recovered* (exit 0 at the last iteration, every replacement loaded a checkpoint that was whole: never
the damaged one where the damage broke its files, never none while one existed), or *stopped loudly*
(non-zero, within the bound: at most `loud_stop_bound` replacement cycles after the damage, the cycles NVRx
0.7.0 allows without progress by default, or fewer where --max-restarts is lower).
"""

from __future__ import annotations

from ftqual.rank.damage import DAMAGES_TO_FILES
from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import CheckSpec, Waiver, plain
from ftqual.verification.evidence import endings
from ftqual.verification.evidence.snapshot import RunSnapshot

CHECKPOINT_BREAK = "checkpoint_break_outcome"
# NVRx 0.7.0's --ft-max-no-progress-cycles default (ftqual leaves it so): after this many consecutive cycles
# without the tracker advancing, ft_launcher stops the job with exit 93.
NVRX_NO_PROGRESS_CYCLES = 3
# What the recovery checks say after a loud stop (their specs name this check in `waived_by`).
STOPPED_LOUDLY = (
    "the job stopped non-zero on the broken checkpoint, so there is no recovery to verify "
    "(checkpoint_break_outcome judges the ending)"
)
MITIGATIONS = {
    "silent_end": (
        "no core_v0.19.0 flag makes this exit non-zero: have the job script fail an exit 0 whose tracker "
        "(or last logged iteration) is short of train_iters"
    ),
    "restarted_from_scratch": (
        "--exit-on-missing-checkpoint stops instead of training from random (it exits 0 in core_v0.19.0: "
        "pair it with the job script's check of the tracker)"
    ),
    "kept_restarting": (
        "keep --ft-checkpoint-iteration-file on the tracker and NVRx's --ft-max-no-progress-cycles on "
        "(3 by default), or lower --max-restarts"
    ),
    "loaded_damaged": "--verify-integrity (torch_dist) re-hashes every file of a checkpoint on load",
}
# loaded_damaged while --verify-integrity was on: the stack's check itself missed the damage
UNCAUGHT_WITH_INTEGRITY = (
    "--verify-integrity was on and did not stop the load: report it to the stack's owners, and keep the job "
    "from trusting a checkpoint it cannot verify"
)


def loud_stop_bound(exp: RunPlan) -> int:
    """The replacement cycles a loud stop may take after the damage."""
    if exp.max_restarts is None:
        return NVRX_NO_PROGRESS_CYCLES
    return max(1, min(exp.max_restarts, NVRX_NO_PROGRESS_CYCLES))


def checkpoint_break_outcome(snap: RunSnapshot, exp: RunPlan) -> CheckResult:
    """Invariant (checkpoint_damage): the marker records the damage run.json asked for, made to the checkpoint
    whose completion armed the kill; then the job recovered (exit 0 at the last iteration, every replacement
    loaded a whole checkpoint) or stopped non-zero within `loud_stop_bound` replacement cycles. It fails on
    a silent end, a restart from scratch, a loop past the bound, or a load of the damaged files."""
    cid = CHECKPOINT_BREAK
    damage = snap.meta.checkpoint_damage
    if damage == "none":
        return skip(cid, "no checkpoint damage in this scenario")
    if not snap.ok("marker"):
        return inconclusive(cid, snap.reason("marker"))
    if snap.marker is None:
        return _no_damage(cid, damage, "no fault_injected.json: the kill, and so the damage, never came")
    if not snap.ok("train_logs"):
        return inconclusive(cid, snap.reason("train_logs"))
    return _judge(snap, exp)


def _no_damage(cid: str, damage: str, why: str) -> CheckResult:
    f = Findings(cid)
    f.values.update(damage=damage, outcome=None)
    f.problem(f"{why}: no replacement met a broken checkpoint ({damage})")
    return f.result()


def _judge(snap: RunSnapshot, exp: RunPlan | None) -> CheckResult:
    f = Findings(CHECKPOINT_BREAK)
    marker = snap.marker
    kind = snap.meta.checkpoint_damage
    record = marker.damage if marker is not None else None
    f.values.update(damage=kind)
    if marker is None or record is None:
        f.values["outcome"] = None
        where = marker.ref if marker is not None else None
        f.problem(f"the marker records no damage: no replacement met a broken checkpoint ({kind})", where)
        return f.result()
    f.cite(marker.ref)
    if record.get("kind") != kind:
        f.problem(
            f"the marker records damage {record.get('kind')!r}, run.json asked for {kind!r}", marker.ref
        )
    damaged = _int(record.get("iteration"))
    f.values.update(damaged_iteration=damaged, damage_record=dict(record))
    if damaged is not None and marker.checkpoint_iteration not in (None, damaged):
        f.problem(
            f"the damage hit iteration {damaged}, not the checkpoint {marker.checkpoint_iteration} that "
            "armed the kill",
            marker.ref,
        )
    after, code, burned = endings.after_the_fault(snap, marker.cycle)
    without_progress = burned.gpu_s if burned is not None else None
    f.values.update(exit_code=code, cycles_after_damage=len(after), gpu_s_without_progress=without_progress)
    if exp is not None:
        f.values["bound_cycles"] = loud_stop_bound(exp)
    found = _ending(snap, kind, damaged, after, code, burned)
    name, text, refs = found
    f.values["outcome"] = name
    if name in MITIGATIONS:
        f.values["mitigation"] = MITIGATIONS[name]
    if name == "loaded_damaged" and snap.meta.verify_integrity:
        f.values["mitigation"] = UNCAUGHT_WITH_INTEGRITY
    if name == "stopped_loudly" and exp is not None and len(after) > loud_stop_bound(exp):
        name = f.values["outcome"] = "kept_restarting"
        f.values["mitigation"] = MITIGATIONS[name]
        text = f"{text}: {len(after)} replacement cycles, more than the {loud_stop_bound(exp)} allowed"
    if name in ("recovered", "stopped_loudly"):
        f.fact(text, *refs)
    elif name is None:
        f.unknown(text, *refs)
    else:
        f.problem(f"{text} (mitigation: {f.values['mitigation']})", *refs)
    return f.result()


def _ending(snap, kind, damaged, after, code, burned) -> tuple[str | None, str, tuple]:
    """(outcome, what the logs show, refs) of the job once a replacement met the damage."""
    if (first := endings.first_ending(snap, f"after the {kind} damage")) is not None:
        return first
    if kind in DAMAGES_TO_FILES and damaged is not None:
        for log in after:
            if endings.restored_iteration(log) == damaged:
                done = log.loads_of("done")
                return (
                    "loaded_damaged",
                    f"cycle {log.cycle} loaded the damaged checkpoint {damaged} ({kind}) without an error",
                    (done[0].ref,) if done else (),
                )
    if not after:
        return None, "no replacement cycle ran after the damage", ()
    if code == 0:
        loaded = sorted({endings.restored_iteration(log) for log in after})
        return "recovered", f"recovered: exit 0 at the last iteration, replacements loaded {loaded}", ()
    if code is None:
        return None, "run.json records no exit code", (snap.meta.ref,)
    cost = f"; {burned.text}" if burned is not None else ""
    took = ""
    marker = snap.marker
    if marker is not None and marker.injected_at is not None and snap.meta.finished_at is not None:
        took = f", {(snap.meta.finished_at - marker.injected_at).total_seconds():.0f} s after the damage"
    text = f"stopped loudly: exit {code} after {len(after)} replacement cycle(s){took}{cost}"
    return "stopped_loudly", text, (snap.meta.ref,)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


SPEC = CheckSpec(
    "checkpoint_break_outcome",
    "the replacement met the checkpoint the fault rank broke, and the job recovered from a whole checkpoint"
    " or stopped non-zero within NVRx's bound: never a silent exit 0, a restart from scratch, a loop or a"
    " load of the damaged files",
    plain(checkpoint_break_outcome),
    # Only a damaged checkpoint's report carries it.
    carried=lambda i: i.snap.meta.checkpoint_damage != "none" and not i.campaign,
    # A loud stop (its pass) has no recovery to verify.
    waives=Waiver(STOPPED_LOUDLY, lambda _, r: r.values.get("outcome") == "stopped_loudly"),
)
