"""Whether the rank sentinels can dump stacks here: py-spy found and one real dump made.

Whether the rank sentinels will be able to dump stacks on this node: py-spy found (as the launcher finds
it, ftqual.stack.facts.stack_dump_tool) and allowed to read a process the way a sentinel reads its rank
(a process that is not its parent and that allowed it through Yama's PR_SET_PTRACER, as the worker wrapper
does): one real dump of a sleeping child interpreter. Facts only; check_stack_dumps judges them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ftqual.stack.facts import DUMP_TOOL_ENV, stack_dump_tool

PROBE_TIMEOUT_S = 15.0
# The target lets any process of its user trace it (Yama ptrace_scope 1), says so, and sleeps.
TARGET = (
    "import ctypes, sys, time\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(0x59616D61, -1, 0, 0, 0)\n"
    "except Exception:\n"
    "    pass\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@dataclass(frozen=True)
class DumpProbe:
    tool: str | None  # py-spy's path; None: not found (or FTQUAL_DUMP_TOOL=none)
    version: str | None = None
    error: str | None = None  # why a dump failed here, in one line; None: one worked
    asked_none: bool = False  # FTQUAL_DUMP_TOOL=none: dumps left to the ranks' faulthandler on purpose
    ptrace_scope: str | None = None  # /proc/sys/kernel/yama/ptrace_scope, where Yama is on


def _ptrace_scope() -> str | None:
    try:
        return Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        return None


def _first_error_line(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith(("Stack backtrace", "0:", "1:", "2:"))]
    return " ".join(useful[:3])[:300] or "no message"


def probe_stack_dumps(env: Mapping[str, str], python: str = sys.executable) -> DumpProbe:
    asked_none = env.get(DUMP_TOOL_ENV, "").strip().lower() == "none"
    tool = stack_dump_tool(env, python)
    scope = _ptrace_scope()
    if tool is None:
        return DumpProbe(None, asked_none=asked_none, ptrace_scope=scope)
    try:
        version = subprocess.run(
            [tool, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False
        ).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return DumpProbe(tool, error=f"{tool} --version failed: {exc}", ptrace_scope=scope)
    try:
        target = subprocess.Popen([python, "-c", TARGET], stdout=subprocess.PIPE, text=True)
    except OSError as exc:
        return DumpProbe(tool, version, f"cannot start {python}: {exc}", ptrace_scope=scope)
    try:
        target.stdout.readline()  # "ready": the PR_SET_PTRACER call is done
        time.sleep(0.2)  # the interpreter reaches its sleep
        done = subprocess.run(
            [tool, "dump", "--pid", str(target.pid), "--json"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            return DumpProbe(tool, version, _first_error_line(done.stderr), ptrace_scope=scope)
        try:
            json.loads(done.stdout)
        except ValueError:
            return DumpProbe(tool, version, "its output is not JSON", ptrace_scope=scope)
        return DumpProbe(tool, version, ptrace_scope=scope)
    except subprocess.TimeoutExpired:
        return DumpProbe(tool, version, f"no answer within {PROBE_TIMEOUT_S:.0f} s", ptrace_scope=scope)
    finally:
        target.kill()
        target.wait()
