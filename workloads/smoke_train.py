#!/usr/bin/env python3
"""CPU stand-in for Megatron's pretrain_gpt.py: a tiny real training job that recovers like Megatron does.

torch + gloo (the environment ft_launcher sets), a tiny next-token model on deterministic synthetic data
(batch i is a function of i alone, so a replayed iteration sees the same data and, from the same restored
state, prints the same loss), gradients averaged with all-reduce, AdamW, real torch.distributed.checkpoint
saves of model + optimizer + iteration + consumed samples into <save>/iter_XXXXXXX/, and the tracker
written by rank 0 only after every rank finished the save. NVRx's RankMonitorClient is used the way
Megatron's ft_integration uses it (sections `setup`, `step`, `checkpointing`), and the lines verifiers
parse are printed in Megatron core_v0.19's exact formats: iteration lines from the last rank, the rest
from rank 0. Accepts Megatron-style arguments (unknown ones are ignored) plus --smoke-step-seconds and
--smoke-save-seconds, which slow steps and saves down so that faults land where tests want them,
--smoke-checkpoint-mb N: every save carries N MiB of random bytes in all, each rank its share, in its own
torch_dist shard (`iter_XXXXXXX/__<rank>_0.distcp`, fsync'd by torch's writer, by its background thread with
--async-save), and every load reads them back, so a checkpoint is as large, and takes as long, as a real one
of that size (Megatron's `save-checkpoint` and `load-checkpoint` timers are printed as core_v0.19 prints
them, from the last rank), and
--smoke-exit-linger-seconds S: a data worker process (non-daemonic, as a DataLoader's are) that takes S s to
finish once told to stop, so a rank that dies of an exception lingers S s while its interpreter joins the
worker at shutdown (what held a Megatron rank after its exception on one H200), while a rank that ends its
training stops it first and exits at once.

Batches and evaluation as Megatron core_v0.19's train loop has them. Each iteration runs G / (M x world)
micro-batches of --micro-batch-size M samples on every rank (forward and backward accumulated, one
optimizer step); a --global-batch-size G not divisible by M x world is refused with Megatron's assertion
message. Micro-batch j of iteration i on rank r holds global samples (i-1)*G + j*M*world + r*M and the M-1
after it (Megatron's pretraining sampler): a batch is still a function of its iteration alone.
--eval-iters E (0 by default here, Megatron's is 100: no evaluation unless asked) with --eval-interval I:
after the iteration line of every iteration N with N % I == 0, before N's save, E forward-only steps, each
inside NVRx's `step` section as ft_integration.on_eval_step_start/end open it (after --ft-num-warmup-iters
eval steps of that evaluation), Megatron's interval timer stopped (`elapsed time per iteration` leaves the
evaluation out); then the `evaluate` timer and the dashed block
(` validation loss at iteration N | lm loss value: ... | lm loss PPL: ... |`), from the last rank. At the
end of training, after the final save, the validation set's and the test set's evaluations, verbose as
Megatron's (`Evaluating on N samples`, `Evaluating iter k/E`, from rank 0). The evaluation after N reads
the validation samples from (N // I - 1) x E x G on (Megatron's consumed_valid_samples, restored with the
checkpoint): a replayed evaluation reads the same samples and prints the same loss.
--smoke-eval-step-seconds (default: a third of --smoke-step-seconds, a forward without the backward) paces
each eval step.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import signal
import sys
import time
from datetime import datetime
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

try:  # import ftqual: installed, or from the checkout the worker put on the path
    import ftqual.rank  # noqa: F401
except ImportError:  # `python workloads/smoke_train.py` in a checkout that is not installed
    sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
# the names the rank's wrapper and the verifier read on disk, never written again here
from ftqual.rank import exactness  # noqa: E402  (the exactness faults' save and restore hooks)
from ftqual.rank.save_phases import MEGATRON_METADATA  # noqa: E402
from ftqual.rank.tracker import TRACKER_NAME, iteration_dir_name  # noqa: E402

PARALLEL_TAG = "[ t 1/1, gtp_remat 1/1, p 1/1 ]"
# Megatron core_v0.19's dist_checkpointing/validation.py: the integrity manifest and how it is hashed
INTEGRITY_NAME = "integrity.json"
INTEGRITY_ALGORITHM = "sha256"
HASH_CHUNK_BYTES = 1 << 20
VOCAB, SEQ, HIDDEN = 64, 16, 32


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="smoke_train.py", allow_abbrev=False)
    add = parser.add_argument
    add("--train-iters", type=int, required=True)
    add("--save-interval", type=int, default=None)
    add("--save", default=None)
    add("--load", default=None)
    add("--micro-batch-size", type=int, default=1)
    add("--global-batch-size", type=int, default=None)
    add("--log-interval", type=int, default=1)
    add("--lr", type=float, default=1e-4)
    add("--lr-decay-style", default="constant")
    add("--seed", type=int, default=1234)
    add("--clip-grad", type=float, default=1.0)
    add("--weight-decay", type=float, default=0.01)
    # Megatron's store_true flags default to None or False; the arguments block prints them as Megatron does.
    add("--no-load-optim", action="store_true", default=None)
    add("--no-load-rng", action="store_true", default=None)
    add("--finetune", action="store_true", default=False)
    add("--use-distributed-optimizer", action="store_true", default=False)
    add("--enable-ft-package", action="store_true", default=False)
    add("--ft-num-warmup-iters", type=int, default=5)
    add("--ckpt-format", default="torch_dist")
    add("--async-save", action="store_true", default=None)
    # Megatron's default is 100; the smoke evaluates only when asked, so a run that names neither flag (every
    # run recorded before evaluation was modelled) keeps its lines
    add("--eval-iters", type=int, default=0)
    add("--eval-interval", type=int, default=None)
    add("--exit-signal-handler", action="store_true", default=False)
    add("--exit-on-missing-checkpoint", action="store_true", default=False)
    add("--verify-integrity", action="store_true", default=False)
    add("--calc-ft-timeouts", action="store_true", default=False)
    # Megatron's NaN check of the loss, on unless the team turns it off (pretrain_gpt.py's loss_func)
    add(
        "--no-check-for-nan-in-loss-and-grad",
        action="store_false",
        default=True,
        dest="check_for_nan_in_loss_and_grad",
    )
    add("--smoke-step-seconds", type=float, default=0.2)
    add("--smoke-eval-step-seconds", type=float, default=None)  # None: a third of --smoke-step-seconds
    add("--smoke-save-seconds", type=float, default=0.0)
    add("--smoke-checkpoint-mb", type=int, default=0)
    add("--smoke-exit-linger-seconds", type=float, default=0.0)
    # the async writer is a persistent process of its own (AsyncSaves), for the writer_stall fault
    add("--smoke-writer-process", action="store_true", default=False)
    args, _unknown = parser.parse_known_args(argv)  # Megatron's other flags mean nothing here
    return args


def stamp() -> str:
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")  # local naive time, as Megatron prints


class Printer:
    def __init__(self, rank: int, world: int):
        self.rank, self.world = rank, world

    def rank_0(self, message: str) -> None:
        if self.rank == 0:
            print(message, flush=True)

    def rank_last(self, message: str) -> None:
        if self.rank == self.world - 1:
            print(message, flush=True)


# Arguments added after runs were recorded: printed only when given, so the block of every earlier kind of run
# stays line for line what it was.
PRINTED_ONLY_WHEN_SET = (
    "exit_signal_handler",
    "calc_ft_timeouts",
    "exit_on_missing_checkpoint",
    "verify_integrity",
    "smoke_eval_step_seconds",
)
# Arguments printed only when turned off (on by default, as Megatron's; every earlier block stays as it was).
PRINTED_ONLY_WHEN_OFF = ("check_for_nan_in_loss_and_grad",)
# Megatron core_v0.19's ft_integration: the step timeout is calculated only after this many iterations.
MIN_ITERS_FOR_STEP_TIMEOUT_UPDATE = 16


def print_arguments(args: argparse.Namespace, out: Printer) -> None:
    out.rank_0("------------------------ arguments ------------------------")
    for name in sorted(vars(args)):
        if name in PRINTED_ONLY_WHEN_SET and not getattr(args, name):
            continue
        if name in PRINTED_ONLY_WHEN_OFF and getattr(args, name):
            continue
        out.rank_0("  {} {} {}".format(name, "." * (48 - len(name)), getattr(args, name)))
    out.rank_0("-------------------- end of arguments ---------------------")


class FaultTolerance:
    """Megatron's ft_integration, reduced to what the smoke workload needs: the same calls, same prints."""

    def __init__(self, args: argparse.Namespace, out: Printer):
        self.enabled = args.enable_ft_package
        self.warmup = args.ft_num_warmup_iters
        self.out = out
        self.client = None
        # --calc-ft-timeouts, as Megatron's ft_integration: NVRx calculates the timeouts after each save and
        # at the end, rank 0 persists them in ft_state.json, and a later cycle loads them.
        self.calculating = bool(getattr(args, "calc_ft_timeouts", False))
        self.async_save = bool(args.async_save)
        self.seen_checkpoints = 0
        self.persistent_loaded = False
        self.state_file = Path(args.save) / "ft_state.json" if args.save else None
        self.seen_steps = 0
        self.eval_steps = 0  # eval steps since the last training step (Megatron's _curr_eval_iter_idx)
        self.step_open = False
        self.setup_open = False
        if not self.enabled:
            return
        if not args.save:
            raise ValueError("checkpointing save dir must be set to enable fault tolerance")
        from nvidia_resiliency_ext.fault_tolerance.rank_monitor_client import RankMonitorClient

        out.rank_0("FT: initializing...")
        Path(args.save).mkdir(parents=True, exist_ok=True)
        self.client = RankMonitorClient()
        self.client.init_workload_monitoring(num_warmup_iters=self.warmup)
        state_file = Path(args.save) / "ft_state.json"
        if state_file.exists():  # Megatron loads it unconditionally; so do we, visibly
            self.client.load_state_dict(json.loads(state_file.read_text()))
            out.rank_0(f"FT: loaded timeouts from {state_file}. {self.client.section_timeouts}")
        out.rank_0(f"FT: initialized. Timeouts={self.client.section_timeouts}")
        self.client.start_section("setup")
        self.setup_open = True

    def step_start(self) -> None:
        if self.client is None:
            return
        if self.setup_open:
            self.client.end_section("setup")
            self.setup_open = False
        self.eval_steps = 0  # training started: the evaluation is over
        if self.seen_steps >= self.warmup:
            self.client.start_section("step")
            self.step_open = True

    def step_end(self) -> None:
        if self.client is None:
            return
        if self.step_open:
            self.client.end_section("step")
            self.step_open = False
        self.seen_steps += 1

    def eval_step_start(self) -> None:
        """Megatron's on_eval_step_start: a `step` section once this evaluation saw the warm-up's count of
        eval steps (the count restarts with every training step)."""
        if self.client is None:
            return
        if self.setup_open:  # an evaluation before any training step (none here: kept as Megatron has it)
            self.client.end_section("setup")
            self.setup_open = False
        if self.eval_steps >= self.warmup:
            self.client.start_section("step")
            self.step_open = True

    def eval_step_end(self) -> None:
        if self.client is None:
            return
        if self.step_open:
            self.client.end_section("step")
            self.step_open = False
        self.eval_steps += 1

    def checkpointing_start(self) -> None:
        if self.client is not None:
            self.client.start_section("checkpointing")

    def checkpointing_end(self, is_async_finalization: bool = False) -> None:
        if self.client is not None:
            self.client.end_section("checkpointing")
        if not is_async_finalization:
            self.seen_checkpoints += 1
            self.maybe_update_timeouts()

    def checkpoint_loaded(self) -> None:
        self.persistent_loaded = True

    def maybe_update_timeouts(self, closing: bool = False) -> None:
        """Megatron's `_maybe_update_timeouts`, its conditions and lines (every rank calls it: collective)."""
        if self.client is None or not self.calculating:
            return
        out, sections = self.out, []
        if self.persistent_loaded:
            sections.append("setup")
        else:
            out.rank_0("FT: can't update the setup section timeout until persistent checkpoint is loaded")
        if self.seen_steps >= MIN_ITERS_FOR_STEP_TIMEOUT_UPDATE:
            sections.append("step")
        else:
            out.rank_0("FT: need to see more training iterations to update the step section timeout")
        if self.seen_checkpoints > 0:
            if not self.async_save:
                sections.append("checkpointing")
            else:
                out.rank_0("FT: can't update the checkpointing section timeout with async checkpointing")
        else:
            out.rank_0("FT: checkpointing section is not updated until a checkpoint was saved")
        oos = False
        if closing:
            if {"setup", "step"}.issubset(sections) and self.seen_checkpoints > 0:
                oos = True
            else:
                out.rank_0("FT: the out-of-section timeout won't be updated until all FT sections were seen")
        else:
            out.rank_0("FT: the out-of-section timeout won't be updated as the FT is not closing yet")
        if not sections and not oos:
            return
        out.rank_0(f"FT: updating timeouts for: {sections} update out-of-section: {oos} ...")
        self.client.calculate_and_set_section_timeouts(selected_sections=sections, calc_out_of_section=oos)
        if out.rank == 0 and self.state_file is not None:
            self.state_file.write_text(json.dumps(self.client.state_dict()))
            out.rank_0(f"FT: updated timeouts saved to {self.state_file}. {self.client.section_timeouts}")

    def shutdown(self) -> None:
        if self.client is None:
            return
        self.out.rank_0("FT: closing...")
        self.maybe_update_timeouts(closing=True)
        self.client.shutdown_workload_monitoring()
        self.out.rank_0("FT: closed.")


