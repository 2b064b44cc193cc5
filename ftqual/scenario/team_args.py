"""The team's arguments sorted by what ftqual does with each flag:

- TAKEN: the flags that define the job (parallel layout, batch, evaluation, transformer implementation,
  distributed optimizer) are the job's: ftqual runs them as given, and a config setting that says otherwise
  is a contradiction (ftqual.scenario.model names both);
- REPLACED: the flags ftqual must control to verify a run (where it saves and loads, how long it runs, how
  often it logs, NVRx's flags) are dropped from the team's and set by ftqual; each is listed with why, and
  with what the run uses instead (run.json's `job.replaced`, the report's Job section);
- REFUSED: what cannot run as a qualification of the team's job at all;
- the rest are kept as written.

Pure: tokens in (ftqual.scenario.launch_script), a `Sorted` out; every problem one line naming its file:line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ftqual.scenario.launch_script import Token

# The flags that define the job: name -> (the Sorted field, the kind of value).
TAKEN: dict[str, tuple[str, str]] = {
    "--tensor-model-parallel-size": ("tp", "int"),
    "--pipeline-model-parallel-size": ("pp", "int"),
    "--context-parallel-size": ("cp", "int"),
    "--expert-model-parallel-size": ("ep", "int"),
    "--global-batch-size": ("global_batch_size", "int"),
    "--micro-batch-size": ("micro_batch_size", "int"),
    "--eval-interval": ("eval_interval", "int"),
    "--eval-iters": ("eval_iters", "int0"),
    "--transformer-impl": ("transformer_impl", "choice:local,transformer_engine"),
    "--use-distributed-optimizer": ("dist_optimizer", "flag"),
}

_SAVES = "ftqual saves every run into its own checkpoint directory, which the verifier reads"
_LENGTH = "the run's length is the config's train_iters"
_FT = "NVRx's fault tolerance flags are ftqual's (the timeouts: the config's timeouts)"
_ASYNC = "asynchronous saves are the config's async_save"
_PERSISTENT = "the verifier judges the persistent checkpoints of the config's save_interval"
# The flags ftqual controls: name -> why it replaces the team's.
REPLACED: dict[str, str] = {
    "--save": _SAVES,
    "--load": _SAVES + " (each run resumes its own checkpoints)",
    "--save-interval": "the save interval is the config's save_interval",
    "--train-iters": _LENGTH,
    "--train-samples": _LENGTH,
    "--exit-interval": _LENGTH,
    "--exit-duration-in-mins": _LENGTH,
    "--enable-ft-package": "ftqual enables NVRx's fault tolerance package itself",
    "--calc-ft-timeouts": "calculated timeouts are the config's calc_ft_timeouts",
    "--deterministic-mode": "deterministic training is the config's replay: exact",
    "--async-save": _ASYNC,
    "--use-persistent-ckpt-worker": _ASYNC + " (the persistent worker goes with them)",
    "--non-persistent-save-interval": _PERSISTENT,
    "--non-persistent-ckpt-type": _PERSISTENT,
    "--non-persistent-global-ckpt-dir": _PERSISTENT,
    "--non-persistent-local-ckpt-dir": _PERSISTENT,
    "--no-save-optim": "the resume checks need the optimizer state saved",
    "--no-load-optim": "the resume checks need the optimizer state restored",
    "--no-save-rng": "the replay check needs the RNG state saved",
    "--no-load-rng": "the replay check needs the RNG state restored",
    "--finetune": "a finetune load resets the iteration the resume checks follow",
    "--log-interval": "the verifier reads one iteration line per step",
    "--verify-integrity": "integrity checks are the config's verify_integrity",
}
REPLACED_PREFIXES = {"--ft-": _FT}
# Values of a flag that no qualification of the team's job can run with: name -> (allowed, why).
REFUSED_VALUES: dict[str, tuple[tuple[str, ...], str]] = {
    "--ckpt-format": (
        ("torch_dist",),
        "ftqual verifies torch_dist checkpoints only; qualify the job with --ckpt-format torch_dist",
    ),
}


@dataclass(frozen=True)
class Replacement:
    flag: str
    given: str  # the team's flag and value as written
    why: str
    where: str

    def record(self, runs_as: str) -> dict[str, str]:
        return {"flag": self.flag, "given": self.given, "runs_as": runs_as, "why": self.why,
                "where": self.where}  # fmt: skip


@dataclass(frozen=True)
class Taken:
    flag: str
    value: int | str | bool
    where: str


@dataclass(frozen=True)
class Sorted:
    kept: tuple[str, ...]  # the team's arguments that run as written
    taken: dict[str, Taken] = field(default_factory=dict)  # field name -> the flag it came from
    replaced: tuple[Replacement, ...] = ()
    problems: tuple[str, ...] = ()
    tokens: tuple[Token, ...] = ()  # all of them, as given

    def value(self, name: str, default=None):
        taken = self.taken.get(name)
        return default if taken is None else taken.value


def flag_name(text: str) -> str:
    return text.split("=", 1)[0].replace("_", "-")


def is_flag(text: str) -> bool:
    return text.startswith("-") and len(text) > 1 and not re.fullmatch(r"-[0-9.][0-9.e+-]*", text)


def token_groups(tokens: Sequence[Token]) -> tuple[list[list[Token]], list[str]]:
    """Flags with their values; a value before any flag is a problem."""
    out: list[list[Token]] = []
    problems: list[str] = []
    for token in tokens:
        if is_flag(token.text):
            out.append([token])
        elif not out:
            problems.append(
                f"{token.where}: {token.text!r} comes before any flag: give pretrain_gpt.py's arguments, "
                "without the launcher or the script"
            )
        else:
            out[-1].append(token)
    return out, problems


def _values(group: list[Token]) -> list[str]:
    head = group[0].text
    return ([head.split("=", 1)[1]] if "=" in head else []) + [t.text for t in group[1:]]


def _given(group: list[Token]) -> str:
    return " ".join(t.text for t in group)


def _parse(group: list[Token], kind: str) -> tuple[int | str | bool | None, str | None]:
    name, values = flag_name(group[0].text), _values(group)
    if kind == "flag":
        if values:
            return None, f"{group[0].where}: {name} takes no value (got {' '.join(values)!r})"
        return True, None
    if len(values) != 1:
        return None, f"{group[0].where}: {name} takes one value (got {len(values)}: {' '.join(values)!r})"
    raw = values[0]
    if kind.startswith("choice:"):
        choices = kind.split(":", 1)[1].split(",")
        if raw not in choices:
            return None, f"{group[0].where}: {name} must be {' or '.join(choices)} (got {raw!r})"
        return raw, None
    low = 0 if kind == "int0" else 1
    if not re.fullmatch(r"[0-9]{1,9}", raw) or int(raw) < low:
        word = "a non-negative" if low == 0 else "a positive"
        return None, f"{group[0].where}: {name} must be {word} integer (got {raw!r})"
    return int(raw), None


def sort_args(tokens: Sequence[Token]) -> Sorted:
    """Every flag of the team's arguments sorted; all problems at once, one line each."""
    groups, problems = token_groups(tokens)
    kept: list[str] = []
    taken: dict[str, Taken] = {}
    replaced: list[Replacement] = []
    for group in groups:
        name = flag_name(group[0].text)
        why = REPLACED.get(name) or next(
            (w for p, w in REPLACED_PREFIXES.items() if name.startswith(p)), None
        )
        if why:
            replaced.append(Replacement(name, _given(group), why, group[0].where))
            continue
        problems += [
            f"{t.where}: {t.text!r} in {name}: {t.unresolved}; set it in the environment or write its value"
            for t in group
            if t.unresolved
        ]
        if name in REFUSED_VALUES:
            allowed, reason = REFUSED_VALUES[name]
            values = _values(group)
            if values and values[0] not in allowed:
                problems.append(f"{group[0].where}: {name} {values[0]}: {reason}")
                continue
            replaced.append(
                Replacement(name, _given(group), "ftqual sets it (the same format)", group[0].where)
            )
            continue
        if name in TAKEN:
            key, kind = TAKEN[name]
            value, problem = _parse(group, kind)
            if problem:
                problems.append(problem)
                continue
            earlier = taken.get(key)
            if earlier is not None and earlier.value != value:
                problems.append(
                    f"{group[0].where}: {name} {value} contradicts {earlier.where}: {name} {earlier.value}; "
                    "keep one"
                )
            taken[key] = Taken(name, value, group[0].where)
            continue
        kept += [t.text for t in group]
    problems += batch_problems(taken)
    return Sorted(tuple(kept), taken, tuple(replaced), tuple(problems), tuple(tokens))


def batch_problems(taken: dict[str, Taken]) -> list[str]:
    """What the team's batch and evaluation say about themselves (the world size is judged later)."""
    out = []
    micro, global_ = taken.get("micro_batch_size"), taken.get("global_batch_size")
    if micro and global_ and int(global_.value) % int(micro.value):
        out.append(
            f"{global_.where}: --global-batch-size {global_.value} is not a multiple of {micro.where}: "
            f"--micro-batch-size {micro.value}; make it one"
        )
    return out


def accumulation_problem(
    world: int, tp: int, pp: int, cp: int, micro: int, global_batch: int, where: str
) -> str | None:
    """Megatron's rule: the global batch is micro batch x data-parallel size x accumulation steps."""
    dp = world // max(1, tp * pp * cp)
    if dp < 1 or global_batch % (micro * dp):
        return (
            f"{where}: the global batch {global_batch} is not divisible by micro batch {micro} x "
            f"data-parallel size {dp} (world {world} / TP {tp} x PP {pp} x CP {cp}); "
            "choose a global batch that is"
        )
    return None
