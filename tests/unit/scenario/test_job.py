"""The job's own shape (ftqual/scenario/job.py): presets, the team's arguments (list and file), the flags
ftqual owns, and the estimates against hand-computed figures."""

from __future__ import annotations

import dataclasses

import pytest

from ftqual.scenario import job as J
from ftqual.scenario.job import MODEL
from ftqual.scenario.model import ConfigError, resolve


def test_tiny_is_the_default_and_today_s_walkthrough_gpt():
    job = J.resolve_job()
    assert job.model == "tiny"
    assert job.data == ("--mock-data", "--tokenizer-type=NullTokenizer")
    assert job.shape_args == J.TINY
    assert job.training == ("--lr=0.0001", "--lr-decay-style=constant", "--bf16")
    assert job.shape == dataclasses.replace(MODEL, max_position_embeddings=MODEL.seq_length)


def test_tiny_params_match_the_walkthrough_formula():
    # 12h^2 + 13h per layer, (1024 + EOD) padded to 1152 rows, 256 learned positions, final LayerNorm
    h = 512
    assert J.params(MODEL) == 4 * (12 * h * h + 13 * h) + 1152 * h + 256 * h + 2 * h
    assert J.checkpoint_bytes(MODEL) == J.params(MODEL) * 14  # ~190 MB, as recorded on H200


def test_1_3b_params_and_checkpoint_by_hand():
    shape = J.resolve_job("1.3b").shape
    h = 2048
    per_layer = 12 * h * h + 13 * h
    expected = 24 * per_layer + 50304 * h + 2048 * h + 2 * h
    assert J.params(shape) == expected == 1_315_819_520
    assert J.checkpoint_bytes(shape) == expected * 14  # 18.4 GB with the optimizer state
    assert 18e9 < J.checkpoint_bytes(shape) < 19e9


def test_8b_is_llama3_8b():
    shape = J.resolve_job("8b").shape
    h, kv, ffn = 4096, 1024, 14336
    per_layer = h * (h + 2 * kv) + h * h + h * 2 * ffn + ffn * h + 2 * h  # no biases, RMSNorm
    assert J.padded_vocab(shape) == 128256
    assert J.params(shape) == 32 * per_layer + 2 * 128256 * h + h == 8_030_261_248
    assert shape.parallelism_problem(8, 1) is None
    assert shape.parallelism_problem(16, 1) == "TP=16 must divide the model's 8 query groups"
    assert J.resolve_job("8b").shape.num_query_groups == 8


def test_125m_is_gpt3_small():
    assert 124e6 < J.params(J.resolve_job("125m").shape) < 126e6


def test_vocab_padding_follows_tp():
    shape = J.resolve_job("1.3b").shape
    assert J.padded_vocab(shape, 1) == 50304
    assert J.padded_vocab(shape, 2) == 50432  # a multiple of 256


def test_gpu_memory_by_hand_and_the_distributed_optimizer_shards_it():
    shape = J.resolve_job("1.3b").shape
    one = J.gpu_memory(shape, 1, 1, 1, False)
    n = J.params(shape)
    assert (one.weights, one.grads, one.optimizer) == (2 * n, 4 * n, 12 * n)
    sharded = J.gpu_memory(shape, 1, 1, 4, True)
    assert sharded.optimizer == 12 * n // 4 and sharded.total < one.total
    assert 30 * 2**30 < one.total < 60 * 2**30  # fits one H200's 139 GiB
    # Llama-3-8B with its 8192 tokens does not fit one H200 (the attention scores alone)
    assert J.gpu_memory(J.resolve_job("8b").shape, 1, 1, 1, True).total > 139 * 2**30


def test_team_arguments_replace_the_presets_and_their_data_replaces_the_mock_data():
    job = J.resolve_job("1.3b", ["--num-layers=16", "--data-path", "1.0", "/d/a_text_document", "--fp16"])
    assert job.model == "custom"
    assert job.shape.num_layers == 16
    assert "--mock-data" not in job.args and job.has_data
    assert job.data[-3:] == ("--data-path", "1.0", "/d/a_text_document")
    assert "--fp16" in job.args and "--bf16" not in job.args
    assert job.args.count("--num-layers=16") == 1 and "--num-layers=24" not in job.args


def test_team_arguments_that_keep_the_shape_keep_the_preset_name():
    job = J.resolve_job("1.3b", ["--seed=7", "--num-layers=24"])
    assert job.model == "1.3b"
    assert job.args[-1] == "--seed=7"
    assert J.shape_digest(job.shape, True, 2) == J.shape_digest(J.resolve_job("1.3b").shape, True, 2)


REPLACED_CASES = [
    ["--save", "/x"],
    ["--load=/x"],
    ["--save-interval", "3"],
    ["--train-iters=9"],
    ["--train-samples=9"],
    ["--enable-ft-package"],
    ["--ft-num-warmup-iters=3"],
    ["--calc-ft-timeouts"],
    ["--async-save"],
    ["--use-persistent-ckpt-worker"],
    ["--ckpt-format=torch_dist"],
    ["--no-load-optim"],
    ["--log-interval=10"],
    ["--exit-interval=5"],
    ["--save_interval=3"],  # Megatron reads underscores as dashes; so does ftqual
]


@pytest.mark.parametrize("args", REPLACED_CASES, ids=lambda a: a[0])
def test_each_flag_ftqual_controls_is_replaced_with_why(args):
    job = J.resolve_job("tiny", ["--seed=1", *args])
    assert not set(args) & set(job.args) and job.args[-1] == "--seed=1"
    (replaced,) = job.sorted.replaced
    assert replaced.given == " ".join(args) and replaced.why
    assert replaced.flag == args[0].split("=")[0].replace("_", "-")


