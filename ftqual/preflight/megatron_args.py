"""Ask the Megatron-LM checkout's own argument parser whether it accepts each scenario's arguments.

A flag the checkout does not know otherwise costs a launch, every restart and GPU time, and surfaces as
`pretrain_gpt.py: error: unrecognized arguments: ...` in each cycle's training log. Here the tree's
`megatron.training.arguments.parse_args` runs on exactly the arguments the worker hands to pretrain_gpt.py,
in a child interpreter (no GPU, no process group; a broken install or a hanging import cannot stall the
preflight), and argparse's one-line error comes back. Only parsing is checked: Megatron's validate_args
needs the world it will run in.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ftqual.preflight.child import run_json_child

# Runs in the child. Reads {"tree": ..., "argvs": [[...], ...]} on stdin, prints one JSON line.
PARSE_SCRIPT = r"""
import contextlib, importlib.util, io, json, sys
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
results = []
for argv in req["argvs"]:
    sys.argv = ["pretrain_gpt.py", *argv]
    err = io.StringIO()
    res = {"ok": True, "error": None}
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            A.parse_args(extra_args_provider=extra, ignore_unknown_args=False)
    except SystemExit:
        said = [ln for ln in err.getvalue().splitlines() if "error:" in ln]
        res["ok"] = False
        res["error"] = said[-1].split("error:", 1)[1].strip() if said else "argument parsing failed"
    except Exception as exc:
        res["ok"] = False
        res["error"] = (f"{type(exc).__name__}: {exc}".strip().splitlines() or ["error"])[0]
    results.append(res)
print(json.dumps({"results": results}))
"""


@dataclass(frozen=True)
class MegatronParse:
    scenario: str
    ok: bool | None  # None: the parser could not be run
    error: str | None = None


def workload_args(argv: Sequence[str]) -> list[str]:
    """What the worker wrapper hands to the entrypoint: everything after the first `--`."""
    return list(argv[list(argv).index("--") + 1 :]) if "--" in argv else []


def parse_with_megatron(
    tree: str,
    argvs: Mapping[str, Sequence[str]],
    python: str = sys.executable,
    timeout_s: float = 180.0,
    env: Mapping[str, str] | None = None,
) -> list[MegatronParse]:
    """One MegatronParse per scenario (workload arguments only), in the mapping's order."""
    if not argvs:
        return []
    names = list(argvs)

    def every(ok: bool | None, error: str) -> list[MegatronParse]:
        return [MegatronParse(n, ok, error) for n in names]

    request = {"tree": str(tree), "argvs": [list(argvs[n]) for n in names]}
    data = run_json_child(python, PARSE_SCRIPT, request, timeout_s, env, "importing Megatron's arguments")
    if isinstance(data, str):
        return every(None, data)
    if "import_error" in data:
        return every(None, f"cannot import megatron.training.arguments: {data['import_error']}")
    return [MegatronParse(n, r["ok"], r["error"]) for n, r in zip(names, data["results"], strict=True)]