class ExitSignal:
    """Megatron's --exit-signal-handler (its DistributedSignalHandler of SIGTERM): the handler records the
    signal; `any_received` tells every rank whether any rank got one (a collective, once per iteration)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.received = False
        if enabled:
            signal.signal(signal.SIGTERM, self._handler)

    def _handler(self, signum, frame) -> None:
        self.received = True

    def any_received(self) -> bool:
        if not self.enabled:
            return False
        flag = torch.tensor([1 if self.received else 0], dtype=torch.int64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


class TinyLM(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.hidden = torch.nn.Linear(HIDDEN, HIDDEN)
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.hidden(self.embed(tokens))))


# Each split's samples come from a generator seeded apart (the training split's seeds are those of every run
# recorded before the other splits existed).
SPLIT_SEED_OFFSET = {"train": 0, "valid": 1 << 40, "test": 2 << 40}


def sample(index: int, seed: int, split: str = "train") -> tuple[torch.Tensor, torch.Tensor]:
    """Global sample `index` of `split`: random tokens, each followed by a fixed function of itself
    (learnable)."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + index + SPLIT_SEED_OFFSET[split])
    tokens = torch.randint(0, VOCAB, (SEQ,), generator=gen)
    return tokens, (tokens * 7 + 3) % VOCAB


