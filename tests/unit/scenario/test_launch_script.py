"""A team's launch script read as the team writes it (Megatron's example scripts: arrays, variables, a
torchrun line), each argument with its file:line, and the config's refusals: every problem at once."""

from __future__ import annotations

import pytest

from ftqual.scenario import launch_script as L
from ftqual.scenario import team_args as T
from ftqual.scenario.model import ConfigError, resolve

# Written like Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh, scaled down; never run.
SCRIPT_175B_STYLE = """\
#!/bin/bash

# Runs the "175B" parameter model, scaled to fit
export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=2
NUM_NODES=1
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))

CHECKPOINT_PATH=$1 #<Specify path>
TENSORBOARD_LOGS_PATH="$HOME/tb"

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
)

GPT_MODEL_ARGS=(
    --num-layers 8
    --hidden-size 256
    --num-attention-heads 8
    --seq-length 128
    --max-position-embeddings 128
    --attention-backend auto # Can use (flash/fused/unfused/local)
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 8
    --train-iters 500000
    --weight-decay 0.1
    --fp16
    --lr 6.0e-5
    --lr-decay-style cosine
)

MODEL_PARALLEL_ARGS=(
	--tensor-model-parallel-size 1
	--pipeline-model-parallel-size 1
)

EVAL_AND_LOGGING_ARGS=(
    --log-interval 100
    --save-interval 10000
    --eval-interval 1000
    --save $CHECKPOINT_PATH
    --load $CHECKPOINT_PATH
    --eval-iters 10
    --tensorboard-dir $TENSORBOARD_LOGS_PATH
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \\
    ${GPT_MODEL_ARGS[@]} \\
    ${TRAINING_ARGS[@]} \\
    ${MODEL_PARALLEL_ARGS[@]} \\
    ${EVAL_AND_LOGGING_ARGS[@]}
"""


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), start=1) if needle in line)


def test_a_script_like_megatrons_example_gives_its_arguments_each_with_its_line():
    read = L.read_script(SCRIPT_175B_STYLE, {"HOME": "/home/team"}, "train.sh")
    assert not read.problems
    texts = [t.text for t in read.tokens]
    assert texts[:2] == ["--num-layers", "8"] and "--tensorboard-dir" in texts
    assert texts[texts.index("--tensorboard-dir") + 1] == "/home/team/tb"
    assert "--attention-backend" in texts and "(flash/fused/unfused/local)" not in " ".join(texts)
    where = {t.text: t.where for t in read.tokens}
    assert where["--global-batch-size"] == f"train.sh:{line_of(SCRIPT_175B_STYLE, '--global-batch-size')}"
    assert [t.text for t in read.launcher] == ["torchrun", "--nproc_per_node", "2", "--nnodes", "1"]
    # $1 cannot be known; it only stands in flags that ftqual replaces
    save = next(t for t in read.tokens if t.text == "$CHECKPOINT_PATH")
    assert save.unresolved and "script's own arguments" in save.unresolved
    assert "train.sh:10" in save.unresolved


def test_the_script_sorted_takes_the_job_and_replaces_ftquals_flags():
    read = L.read_script(SCRIPT_175B_STYLE, {"HOME": "/h"}, "train.sh")
    sorted_ = T.sort_args(read.tokens)
    assert not sorted_.problems
    assert {k: v.value for k, v in sorted_.taken.items()} == {
        "micro_batch_size": 1, "global_batch_size": 8, "tp": 1, "pp": 1, "eval_interval": 1000,
        "eval_iters": 10,
    }  # fmt: skip
    assert [r.flag for r in sorted_.replaced] == [
        "--train-iters", "--log-interval", "--save-interval", "--save", "--load"
    ]  # fmt: skip
    assert "--fp16" in sorted_.kept and "--train-iters" not in sorted_.kept


