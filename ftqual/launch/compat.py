"""Flags only some Megatron versions know: kept, left out or refused, read from the tree's text.

Flags that only some Megatron-LM versions know: keep them, leave them out where the meaning survives,
or refuse before anything is launched.

The launcher decides from the Megatron tree's text (cheap, no import, the same on a login node and in the
training job); the preflight then proves the decision with Megatron's own argument parser
(ftqual.preflight.megatron_args), so a wrong guess here is a preflight failure, never a failed training run.

First, a refusal: Megatron-Core 0.13-0.15 shut NVRx's rank-monitor client down at the end of train()
(`get_rank_monitor_client().shutdown_workload_monitoring()`) and then open its 'checkpointing' section in
pretrain(); every NVRx client from 0.4.1 to 0.7.0 raises RankMonitorClientError ("not initialized") there,
so each run crashes after its last iteration and ft_launcher restarts it until it gives up (exit 93; seen
on H200 with 0.14.0 and NVRx 0.6.0 and 0.7.0). Nothing the launcher can change keeps the meaning (a clean
finish), so such a tree is refused; 0.16 removed the call.

Then two adaptations. `--ft-num-warmup-iters=0` asks Megatron's fault-tolerance integration to monitor the
'step' section from the first iteration. Megatron-Core 0.16 added the flag; 0.13-0.15 have no flag and a
fixed warm-up (`_NUM_WARMUP_ITERS = 1` in megatron/training/ft_integration.py) during which a step counts as
out of section. Every fault is injected after the first checkpoint, i.e. after at least `save_interval`
iterations of the cycle, so a fixed warm-up of at most `save_interval` iterations is over by then and the
fault falls into the monitored 'step' section exactly as with the flag: leaving the flag out keeps the
walkthrough's meaning. A longer or unreadable warm-up does not, and is refused.

And `--mock-data`: up to 0.15 the mock dataset emits token ids 1..max_sequence_length-1 (4095) without
wrapping them into the vocabulary (0.16 added `% vocab_size`), so the walkthrough's 1,024-token vocabulary
ends in a CUDA device-side assert in the embedding lookup at the first step (seen on H200 with 0.14.0).
There `--vocab-size` is raised to the mock data's bound: a larger toy embedding, the same recovery under
test; baseline and fault runs of one qualification get the same model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

WARMUP_FLAG = "--ft-num-warmup-iters"
FT_INTEGRATION = Path("megatron") / "training" / "ft_integration.py"
TRAINING_ARGS_DIR = Path("megatron") / "training"
FIXED_WARMUP = re.compile(r"^_NUM_WARMUP_ITERS\s*=\s*(\d+)\b", re.MULTILINE)
VOCAB_FLAG = "--vocab-size"
GPT_DATASET = Path("megatron") / "core" / "datasets" / "gpt_dataset.py"
MOCK_CLASS = "class MockGPTLowLevelDataset"
MOCK_MAX_LENGTH = re.compile(r"max_sequence_length\s*:\s*int\s*=\s*(\d+)")
TRAINING_PY = Path("megatron") / "training" / "training.py"
EARLY_FT_SHUTDOWN = "get_rank_monitor_client().shutdown_workload_monitoring()"


class IncompatibleStack(ValueError):
    """The Megatron tree lacks a flag whose absence would change what the qualification tests."""


@dataclass(frozen=True)
class Adaptation:
    component: str  # "megatron"
    flag: str  # the option, without a value
    action: str  # "omitted"
    reason: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Compat:
    """What the launcher changes in the workload's arguments for this Megatron tree."""

    omitted: tuple[str, ...] = ()
    adaptations: tuple[Adaptation, ...] = ()
    values: tuple[tuple[str, str], ...] = ()  # (option, new value) for options given as `--option=value`

    def apply(self, args: Sequence[str]) -> list[str]:
        """`args` without the omitted options (in `--flag=value` or `--flag value` form) and with the
        changed values."""
        values = dict(self.values)
        out: list[str] = []
        skip_value = False
        for arg in args:
            if skip_value:
                skip_value = False
                continue
            if arg in self.omitted:
                skip_value = True
                continue
            option = arg.split("=", 1)[0]
            if option in self.omitted:
                continue
            out.append(f"{option}={values[option]}" if "=" in arg and option in values else arg)
        return out


def defines_option(tree: Path, option: str) -> bool | None:
    """Whether Megatron's training code names `option` as a quoted string; None when no code is readable."""
    folder = tree / TRAINING_ARGS_DIR
    try:
        files = sorted(folder.rglob("*.py"))
    except OSError:
        return None
    if not files:
        return None
    needles = (f"'{option}'", f'"{option}"')
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if any(n in text for n in needles):
            return True
    return False


def fixed_warmup_iters(tree: Path) -> int | None:
    """The warm-up hard-coded in ft_integration.py, when the module never reads it from the arguments."""
    try:
        text = (tree / FT_INTEGRATION).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if "ft_num_warmup_iters" in text:
        return None  # the flag sets it: not fixed
    m = FIXED_WARMUP.search(text)
    return int(m.group(1)) if m else None


