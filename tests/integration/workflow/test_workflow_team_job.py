"""The team's job as it will run, through Snakemake on CPU (real ft_launcher, smoke workload): a launch script
written like Megatron's GPT-3 175B example (arrays, variables, a torchrun line, ftqual's own flags in it) is
accepted whole; its batch (global 8 on 2 ranks: 4 accumulation steps) and its evaluation (every 4 iterations)
run as written; each flag ftqual replaced is listed with why in run.json and the report; the baseline and a
kill qualify, with the account and a recommendation that says what it covers of evaluation."""

from __future__ import annotations

import pytest

from tests.support.workflow import project_with, read_json, run_snakemake, write_yaml

SCRIPT = """\
#!/bin/bash
# the team's launch script, written like Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh
export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=2
CHECKPOINT_PATH=$1 #<Specify path>

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes 1
)

GPT_MODEL_ARGS=(
    --num-layers 4
    --hidden-size 256
    --num-attention-heads 8
    --seq-length 128
    --max-position-embeddings 128
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 8
    --train-iters 500000
    --lr 6.0e-5
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 100
    --save-interval 10000
    --eval-interval 4
    --eval-iters 2
    --save $CHECKPOINT_PATH
    --load $CHECKPOINT_PATH
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \\
    ${GPT_MODEL_ARGS[@]} \\
    ${TRAINING_ARGS[@]} \\
    ${EVAL_AND_LOGGING_ARGS[@]}
"""
CONFIG = {
    "megatron_args_file": "config/team_train.sh",
    "train_iters": 12,
    "save_interval": 3,
    "smoke": {"step_seconds": 0.05, "save_seconds": 0.0},
    "scale": {"gpus": 4096, "days": 30},
    "scenarios": {"baseline": {"fault": "none"}, "kill": {"fault": "kill", "rank": 1},
                  "hang": {"enabled": False}},
}  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    project = project_with(tmp_path_factory.mktemp("team_job") / "project", {})
    (project / "config" / "team_train.sh").write_text(SCRIPT)
    write_yaml(project / "config" / "team.yaml", CONFIG)
    proc = run_snakemake(
        project, "--profile", "profiles/local", "--configfile", "config/team.yaml", timeout=600
    )
    return project, proc


def run_json(project, scenario: str) -> dict:
    [attempt] = sorted((project / "results" / scenario).glob("*-*/attempt.json"))
    return read_json(attempt)


@pytest.mark.timeout(700)
def test_the_teams_job_qualifies_with_its_batch_and_evaluation(run):
    project, proc = run
    assert proc.returncode == 0, proc.stdout[-6000:]
    summary = read_json(project / "results" / "summary.json")
    assert summary["verdict"] == "pass", summary["headline"]
    # the progress line: elapsed and what is left, for the scenario and the workflow
    assert "left in this scenario, about" in proc.stdout and " in the workflow" in proc.stdout
    for scenario in ("baseline", "kill"):
        record = run_json(project, scenario)
        assert record["batch"] == {"world_size": 2, "data_parallel_size": 2, "micro_batch_size": 1,
                                   "global_batch_size": 8, "accumulation_steps": 4}  # fmt: skip
        assert record["evaluation"] == {"interval": 4, "iters": 2}
        command = record["command"]
        assert "--global-batch-size=8" in command and "--eval-interval=4" in command
        assert "--log-interval=1" in command and "--log-interval" not in " ".join(command).replace(
            "--log-interval=1", "")  # fmt: skip


@pytest.mark.timeout(700)
def test_each_replaced_flag_is_listed_with_why(run):
    project, proc = run
    assert proc.returncode == 0, proc.stdout[-6000:]
    replaced = run_json(project, "kill")["job"]["replaced"]
    by_flag = {r["flag"]: r for r in replaced}
    assert set(by_flag) == {"--train-iters", "--log-interval", "--save-interval", "--save", "--load"}
    save = by_flag["--save"]
    assert save["given"] == "--save $CHECKPOINT_PATH" and save["where"].endswith("team_train.sh:33")
    assert save["runs_as"].startswith("--save=") and save["why"]
    assert by_flag["--train-iters"]["runs_as"] == "--train-iters=12"
    md = (project / "results" / "summary.md").read_text()
    assert "The team's flags ftqual replaced" in md and "`--save $CHECKPOINT_PATH`" in md
    assert "Batch: global 8 = micro 1 x data-parallel 2 x 4 accumulation step(s)" in md
    assert "Evaluation: 2 step(s) every 4 iterations." in md


@pytest.mark.timeout(700)
def test_the_recommendation_covers_the_evaluation_that_ran(run):
    project, proc = run
    assert proc.returncode == 0, proc.stdout[-6000:]
    summary = read_json(project / "results" / "summary.json")
    evaluation = summary["timeouts"].get("evaluation")
    assert evaluation is not None, summary["timeouts"]
    assert evaluation.get("note"), evaluation
    assert "no evaluation ran" not in evaluation["note"]
    md = (project / "results" / "summary.md").read_text()
    assert f"**Evaluation**: {evaluation['note']}" in md


@pytest.mark.timeout(700)
def test_the_report_projects_the_job_at_the_configured_scale(run):
    """config `scale`: the At your scale section, from this qualification's own measurements."""
    project, proc = run
    assert proc.returncode == 0, proc.stdout[-6000:]
    at_scale = read_json(project / "results" / "summary.json")["at_scale"]
    assert not at_scale.get("problems"), at_scale.get("problems")
    assert at_scale["gpus"] == 4096 and 0 < at_scale["configured"]["goodput"] <= 1
    assert at_scale["best"]["goodput"] >= at_scale["configured"]["goodput"]
    assert at_scale["inputs"]["crash_detect"]["source"].startswith("summary.json")  # the kill measured it
    md = (project / "results" / "summary.md").read_text()
    assert "## At your scale" in md and "**4,096 GPUs for 30 days**" in md
    # one goodput answer: At your scale alone, its prior named and the others tabled; the smoke
    # workload ran here, which it says first
    assert "## Goodput projection" not in md and md.count("expected goodput") == 1
    assert at_scale["prior"] == "llama3" and "| **llama3** (in use) |" in md and "| rsc-1024 |" in md
    assert at_scale["smoke"] and "SMOKE WORKLOAD: NOT YOUR JOB" in md
    png = project / "results" / "plots" / "at_scale.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
