"""The rank sentinel: dumps its rank's stacks before a timeout is due and after a fault it survives.

A rank's sentinel: records the Python stack of its rank (and of the rank's children) before a timeout's
kill or while a fault keeps the rank alive, so that the run directory says *where* a rank waited.

    python -m ftqual.rank.sentinel --pid PID --dump-dir DIR --prefix NAME [--tool PY_SPY] [--timeouts JSON]
        [--faulthandler-file FILE] [--faulthandler-signal N]

Started by the worker wrapper (ftqual.rank.sections.start_sentinel) as its child, one per rank, before the
workload; it reads one JSON event per line on stdin from the rank:

    {"event": "start"|"end", "section": NAME, "timeouts": {"step": 10, ..., "out_of_section": 5}}
    {"event": "injected", "fault": "hang"}

and dumps the rank
- a `lead` before the open section's timeout (or the out-of-section timeout after the last section ended)
  is due: NVRx's rank monitor kills the rank between the timeout and one monitor interval after it, so a
  dump at the timeout minus the lead is taken while the rank still lives (section timeouts come with each
  event, as the rank's RankMonitorClient holds them: calculated timeouts included);
- 2, 8 and 30 s after a fault that leaves the rank alive (a hang, a GIL lock, a GPU hang, an exception or
  SIGINT while the rank unwinds and lingers).

Each dump is one file, dumps/<prefix>.<n>.json (schema ftqual.stackdump/v1), written atomically: the time
it was taken, what triggered it, and per process (the rank, then its children) the tool's raw output. The
tool is py-spy (reads a live or stopped process from outside; needs ptrace permission): Python frames of
every process first, written at once, then the rank's native frames added where py-spy can unwind them.
Without py-spy, or where it cannot read the rank, Python's faulthandler inside the rank (registered by the
wrapper on `--faulthandler-signal`, writing to `--faulthandler-file`) is asked, which works while the rank
can still run a C signal handler (not when it is stopped); the record then holds its text. The readers
are in ftqual.verification.evidence.dumps.

The sentinel ends with its rank: its parent's death (PR_SET_PDEATHSIG) or the end of stdin. Standard
library only (ftqual.rank's): it runs in the training environment, beside the workload.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from ftqual.rank.ids import STACKDUMP_SCHEMA
from ftqual.rank.markers import utc_now
from ftqual.rank.procfs import caught, cmdline, descendants_of, parent_pids, read_stat

SCHEMA = STACKDUMP_SCHEMA
# Faults after which the rank lives on (for a while or until killed): dumped at these delays.
ALIVE_FAULTS = ("hang", "gil_lock", "gpu_hang", "exception", "sigint")
FAULT_DUMP_DELAYS_S = (2.0, 8.0, 30.0)
MAX_DUMPS = 12  # per rank and cycle: a flood of dumps would be noise, not evidence
TOOL_TIMEOUT_S = 10.0
NATIVE_TIMEOUT_S = 20.0
FAULTHANDLER_WAIT_S = 2.0
PARENT_POLL_S = 0.5
PR_SET_PDEATHSIG = 1


def lead_s(timeout: float) -> float:
    """How long before a timeout is due the rank is dumped: 3 s, or less for short timeouts (at most 30 % of
    the timeout, so that a dump is not taken in every step of a healthy run)."""
    return min(3.0, 0.3 * timeout)


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when its parent dies (Linux); a no-op elsewhere."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)


def _pdeathsig() -> None:
    """In a child before its exec: SIGKILL it when this process dies (the sentinel has one thread, so a
    preexec function is safe here)."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def proc_state(pid: int) -> str | None:
    """The process's state letter from /proc (R, S, D, T, t, Z...), None when it is gone."""
    stat = read_stat(pid)
    return stat.state if stat is not None else None


def children_of(root: int, exclude: int) -> list[int]:
    """Every descendant of `root` (breadth first), `exclude` and its descendants left out."""
    parents = {pid: ppid for pid, ppid in parent_pids().items() if pid != exclude}
    return descendants_of(root, parents)


def run_tool(argv: list[str], timeout: float = TOOL_TIMEOUT_S) -> tuple[object | None, str | None]:
    """(py-spy's parsed JSON, None) or (None, its error in one line)."""
    try:
        # the tool dies with the sentinel (which dies with its rank): nothing outlives the cycle
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, preexec_fn=_pdeathsig
        )
    except subprocess.TimeoutExpired:
        return None, f"{argv[0]} did not answer within {timeout:.0f} s"
    except OSError as exc:
        return None, f"{argv[0]}: {exc}"
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        cause = next((line for line in lines if not line.startswith(("Stack backtrace", "0:"))), "")
        detail = " ".join(lines[:4]) if not cause else " ".join(lines[: lines.index(cause) + 3])
        return None, f"exit {done.returncode}: {detail[:400]}"
    try:
        return json.loads(done.stdout), None
    except ValueError:
        return None, "unreadable output (not JSON)"


