"""The job's own shape: model presets, the team's Megatron arguments, and the estimates made from them.

The job's own shape: a model preset or the team's Megatron arguments, the flags ftqual owns, and the
estimates (parameters, checkpoint bytes, GPU memory) the preflight judges. Pure: no file is read here except
the one `read_args_file` is given, nothing is launched.

A job is the preset's arguments (`tiny`, the walkthrough's GPT, is the default: its command is today's) with
the team's arguments over them: a team flag replaces the preset's flag of the same name where it stood,
`--fp16` replaces `--bf16`, a data path (`--data-path`, ...) replaces `--mock-data`, and every other team flag
comes after the preset's. The team's arguments come whole: the flags that define the job (parallel layout,
batch, evaluation) are taken from them and the flags ftqual must control are replaced
(ftqual.scenario.team_args); what cannot stand is refused in one line here, before any GPU time: the
config's planning (`snakemake -n`, every problem with its file:line) and the launcher's NVRX_MEGATRON_ARGS
(exit 2). Megatron's own parser judges the whole list in the preflight (ftqual.preflight.megatron_args);
Megatron's parser refuses abbreviated flags (allow_abbrev=False): a name compared here is the name it reads.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ftqual.scenario import launch_script, team_args


@dataclass(frozen=True)
class ModelShape:
    """A GPT's shape as Megatron builds it; the defaults are the walkthrough's tiny GPT. PP must divide its
    layers, TP its attention heads and its query groups (ftqual.scenario.job reads a shape from the
    arguments and estimates its parameters, checkpoint and memory)."""

    num_layers: int = 4
    hidden_size: int = 512
    num_attention_heads: int = 8
    seq_length: int = 256
    vocab_size: int = 1024
    num_query_groups: int | None = None  # None: as many as heads (no GQA)
    ffn_hidden_size: int | None = None  # None: 4 x hidden
    max_position_embeddings: int | None = None  # None: seq_length
    swiglu: bool = False
    untied_embeddings: bool = False
    position_embedding: str = "learned_absolute"  # or rope (no position table)
    normalization: str = "LayerNorm"  # or RMSNorm (no bias)
    bias_linear: bool = True

    def parallelism_problem(self, tp: int, pp: int) -> str | None:
        """Why this TP/PP cannot split the model, or None."""
        if pp < 1 or self.num_layers % pp:
            return f"PP={pp} must divide the model's {self.num_layers} layers"
        if tp < 1 or self.num_attention_heads % tp:
            return f"TP={tp} must divide the model's {self.num_attention_heads} attention heads"
        groups = self.num_query_groups
        if groups is not None and groups % tp:
            return f"TP={tp} must divide the model's {groups} query groups"
        return None


MODEL = ModelShape()


class JobError(ValueError):
    """The job's arguments cannot be used; the message is one line saying what and how to fix it."""


# The walkthrough's GPT (MODEL above), in the order today's command carries it.
TINY = (
    f"--vocab-size={MODEL.vocab_size}",
    f"--num-layers={MODEL.num_layers}",
    f"--hidden-size={MODEL.hidden_size}",
    f"--num-attention-heads={MODEL.num_attention_heads}",
    f"--seq-length={MODEL.seq_length}",
    f"--max-position-embeddings={MODEL.seq_length}",
)
# GPT-3's shapes (Brown et al. 2020, table 2.1) with GPT-2's 50,257-token vocabulary: NullTokenizer adds the
# end-of-document token to --vocab-size, so 50256 gives 50,257 rows, padded to 50,304.
GPT3_125M = ("--vocab-size=50256", "--num-layers=12", "--hidden-size=768", "--num-attention-heads=12",
             "--seq-length=2048", "--max-position-embeddings=2048")  # fmt: skip
GPT3_1_3B = ("--vocab-size=50256", "--num-layers=24", "--hidden-size=2048", "--num-attention-heads=16",
             "--seq-length=2048", "--max-position-embeddings=2048")  # fmt: skip
