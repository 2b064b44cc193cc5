"""Ask the Megatron-LM checkout itself (its parser, then its validate_args) whether it accepts the arguments.

Each scenario's arguments, the parser's and the validation's word.

A flag the checkout does not know, or a pair of flags its validation refuses (`Cannot specify both
--step-batch-size-schedule and --global-batch-size`, a world size the parallel sizes do not divide), otherwise
costs a launch, every restart and GPU time, and surfaces only in each cycle's training log. Here the tree's
`megatron.training.arguments.parse_args` runs on exactly the arguments the worker hands to pretrain_gpt.py,
then its `validate_args` (with pretrain_gpt.py's defaults), in a child interpreter: no GPU, no process group
(the environment validate_args reads, WORLD_SIZE, RANK and LOCAL_RANK, is the scenario's world size, rank 0),
nothing of Megatron stubbed; a broken install or a hanging import cannot stall the preflight. argparse's
one-line error, or validate_args' refusal (its exception, an empty assertion named by its source line), comes
back. What validate_args cannot judge on this machine (it needs CUDA, a module the training node has, the
checkpoint --use-checkpoint-args reads) is "not validated here", never a refusal.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ftqual.preflight.child import run_json_child

# Runs in the child. Reads {"tree": ..., "argvs": [[...], ...]} on stdin, prints one JSON line.
PARSE_SCRIPT = r"""
import contextlib, importlib.util, io, json, os, sys, traceback
req = json.loads(sys.stdin.read())
sys.path.insert(0, req["tree"])
try:
    with contextlib.redirect_stdout(io.StringIO()):
        from megatron.training import arguments as A
except BaseException as exc:
    print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}".strip().splitlines()[0]})); sys.exit(0)
extra = None
if importlib.util.find_spec("modelopt") is not None:  # pretrain_gpt.py adds these arguments when present
    try:
        from megatron.post_training.arguments import add_modelopt_args as extra
    except BaseException:
        extra = None
DEFAULTS = {"tokenizer_type": "GPT2BPETokenizer"}  # pretrain_gpt.py's args_defaults
# What only the training node has: a refusal that names it is no judgement of the arguments.
MACHINE = ("cuda", "nvidia driver", "no gpu", "gpus available", "device-side", "nccl")

def first_line(exc):
    text = f"{type(exc).__name__}: {exc}".strip()
    if str(exc).strip() or not exc.__traceback__:
        return text.splitlines()[0]
    frame = traceback.extract_tb(exc.__traceback__)[-1]  # a bare `assert`: its source line says what failed
    where = frame.filename
    if where.startswith(req["tree"]):
        where = os.path.relpath(where, req["tree"])
    return f"{type(exc).__name__} at {where}:{frame.lineno}: {(frame.line or '').strip()}"

results = []
saved = dict(os.environ)
for argv, world in zip(req["argvs"], req["worlds"]):
    os.environ.clear(); os.environ.update(saved)
    os.environ.update({"WORLD_SIZE": str(world), "RANK": "0", "LOCAL_RANK": "0"})
    sys.argv = ["pretrain_gpt.py", *argv]
    err = io.StringIO()
    res = {"ok": True, "error": None, "stage": "parse_args", "unvalidated": None}
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = A.parse_args(extra_args_provider=extra, ignore_unknown_args=False)
    except SystemExit:
        said = [ln for ln in err.getvalue().splitlines() if "error:" in ln]
        res["ok"] = False
        res["error"] = said[-1].split("error:", 1)[1].strip() if said else "argument parsing failed"
        results.append(res); continue
    except Exception as exc:
        res["ok"] = False
        res["error"] = first_line(exc)
        results.append(res); continue
    if not req["validate"]:
        pass
    elif not hasattr(A, "validate_args"):
        res["unvalidated"] = "this tree's megatron/training/arguments.py has no validate_args"
    elif getattr(args, "use_checkpoint_args", False) or getattr(args, "yaml_cfg", None):
        res["unvalidated"] = "--use-checkpoint-args or --yaml-cfg: arguments come from files read at launch"
    else:
        try:
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                A.validate_args(args, dict(DEFAULTS))
        except (AssertionError, ValueError, SystemExit) as exc:
            said = f"validate_args exited ({exc.code})" if isinstance(exc, SystemExit) else first_line(exc)
            if any(m in said.lower() for m in MACHINE):
                res["unvalidated"] = said
            else:
                res.update(ok=False, error=said, stage="validate_args")
        except BaseException as exc:  # an import, CUDA, a file: what this machine lacks, not a refusal
            res["unvalidated"] = first_line(exc)
    results.append(res)