def micro_batch(first_of_step: int, micro: int, rank: int, world: int, mbs: int, seed: int, split: str):
    """Micro-batch `micro` of this rank in a step whose global batch starts at sample `first_of_step`: as
    Megatron's pretraining sampler deals them, each micro-batch step takes mbs x world consecutive samples
    and rank r the r-th mbs of them."""
    first = first_of_step + micro * mbs * world + rank * mbs
    pairs = [sample(first + i, seed, split) for i in range(mbs)]
    return torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])


def num_micro_batches(args, world: int) -> int:
    return args.global_batch_size // (args.micro_batch_size * world)


def checkpoint_dir(root: str, iteration: int) -> Path:
    return Path(root) / iteration_dir_name(iteration)


def read_tracker(root: str, out: Printer) -> int | None:
    """The tracker's iteration (None without a tracker), as Megatron core_v0.19's read_metadata reads it:
    stripped text through int(); `release` is 0; any other text (NULs and empty included) ends every rank
    with exit status 0 after rank 0's ERROR line, which ft_launcher takes for a finished worker."""
    path = Path(root) / TRACKER_NAME
    if not path.exists():
        return None
    try:
        text = path.read_text().strip()
    except UnicodeDecodeError:
        text = None  # not text at all: as invalid as any other garbage
    try:
        return int(text)
    except (TypeError, ValueError):
        if text == "release":
            return 0
    out.rank_0(f"ERROR: Invalid metadata file {path}. Exiting")
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit()


