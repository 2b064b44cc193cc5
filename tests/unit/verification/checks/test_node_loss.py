"""node_loss_outcome on a recorded CPU Slurm run (tests/data/slurm-cpu-node-loss: two nodes, n2's whole
ft_launcher killed after checkpoint 5, no spare, join_timeout 30 s), and negative controls: each edit that
makes the run contradict NVRx's documented ending fails the check (or leaves it inconclusive where the
evidence is gone), never passes."""

from __future__ import annotations

import re
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from ftqual.verification.checks import waived_by
from ftqual.verification.verify import check_by_id
from tests.unit.verification.conftest import (
    RunEditor,  # by its package path: other folders have a conftest too
)

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "slurm-cpu-node-loss"
LOG = "logs/launcher.log"


@pytest.fixture
def run(tmp_path) -> RunEditor:
    shutil.copytree(FIXTURE, tmp_path / "run")
    return RunEditor(tmp_path / "run")


def outcome(verify, run) -> tuple[int, dict, dict]:
    code, report = verify(run)
    return code, report, check_by_id(report, "node_loss_outcome")


def shifted(stamp: str, seconds: float) -> str:
    t = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ") + timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_recorded_node_loss_passes_with_evidence_from_both_nodes(run, verify):
    code, report, item = outcome(verify, run)
    assert code == 0 and report["verdict"] == "pass", item
    assert item["status"] == "pass"
    values = item["values"]
    assert (values["lost_host"], values["survivors"], values["detected_on"]) == ("n2", ["n1"], "n1")
    assert values["join_timeout"] == 30 and 29 <= values["rendezvous_waited_s"] <= 31
    assert 0 <= values["lost_after_s"] < 5 and values["detected_s"] < 10
    assert 30 < values["ended_s"]["n1"] < 30 + 60
    cited = {ev["path"] for ev in item["evidence"]}
    assert {"fault_injected.json", "nodes/n1.json", "nodes/n2.json", LOG} <= cited
    carried = {c["id"] for c in report["checks"]}
    waived = [cid for cid in waived_by("node_loss_outcome") if cid in carried]
    assert {"resumed_from_checkpoint", "progress_after_resume"} <= set(waived)
    for cid in waived:
        assert check_by_id(report, cid)["status"] == "skip"
    assert check_by_id(report, "checkpoint_before_failure")["status"] == "pass"
    assert report["expected"]["outcome"] == "job_ends" and report["expected"]["cycles"] == 1


def test_lost_node_that_exited_on_its_own_fails(run, verify):
    run.set_json("nodes/n2.json", exit_code=0, signal=None)
    code, _, item = outcome(verify, run)
    assert code == 1 and item["status"] == "fail"
    assert "not SIGKILL: the node was not lost" in item["detail"]


def test_survivor_that_finished_cleanly_fails(run, verify):
    run.set_json("nodes/n1.json", exit_code=0)
    code, _, item = outcome(verify, run)
    assert code == 1 and "the job went on without the lost node" in item["detail"]


def test_survivor_ending_long_after_the_join_timeout_fails(run, verify):
    finished = run.json("nodes/n1.json")["finished_at"]
    run.set_json("nodes/n1.json", finished_at=shifted(finished, 600))
    code, _, item = outcome(verify, run)
    assert code == 1 and "later than join_timeout 30 s" in item["detail"]


def test_rendezvous_timeout_other_than_the_configured_one_fails(run, verify):
    run.set_json("run.json", join_timeout=300)
    code, _, item = outcome(verify, run)
    assert code == 1 and "timed out after 30 s, not join_timeout 300 s" in item["detail"]


def test_default_join_timeout_is_nvrx_s_600_seconds(run, verify):
    run.set_json("run.json", join_timeout=None)
    _, report, item = outcome(verify, run)
    assert item["status"] == "fail" and "not join_timeout 600 s" in item["detail"]
    assert report["expected"]["join_timeout"] == 600


def test_no_rendezvous_timeout_line_fails(run, verify):
    run.delete_lines(LOG, lambda line: "rendezvous has timed out" in line)
    code, _, item = outcome(verify, run)
    assert code == 1 and "logged no rendezvous timeout after the loss" in item["detail"]


def test_a_round_formed_after_the_loss_fails(run, verify):
    last = run.lines(LOG)[-1]
    stamp = re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", last)[0]
    run.append(
        LOG,
        [
            f"{stamp} [INFO] [n1] [workload:?(?) infra:0(0)] ft_rendezvous_barrier.py:2800 The node "
            f"'n1_1_0' has joined the rendezvous 'x' as rank 0 in a world of size 1."
        ],
    )
    code, _, item = outcome(verify, run)
    assert code == 1 and "a rendezvous round formed after the loss" in item["detail"]