os.environ.clear(); os.environ.update(saved)
print(json.dumps({"results": results}))
"""


@dataclass(frozen=True)
class MegatronParse:
    scenario: str
    ok: bool | None  # None: the parser could not be run
    error: str | None = None
    stage: str = "parse_args"  # which of Megatron's steps refused (ok False): parse_args | validate_args
    unvalidated: str | None = None  # why validate_args could not judge the parsed arguments here


def workload_args(argv: Sequence[str]) -> list[str]:
    """What the worker wrapper hands to the entrypoint: everything after the first `--`."""
    return list(argv[list(argv).index("--") + 1 :]) if "--" in argv else []


def parse_with_megatron(
    tree: str,
    argvs: Mapping[str, Sequence[str]],
    python: str = sys.executable,
    timeout_s: float = 180.0,
    env: Mapping[str, str] | None = None,
    worlds: Mapping[str, int] | None = None,
    validate: bool = True,
) -> list[MegatronParse]:
    """One MegatronParse per scenario (workload arguments only), in the mapping's order; `worlds`: each
    scenario's world size (1 where not given), the WORLD_SIZE validate_args judges the parallel sizes by."""
    if not argvs:
        return []
    names = list(argvs)

    def every(ok: bool | None, error: str) -> list[MegatronParse]:
        return [MegatronParse(n, ok, error) for n in names]

    request = {
        "tree": str(tree),
        "argvs": [list(argvs[n]) for n in names],
        "worlds": [int((worlds or {}).get(n) or 1) for n in names],
        "validate": validate,
    }
    data = run_json_child(python, PARSE_SCRIPT, request, timeout_s, env, "importing Megatron's arguments")
    if isinstance(data, str):
        return every(None, data)
    if "import_error" in data:
        return every(None, f"cannot import megatron.training.arguments: {data['import_error']}")
    return [
        MegatronParse(n, r["ok"], r["error"], r.get("stage", "parse_args"), r.get("unvalidated"))
        for n, r in zip(names, data["results"], strict=True)
    ]


# ------------------------------------------------------------------ where a refused argument was written

FLAG_RE = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*")
NAME_RE = re.compile(r"\b(?:args\.)?([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")


def _flag(text: str) -> str:
    return text.split("=", 1)[0].replace("_", "-")


def named_flags(error: str, argv: Sequence[str]) -> list[str]:
    """The flags of `argv` a refusal names, in the refusal's order: `--global-batch-size`, or the attribute
    validate_args tests (`args.global_batch_size`, `global_batch_size`)."""
    given = {_flag(a) for a in argv if a.startswith("--")}
    found: list[str] = []
    for match in sorted([*FLAG_RE.finditer(error), *NAME_RE.finditer(error)], key=lambda m: m.start()):
        text = match.group(0) if match.group(0).startswith("--") else "--" + match.group(1)
        flag = _flag(text)
        if flag in given and flag not in found:
            found.append(flag)
    return found


def origins(flags: Sequence[str], team_args: Sequence[str], where: Sequence[str]) -> list[str]:
    """`<file:line> <flag>` for each flag the team wrote (the launch script's line; `megatron_args[i]`, the
    config key, where the arguments came from the config), `<flag> (ftqual's)` for one ftqual added."""
    named = (
        list(where)
        if len(where) == len(team_args)
        else [f"megatron_args[{i}]" for i in range(len(team_args))]
    )
    out = []
    for flag in flags:
        at = next(
            (named[i] for i, a in enumerate(team_args) if a.startswith("--") and _flag(a) == flag), None
        )
        out.append(f"{at} {flag}" if at else f"{flag} (ftqual's)")
    return out