FRAME_KEYS = ("name", "filename", "short_filename", "line")  # what the readers use of py-spy's frames


def slim(output: object) -> object:
    """py-spy's threads with each frame cut to FRAME_KEYS (its locals, module and entry flags are empty or
    unused here, and a CUDA process has thousands of frames)."""
    if not isinstance(output, list):
        return output
    for thread in output:
        if isinstance(thread, dict) and isinstance(thread.get("frames"), list):
            thread["frames"] = [
                {k: f.get(k) for k in FRAME_KEYS} if isinstance(f, dict) else f for f in thread["frames"]
            ]
    return output


def pyspy_dump(tool: str, pid: int, native: bool = False) -> dict:
    """One process through py-spy: Python frames (paused for the read, or read as it lies where pausing
    fails); with `native`, native frames too, which cost a symbol load of every library (seconds with CUDA's)
    and so come second, once the Python frames are on disk."""
    # a stopped process cannot be paused (py-spy fails to suspend it): it is read as it lies
    if native:
        tries = [["--native"]]
    elif proc_state(pid) in ("T", "t"):
        tries = [["--nonblocking"]]
    else:
        tries = [[], ["--nonblocking"]]
    errors = []
    for extra in tries:
        argv = [tool, "dump", "--pid", str(pid), "--json", *extra]
        output, error = run_tool(argv, NATIVE_TIMEOUT_S if native else TOOL_TIMEOUT_S)
        if output is not None:
            return {"format": "py-spy-json", "command": argv, "output": slim(output), "errors": errors}
        errors.append(f"{' '.join(argv[1:])}: {error}")
    return {"format": None, "command": None, "output": None, "errors": errors}


def faulthandler_dump(pid: int, path: Path | None, signum: int | None) -> dict:
    """Ask the rank's faulthandler for its threads' stacks; its text, or why not."""
    if path is None or signum is None:
        return {"format": None, "output": None, "errors": ["no faulthandler registered by the wrapper"]}
    if proc_state(pid) in ("T", "t"):
        return {
            "format": None,
            "output": None,
            "errors": ["the rank is stopped: its faulthandler cannot run until it is continued"],
        }
    if not caught(pid, signum):
        return {"format": None, "output": None, "errors": [f"the rank does not catch signal {signum}"]}
    try:
        before = path.stat().st_size
    except OSError:
        before = 0
    os.kill(pid, signum)
    deadline = time.monotonic() + FAULTHANDLER_WAIT_S
    text = ""
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            with open(path, "rb") as fh:
                fh.seek(before)
                text = fh.read().decode(errors="replace")
        except OSError:
            text = ""
        if text.endswith("\n") and time.monotonic() > deadline - FAULTHANDLER_WAIT_S + 0.3:
            break
    if not text:
        return {"format": None, "output": None, "errors": ["the faulthandler wrote nothing within 2 s"]}
    return {"format": "faulthandler", "output": text, "errors": []}


class Sentinel:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pid = args.pid
        self.timeouts: dict[str, float | None] = dict(args.timeouts)
        self.open: list[tuple[str, float]] = []  # (section, monotonic start)
        self.last_end: float | None = None  # monotonic end of the last section, none open since
        self.planned: list[tuple[float, dict]] = []  # (monotonic due, trigger)
        self.done_keys: set = set()
        self.injected_at: float | None = None
        self.count = 0

    # events from the rank
    def on_event(self, event: dict) -> None:
        now = time.monotonic()
        timeouts = event.get("timeouts")
        if isinstance(timeouts, dict):
            self.timeouts.update(timeouts)
        kind = event.get("event")
        if kind == "start":
            self.open.append((str(event.get("section")), now))
        elif kind == "end":
            name = event.get("section")
            self.open = [] if name is None else [s for s in self.open if s[0] != name]
            if not self.open:
                self.last_end = now
        elif kind == "injected" and event.get("fault") in ALIVE_FAULTS:
            self.injected_at = now
            for delay in FAULT_DUMP_DELAYS_S:
                trigger = {"kind": "fault", "fault": event.get("fault"), "after_injection_s": delay}
                self.planned.append((now + delay, trigger))

    def section_due(self) -> tuple[float, dict] | None:
        """When the timeout of what is open now is due, minus the lead, with what it is."""
        if self.open:
            section, since = self.open[-1]
            timeout = self.timeouts.get(section)
            key = (section, since)
        elif self.last_end is not None:
            section, since = None, self.last_end
            timeout = self.timeouts.get("out_of_section")
            key = (None, since)
        else:
            return None
        if not isinstance(timeout, (int, float)) or timeout <= 0 or key in self.done_keys:
            return None
        lead = lead_s(float(timeout))
        trigger = {
            "kind": "timeout_due",
            "section": section,
            "timeout_s": timeout,
            "open_s": round(float(timeout) - lead, 3),
            "key": key,
        }
        return since + float(timeout) - lead, trigger

    def next_due(self) -> tuple[float, dict] | None:
        candidates = list(self.planned)
        due = self.section_due()
        if due is not None:
            candidates.append(due)
        return min(candidates, key=lambda c: c[0]) if candidates else None

    def fire(self, trigger: dict) -> None:
        key = trigger.pop("key", None)
        if key is not None:
            self.done_keys.add(key)
        else:
            self.planned = [p for p in self.planned if p[1] is not trigger]
        if self.count >= MAX_DUMPS or proc_state(self.pid) in (None, "Z"):
            return
        if self.injected_at is not None and trigger["kind"] == "timeout_due":
            trigger["after_injection_s"] = round(time.monotonic() - self.injected_at, 3)
        self.count += 1
        write_dump(self.args, self.count, trigger)

    def loop(self) -> None:
        stdin = sys.stdin.buffer
        buffered = b""
        while True:
            if os.getppid() != self.pid:
                return
            due = self.next_due()
            now = time.monotonic()
            if due is not None and due[0] <= now:
                self.fire(due[1])
                continue
            wait = PARENT_POLL_S if due is None else min(PARENT_POLL_S, due[0] - now)
            ready, _, _ = select.select([stdin], [], [], max(wait, 0.0))
            if not ready:
                continue
            chunk = os.read(stdin.fileno(), 65536)
            if not chunk:
                return  # the rank closed our pipe: it exited
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self.on_event(event)


