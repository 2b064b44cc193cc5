"""A team's launch script taken whole on one H100 (tests/data/megatron-h100-team-job-1gpu and -1gpu-proof,
tools/gpu/team_job.sh): 8 accumulation steps, an evaluation of 4 steps every 5 iterations. What the machine
decided and what ftqual decides now from the same evidence, the batch, evaluation and replaced flags the runs
recorded, and the proof of the recommendation the first call wrote (tools/gpu/team-job-recommended.yaml)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ftqual.verification.schema import judged
from ftqual.verification.verify import build_report

REPO = Path(__file__).resolve().parents[4]
DATA = REPO / "tests" / "data"
FIRST = DATA / "megatron-h100-team-job-1gpu"
PROOF = DATA / "megatron-h100-team-job-1gpu-proof"
RUNS = {  # run -> (fixture, its baseline)
    "baseline-20261206T164256Z-707-a1": (FIRST, None),
    "kill-20261206T164353Z-1077-a1": (FIRST, "baseline-20261206T164256Z-707-a1"),
    "baseline-20261206T164542Z-1904-a1": (PROOF, None),
    "hang-20261206T164642Z-2254-a1": (PROOF, "baseline-20261206T164542Z-1904-a1"),
}


def verify(run_id: str) -> dict:
    fixture, baseline = RUNS[run_id]
    return build_report(fixture / "runs" / run_id, fixture / "runs" / baseline if baseline else None)


def run_json(run_id: str) -> dict:
    return json.loads((RUNS[run_id][0] / "runs" / run_id / "run.json").read_text())


@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_every_run_passes_now_as_it_did_on_the_machine(run_id):
    report = verify(run_id)
    assert judged(report).raw == "pass", [c for c in report["checks"] if c["status"] == "fail"]
    scenario = run_id.split("-")[0]
    recorded = [
        json.loads(p.read_text())
        for p in (RUNS[run_id][0] / "results" / scenario).glob("*/verify.json")
        if json.loads(p.read_text())["run_id"] == run_id
    ]
    assert [judged(r).raw for r in recorded] == ["pass"]


@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_the_team_script_ran_with_its_batch_and_evaluation_and_five_flags_replaced(run_id):
    run = run_json(run_id)
    assert run["batch"] == {
        "world_size": 1,
        "data_parallel_size": 1,
        "micro_batch_size": 2,
        "global_batch_size": 16,
        "accumulation_steps": 8,
    }
    assert run["evaluation"] == {"interval": 5, "iters": 4}
    replaced = {(r["flag"], r["where"]) for r in run["job"]["replaced"]}
    assert replaced == {
        ("--train-iters", "tools/gpu/team_train_gpt.sh:37"),
        ("--log-interval", "tools/gpu/team_train_gpt.sh:56"),
        ("--save-interval", "tools/gpu/team_train_gpt.sh:57"),
        ("--save", "tools/gpu/team_train_gpt.sh:59"),
        ("--load", "tools/gpu/team_train_gpt.sh:60"),
    }


def test_every_evaluation_of_the_baseline_is_read_with_its_steps():
    """Six in the train loop (every 5 of 30 iterations) and pretrain()'s two after training, 4 steps each,
    every eval step inside a `step` section; the longest eval step is shorter than the longest training step,
    which the recommendation is made from."""
    evaluation = verify("baseline-20261206T164256Z-707-a1")["sections"]["evaluation"]
    spans = [(e["iteration"], e["on"], e["steps"]) for e in evaluation["evaluations"]]
    assert spans == [(i, None, 4) for i in (5, 10, 15, 20, 25, 30)] + [(30, "validation", 4), (30, "test", 4)]
    assert evaluation["in_step_sections"] is True
    assert evaluation["longest_step"]["s"] == pytest.approx(0.224)
    assert (
        evaluation["longest_step"]["s"]
        < verify("baseline-20261206T164256Z-707-a1")["sections"]["overall"]["step"]["s"]
    )


def test_the_proof_ran_under_the_committed_recommendation_and_caught_the_hang_within_it():
    committed = yaml.safe_load((REPO / "tools" / "gpu" / "team-job-recommended.yaml").read_text())
    run = run_json("hang-20261206T164642Z-2254-a1")
    assert (
        run["timeouts"]
        == committed["timeouts"]
        == {
            "setup": 300,
            "step": 60,
            "checkpointing": 120,
            "out_of_section": 120,
        }
    )
    assert run["timeouts_source"] == "recommended"
    assert committed["timeouts_for"]["job"] == run["job"]["digest"]
    report = verify("hang-20261206T164642Z-2254-a1")
    checks = {c["id"]: c["status"] for c in report["checks"]}
    assert checks["detected_within_timeout"] == "pass"
    assert report["metrics"]["detected_by"] == "section:step"
    assert 60 <= report["metrics"]["detection_s"] <= 65  # the step timeout + the rank monitor's 5 s