# Llama-3-8B's shape: GQA (8 query groups), SwiGLU, RoPE (base 500000), RMSNorm, no linear biases, untied
# embeddings, 128,256 rows (127255 + the end-of-document token), sequence 8192. All of it runs with
# --transformer-impl local (no Transformer Engine), which the stack resolution adds.
LLAMA3_8B = ("--vocab-size=128255", "--num-layers=32", "--hidden-size=4096", "--ffn-hidden-size=14336",
             "--num-attention-heads=32", "--group-query-attention", "--num-query-groups=8",
             "--seq-length=8192", "--max-position-embeddings=8192", "--swiglu",
             "--position-embedding-type=rope", "--rotary-base=500000",
             "--untie-embeddings-and-output-weights", "--normalization=RMSNorm",
             "--disable-bias-linear")  # fmt: skip
PRESETS: dict[str, tuple[str, ...]] = {"tiny": TINY, "125m": GPT3_125M, "1.3b": GPT3_1_3B, "8b": LLAMA3_8B}
DEFAULT_MODEL = "tiny"
CUSTOM = "custom"  # the record's model when the team's arguments change the preset's shape

MOCK_DATA = ("--mock-data", "--tokenizer-type=NullTokenizer")
TRAINING = ("--lr=0.0001", "--lr-decay-style=constant", "--bf16")
# Flags whose values decide the model's shape (the digest, and whether the job is still its preset).
SHAPE_FLAGS = ("--vocab-size", "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads",
               "--group-query-attention", "--num-query-groups", "--seq-length", "--max-position-embeddings",
               "--swiglu", "--position-embedding-type", "--rotary-base",
               "--untie-embeddings-and-output-weights",
               "--normalization", "--disable-bias-linear", "--kv-channels", "--tokenizer-type",
               "--make-vocab-size-divisible-by", "--bf16", "--fp16", "--num-experts",
               )  # fmt: skip
# A team's data: any of these replaces --mock-data.
DATA_FLAGS = ("--data-path", "--train-data-path", "--valid-data-path", "--test-data-path", "--data-args-path",
              "--per-split-data-args-path", "--sft")  # fmt: skip
EXCLUSIVE = {"--fp16": "--bf16", "--bf16": "--fp16"}


def flag_name(token: str) -> str:
    """`--name=value` -> `--name`, underscores as dashes (the spelling compared, never the one passed)."""
    return token.split("=", 1)[0].replace("_", "-")


def is_flag(token: str) -> bool:
    """A flag, not a value (`-1` and `-0.5` are values)."""
    return token.startswith("-") and len(token) > 1 and not re.fullmatch(r"-[0-9.][0-9.e+-]*", token)


def groups(args: Sequence[str]) -> list[tuple[str, ...]]:
    """The arguments as flags with their values: `--data-path a b --seq-length=8` -> two groups."""
    out: list[list[str]] = []
    for token in args:
        if is_flag(token):
            out.append([token])
        elif not out:
            raise JobError(
                f"megatron_args must start with a flag, not {token!r}: give pretrain_gpt.py's arguments, "
                "without the launcher or the script"
            )
        else:
            out[-1].append(token)
    return [tuple(g) for g in out]