PAYLOAD_KEY = "smoke_payload"
MIB = 1 << 20


def payload_share(megabytes: int, rank: int, world: int) -> int:
    """This rank's bytes of a `megabytes` MiB payload split over `world` ranks (rank 0 takes the rest)."""
    total = megabytes * MIB
    share = total // world
    return share + (total - share * world if rank == 0 else 0)


class Payload:
    """This rank's share of --smoke-checkpoint-mb: random bytes (incompressible: no file system shortcut)
    made once, saved under a key of this rank's own (so torch's planner never deduplicates it away) into this
    rank's `__<rank>_0.distcp`, and read back by every load."""

    def __init__(self, megabytes: int, rank: int, world: int) -> None:
        self.key = f"rank{rank}"
        size = payload_share(megabytes, rank, world) if megabytes > 0 else 0
        self.tensor = torch.frombuffer(bytearray(os.urandom(size)), dtype=torch.uint8) if size else None

    def add_to(self, state: dict) -> None:
        if self.tensor is not None:
            state[PAYLOAD_KEY] = {self.key: self.tensor}

    def load_into(self, state: dict, checkpoint: Path) -> None:
        """Ask the load for this rank's payload when the checkpoint holds one (of any size)."""
        try:
            saved = dcp.FileSystemReader(str(checkpoint)).read_metadata().state_dict_metadata
        except Exception:  # no readable metadata: the load itself says so
            return
        found = saved.get(f"{PAYLOAD_KEY}.{self.key}")
        if found is not None and hasattr(found, "size"):
            state[PAYLOAD_KEY] = {self.key: torch.empty(tuple(found.size), dtype=torch.uint8)}


class Timers:
    """Megatron's timers as core_v0.19 logs them: (min, max) across ranks in ms, from the last rank."""

    def __init__(self, out: Printer) -> None:
        self.out = out
        self.started: dict[str, float] = {}

    def start(self, name: str) -> None:
        self.started[name] = time.perf_counter()

    def log(self, name: str) -> None:
        """Every rank calls it (a collective, as Megatron's timers.log)."""
        ms = (time.perf_counter() - self.started.pop(name)) * 1000.0
        low = torch.tensor([ms], dtype=torch.float64)
        high = low.clone()
        dist.all_reduce(low, op=dist.ReduceOp.MIN)
        dist.all_reduce(high, op=dist.ReduceOp.MAX)
        self.out.rank_last("INFO:megatron.core.timers:(min, max) time across ranks (ms):")
        self.out.rank_last(f"    {(name + ' ').ljust(48, '.')}: ({low.item():.2f}, {high.item():.2f})")


class AsyncSaves:
    """--async-save: torch's background writer on a process group of its own (its collectives must not
    meet the training's all-reduces on the default one); the finalize waits for the write to end. A thread of
    this process by default; with `writer_process`, a persistent process of its own that writes every save
    (torch's AsyncCheckpointerType.PROCESS, spawned at the first save), as Megatron's persistent checkpoint
    worker does: a process the writer_stall fault can stop while the rank lives on."""

    def __init__(self, writer_process: bool = False) -> None:
        self.group = None
        self.pending = None
        self.writer_process = writer_process

    def save(self, state: dict, checkpoint: Path) -> None:
        if self.group is None:
            self.group = dist.new_group(backend="gloo")
        kind = {}
        if self.writer_process:
            from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

            kind = {"async_checkpointer_type": AsyncCheckpointerType.PROCESS}
        self.pending = dcp.async_save(state, checkpoint_id=str(checkpoint), process_group=self.group, **kind)

    def wait(self) -> None:
        if self.pending is not None:
            self.pending.result()
            self.pending = None