def write_dump(args: argparse.Namespace, number: int, trigger: dict) -> Path:
    """Dump the rank and its children (Python frames), write the record, then add the rank's native frames
    where py-spy gives them and write it again: a kill that comes while the native unwinding still runs
    finds the Python frames on disk."""
    started = time.monotonic()
    taken_at = utc_now()
    me = os.getpid()
    processes = []
    for pid in [args.pid, *children_of(args.pid, exclude=me)]:
        state = proc_state(pid)
        if state is None:
            continue
        entry: dict = {"pid": pid, "ppid": None, "state": state, "cmdline": cmdline(pid)[:8]}
        stat = read_stat(pid)
        if stat is not None:
            entry["ppid"] = stat.ppid
        errors: list[str] = []
        dump = None
        if state == "Z":  # exited, not yet reaped by its parent: nothing to read, its state says it
            processes.append({**entry, "format": None, "command": None, "output": None, "errors": []})
            continue
        if args.tool:
            dump = pyspy_dump(args.tool, pid)
            errors += dump["errors"]
        if (dump is None or dump["format"] is None) and pid == args.pid:
            fallback = faulthandler_dump(pid, args.faulthandler_file, args.faulthandler_signal)
            errors += fallback["errors"]
            if fallback["format"] is not None:
                dump = fallback
        if dump is None and not args.tool and pid != args.pid:
            errors.append("no py-spy: a child process is listed, not dumped")
        entry.update(
            format=dump["format"] if dump else None,
            command=dump.get("command") if dump else None,
            output=dump["output"] if dump else None,
            errors=errors,
        )
        processes.append(entry)
    record = {
        "schema": SCHEMA,
        "prefix": args.prefix,
        "number": number,
        "pid": args.pid,
        "taken_at": taken_at,
        "took_s": round(time.monotonic() - started, 3),
        "trigger": trigger,
        "tool": args.tool or None,
        "native": False,
        "processes": processes,
    }
    path = _write(args, number, record)
    rank = processes[0] if processes and processes[0]["pid"] == args.pid else None
    if args.tool and rank is not None and rank["format"] == "py-spy-json" and rank["state"] not in ("T", "t"):
        native = pyspy_dump(args.tool, args.pid, native=True)
        if native["format"] is not None:
            rank.update(command=native["command"], output=native["output"])
            record.update(native=True, took_s=round(time.monotonic() - started, 3))
        else:
            rank["errors"] = [*rank["errors"], *native["errors"]]
        path = _write(args, number, record)
    return path


def _write(args: argparse.Namespace, number: int, record: dict) -> Path:
    args.dump_dir.mkdir(parents=True, exist_ok=True)
    path = args.dump_dir / f"{args.prefix}.{number}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ftqual.rank.sentinel", description=__doc__.splitlines()[0])
    parser.add_argument("--pid", type=int, required=True)
    parser.add_argument("--dump-dir", type=Path, required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--tool", default="")
    parser.add_argument("--timeouts", type=json.loads, default={})
    parser.add_argument("--faulthandler-file", type=Path, default=None)
    parser.add_argument("--faulthandler-signal", type=int, default=None)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    die_with_parent(args.pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C to the group is for the rank, not for us
    Sentinel(args).loop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
