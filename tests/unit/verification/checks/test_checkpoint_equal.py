"""checkpoint_equal: the recovered run's checkpoint at M against the baseline's, from the kept digests."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from ftqual.launch.checkpoint_digest import SCHEMA, read_digests
from ftqual.verification.checks.checkpoint_equal import SPEC, checkpoint_equal, compare_groups
from ftqual.verification.checks.spec import CheckInputs

SETTINGS = {"workload": "smoke", "world_size": 2, "train_iters": 20}


def tensor(sha: str, max_abs: float = 1.0, norm: float = 2.0, dtype: str = "float32") -> dict:
    return {"sha256": sha * 64, "dtype": dtype, "shape": [4], "max_abs": max_abs, "norm": norm}


def groups(**changed: dict) -> dict:
    base = {
        "model": {"model.w": tensor("a"), "model.b": tensor("b")},
        "optimizer": {"optimizer.state.w.exp_avg": tensor("c")},
        "rng": {"rng": tensor("d", dtype="uint8")},
        "scheduler": {},
        "data_position": {"progress": tensor("e", dtype="int64")},
        "filler": {"smoke_payload.rank0": tensor("f")},
    }
    for group, tensors in changed.items():
        base[group] = {**base[group], **tensors}
    return base


def write_run(root: Path, name: str, docs: dict[int, dict | None], problem: str | None = None) -> Path:
    folder = root / name / "checkpoint_record" / "digests"
    folder.mkdir(parents=True)
    for iteration, doc_groups in docs.items():
        doc = {"schema": SCHEMA, "iteration": iteration, "format": "torch_dist", "readable": True}
        if doc_groups is None:
            doc.update(readable=False, problem="format not readable here: a reader error", groups={})
        else:
            doc["groups"] = doc_groups
        (folder / f"iter_{iteration:07d}.json").write_text(json.dumps(doc))
    index = {"schema": SCHEMA, "iterations": sorted(docs), "problem": problem}
    (folder / "index.json").write_text(json.dumps(index))
    return root / name


def snap(run: Path | None, restored: int | None = 5, workload: str = "smoke", replay: str | None = None):
    meta = SimpleNamespace(settings={**SETTINGS, "workload": workload}, workload=workload, replay=replay)
    marker = SimpleNamespace(checkpoint_iteration=restored)
    digests = read_digests(run / "checkpoint_record") if run is not None else None
    return SimpleNamespace(meta=meta, marker=marker, digests=digests)


EXP = SimpleNamespace(fault="optimizer_not_restored", replay_tolerance=1e-3)


def test_equal_checkpoints_pass_at_the_last_common_save_after_the_restore(tmp_path):
    ours = write_run(tmp_path, "kill", {5: groups(), 10: groups(), 20: groups()})
    base = write_run(tmp_path, "base", {5: groups(), 10: groups(), 15: groups(), 20: groups()})
    result = checkpoint_equal(snap(ours), EXP, snap(base))
    assert result.status == "pass", result.detail
    assert result.values["iteration"] == 20 and result.values["restored"] == 5
    assert "bitwise" in result.detail and "filler" not in result.values["groups"]


def test_the_first_difference_is_named_by_group_and_tensor(tmp_path):
    """Negative control: the optimizer's moments differ (a restore that loaded the weights only)."""
    moments = {"optimizer.state.w.exp_avg": tensor("9", max_abs=0.5)}
    ours = write_run(tmp_path, "fault", {20: groups(optimizer=moments, model={"model.w": tensor("8")})})
    base = write_run(tmp_path, "base", {20: groups()})
    result = checkpoint_equal(snap(ours), EXP, snap(base))
    assert result.status == "fail"
    assert "first in group optimizer, tensor optimizer.state.w.exp_avg" in result.detail  # its cause first
    assert result.values["first_difference"]["group"] == "optimizer"
    assert result.values["groups"]["optimizer"]["differing"] == 1
    assert result.values["groups"]["optimizer"]["relative_difference_at_least"] == 0.5


def test_the_rng_and_the_data_position_differ_bitwise_in_any_mode(tmp_path):
    ours = write_run(tmp_path, "fault", {20: groups(rng={"rng": tensor("7", dtype="uint8")})})
    base = write_run(tmp_path, "base", {20: groups()})
    tolerant = snap(ours, workload="megatron", replay="tolerance")
    result = checkpoint_equal(tolerant, EXP, snap(base, workload="megatron"))
    assert result.status == "fail" and "group rng, tensor rng" in result.detail