def read_args_file(path: str, env: Mapping[str, str]) -> launch_script.ScriptArgs:
    """The team's launch script or arguments file, each token with its file:line (ftqual.scenario.
    launch_script); JobError when it cannot be read at all."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read(1 << 20)
    except (OSError, UnicodeDecodeError) as exc:
        raise JobError(
            f"megatron_args_file {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})"
        ) from exc
    return launch_script.read_script(text, env, path)


# ------------------------------------------------------------------------------------------------ the job


@dataclass(frozen=True)
class Job:
    """The model, data and training arguments as they run, and the shape read from them."""

    model: str  # a preset's name, or "custom" where the team's arguments changed its shape
    data: tuple[str, ...]
    shape_args: tuple[str, ...]
    training: tuple[str, ...]
    team: tuple[str, ...]  # the team's arguments as given
    shape: ModelShape
    null_tokenizer: bool
    bytes_per_weight: int = 2  # bf16 or fp16; 4 for fp32
    sorted: team_args.Sorted = team_args.Sorted(())  # the team's flags: taken, replaced, kept

    @property
    def micro_batch_size(self) -> int:
        return int(self.sorted.value("micro_batch_size", 1))

    def global_batch_size(self, data_parallel: int) -> int:
        """The team's global batch; without one, a micro batch on each data-parallel rank."""
        return int(self.sorted.value("global_batch_size", self.micro_batch_size * data_parallel))

    @property
    def context_parallel(self) -> int:
        return int(self.sorted.value("cp", 1))

    @property
    def evaluation(self) -> tuple[int, int] | None:
        """(interval, iterations) where the team evaluates (Megatron's defaults 1000 and 100 fill in the one
        left out); None: no evaluation."""
        interval, iters = self.sorted.value("eval_interval"), self.sorted.value("eval_iters")
        if interval is None and iters is None:
            return None
        iters = 100 if iters is None else int(iters)
        return (1000 if interval is None else int(interval), iters) if iters > 0 else None

    @property
    def args(self) -> tuple[str, ...]:
        """run.json's `job.megatron_args`: the model, data and team arguments as they run."""
        return (*self.data, *self.shape_args, *self.training)

    @property
    def has_data(self) -> bool:
        return "--mock-data" not in self.data


def _merge(base: list[tuple[str, ...]], team: list[tuple[str, ...]]) -> tuple[list, list]:
    """Team groups replace base groups of the same name in place; the rest come back as leftovers."""
    names = [flag_name(g[0]) for g in base]
    out = list(base)
    rest = []
    for g in team:
        name = flag_name(g[0])
        if name in names:
            out[names.index(name)] = g
        else:
            rest.append(g)
    return out, rest


