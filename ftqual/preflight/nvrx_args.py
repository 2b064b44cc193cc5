"""Ask NVRx's own ft_launcher argument parser whether it accepts our command lines.

With --ft-nvrx-logfile, ft_launcher redirects its stderr into a pipe before it validates anything, so a bad
flag or a bad combination ends as exit 1 with empty logs. Here the same parser and the same pure
validations run in a child interpreter (a broken NVRx install or a hanging import cannot stall preflight),
and the errors come back as text.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ftqual.preflight.child import run_json_child

# Runs in the child. Reads {"argvs": [[...], ...]} on stdin, prints one JSON line of results.
PARSE_SCRIPT = r"""
import argparse, json, os, sys
req = json.loads(sys.stdin.read())
try:
    from nvidia_resiliency_ext.fault_tolerance import launcher as L
    from nvidia_resiliency_ext.fault_tolerance.config import FaultToleranceConfig
except Exception as exc:
    print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"})); sys.exit(0)

class ParseError(Exception):
    pass

def fail(message):
    raise ParseError(message)

results = []
for argv in req["argvs"]:
    parser = L.get_args_parser()
    parser.error = fail  # argparse would print usage and sys.exit(2)
    res = {"ok": False, "error": None, "parsed": {}}
    try:
        args = parser.parse_args(argv)
        # The checks ft_launcher makes before its log pipe reader exists (launcher.py run/config_from_args).
        for name, flag in (("ft_nvrx_logfile", "--ft-nvrx-logfile"),
                           ("ft_per_cycle_applog_prefix", "--ft-per-cycle-applog-prefix")):
            value = getattr(args, name, None)
            if value and not os.path.isabs(value):
                raise ParseError(f"{flag} must be an absolute path, got: {value}")
        if hasattr(L, "_validate_args"):
            L._validate_args(args)
        lo, hi = L.parse_min_max_nnodes(args.nnodes)
        if not 0 < lo <= hi:
            raise ParseError(f"--nnodes={args.nnodes} must be positive")
        if args.max_restarts < 0:
            raise ParseError("--max-restarts must be >= 0")
        if args.rdzv_backend.lower() != "c10d":
            raise ParseError(f"ft_launcher supports only --rdzv-backend=c10d, got {args.rdzv_backend}")
        try:
            cfg = FaultToleranceConfig.from_args(args)
        except Exception as exc:  # the section/timeout strings are parsed here, with terse messages
            raise ParseError(f"NVRx cannot build its FT config from the --ft-* flags: {exc}")
        res["parsed"] = {
            "nnodes": args.nnodes, "nproc_per_node": args.nproc_per_node, "max_restarts": args.max_restarts,
            "term_timeout": args.term_timeout, "workers_stop_timeout": args.workers_stop_timeout,
            "log_server_port": getattr(args, "ft_log_server_port", None),
            "rank_section_timeouts": cfg.rank_section_timeouts,
            "rank_out_of_section_timeout": cfg.rank_out_of_section_timeout,
            "training_script": args.training_script,
        }
        res["ok"] = True
    except (ParseError, ValueError, TypeError, AssertionError, RuntimeError) as exc:
        res["error"] = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    results.append(res)
print(json.dumps({"results": results}, default=str))
"""


@dataclass(frozen=True)
class ParseResult:
    ok: bool | None  # None: the parser could not be run at all
    error: str | None = None
    parsed: dict = field(default_factory=dict)


def parse_with_nvrx(
    argvs: Sequence[Sequence[str]],
    python: str = sys.executable,
    timeout_s: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> list[ParseResult]:
    """One ParseResult per argv (everything after `ft_launcher`), in order."""
    if not argvs:
        return []
    request = {"argvs": [list(a) for a in argvs]}
    data = run_json_child(python, PARSE_SCRIPT, request, timeout_s, env, "importing NVRx's launcher")
    if isinstance(data, str):
        return [ParseResult(None, data)] * len(argvs)
    if "import_error" in data:
        return [ParseResult(None, f"cannot import NVRx's launcher: {data['import_error']}")] * len(argvs)
    return [ParseResult(r["ok"], r["error"], r["parsed"]) for r in data["results"]]
