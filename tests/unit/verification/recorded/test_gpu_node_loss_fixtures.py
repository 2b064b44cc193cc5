"""node_loss on 2 x H200 with Megatron (tests/data/megatron-h200x2-node-loss, -node-spare): launchers as
nodes on one host (tools/gpu/node_loss_suite.sh). With NCCL the survivor's collective does not fail when
its peer vanishes, it waits: the loss is seen by the step timeout (30 s), not by a worker exit as on CPU
(gloo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftqual.verification.checks import waived_by
from ftqual.verification.verify import build_report, check_by_id

DATA = Path(__file__).resolve().parents[3] / "data"


@pytest.fixture(scope="module")
def no_spare() -> dict:
    return build_report(DATA / "megatron-h200x2-node-loss")


@pytest.fixture(scope="module")
def spare() -> dict:
    return build_report(DATA / "megatron-h200x2-node-spare")


def test_gpu_node_loss_without_a_spare_ends_after_the_join_timeout(no_spare):
    item = check_by_id(no_spare, "node_loss_outcome")
    assert no_spare["verdict"] == "pass" and item["status"] == "pass", item
    values = item["values"]
    assert (values["lost_host"], values["survivors"], values["join_timeout"]) == ("n2", ["n1"], 60)
    assert values["killed_processes"] > 1  # the node's workers' children went too (checkpoint worker, ...)
    assert 30 <= values["detected_s"] < 40 and "'step' timeout" in item["detail"]  # NCCL waits
    assert 60 <= values["rendezvous_waited_s"] < 61 and values["ended_s"]["n1"] < 60 + 30 + 60
    assert no_spare["metrics"]["detected_by"] == "section:step"
    carried = {c["id"] for c in no_spare["checks"]}  # exact_replay, checkpoint_equal: only where exact
    waived = [cid for cid in waived_by("node_loss_outcome") if cid in carried]
    assert {"resumed_from_checkpoint", "progress_after_resume"} <= set(waived)
    for cid in waived:
        assert check_by_id(no_spare, cid)["status"] == "skip"


def test_gpu_node_loss_with_a_spare_is_a_full_recovery(spare):
    item = check_by_id(spare, "node_loss_outcome")
    assert spare["verdict"] == "pass" and item["status"] == "pass", item
    values = item["values"]
    # NVRx chose n3 as the active second node and kept n2 as the standby; rank 1 (n3) was lost
    assert (values["lost_host"], values["promoted"], values["survivors"]) == ("n3", ["n2"], ["n1", "n2"])
    for cid in ("failure_detected_and_restarted", "resumed_from_checkpoint", "progress_after_resume",
                "clean_finish", "active_world_unchanged", "no_leftovers", "replay_consistency"):  # fmt: skip
        assert check_by_id(spare, cid)["status"] == "pass", cid
    metrics = spare["metrics"]
    assert metrics["restored_iteration"] == 5 and metrics["detected_by"] == "section:step"
    assert 0 < metrics["restart_s"] < 10 and 0 < metrics["failure_to_first_step_s"] < 120