def test_the_note_says_whether_the_restored_checkpoint_already_differed(tmp_path):
    stale = groups(model={"model.w": tensor("8")})
    ours = write_run(tmp_path, "stale", {5: stale, 20: stale})
    base = write_run(tmp_path, "base", {5: groups(), 20: groups()})
    result = checkpoint_equal(snap(ours), EXP, snap(base))
    assert result.status == "fail" and result.values["restored_differs"]["key"] == "model.w"
    assert "restored checkpoint 5 already differed" in result.notes[0]
    lost = write_run(tmp_path, "lost", {5: groups(), 20: stale})
    result = checkpoint_equal(snap(lost), EXP, snap(base))
    assert result.values["restored_differs"] is None and "the restore lost" in result.notes[0]


def test_a_key_one_side_lacks_is_a_difference(tmp_path):
    ours = write_run(tmp_path, "fault", {20: groups(optimizer={"optimizer.state.extra": tensor("1")})})
    base = write_run(tmp_path, "base", {20: groups()})
    result = checkpoint_equal(snap(ours), EXP, snap(base))
    assert result.status == "fail" and "not in the baseline's checkpoint" in result.detail


def test_outside_exact_mode_a_model_difference_within_the_tolerance_passes_with_its_bound(tmp_path):
    close = {"model.w": tensor("8", max_abs=1.0 + 1e-5, norm=2.0)}
    ours = write_run(tmp_path, "fault", {20: groups(model=close)})
    base = write_run(tmp_path, "base", {20: groups()})
    tolerant = snap(ours, workload="megatron", replay="tolerance")
    result = checkpoint_equal(tolerant, EXP, snap(base, workload="megatron"))
    assert result.status == "pass" and "not ruled out" in result.detail
    far = write_run(tmp_path, "far", {20: groups(model={"model.w": tensor("8", max_abs=2.0)})})
    assert (
        checkpoint_equal(snap(far, workload="megatron"), EXP, snap(base, workload="megatron")).status
        == "fail"
    )


def test_what_cannot_be_compared_is_inconclusive_never_pass(tmp_path):
    ours = write_run(tmp_path, "fault", {5: groups(), 20: groups()})
    base = write_run(tmp_path, "base", {5: groups(), 20: groups()})
    assert checkpoint_equal(snap(ours), EXP, None).status == "inconclusive"  # no baseline
    assert checkpoint_equal(snap(None), EXP, snap(base)).status == "inconclusive"  # no digests
    assert (
        checkpoint_equal(snap(ours, restored=20), EXP, snap(base)).status == "inconclusive"
    )  # no save after
    unreadable = write_run(tmp_path, "unreadable", {5: groups(), 20: None})
    result = checkpoint_equal(snap(unreadable), EXP, snap(base))
    assert result.status == "inconclusive" and "format not readable here" in result.detail
    broken = write_run(tmp_path, "broken", {}, problem="the digest subprocess failed: no torch")
    assert checkpoint_equal(snap(broken), EXP, snap(base)).status == "inconclusive"
    other = snap(base)
    other.meta.settings = {**SETTINGS, "train_iters": 30}
    assert checkpoint_equal(snap(ours), EXP, other).status == "inconclusive"


def test_the_baseline_and_a_campaign_say_skip(tmp_path):
    base = write_run(tmp_path, "base", {20: groups()})
    for fault in ("none", "campaign"):
        exp = SimpleNamespace(fault=fault, replay_tolerance=1e-3)
        assert checkpoint_equal(snap(base), exp, snap(base)).status == "skip"


def test_groups_compare_in_order_and_the_filler_never():
    found, summary = compare_groups(groups(filler={"smoke_payload.rank0": tensor("0")}), groups())
    assert found == [] and set(summary) == {"model", "optimizer", "rng", "data_position"}


def test_other_faults_carry_it_only_with_digests_on_both_sides_and_the_same_settings(tmp_path):
    ours = write_run(tmp_path, "kill", {20: groups()})
    base = write_run(tmp_path, "base", {20: groups()})
    kill = SimpleNamespace(fault="kill", replay_tolerance=1e-3)

    def carried(run, baseline, exp=kill) -> bool:
        return SPEC.carried(CheckInputs(snap=run, exp=exp, baseline=baseline))

    assert carried(snap(ours), snap(base))
    assert not carried(snap(ours), None) and not carried(snap(None), snap(base))  # older runs: as before
    longer = snap(base)
    longer.meta.settings = {**SETTINGS, "train_iters": 30}  # a resume of the baseline's checkpoint
    assert not carried(snap(ours), longer)
    assert carried(snap(None), None, EXP)  # an exactness fault's report always carries it
    assert not carried(snap(ours), snap(base), SimpleNamespace(fault="campaign", replay_tolerance=1e-3))