def test_without_a_command_line_the_arrays_are_the_arguments_less_torchruns():
    text = "A=(--nproc_per_node 8 --nnodes 2)\nB=(--num-layers 4 --seed 3)\nC=(--lr 1e-4)\n"
    read = L.read_script(text, {}, "f")
    assert [t.text for t in read.tokens] == ["--num-layers", "4", "--seed", "3", "--lr", "1e-4"]
    assert [t.where for t in read.tokens][:1] == ["f:2"]


def test_a_plain_arguments_file_reads_as_before():
    text = '# args\n--num-layers 16 \\\n    --data-path "$DATA/corpus" \\\n    --tokenizer-type ${TOK}  # c\n'
    read = L.read_script(text, {"DATA": "/d", "TOK": "Hf"}, "args.sh")
    assert [(t.text, t.where) for t in read.tokens] == [
        ("--num-layers", "args.sh:2"), ("16", "args.sh:2"), ("--data-path", "args.sh:3"),
        ("/d/corpus", "args.sh:3"), ("--tokenizer-type", "args.sh:4"), ("Hf", "args.sh:4"),
    ]  # fmt: skip


def test_what_cannot_be_read_is_a_problem_with_its_line():
    assert "never closed" in L.read_script("A=(\n--seed 1\n", {}, "f").problems[0]
    assert "quotes" in L.read_script("--data-path 'unclosed\n", {}, "f").problems[0]
    assert "no arguments" in L.read_script("set -e\n", {}, "f").problems[0]
    unset = L.read_script("--tokenizer-type $TOK\n", {}, "f").tokens[1]
    assert unset.unresolved and "$TOK is not set" in unset.unresolved
    command = L.read_script("--seed $(date +%s)\n", {}, "f").tokens[1]
    assert "command substitution" in command.unresolved


def write(tmp_path, text: str):
    path = tmp_path / "train.sh"
    path.write_text(text)
    return str(path)


def test_the_config_takes_the_scripts_layout_and_runs_its_batch(tmp_path):
    cfg = resolve({"megatron_args_file": write(tmp_path, SCRIPT_175B_STYLE), "gpus_per_node": 2},
                  env={"HOME": "/h"})  # fmt: skip
    kill = cfg.by_name["kill"]
    assert "--global-batch-size" in kill.megatron_args  # the whole arguments travel to the launcher


def test_contradictions_are_refused_in_one_message_naming_every_line(tmp_path):
    bad = (
        SCRIPT_175B_STYLE.replace("--tensor-model-parallel-size 1", "--tensor-model-parallel-size 2")
        .replace("--weight-decay 0.1", "--weight-decay 0.1\n    --ckpt-format torch")
        .replace("--tensorboard-dir $TENSORBOARD_LOGS_PATH", "--tensorboard-dir $UNSET_DIR")
    )
    path = write(tmp_path, bad)
    with pytest.raises(ConfigError) as err:
        resolve({"megatron_args_file": path, "tp": 4, "gpus_per_node": 4}, env={"HOME": "/h"})
    lines = err.value.problems
    assert len(lines) >= 3, lines
    text = "\n".join(lines)
    contradiction = "--tensor-model-parallel-size 2 contradicts the config's tp: 4"
    for needle in ("--ckpt-format torch", "$UNSET_DIR", contradiction):
        hit = [line for line in lines if needle in line]
        assert hit, (needle, text)
        assert f"{path}:" in hit[0]  # each names its file:line
    # negative control: the same script as written is accepted
    good = write(tmp_path, SCRIPT_175B_STYLE)
    resolve({"megatron_args_file": good, "gpus_per_node": 2}, env={"HOME": "/h"})


def test_a_global_batch_the_world_cannot_split_names_its_line(tmp_path):
    text = "--global-batch-size 6\n--micro-batch-size 2\n"
    with pytest.raises(ConfigError) as err:
        resolve({"megatron_args_file": write(tmp_path, text), "gpus_per_node": 2}, env={})
    (line,) = err.value.problems  # one line, not one per scenario
    assert "train.sh:1: the global batch 6 is not divisible by micro batch 2 x data-parallel size 2" in line