def mock_token_bound(tree: Path) -> int | None:
    """One past the largest token id the tree's mock dataset can emit when it does not wrap ids into the
    vocabulary; None when it wraps them or has no mock dataset. Raises IncompatibleStack when the
    dataset does not wrap and its bound cannot be read."""
    try:
        text = (tree / GPT_DATASET).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    start = text.find(MOCK_CLASS)
    if start < 0:
        return None
    end = text.find("\nclass ", start + len(MOCK_CLASS))
    body = text[start : end if end > 0 else len(text)]
    if "% self.vocab_size" in body or "% vocab_size" in body:
        return None
    m = MOCK_MAX_LENGTH.search(body)
    if m is None:
        raise IncompatibleStack(
            f"{GPT_DATASET}'s mock dataset does not wrap token ids into the vocabulary and its largest id "
            "cannot be read: --mock-data could index past the embedding; use Megatron-LM core_v0.16.0 or "
            "later (qualified: core_v0.19.0)"
        )
    return int(m.group(1))


def _version_words(version: str | None) -> str:
    return f"Megatron-Core {version}" if version else "this Megatron-LM tree"


def resolve(
    tree: Path | str | None, save_interval: int, version: str | None = None, vocab_size: int | None = None
) -> Compat:
    """The adaptations for the Megatron tree at `tree`; raises IncompatibleStack when one is needed but
    would change the meaning. No tree (the smoke workload, or a path the preflight reports): nothing.
    `vocab_size`: the `--vocab-size` the command carries (checked against the mock data's ids)."""
    if tree is None:
        return Compat()
    tree = Path(tree)
    _refuse_early_ft_shutdown(tree, version)
    warmup = _warmup(tree, save_interval, version)
    vocab = _mock_vocab(tree, vocab_size, version)
    return Compat(
        omitted=warmup.omitted,
        adaptations=warmup.adaptations + vocab.adaptations,
        values=vocab.values,
    )


def _refuse_early_ft_shutdown(tree: Path, version: str | None) -> None:
    try:
        text = (tree / TRAINING_PY).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    if EARLY_FT_SHUTDOWN in text:
        raise IncompatibleStack(
            f"{_version_words(version)} shuts NVRx's rank-monitor client down at the end of train() and "
            "then opens its 'checkpointing' section in pretrain(): NVRx raises RankMonitorClientError there, "
            "so every run crashes after its last iteration and is restarted until NVRx gives up (exit 93); "
            "use Megatron-LM core_v0.16.0 or later (qualified: core_v0.19.0)"
        )


def _mock_vocab(tree: Path, vocab_size: int | None, version: str | None) -> Compat:
    bound = mock_token_bound(tree)
    if bound is None or vocab_size is None or vocab_size >= bound:
        return Compat()
    reason = (
        f"{_version_words(version)}'s mock dataset emits token ids up to {bound - 1} without wrapping them "
        f"into the vocabulary: with {VOCAB_FLAG}={vocab_size} the embedding lookup fails at the first step "
        f"(CUDA device-side assert), so the toy model's vocabulary is raised to {bound}; the recovery under "
        "test is the same"
    )
    change = Adaptation("megatron", VOCAB_FLAG, f"set to {bound}", reason)
    return Compat(adaptations=(change,), values=((VOCAB_FLAG, str(bound)),))


def _warmup(tree: Path, save_interval: int, version: str | None) -> Compat:
    has_flag = defines_option(tree, WARMUP_FLAG)
    if has_flag is None or has_flag:
        return Compat()
    who = _version_words(version)
    warmup = fixed_warmup_iters(tree)
    if warmup is None:
        raise IncompatibleStack(
            f"{who} has no {WARMUP_FLAG} and its fault-tolerance warm-up cannot be read from "
            f"{FT_INTEGRATION}: cannot tell whether an injected fault would be monitored; use Megatron-LM "
            "core_v0.16.0 or later (qualified: core_v0.19.0)"
        )
    if warmup > save_interval:
        raise IncompatibleStack(
            f"{who} has no {WARMUP_FLAG} and a fixed fault-tolerance warm-up of {warmup} iterations, more "
            f"than save_interval {save_interval}: a fault after the first checkpoint would not be in the "
            f"monitored 'step' section; set save_interval to {warmup} or more, or use Megatron-LM "
            "core_v0.16.0 or later"
        )
    reason = (
        f"{who} has no {WARMUP_FLAG}; its fault-tolerance integration has a fixed warm-up of {warmup} "
        f"iteration(s), over before the first checkpoint (save_interval {save_interval}), so every injected "
        "fault is in the monitored 'step' section as with 0"
    )
    omitted = Adaptation("megatron", WARMUP_FLAG, "omitted", reason)
    return Compat(omitted=(WARMUP_FLAG,), adaptations=(omitted,))
