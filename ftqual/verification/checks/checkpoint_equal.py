"""The checkpoint as proof: the recovered run's checkpoint at M equals the baseline's, tensor by tensor.

A restore that loses the optimizer's moments, the RNG, the scheduler's step or the data position, or a save
that writes old state under a new name, can stay inside a loss tolerance for many iterations; the checkpoint
cannot hide it. M is the last iteration both the recovered run and the baseline saved after the restore (the
checkpoint the fault followed, `marker.checkpoint_iteration`). Both runs' digests (checkpoint_record/digests/,
ftqual.launch.checkpoint_digest) are compared group by group (model, optimizer, rng, scheduler,
data_position; the smoke workload's random filler never): a key one side lacks, or a tensor whose dtype,
shape or sha256 differs, is a difference. The first is named from the group a difference starts in
(CAUSE_ORDER: data position, RNG, scheduler, optimizer, then the model, which all of them reach by M), and a
note says whether the restored checkpoint itself already differed (a save that wrote the wrong state) or
not (the restore lost it).

Exact (run.json's `replay` exact, or the smoke workload, which is deterministic on CPU): any difference
fails. Otherwise the model's and the optimizer's tensors may differ within the replay tolerance: the largest
relative difference per group is bounded from below by each tensor's max-abs value and L2 norm
(| max|a| - max|b| | <= max|a - b|, | ||a|| - ||b|| | <= ||a - b||, each over the larger of the two); the
check fails when that bound exceeds the tolerance, and says that a difference the statistics hide is not
ruled out. The RNG, the scheduler and the data position are compared bitwise in every mode.

It needs `--baseline` (inconclusive without), and a checkpoint whose format this environment could not read
when the run ended is inconclusive, never a pass. Carried by the reports of the faults whose registry entry
names it (the exactness faults), and of any other fault run whose record and baseline both hold digests and
whose settings are the baseline's.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftqual.contract import family_of
from ftqual.contract import fault as registry_entry
from ftqual.launch.checkpoint_digest import COMPARED_GROUPS, DIGESTS_DIR, digest_name
from ftqual.verification.checks.result import CheckResult, Findings, inconclusive, skip
from ftqual.verification.checks.run_plan import RunPlan
from ftqual.verification.checks.spec import NO_RECOVERY, CheckInputs, CheckSpec
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.snapshot import RunSnapshot

CHECK = "checkpoint_equal"
BITWISE_GROUPS = ("rng", "scheduler", "data_position")  # never a sum of floats: equal or wrong
# The group a difference is named in first: the one it starts from. Weights trained on from a lost data
# position, RNG, schedule or optimizer state all differ by M, so the model is the last place to look.
CAUSE_ORDER = ("data_position", "rng", "scheduler", "optimizer", "model")


@dataclass(frozen=True)
class Difference:
    group: str
    key: str
    what: str
    bound: float = 0.0  # the lower bound of the relative difference (0: unknown, or not a number)

    def said(self) -> str:
        return f"group {self.group}, tensor {self.key}: {self.what}"


def _relative(a: object, b: object) -> float:
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return 0.0
    scale = max(abs(a), abs(b))
    return abs(a - b) / scale if scale > 0 else 0.0


def compare_tensor(group: str, key: str, ours: dict, theirs: dict) -> Difference | None:
    if ours.get("sha256") == theirs.get("sha256") and ours.get("sha256") is not None:
        return None
    for field in ("dtype", "shape"):
        if ours.get(field) != theirs.get(field):
            return Difference(
                group, key, f"{field} {ours.get(field)} here, {theirs.get(field)} in the baseline"
            )
    bound = max(
        _relative(ours.get("max_abs"), theirs.get("max_abs")), _relative(ours.get("norm"), theirs.get("norm"))
    )
    said = f"sha256 {str(ours.get('sha256'))[:12]} here, {str(theirs.get('sha256'))[:12]} in the baseline"
    if bound > 0:
        said += f" (relative difference at least {bound:.3g})"
    return Difference(group, key, said, bound)


def compare_groups(ours: dict, theirs: dict) -> tuple[list[Difference], dict[str, dict]]:
    """Every difference, in GROUPS then key order, and per group: tensors, differing, the largest bound."""
    found: list[Difference] = []
    summary: dict[str, dict] = {}
    for group in COMPARED_GROUPS:
        mine, base = ours.get(group) or {}, theirs.get(group) or {}
        if not mine and not base:
            continue
        here: list[Difference] = []
        for key in sorted(set(mine) | set(base)):
            if key not in base:
                here.append(Difference(group, key, "saved here, not in the baseline's checkpoint"))
            elif key not in mine:
                here.append(Difference(group, key, "in the baseline's checkpoint, not saved here"))
            elif (diff := compare_tensor(group, key, mine[key], base[key])) is not None:
                here.append(diff)
        summary[group] = {
            "tensors": len(set(mine) | set(base)),
            "differing": len(here),
            "relative_difference_at_least": max((d.bound for d in here), default=0.0),
        }
        found.extend(here)
    return found, summary


def exact_mode(snap: RunSnapshot) -> bool:
    """Bitwise for every group: replay exact (run.json's `replay`), or the smoke workload (deterministic)."""
    return getattr(snap.meta, "replay", None) == "exact" or snap.meta.workload == "smoke"


def _doc(snap: RunSnapshot, iteration: int, who: str, f: Findings) -> dict | None:
    doc = snap.digests.at(iteration) if snap.digests is not None else None
    if doc is None:
        f.unknown(f"{who}'s digest of iteration {iteration} is missing or unreadable")
        return None
    if doc.get("readable") is not True or not isinstance(doc.get("groups"), dict):
        f.unknown(f"{who}'s checkpoint at iteration {iteration}: {doc.get('problem') or 'not readable'}")
        return None
    return doc


def checkpoint_equal(snap: RunSnapshot, exp: RunPlan, baseline: RunSnapshot | None) -> CheckResult:
    if family_of(exp.fault) in ("none", "campaign"):
        return skip(CHECK, "no single restore in this scenario: nothing to compare")
    if baseline is None:
        return inconclusive(CHECK, "needs --baseline: the checkpoint is compared with the baseline's")
    for who, run in (("this run", snap), ("the baseline", baseline)):
        if run.digests is None:
            return inconclusive(CHECK, f"{who} has no checkpoint digests (recorded before they were kept)")
        if run.digests.problem is not None:
            return inconclusive(CHECK, f"{who}'s checkpoint digests: {run.digests.problem}")
    if snap.meta.settings != baseline.meta.settings:
        return inconclusive(CHECK, "the baseline ran with other settings (run.json's trajectory keys differ)")
    if snap.marker is None or snap.marker.checkpoint_iteration is None:
        return inconclusive(CHECK, "no injection marker names the checkpoint the replacement restored")
    restored = snap.marker.checkpoint_iteration
    both = sorted(set(snap.digests.iterations) & set(baseline.digests.iterations))  # type: ignore[union-attr]
    after = [i for i in both if i > restored]
    if not after:
        return inconclusive(
            CHECK, f"no iteration after the restore at {restored} was saved by both this run and the baseline"
        )
    m = after[-1]
    f = Findings(CHECK)
    f.values.update(iteration=m, restored=restored)
    rel = f"checkpoint_record/{DIGESTS_DIR}/{digest_name(m)}"
    f.cite(Ref(rel))
    ours, theirs = _doc(snap, m, "this run", f), _doc(baseline, m, "the baseline", f)
    if ours is None or theirs is None:
        return f.result()
    found, summary = compare_groups(ours["groups"], theirs["groups"])
    f.values["groups"] = summary
    exact = exact_mode(snap)
    f.values["exact"] = exact
    failing = [d for d in found if exact or d.group in BITWISE_GROUPS or d.bound > exp.replay_tolerance]
    counts = ", ".join(f"{g} {s['differing']}/{s['tensors']}" for g, s in summary.items() if s["differing"])
    if failing:
        first = min(failing, key=lambda d: CAUSE_ORDER.index(d.group))  # stable: key order within a group
        f.values["first_difference"] = {"group": first.group, "key": first.key, "what": first.what}
        f.problem(
            f"the checkpoint at iteration {m} (the last both runs saved after the restore at {restored}) "
            f"differs from the baseline's{' bitwise' if exact else ''}: first in {first.said()}; "
            f"differing tensors: {counts}"
        )
        _restored_note(snap, baseline, restored, f)
        return f.result()
    tensors = sum(s["tensors"] for s in summary.values())
    if found:
        f.fact(
            f"the checkpoint at iteration {m} differs from the baseline's within the replay tolerance "
            f"{exp.replay_tolerance:g} as far as the statistics bound it (differing tensors: {counts}); a "
            "difference they hide is not ruled out: run with replay exact for a bitwise comparison"
        )
        return f.result()
    f.fact(
        f"the checkpoint at iteration {m} (the last both runs saved after the restore at {restored}) equals "
        f"the baseline's bitwise: {tensors} tensors in {', '.join(summary)}"
    )
    return f.result()


def _restored_note(snap: RunSnapshot, baseline: RunSnapshot, restored: int, f: Findings) -> None:
    """Where the difference began: whether the checkpoint the replacement restored already differed from the
    baseline's at that iteration (a save that wrote the wrong state) or was equal (the restore lost it)."""
    if restored not in (snap.digests.iterations if snap.digests else ()):
        return
    if restored not in (baseline.digests.iterations if baseline.digests else ()):
        return
    ours, theirs = snap.digests.at(restored), baseline.digests.at(restored)  # type: ignore[union-attr]
    if not ours or not theirs or not ours.get("readable") or not theirs.get("readable"):
        return
    found, _ = compare_groups(ours.get("groups") or {}, theirs.get("groups") or {})
    if found:
        first = min(found, key=lambda d: CAUSE_ORDER.index(d.group))
        f.values["restored_differs"] = {"group": first.group, "key": first.key}
        f.note(f"the restored checkpoint {restored} already differed from the baseline's: {first.said()}")
    else:
        f.values["restored_differs"] = None
        f.note(f"the restored checkpoint {restored} equals the baseline's: the restore lost what differs")


def _carried(inputs: CheckInputs) -> bool:
    """The faults whose entry names it; any other fault run whose record and baseline both hold digests and
    whose settings are the baseline's (older reports, runs verified without a baseline and runs longer than
    it, such as a resume of the baseline's checkpoint, keep the checks they listed)."""
    entry = registry_entry(inputs.exp.fault)
    if entry is None or not entry.injected or entry.family == "campaign":
        return False
    if CHECK in entry.checks:
        return True
    base, snap = inputs.baseline, inputs.snap
    if snap.digests is None or base is None or base.digests is None:
        return False
    return snap.meta.settings == base.meta.settings


SPEC = CheckSpec(
    CHECK,
    "the checkpoint the recovered run wrote at the last iteration both runs saved after the restore equals"
    " the baseline's, tensor by tensor (model, optimizer, RNG, scheduler, data position; bitwise in exact"
    " mode), from the digests kept in checkpoint_record/; the first difference is named",
    lambda inputs: checkpoint_equal(inputs.snap, inputs.exp, inputs.baseline),
    carried=_carried,
    waived_by=NO_RECOVERY,
)

__all__ = ["CHECK", "SPEC", "checkpoint_equal", "compare_groups"]