def save_checkpoint(
    args, model, optimizer, iteration: int, consumed: int, ft: FaultTolerance, out: Printer, io
) -> None:
    """Write the checkpoint of `iteration` on every rank (in the background with --async-save); the tracker
    waits for finalize_checkpoint. `io`: the run's Payload, Timers and AsyncSaves."""
    payload, timers, saves = io
    timers.start("save-checkpoint")
    ft.checkpointing_start()
    out.rank_0(
        f"[{stamp()}] saving checkpoint at iteration {iteration:7d} to {args.save} in torch_dist format"
    )
    # stale_save (ftqual.rank.exactness) writes the previous iteration's model and optimizer under this name
    model_sd, optim_sd = exactness.state_to_save(get_state_dict(model, optimizer), iteration)
    state = {
        "model": model_sd,
        "optimizer": optim_sd,
        "progress": torch.tensor([iteration, consumed], dtype=torch.int64),
        "rng": torch.get_rng_state(),
    }
    payload.add_to(state)
    if args.async_save:
        saves.save(state, checkpoint_dir(args.save, iteration))
        out.rank_0(
            f"  [{stamp()}] scheduled an async checkpoint save at iteration {iteration:7d} to {args.save}"
        )
    else:
        dcp.save(state, checkpoint_id=str(checkpoint_dir(args.save, iteration)))
    if args.smoke_save_seconds > 0:
        time.sleep(args.smoke_save_seconds)
    ft.checkpointing_end()
    timers.log("save-checkpoint")


def finalize_checkpoint(args, iteration: int, ft: FaultTolerance, out: Printer, rank: int, io) -> None:
    """Once every rank has written `iteration`, rank 0 advances the tracker (as Megatron's finalize does)."""
    ft.checkpointing_start()
    io[2].wait()  # this rank's background write (and, on rank 0, torch's `.metadata`) is on disk
    dist.barrier()  # every rank has written its part before the tracker may advance
    if rank == 0:
        target = checkpoint_dir(args.save, iteration)
        (target / MEGATRON_METADATA).write_text(
            json.dumps({"sharded_backend": "torch_dist", "sharded_backend_version": 1})
        )
        if args.verify_integrity:  # after metadata.json, before the tracker: Megatron's finalize order
            save_integrity_manifest(target)
        with open(Path(args.save) / TRACKER_NAME, "w") as fh:  # truncate then write, like Megatron
            fh.write(str(iteration))
        out.rank_0(
            f"  [{stamp()}] successfully saved checkpoint from iteration {iteration:7d} "
            f"to {args.save} {PARALLEL_TAG}"
        )
    dist.barrier()
    ft.checkpointing_end(is_async_finalization=True)