TAKEN_CASES = [
    (["--tensor-model-parallel-size=2"], "tp", 2),
    (["--pipeline-model-parallel-size", "2"], "pp", 2),
    (["--global-batch-size=8"], "global_batch_size", 8),
    (["--micro-batch-size", "2"], "micro_batch_size", 2),
    (["--use-distributed-optimizer"], "dist_optimizer", True),
    (["--transformer-impl=local"], "transformer_impl", "local"),
    (["--eval-iters=5"], "eval_iters", 5),
    (["--eval-interval", "50"], "eval_interval", 50),
    (["--context-parallel-size=2"], "cp", 2),
]


@pytest.mark.parametrize(("args", "key", "value"), TAKEN_CASES, ids=lambda a: str(a))
def test_each_flag_that_defines_the_job_is_taken_from_it(args, key, value):
    job = J.resolve_job("tiny", ["--seed=1", *args])
    assert job.sorted.value(key) == value
    assert not set(args) & set(job.args)  # ftqual writes it once, from the settings


def test_the_jobs_batch_and_evaluation():
    job = J.resolve_job("tiny", ["--micro-batch-size=2", "--global-batch-size=16", "--eval-interval=4"])
    assert (job.micro_batch_size, job.global_batch_size(2), job.evaluation) == (2, 16, (4, 100))
    plain = J.resolve_job("tiny")
    assert (plain.micro_batch_size, plain.global_batch_size(3), plain.evaluation) == (1, 3, None)
    assert J.resolve_job("tiny", ["--eval-iters=0", "--eval-interval=5"]).evaluation is None


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--ckpt-format=torch"], "torch_dist checkpoints only"),
        (["--global-batch-size=6", "--micro-batch-size=4"], "not a multiple of"),
        (["--tensor-model-parallel-size=two"], "must be a positive integer"),
        (["--use-distributed-optimizer=1"], "takes no value"),
        (["--transformer-impl=magic"], "must be local or transformer_engine"),
    ],
)
def test_what_cannot_stand_is_refused_in_one_line(args, words):
    with pytest.raises(J.JobError, match=words) as err:
        J.resolve_job("tiny", ["--seed=1", *args])
    assert "\n" not in str(err.value)


def test_arguments_must_start_with_a_flag():
    with pytest.raises(J.JobError, match="before any flag"):
        J.resolve_job("tiny", ["python", "pretrain_gpt.py", "--seed=1"])


def test_config_megatron_args_and_file_reach_the_scenarios(tmp_path):
    cfg = resolve({"model": "125m", "megatron_args": ["--seed=3"]}, env={})
    assert {(s.model, s.megatron_args) for s in cfg.scenarios} == {("125m", ("--seed=3",))}
    path = tmp_path / "a.sh"
    path.write_text("--seed $SEED\n")
    cfg = resolve({"megatron_args_file": str(path)}, env={"SEED": "5"})
    assert cfg.by_name["kill"].megatron_args == ("--seed", "5")


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"megatron_args": ["--ckpt-format=torch"]}, r"megatron_args\[0\]: --ckpt-format torch"),
        ({"megatron_args": ["--seed=1"], "megatron_args_file": "/x"}, "not both"),
        ({"megatron_args_file": "/nonexistent/args.sh"}, "cannot be read"),
        ({"model": "1.3b", "tp": 3, "gpus_per_node": 3}, "TP=3 must divide the model's 16 attention heads"),
    ],
)
def test_bad_job_configs_are_one_config_error(config, words):
    with pytest.raises(ConfigError, match=words.replace("$", r"\$")):
        resolve(config, env={})


def test_tp_follows_the_jobs_shape():
    resolve({"model": "1.3b", "tp": 2, "gpus_per_node": 2}, env={})  # 16 heads take TP=2
    resolve({"tp": 2, "gpus_per_node": 2}, env={})  # tiny's 8 heads too
    with pytest.raises(ConfigError, match="must divide the model's 16 attention heads"):
        resolve({"model": "1.3b", "tp": 32, "gpus_per_node": 32}, env={})


def test_default_job_settings_keep_every_fingerprint():
    plain = resolve({}, env={})
    same = resolve({"model": "tiny", "megatron_args": [], "checkpoint_dir": ""}, env={})
    assert [plain.fingerprint(s) for s in plain.scenarios] == [same.fingerprint(s) for s in same.scenarios]
    other = resolve({"model": "125m"}, env={})
    assert plain.fingerprint(plain.scenarios[0]) != other.fingerprint(other.scenarios[0])


def test_checkpoint_dir_reaches_the_launcher_absolute(tmp_path):
    from ftqual.scenario import model as M

    cfg = resolve({"checkpoint_dir": str(tmp_path / "ckpt")}, env={})
    assert M.launcher_env(cfg, cfg.by_name["kill"])["NVRX_CHECKPOINT_ROOT"] == str(tmp_path / "ckpt")


def test_the_record_names_the_job_and_its_estimates():
    rec = J.record(J.resolve_job("1.3b"), 1, 1, 1, True)
    assert rec["model"] == "1.3b" and rec["params"] == 1_315_819_520
    assert rec["checkpoint_bytes_estimate"] == 1_315_819_520 * 14
    assert len(rec["digest"]) == 12 and "24 layers" in rec["describe"]
    assert rec["megatron_args"][:2] == ["--mock-data", "--tokenizer-type=NullTokenizer"]
    smoke = J.record(J.resolve_job("1.3b"), 1, 1, 1, True, workload="smoke")
    assert "not run" in smoke["describe"] and smoke["megatron_args"] == []