def test_marker_naming_another_launcher_fails(run, verify):
    marker = run.json("fault_injected.json")
    run.set_json("fault_injected.json", node={**marker["node"], "launcher_pid": 1})
    code, _, item = outcome(verify, run)
    assert code == 1 and "the marker killed ft_launcher pid 1 on n2" in item["detail"]


def test_no_survivor_saw_the_loss_fails(run, verify):
    run.delete_lines(LOG, lambda line: "failed (exitcode:" in line)
    code, _, item = outcome(verify, run)
    assert code == 1 and "no surviving node saw a worker fail" in item["detail"]


def test_missing_node_records_are_inconclusive(run, verify):
    shutil.rmtree(run.path("nodes"))
    code, report, item = outcome(verify, run)
    assert code == 3 and item["status"] == "inconclusive" and "nodes/ is absent" in item["detail"]
    assert report["sources"]["nodes"]["ok"] is False


def test_a_node_without_its_record_is_inconclusive(run, verify):
    run.path("nodes/n1.json").unlink()
    code, _, item = outcome(verify, run)
    assert code == 3 and "1 of 2 nodes wrote nodes/<host>.json" in item["detail"]


def test_garbled_node_record_is_inconclusive_never_a_pass(run, verify):
    run.path("nodes/n1.json").write_text("{not json")
    code, _, item = outcome(verify, run)
    assert code == 3 and item["status"] == "inconclusive" and "nodes/n1.json unreadable" in item["detail"]


def test_other_faults_never_carry_the_check(kill_run, verify):
    _, report = verify(kill_run)
    assert "node_loss_outcome" not in {c["id"] for c in report["checks"]}
    assert "nodes" not in report["sources"]


# --- with a spare node: NVRx promotes the standby and training goes on ----------------------------------

SPARE = Path(__file__).resolve().parents[3] / "data" / "slurm-cpu-node-loss-spare"


@pytest.fixture
def spare_run(tmp_path) -> RunEditor:
    shutil.copytree(SPARE, tmp_path / "spare")
    return RunEditor(tmp_path / "spare")


def test_recorded_spare_promotion_passes_every_recovery_check(spare_run, verify):
    """Three nodes, --nnodes=2:3: n2 lost after checkpoint 5, n3 (the standby) promoted, training finished."""
    code, report, item = outcome(verify, spare_run)
    assert code == 0 and report["verdict"] == "pass", item
    values = item["values"]
    assert (values["lost_host"], values["promoted"], values["survivors"]) == ("n2", ["n3"], ["n1", "n3"])
    assert "n3 (spare) promoted" in item["detail"] and "finished with exit 0" in item["detail"]
    for cid in ("failure_detected_and_restarted", "resumed_from_checkpoint", "progress_after_resume",
                "clean_finish", "active_world_unchanged", "replay_consistency", "no_leftovers"):  # fmt: skip
        assert check_by_id(report, cid)["status"] == "pass", cid
    world = check_by_id(report, "active_world_unchanged")
    assert "n1 (node rank 0), n3 (node rank 1) in cycle 1" in world["detail"]
    assert "n3 (spare) took the place of the lost n2 from cycle 1" in world["detail"]
    assert report["expected"]["outcome"] == "spare_promoted" and report["expected"]["cycles"] == 2


def test_spare_that_never_joined_fails(spare_run, verify):
    spare_run.delete_lines(LOG, lambda line: "'n3_" in line and "has joined the rendezvous" in line)
    code, report, item = outcome(verify, spare_run)
    assert code == 1 and item["status"] == "fail", item
    assert "no spare node joined after n2 was lost" in item["detail"]
    assert check_by_id(report, "active_world_unchanged")["status"] != "pass"


def test_survivor_failing_after_the_promotion_fails(spare_run, verify):
    spare_run.set_json("nodes/n3.json", exit_code=1)
    code, _, item = outcome(verify, spare_run)
    assert code == 1 and "with a spare node the job must go on and finish" in item["detail"]


def test_lost_node_back_in_a_later_round_fails(spare_run, verify):
    spare_run.sub(LOG, r"The node 'n3_(\d+)_0' has joined", r"The node 'n2_\1_0' has joined")
    spare_run.sub(LOG, r"\[n3\] (\[workload:\S+ infra:\S+\] ft_rendezvous_barrier\.py:2804)", r"[n2] \1")
    code, _, item = outcome(verify, spare_run)
    assert code == 1 and "the lost node n2 joined a round after the loss" in item["detail"]


def test_a_spare_run_judged_as_one_without_spare_fails(spare_run, verify):
    """run.json says no spare: a round that formed after the loss contradicts it."""
    spare_run.set_json("run.json", spare_nodes=0)
    code, _, item = outcome(verify, spare_run)
    assert code == 1 and "a rendezvous round formed after the loss" in item["detail"]