class CheckpointingException(Exception):
    """Megatron's dist_checkpointing CheckpointingException: what its integrity verification raises."""


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(HASH_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def save_integrity_manifest(directory: Path) -> None:
    """Every file of the checkpoint but the manifest, name -> SHA-256, as Megatron writes `integrity.json`."""
    files = {
        p.name: file_hash(p)
        for p in sorted(directory.iterdir(), key=str)
        if p.is_file() and p.name != INTEGRITY_NAME
    }
    with open(directory / INTEGRITY_NAME, "w") as fh:
        json.dump({"algorithm": INTEGRITY_ALGORITHM, "files": files}, fh, indent=2)


def integrity_problem(directory: Path) -> str | None:
    """Megatron's _verify_integrity_manifest_impl, its messages word for word; None when all files match."""
    manifest_path = directory / INTEGRITY_NAME
    if not manifest_path.exists():
        return (
            f"Integrity manifest not found at {manifest_path}. The checkpoint must be saved with integrity "
            "verification enabled (save_integrity=True) before it can be verified on load."
        )
    manifest = json.loads(manifest_path.read_text())
    algorithm = manifest.get("algorithm", INTEGRITY_ALGORITHM)
    if algorithm != INTEGRITY_ALGORITHM:
        return (
            f"Unsupported hash algorithm in integrity manifest: {algorithm!r}. "
            f"Expected: {INTEGRITY_ALGORITHM!r}."
        )
    mismatches = []
    for name, expected in manifest["files"].items():
        try:
            actual = file_hash(directory / name)
        except OSError as exc:
            mismatches.append(f"  {name}: file missing or unreadable ({exc})")
            continue
        if actual != expected:
            mismatches.append(f"  {name}: hash mismatch (expected {expected[:16]}..., got {actual[:16]}...)")
    if not mismatches:
        return None
    return (
        f"Checkpoint integrity verification failed for {len(mismatches)} file(s) in {directory}:\n"
        + "\n".join(mismatches)
    )


def verify_integrity_manifest(directory: Path, rank: int) -> None:
    """Rank 0 re-hashes, every rank learns the verdict and raises on a problem (Megatron's, with > 1 rank)."""
    found = [integrity_problem(directory) if rank == 0 else None]
    if dist.get_world_size() > 1:
        dist.broadcast_object_list(found, src=0)
    if found[0] is not None:
        raise CheckpointingException(found[0])


def saves_rng(checkpoint: Path) -> bool:
    """Whether the checkpoint holds the RNG's state (every save since the RNG was saved)."""
    try:
        return "rng" in dcp.FileSystemReader(str(checkpoint)).read_metadata().state_dict_metadata
    except Exception:  # no readable metadata: the load itself says so
        return False


def load_checkpoint(args, model, optimizer, out: Printer, payload: Payload) -> tuple[int, int]:
    """(iteration, consumed samples) to continue from; (0, 0) for a fresh start."""
    if not args.load:
        return 0, 0
    iteration = read_tracker(args.load, out)
    if iteration is None:
        out.rank_0(f"WARNING: could not find the metadata file {Path(args.load) / TRACKER_NAME}")
        out.rank_0("    will not load any checkpoints and will start from random")
        if args.exit_on_missing_checkpoint:
            out.rank_0(">> '--exit-on-missing-checkpoint' set ... exiting. <<")
            dist.barrier()
            sys.exit()
        return 0, 0
    # Megatron's _get_checkpoint_format lists the directory first: a tracker naming a directory that is not
    # there raises FileNotFoundError, uncaught (the rank exits non-zero), before any load.
    list(checkpoint_dir(args.load, iteration).iterdir())
    out.rank_0(f" loading distributed checkpoint from {args.load} at iteration {iteration}")
    # the exactness faults' restore hooks (ftqual.rank.exactness) say what a broken restore leaves out
    load_optim = not (args.no_load_optim or args.finetune) and exactness.restores_optimizer()
    state = {"model": get_model_state_dict(model), "progress": torch.zeros(2, dtype=torch.int64)}
    if load_optim:
        state["optimizer"] = get_optimizer_state_dict(model, optimizer)
    if args.verify_integrity:
        verify_integrity_manifest(checkpoint_dir(args.load, iteration), out.rank)
    payload.load_into(state, checkpoint_dir(args.load, iteration))
    if saves_rng(checkpoint_dir(args.load, iteration)) and exactness.restores_rng():
        state["rng"] = torch.get_rng_state()  # a checkpoint written before the RNG was saved has none
    dcp.load(state, checkpoint_id=str(checkpoint_dir(args.load, iteration)))
    set_model_state_dict(model, state["model"])
    if load_optim:
        set_optimizer_state_dict(model, optimizer, state["optimizer"])
    if "rng" in state:
        torch.set_rng_state(state["rng"])
    iteration, consumed = (int(v) for v in state["progress"])
    consumed = exactness.data_position(consumed)
    if args.finetune:
        iteration, consumed = 0, 0
    out.rank_0(f"  successfully loaded checkpoint from {args.load} {PARALLEL_TAG} at iteration {iteration}")
    return iteration, consumed


def checkpoint(
    args,
    model,
    optimizer,
    iteration: int,
    consumed: int,
    ft: FaultTolerance,
    out: Printer,
    rank: int,
    pending: int | None,
    io,
) -> int | None:
    """Save `iteration`; returns the save still to finalize (async) or None (finalized now)."""
    if pending is not None:  # at most one save in flight
        finalize_checkpoint(args, pending, ft, out, rank, io)
    save_checkpoint(args, model, optimizer, iteration, consumed, ft, out, io)
    if args.async_save:
        return iteration
    finalize_checkpoint(args, iteration, ft, out, rank, io)
    return None


def check_loss(loss: torch.Tensor, iteration: int, rank: int) -> None:
    """Megatron core_v0.19's pretrain_gpt.py loss_func under --check-for-nan-in-loss-and-grad: each rank's
    loss validated before the data-parallel reduction, NaN then Inf, fatal; the RuntimeError its rerun state
    machine raises with reruns disabled, in its words (iteration: the one being computed; device: CPU here).
    With reruns on (validate_results, Megatron's default) Megatron reruns the iteration first and exits 16 or
    17 instead: the smoke has no rerun machine."""
    for rejects, what in ((torch.isnan, "NaN"), (torch.isinf, "Inf")):
        if bool(rejects(loss)):
            raise RuntimeError(
                f"Rank {rank}, node {os.uname()[1]}, device cpu, iteration {iteration}: "
                f"Unexpected result {loss} (message='found {what} in local forward loss calculation')"
            )


def train_step(
    model, optimizer, iteration: int, args, rank: int, world: int, first: int | None = None
) -> tuple[float, float]:
    """One iteration: its micro-batches' gradients accumulated (each loss scaled by 1 / their count, as
    Megatron's schedule does), averaged over the ranks, one optimizer step; the loss is the mean over the
    micro-batches and ranks (every sample holds as many tokens). `first`: the global sample the step's batch
    starts at, the samples consumed so far (the data position a checkpoint restores); by default the
    iteration's own, (iteration - 1) x G, which it equals unless a restore lost the position."""
    count = num_micro_batches(args, world)
    first = (iteration - 1) * args.global_batch_size if first is None else first
    torch.rand(())  # the step's draw from the RNG stream, as dropout's: the saved RNG state follows the steps
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros(())
    for micro in range(count):
        tokens, targets = micro_batch(first, micro, rank, world, args.micro_batch_size, args.seed, "train")
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        if args.check_for_nan_in_loss_and_grad:
            check_loss(loss, iteration, rank)
        (loss / count).backward()
        total += loss.detach() / count
    loss = total
    for param in model.parameters():  # data parallel: average the gradients of all ranks
        dist.all_reduce(param.grad, op=dist.ReduceOp.SUM)
        param.grad.div_(world)
    grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad))
    optimizer.step()
    reduced = loss.detach().clone()
    dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
    return float(reduced) / world, grad_norm


def eval_step_seconds(args) -> float:
    if args.smoke_eval_step_seconds is not None:
        return args.smoke_eval_step_seconds
    return args.smoke_step_seconds / 3  # a forward without the backward