def _flat(gs: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(t for g in gs for t in g)


def resolve_job(model: str = DEFAULT_MODEL, team: Sequence[str] = (), where: tuple[str, ...] = ()) -> Job:
    """The preset `model` with the team's arguments over it; JobError: an unknown preset, an owned flag."""
    if model not in PRESETS:
        raise JobError(f"model must be one of {', '.join(PRESETS)} (got {model!r})")
    sorted_ = team_args.sort_args(launch_script.from_list(list(team), lines=where).tokens)
    if sorted_.problems:
        raise JobError(sorted_.problems[0])
    team_groups = groups(sorted_.kept)
    team_names = {flag_name(g[0]) for g in team_groups}
    data_base = [g for g in groups(MOCK_DATA) if not (team_names & set(DATA_FLAGS) and g[0] == "--mock-data")]
    train_base = [g for g in groups(TRAINING) if EXCLUSIVE.get(flag_name(g[0])) not in team_names]
    data, rest = _merge(data_base, team_groups)
    shape_groups, rest = _merge(list(groups(PRESETS[model])), rest)
    training, rest = _merge(train_base, rest)
    job_data = [g for g in rest if flag_name(g[0]) in DATA_FLAGS]
    others = [g for g in rest if flag_name(g[0]) not in DATA_FLAGS]
    all_args = _flat([*data, *job_data, *shape_groups, *training, *others])
    values = _values(all_args)
    shape = shape_from(values)
    changed = any(flag_name(g[0]) in SHAPE_FLAGS for g in team_groups) and shape_digest(
        shape_from(_values(_flat(groups(PRESETS[model])) + MOCK_DATA + TRAINING)), True, 2
    ) != shape_digest(shape, _null(values), _weight_bytes(values))
    return Job(
        model=CUSTOM if changed else model,
        data=_flat([*data, *job_data]),
        shape_args=_flat(shape_groups),
        training=_flat([*training, *others]),
        team=tuple(team),
        shape=shape,
        null_tokenizer=_null(values),
        bytes_per_weight=_weight_bytes(values),
        sorted=sorted_,
    )


def _values(args: Sequence[str]) -> dict[str, str | None]:
    """Each flag's last value (a store_true flag: None)."""
    out: dict[str, str | None] = {}
    for g in groups(args):
        name = flag_name(g[0])
        if "=" in g[0]:
            out[name] = g[0].split("=", 1)[1]
        else:
            out[name] = g[1] if len(g) > 1 else None
    return out


def _null(values: Mapping[str, str | None]) -> bool:
    return values.get("--tokenizer-type") == "NullTokenizer"


def _weight_bytes(values: Mapping[str, str | None]) -> int:
    return 2 if ("--bf16" in values or "--fp16" in values) else 4


def _int(values: Mapping[str, str | None], name: str, default: int | None) -> int | None:
    raw = values.get(name)
    if raw is None:
        return default
    if not re.fullmatch(r"[0-9]{1,9}", raw):
        raise JobError(f"megatron_args: {name} must be a positive integer (got {raw!r})")
    return int(raw)


def shape_from(values: Mapping[str, str | None]) -> ModelShape:
    """The shape Megatron builds from these arguments (its defaults where one is left out)."""
    need = {n: _int(values, n, None) for n in ("--num-layers", "--hidden-size", "--num-attention-heads",
                                               "--seq-length")}  # fmt: skip
    missing = [n for n, v in need.items() if not v]
    if missing:
        raise JobError(f"megatron_args: the model needs {', '.join(missing)} (a preset gives them: model)")
    seq = need["--seq-length"]
    groups_ = _int(values, "--num-query-groups", None) if "--group-query-attention" in values else None
    return ModelShape(
        num_layers=need["--num-layers"],
        hidden_size=need["--hidden-size"],
        num_attention_heads=need["--num-attention-heads"],
        seq_length=seq,
        vocab_size=_int(values, "--vocab-size", 0) or 0,
        num_query_groups=groups_,
        ffn_hidden_size=_int(values, "--ffn-hidden-size", None),
        max_position_embeddings=_int(values, "--max-position-embeddings", seq),
        swiglu="--swiglu" in values,
        untied_embeddings="--untie-embeddings-and-output-weights" in values,
        position_embedding=values.get("--position-embedding-type") or "learned_absolute",
        normalization=values.get("--normalization") or "LayerNorm",
        bias_linear="--disable-bias-linear" not in values,
    )


# ------------------------------------------------------------------------------------------------ estimates


def padded_vocab(shape: ModelShape, tp: int = 1, null_tokenizer: bool = True) -> int:
    """Megatron's embedding rows: the tokenizer's vocabulary (NullTokenizer adds the end-of-document token)
    padded to a multiple of 128 x TP (--make-vocab-size-divisible-by's default)."""
    vocab = shape.vocab_size + (1 if null_tokenizer else 0)
    pad = 128 * tp
    return -(-vocab // pad) * pad


def layer_params(shape: ModelShape) -> int:
    """One transformer layer: attention (QKV with GQA's smaller K and V, output projection), the MLP (SwiGLU's
    first projection is twice as wide), two norms (LayerNorm: weight and bias; RMSNorm: weight)."""
    h = shape.hidden_size
    kv = (shape.num_query_groups or shape.num_attention_heads) * (h // shape.num_attention_heads)
    ffn = shape.ffn_hidden_size or 4 * h
    bias = shape.bias_linear
    fc1 = ffn * (2 if shape.swiglu else 1)
    attention = h * (h + 2 * kv) + (h + 2 * kv if bias else 0) + h * h + (h if bias else 0)
    mlp = h * fc1 + (fc1 if bias else 0) + ffn * h + (h if bias else 0)
    return attention + mlp + 2 * norm_params(shape)


def norm_params(shape: ModelShape) -> int:
    return shape.hidden_size * (1 if shape.normalization == "RMSNorm" else 2)


def embedding_params(shape: ModelShape, tp: int = 1, null_tokenizer: bool = True) -> int:
    """Word embeddings (and the untied output layer), learned positions, the final norm."""
    h = shape.hidden_size
    words = padded_vocab(shape, tp, null_tokenizer) * h * (2 if shape.untied_embeddings else 1)
    positions = (shape.max_position_embeddings or shape.seq_length) * h
    return words + (positions if shape.position_embedding == "learned_absolute" else 0) + norm_params(shape)


def params(shape: ModelShape, tp: int = 1, null_tokenizer: bool = True) -> int:
    return shape.num_layers * layer_params(shape) + embedding_params(shape, tp, null_tokenizer)


# A checkpoint with its optimizer state, per parameter: the model's bf16 weights (2 B), the fp32 main
# parameters (4 B) and Adam's two fp32 moments (8 B). torch_dist's metadata and the RNG states are small.
CHECKPOINT_BYTES_PER_PARAM = 2 + 4 + 2 * 4
GIB = 2**30
# Per GPU, beyond the tensors counted: CUDA context, NCCL buffers, the allocator's fragmentation (estimate).
GPU_OVERHEAD_BYTES = 3 * GIB
GPU_OVERHEAD_FACTOR = 1.10


def checkpoint_bytes(shape: ModelShape, tp: int = 1, null_tokenizer: bool = True) -> int:
    """params x (2 bf16 weights + 4 fp32 main params + 8 two fp32 Adam moments) = params x 14 B."""
    return params(shape, tp, null_tokenizer) * CHECKPOINT_BYTES_PER_PARAM


def activation_bytes(shape: ModelShape, tp: int, micro_batch: int = 1, flash_attention: bool = False) -> int:
    """Activations kept for the backward pass on the first pipeline stage, no recomputation: Korthikanti et
    al. 2022 (bf16, per layer: s b h (10 + 24/t) + 5 a s^2 b / t), its MLP term scaled to the MLP's width,
    the attention scores' term only without flash attention (Megatron's local implementation materialises
    them), and the fp32 logits with their gradient. With 1F1B the first stage holds PP micro-batches of its
    layers/PP: the whole model's layers' worth. An estimate, within a factor of about 1.5."""
    s, b, h, a = shape.seq_length, micro_batch, shape.hidden_size, shape.num_attention_heads
    ffn = shape.ffn_hidden_size or 4 * h
    mlp = 3 + 4 * ffn * (2 if shape.swiglu else 1) / h  # 19 for a GELU MLP of 4h
    sharded = 11 + mlp - 6  # the sharded terms: 24 for a 4h GELU MLP
    per_layer = s * b * h * (10 + sharded / tp)
    if not flash_attention:
        per_layer += 5 * a * s * s * b / tp
    logits = 2 * s * b * padded_vocab(shape, tp) * 4 / tp
    return int(shape.num_layers * per_layer + logits)


@dataclass(frozen=True)
class Memory:
    weights: int
    grads: int
    optimizer: int
    activations: int

    @property
    def total(self) -> int:
        counted = self.weights + self.grads + self.optimizer + self.activations
        return int(counted * GPU_OVERHEAD_FACTOR) + GPU_OVERHEAD_BYTES


def gpu_memory(
    shape: ModelShape,
    tp: int,
    pp: int,
    dp: int,
    distributed_optimizer: bool,
    null_tokenizer: bool = True,
    flash_attention: bool = False,
    bytes_per_weight: int = 2,
    micro_batch: int = 1,
) -> Memory:
    """The busiest GPU's memory, an estimate: its parameters (the layers of one stage, all embeddings
    counted on it, split over TP) as bf16 weights, fp32 gradients (Megatron accumulates bf16 training's
    gradients in fp32) and the optimizer's 12 B a parameter (fp32 main parameter and two Adam moments;
    sharded over DP with the distributed optimizer), activations (activation_bytes, of the job's micro batch:
    accumulation runs its micro-batches one after another), x1.1 + 3 GiB."""
    on_gpu = (
        shape.num_layers * layer_params(shape) // pp + embedding_params(shape, tp, null_tokenizer)
    ) // tp
    optimizer = on_gpu * 12 // (dp if distributed_optimizer else 1)
    return Memory(
        weights=on_gpu * bytes_per_weight,
        grads=on_gpu * 4,
        optimizer=optimizer,
        activations=activation_bytes(shape, tp, micro_batch, flash_attention),
    )


def shape_digest(shape: ModelShape, null_tokenizer: bool, bytes_per_weight: int) -> str:
    data = {**shape.__dict__, "null_tokenizer": null_tokenizer, "bytes_per_weight": bytes_per_weight}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]


def human(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(int(n))


def describe(job: Job, tp: int = 1) -> str:
    s = job.shape
    n = params(s, tp, job.null_tokenizer)
    gqa = f" ({s.num_query_groups} query groups)" if s.num_query_groups else ""
    return (
        f"{job.model}: {s.num_layers} layers, hidden {s.hidden_size}, {s.num_attention_heads} heads{gqa}, "
        f"seq {s.seq_length}, {human(n)} params"
    )


def record(
    job: Job, tp: int, pp: int, dp: int, distributed_optimizer: bool, flash_attention: bool = False,
    workload: str = "megatron",
) -> dict:  # fmt: skip
    """run.json's `job` (an optional key: older run.json have none). The smoke workload runs no model: its
    record names the model the config asked for, with what it ran (nothing of it)."""
    n = params(job.shape, tp, job.null_tokenizer)
    memory = gpu_memory(
        job.shape,
        tp,
        pp,
        dp,
        distributed_optimizer,
        job.null_tokenizer,
        flash_attention,
        job.bytes_per_weight,
        job.micro_batch_size,
    )
    said = describe(job, tp)
    return {
        "model": job.model,
        "describe": said
        if workload == "megatron"
        else f"{said} (not run: the {workload} workload has no model)",
        "digest": shape_digest(job.shape, job.null_tokenizer, job.bytes_per_weight),
        "params": n,
        "checkpoint_bytes_estimate": n * CHECKPOINT_BYTES_PER_PARAM,
        "gpu_memory_bytes_estimate": memory.total,
        "megatron_args": list(job.args) if workload == "megatron" else [],
    }


# checkpoint_payloads `auto` (ftqual.launch.payloads) drops a run whose payloads total at least this: the
# walkthrough's GPT (4 layers, hidden 512) writes ~190 MB per checkpoint, ~1.1 GB per 30-iteration run, and
# the smoke workload KBs (or checkpoint_payload_mb x saves): they stay, as recorded. A ~125M model's
# checkpoint with its optimizer state is ~1.5-2 GB, an 8B one ~100 GB: every real job's run is dropped.
AUTO_DROP_BYTES = 2 << 30


def checkpoints_written(train_iters: int, save_interval: int, start_iteration: int = 0) -> int:
    """How many checkpoints a run writes and Megatron keeps: one every `save_interval` iterations after
    `start_iteration`, plus the final save at `train_iters` when it is not on the interval (Megatron saves on
    exit); a replayed iteration overwrites its folder, so faults add none."""
    if train_iters <= start_iteration:
        return 0
    periodic = train_iters // save_interval - start_iteration // save_interval
    return periodic + (1 if train_iters % save_interval else 0)


def peak_checkpoints(scenarios, mode: str = "auto", parallel: int = 1, large: bool = True) -> int:
    """The most checkpoints of the workflow's runs on the disk at once (multiply by one checkpoint's bytes
    for the disk estimate). `keep`: every run's, summed. `drop` (and `auto` when `large`, i.e. the job's
    checkpoints total at least AUTO_DROP_BYTES per run): only the runs in flight, at most `parallel` at once,
    the largest ones; plus the baseline's last checkpoint when a resume_from scenario copies it (kept) and
    each resumed run's seeded copy."""
    counts = []
    resumed = False
    for s in scenarios:
        start = 0
        if getattr(s, "resume_from", None):
            resumed = True
            source = next((o for o in scenarios if o.name == s.resume_from), None)
            start = source.train_iters if source is not None else 0
        counts.append(checkpoints_written(s.train_iters, s.save_interval, start) + (1 if start else 0))
    if not counts:
        return 0
    if mode == "keep" or (mode == "auto" and not large):
        return sum(counts)
    in_flight = sum(sorted(counts, reverse=True)[: max(1, parallel)])
    return in_flight + (1 if resumed else 0)


def args_from_env(raw: str) -> list[str]:
    """NVRX_MEGATRON_ARGS: the arguments shell-quoted into one value (shlex.join), read back."""
    try:
        return shlex.split(raw)
    except ValueError as exc:
        raise JobError(f"NVRX_MEGATRON_ARGS cannot be split into arguments ({exc})") from exc
