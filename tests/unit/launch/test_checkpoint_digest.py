"""The checkpoint digests: every saved iteration's tensors, grouped, hashed, kept in the record."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")

from ftqual.launch import checkpoint_digest as cd  # noqa: E402
from ftqual.launch import checkpoint_record  # noqa: E402


def save(folder: Path, weight: float = 1.0, consumed: int = 16) -> None:
    state = {
        "model": {"w": torch.full((4, 3), weight), "b": torch.arange(3, dtype=torch.float32)},
        "optimizer": {"state": {"w": {"exp_avg": torch.ones(4, 3) * 0.5}}, "param_groups": {"lr": 0.01}},
        "rng": {"torch": torch.ByteTensor(list(range(16)))},
        "progress": torch.tensor([5, consumed], dtype=torch.int64),
        "smoke_payload": {"rank0": torch.frombuffer(bytearray(b"x" * 64), dtype=torch.uint8)},
    }
    dcp.save(state, checkpoint_id=str(folder), no_dist=True)


def test_groups_name_the_smoke_and_megatron_keys():
    assert cd.group_of("model.hidden.weight") == "model"
    assert cd.group_of("decoder.layers.0.mlp.linear_fc1.weight") == "model"
    assert cd.group_of("optimizer.state.hidden.weight.exp_avg") == "optimizer"
    assert cd.group_of("rng_state") == "rng"
    assert cd.group_of("opt_param_scheduler") == "scheduler"
    assert cd.group_of("progress") == "data_position"
    assert cd.group_of("smoke_payload.rank0") == "filler"


def test_every_saved_iteration_is_digested_and_equal_states_hash_alike(tmp_path):
    ckpt = tmp_path / "checkpoints"
    save(ckpt / "iter_0000005")
    save(ckpt / "iter_0000010", weight=2.0)
    out = tmp_path / "digests"
    assert cd.digest_folder(ckpt, out) == 0
    index = json.loads((out / cd.INDEX).read_text())
    assert index["iterations"] == [5, 10] and index["problem"] is None
    five = json.loads((out / "iter_0000005.json").read_text())
    ten = json.loads((out / "iter_0000010.json").read_text())
    assert five["readable"] is True
    w5, w10 = five["groups"]["model"]["model.w"], ten["groups"]["model"]["model.w"]
    assert w5["dtype"] == "float32" and w5["shape"] == [4, 3] and w5["max_abs"] == 1.0
    assert w5["sha256"] != w10["sha256"] and w10["max_abs"] == 2.0
    assert (
        five["groups"]["optimizer"]["optimizer.state.w.exp_avg"]
        == ten["groups"]["optimizer"]["optimizer.state.w.exp_avg"]
    )
    assert "progress" in five["groups"]["data_position"] and "rng.torch" in five["groups"]["rng"]
    assert "optimizer.param_groups.lr" in five["groups"]["optimizer"]  # an object, hashed canonically


def test_a_checkpoint_this_environment_cannot_read_is_recorded_unreadable(tmp_path):
    ckpt = tmp_path / "checkpoints"
    (ckpt / "iter_0000005").mkdir(parents=True)
    (ckpt / "iter_0000005" / ".metadata").write_bytes(b"not a pickle")
    cd.digest_folder(ckpt, tmp_path / "digests")
    doc = json.loads((tmp_path / "digests" / "iter_0000005.json").read_text())
    assert doc["readable"] is False and doc["problem"].startswith("format not readable here")


def test_the_record_keeps_the_digests_and_they_outlive_the_checkpoints(tmp_path):
    run = tmp_path / "run"
    save(run / "checkpoints" / "iter_0000005")
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("5")
    assert checkpoint_record.write(run, "checkpoints") is not None
    import shutil

    shutil.rmtree(run / "checkpoints")
    digests = cd.read_digests(run / "checkpoint_record")
    assert digests is not None and digests.problem is None and digests.iterations == (5,)
    assert digests.at(5)["groups"]["model"]["model.b"]["shape"] == [3]


def test_no_digests_without_a_saved_iteration_and_none_for_an_older_record(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    checkpoint_record.write(run, "checkpoints")
    digests = cd.read_digests(run / "checkpoint_record")
    assert digests is not None and digests.iterations == () and digests.problem is None
    assert cd.read_digests(tmp_path / "nothing") is None


def test_a_failed_digest_subprocess_is_a_problem_never_digests(tmp_path, monkeypatch):
    ckpt = tmp_path / "checkpoints"
    save(ckpt / "iter_0000005")
    monkeypatch.setattr(cd.sys, "executable", "/bin/false")
    cd.write_digests(ckpt, tmp_path / "digests")
    digests = cd.read_digests(tmp_path)
    assert digests is not None and digests.iterations == () and "failed" in digests.problem


def test_a_large_runs_saves_are_digested_newest_and_restored_only(tmp_path, monkeypatch):
    ckpt = tmp_path / "checkpoints"
    for iteration in (5, 10, 15, 20):
        save(ckpt / f"iter_{iteration:07d}")
    saved = cd.saved_iterations(ckpt)
    assert [i for i, _ in cd.chosen(saved, frozenset({10}))] == [5, 10, 15, 20]  # small: every save
    monkeypatch.setattr(cd, "ALL_SAVES_BYTES", 1)
    assert [i for i, _ in cd.chosen(saved, frozenset({10}))] == [10, 20]


def test_the_markers_name_the_restored_checkpoint(tmp_path):
    (tmp_path / "fault_injected.json").write_text(json.dumps({"checkpoint_iteration": 5}))
    (tmp_path / "fault_injected.2.json").write_text(
        json.dumps({"checkpoint_iteration": 10, "save_iteration": 12})
    )
    (tmp_path / "fault_injected.3.json").write_text("not json")
    assert checkpoint_record.marker_iterations(tmp_path) == {5, 10, 12}