def evaluate(model, args, rank: int, world: int, ft: FaultTolerance, out: Printer, timers, first: int, **how):
    """Megatron's evaluate(): --eval-iters forward-only steps (each the global batch's micro-batches), each
    inside FT's eval-step hooks, the loss averaged over the steps and ranks; the `evaluate` timer is logged
    (from the last rank) before the results are printed. `first`: the split's first sample of this
    evaluation. Returns the loss."""
    split, verbose = how.get("split", "valid"), how.get("verbose", False)
    timers.start("evaluate")
    model.eval()
    count = num_micro_batches(args, world)
    total = torch.zeros(())
    with torch.no_grad():
        if verbose:
            out.rank_0(f"Evaluating on {args.eval_iters * args.global_batch_size} samples")
        for step in range(1, args.eval_iters + 1):
            if verbose:
                out.rank_0(f"Evaluating iter {step}/{args.eval_iters}")
            ft.eval_step_start()
            start = first + (step - 1) * args.global_batch_size
            for micro in range(count):
                mbs = args.micro_batch_size
                tokens, targets = micro_batch(start, micro, rank, world, mbs, args.seed, split)
                logits = model(tokens)
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
                total += loss / count
            if eval_step_seconds(args) > 0:
                time.sleep(eval_step_seconds(args))  # paced like a forward of the real model
            ft.eval_step_end()
    model.train()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)  # the sum over the ranks, as Megatron's reduction
    timers.log("evaluate")
    return float(total) / (world * args.eval_iters)


def print_validation(prefix: str, loss: float, out: Printer) -> None:
    """evaluate_and_print_results' dashed block, from the last rank."""
    text = f" validation loss at {prefix} | "
    text += "{} value: {:.6E} | ".format("lm loss", loss)
    text += "{} PPL: {:.6E} | ".format("lm loss", math.exp(min(20, loss)))
    length = len(text) + 1
    out.rank_last("-" * length)
    out.rank_last(text)
    out.rank_last("-" * length)


def evaluation_at(iteration: int, args) -> bool:
    """Megatron's train loop evaluates after `iteration` (do_valid: eval-iters > 0)."""
    return bool(args.eval_interval) and args.eval_iters > 0 and iteration % args.eval_interval == 0


def valid_first_sample(iteration: int, args) -> int:
    """The first validation sample of the evaluation after `iteration`: Megatron's consumed_valid_samples
    then, every earlier evaluation's eval-iters x global batch (restored from the checkpoint on a load)."""
    earlier = iteration // args.eval_interval - 1 if evaluation_at(iteration, args) else 0
    return earlier * args.eval_iters * args.global_batch_size


def final_evaluations(model, args, iteration: int, rank: int, world: int, ft, out: Printer, timers) -> None:
    """After training, pretrain() evaluates the validation set (where the train loop's evaluations left it)
    and the test set (from its start), verbose."""
    if args.eval_iters <= 0:
        return
    done = iteration // args.eval_interval if args.eval_interval else 0
    first = done * args.eval_iters * args.global_batch_size
    loss = evaluate(model, args, rank, world, ft, out, timers, first, verbose=True)
    print_validation(f"iteration {iteration} on validation set", loss, out)
    loss = evaluate(model, args, rank, world, ft, out, timers, 0, split="test", verbose=True)
    print_validation(f"iteration {iteration} on test set", loss, out)


def iteration_line(
    iteration: int, args, consumed: int, elapsed_ms: float, loss: float, grad_norm: float
) -> str:
    return (
        f" [{stamp()}] iteration {iteration:8d}/{args.train_iters:8d} |"
        f" consumed samples: {consumed:12d} |"
        f" elapsed time per iteration (ms): {elapsed_ms:.1f} |"
        f" learning rate: {args.lr:.6E} |"
        f" global batch size: {args.global_batch_size:5d} |"
        f" lm loss: {loss:.6E} |"
        f" loss scale: {1.0:.1f} |"
        f" grad norm: {grad_norm:.3f} |"
        f" number of skipped iterations: {0:3d} |"
        f" number of nan iterations: {0:3d} |"
    )


def exit_on_signal(args, model, optimizer, iteration, consumed, ft, out, rank, pending, io) -> int:
    """A rank got SIGTERM under --exit-signal-handler: save this iteration, say why, exit 0 on every rank."""
    if args.save:
        pending = checkpoint(args, model, optimizer, iteration, consumed, ft, out, rank, pending, io)
    out.rank_0(f"[exiting program after receiving SIGTERM.] datetime: {stamp()} ")
    if pending is not None:
        finalize_checkpoint(args, pending, ft, out, rank, io)
    ft.shutdown()
    dist.barrier()
    dist.destroy_process_group()
    return 0


def data_worker(stop, clean, linger_s: float) -> None:
    """The lingering data worker's loop: waits to be told to stop; unless its rank ended cleanly, it takes
    `linger_s` to finish (a batch in flight)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is its rank's to handle
    while not stop.wait(0.1):
        pass
    if not clean.is_set():
        time.sleep(linger_s)


def start_data_worker(linger_s: float):
    """The data worker of --smoke-exit-linger-seconds, and the call that ends it at once after training; an
    exit of the interpreter (an exception) tells it to stop without `clean`, and then joins it."""
    import atexit
    import multiprocessing

    context = multiprocessing.get_context("fork")
    stop, clean = context.Event(), context.Event()
    worker = context.Process(target=data_worker, args=(stop, clean, linger_s), name="smoke-data-worker")
    worker.start()
    atexit.register(stop.set)  # runs before multiprocessing's own exit handler, which joins the worker

    def finish() -> None:
        clean.set()
        stop.set()
        worker.join()

    return finish


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    out = Printer(rank, world)
    if args.global_batch_size is None:
        args.global_batch_size = args.micro_batch_size * world
    if args.global_batch_size % (args.micro_batch_size * world):  # Megatron's num_microbatches_calculator
        print(
            f"AssertionError: global batch size ({args.global_batch_size}) is not divisible by micro batch "
            f"size ({args.micro_batch_size}) times data parallel size ({world})",
            file=sys.stderr,
        )
        return 1
    print_arguments(args, out)

    exit_signal = ExitSignal(args.exit_signal_handler)
    # Megatron's pretrain() stamps the time before and after ft_integration.setup() (which opens the FT
    # `setup` section) and prints both: the verifier measures the setup section from the second.
    before_ft = stamp()
    ft = FaultTolerance(args, out)
    out.rank_0(f"[after in-process setup and before initialize_megatron] datetime: {before_ft} ")
    out.rank_0(f"[after in-job setup and before initialize_megatron] datetime: {stamp()} ")
    out.rank_0("> initializing torch distributed ...")
    dist.init_process_group(backend="gloo")
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    model = TinyLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    out.rank_0(f"[after megatron is initialized] datetime: {stamp()} ")
    io = (Payload(args.smoke_checkpoint_mb, rank, world), Timers(out), AsyncSaves(args.smoke_writer_process))
    if args.load:
        io[1].start("load-checkpoint")
    iteration, consumed = load_checkpoint(args, model, optimizer, out, io[0])
    if args.load:
        io[1].log("load-checkpoint")
    out.rank_0(f"[after model, optimizer, and learning rate scheduler are built] datetime: {stamp()} ")
    if iteration:
        ft.checkpoint_loaded()
    finish_worker = (
        start_data_worker(args.smoke_exit_linger_seconds) if args.smoke_exit_linger_seconds else None
    )
    out.rank_0("done with setup ...")
    out.rank_0("training ...")

    last_saved = iteration if iteration else None  # a loaded iteration is already in a checkpoint
    # With --async-save, like Megatron, a save is finalized (tracker advanced) only after a later step:
    # the tracker then trails the training, and a fault it triggers replays the iterations in between.
    pending: int | None = None
    last_log = time.monotonic()
    while iteration < args.train_iters:
        if pending is not None and iteration > pending:
            finalize_checkpoint(args, pending, ft, out, rank, io)
            pending = None
        ft.step_start()
        loss, grad_norm = train_step(model, optimizer, iteration + 1, args, rank, world, first=consumed)
        exactness.after_step(lambda: get_state_dict(model, optimizer))  # stale_save keeps the last two
        if args.smoke_step_seconds > 0:
            time.sleep(args.smoke_step_seconds)  # a slower step, so an injected fault lands inside one
        ft.step_end()
        iteration += 1
        consumed += args.global_batch_size
        if not math.isfinite(loss) and args.check_for_nan_in_loss_and_grad:
            print(f"loss is not finite at iteration {iteration}", file=sys.stderr)
            return 1
        # without the check, as Megatron with --no-check-for-nan-in-loss-and-grad, it trains on
        if iteration % args.log_interval == 0:
            now = time.monotonic()
            elapsed_ms = (now - last_log) * 1000.0 / args.log_interval
            last_log = now
            out.rank_last(iteration_line(iteration, args, consumed, elapsed_ms, loss, grad_norm))
        if evaluation_at(iteration, args):  # after the iteration's line, before its save (Megatron's loop)
            began = time.monotonic()
            first = valid_first_sample(iteration, args)
            loss = evaluate(model, args, rank, world, ft, out, io[1], first)
            print_validation(f"iteration {iteration}", loss, out)
            last_log += time.monotonic() - began  # the interval timer stood still (Megatron stops it)
        if exit_signal.any_received():
            if finish_worker is not None:
                finish_worker()
            return exit_on_signal(args, model, optimizer, iteration, consumed, ft, out, rank, pending, io)
        if args.save and args.save_interval and iteration % args.save_interval == 0:
            pending = checkpoint(args, model, optimizer, iteration, consumed, ft, out, rank, pending, io)
            last_saved = iteration
    if args.save and iteration and last_saved != iteration:
        pending = checkpoint(args, model, optimizer, iteration, consumed, ft, out, rank, pending, io)
    if pending is not None:
        out.rank_0("Unfinalized async checkpoint saves. Finalizing them synchronously now.")
        finalize_checkpoint(args, pending, ft, out, rank, io)

    out.rank_0(f"[after training is done] datetime: {stamp()} ")
    final_evaluations(model, args, iteration, rank, world, ft, out, io[1])
    if finish_worker is not None:
        finish_worker()
    ft.shutdown()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
