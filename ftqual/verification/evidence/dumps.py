"""dumps/: the rank sentinels' stack dumps and what held the rank, in one line.

The rank sentinels' stack dumps (dumps/<host>.cycle<c>.rank<r>.<n>.json, schema ftqual.stackdump/v1,
written by ftqual.rank.sentinel): one reader for both formats a dump holds (py-spy's JSON, Python's
faulthandler text), and what held the rank, said in one line.

What holds a rank is the innermost frame of the thread that keeps it from going on that is not a waiting
primitive of the standard library (a join, a lock, a queue, a sleep of threading/multiprocessing/...), with
that primitive and the innermost named native call where the tool gave native frames: "main thread in
torch/utils/data/dataloader.py `_MultiProcessingDataLoaderIter._clean_up_worker` -> `BaseProcess.join`
(waiting on 6 child processes)". The thread is the one that holds the GIL when another than the main thread
does (a GIL lock: nothing else runs), else the main thread.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ftqual.rank.ids import STACKDUMP_SCHEMA
from ftqual.verification.evidence.model import SourceStatus, missing
from ftqual.verification.evidence.safeio import inside

DUMPS = "dumps"
SCHEMA = STACKDUMP_SCHEMA  # the rank sentinel writes the dumps (ftqual.rank.sentinel)
DUMP_NAME = re.compile(
    r"(?P<host>.+)\.cycle(?P<cycle>[0-9]{1,9})\.rank(?P<rank>[0-9]{1,9})\.(?P<n>[0-9]{1,4})\.json"
)
MAX_DUMPS = 2000
MAX_DUMP_BYTES = 8 << 20
NAME_WIDTH = 120  # native C++ names run to kilobytes
# Where a thread waits rather than works: the standard library's joins, locks, queues, selects and sleeps.
WAITING_FILES = re.compile(
    r"(^|/)(threading|queue|selectors|subprocess|socket|ssl)\.py$"
    r"|(^|/)(multiprocessing/(process|popen_\w+|connection|synchronize|queues|managers|pool|resource_sharer)"
    r"|concurrent/futures/[\w]+|asyncio/[\w]+)\.py$"
)
# Native frames that say nothing of who waits: libc, the C++ runtime, libffi and the interpreter itself.
PLUMBING_LIBS = re.compile(
    r"^(libc|libpthread|libstdc\+\+|libgcc_s|libffi|libpython[\d.]*|ld-linux[\w-]*)([.-]|$)"
)
FAULTHANDLER_THREAD = re.compile(
    r"^(?P<current>Current thread|Thread) (?P<id>0x[0-9a-f]+) \(most recent call first\):$"
)
FAULTHANDLER_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+|\?\?\?) in (?P<function>.+)$')


@dataclass(frozen=True)
class Frame:
    function: str
    file: str  # short: the package-relative path py-spy gives, or the path faulthandler prints
    line: int | None
    native: bool = False

    def said(self) -> str:
        where = f" in {self.file}" if self.native else ""
        return f"`{self.function[:NAME_WIDTH]}`{where}"


@dataclass(frozen=True)
class Thread:
    name: str
    frames: tuple[Frame, ...]  # innermost first
    owns_gil: bool | None = None  # None: the tool does not say (faulthandler)
    main: bool = False


@dataclass(frozen=True)
class DumpedProcess:
    pid: int
    ppid: int | None
    state: str | None
    cmdline: tuple[str, ...]
    tool_format: str | None  # "py-spy-json", "faulthandler", None (not dumped)
    threads: tuple[Thread, ...]
    errors: tuple[str, ...]


@dataclass(frozen=True)
class StackDump:
    path: str  # relative to the run directory
    host: str
    cycle: int
    rank: int
    number: int
    pid: int
    taken_at: datetime | None
    trigger: dict
    tool: str | None
    processes: tuple[DumpedProcess, ...]

    @property
    def rank_process(self) -> DumpedProcess | None:
        return next((p for p in self.processes if p.pid == self.pid), None)

    @property
    def children(self) -> tuple[DumpedProcess, ...]:
        return tuple(p for p in self.processes if p.pid != self.pid)

    def trigger_said(self) -> str:
        t = self.trigger
        if t.get("kind") == "fault":
            return f"{t.get('after_injection_s')} s after the {t.get('fault')} was injected"
        if t.get("kind") == "timeout_due":
            what = f"section '{t['section']}'" if t.get("section") else "out of section"
            return f"{what} open {t.get('open_s')} s of its {t.get('timeout_s')} s timeout"
        return "unknown trigger"


@dataclass(frozen=True)
class StackDumps:
    items: tuple[StackDump, ...]
    problems: tuple[str, ...] = ()  # files that could not be read, each in one line

    def of(self, cycle: int | None, rank: int | None = None) -> tuple[StackDump, ...]:
        return tuple(
            d for d in self.items if (cycle is None or d.cycle == cycle) and (rank is None or d.rank == rank)
        )


def _py_spy_threads(output: object) -> tuple[Thread, ...]:
    if not isinstance(output, list):
        raise ValueError("py-spy output is not a list of threads")
    threads = []
    for item in output:
        if not isinstance(item, dict) or not isinstance(item.get("frames"), list):
            raise ValueError("a py-spy thread without frames")
        frames = []
        for f in item["frames"]:
            if not isinstance(f, dict):
                raise ValueError("a py-spy frame is not an object")
            short = str(f.get("short_filename") or f.get("filename") or "?")
            line = f.get("line") if isinstance(f.get("line"), int) and f.get("line") else None
            native = not short.endswith(".py") and not short.startswith("<")
            frames.append(Frame(str(f.get("name") or "?"), short, line, native))
        name = str(item.get("thread_name") or item.get("thread_id") or "?")
        main = item.get("os_thread_id") == item.get("pid") or name == "MainThread"
        threads.append(Thread(name, tuple(frames), bool(item.get("owns_gil")), main))
    return tuple(threads)


def _faulthandler_threads(text: object) -> tuple[Thread, ...]:
    if not isinstance(text, str):
        raise ValueError("faulthandler output is not text")
    threads: list[Thread] = []
    name, frames = None, []

    def close() -> None:
        if name is not None:
            outer = frames[-1].function if frames else ""
            threads.append(Thread(name, tuple(frames), None, outer == "<module>"))

    for line in text.splitlines():
        head = FAULTHANDLER_THREAD.match(line)
        if head:
            close()
            name, frames = f"thread {head['id']}", []
            continue
        frame = FAULTHANDLER_FRAME.match(line)
        if frame and name is not None:
            number = frame["line"]
            frames.append(
                Frame(frame["function"], _short(frame["file"]), int(number) if number.isdigit() else None)
            )
    close()
    if not threads:
        raise ValueError("faulthandler output holds no thread")
    return tuple(threads)


def _short(path: str) -> str:
    """A path as py-spy shortens it: from the package below site-packages, or the file's name."""
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    match = re.search(r"/lib/python3\.\d+/(.+)$", path)
    return match[1] if match else os.path.basename(path)


def _process(raw: object) -> DumpedProcess:
    if not isinstance(raw, dict) or not isinstance(raw.get("pid"), int):
        raise ValueError("a process entry without a pid")
    fmt = raw.get("format")
    threads: tuple[Thread, ...] = ()
    if fmt == "py-spy-json":
        threads = _py_spy_threads(raw.get("output"))
    elif fmt == "faulthandler":
        threads = _faulthandler_threads(raw.get("output"))
    elif fmt is not None:
        raise ValueError(f"unknown dump format {fmt!r}")
    errors = raw.get("errors") if isinstance(raw.get("errors"), list) else []
    cmd = raw.get("cmdline") if isinstance(raw.get("cmdline"), list) else []
    return DumpedProcess(
        pid=raw["pid"],
        ppid=raw.get("ppid") if isinstance(raw.get("ppid"), int) else None,
        state=raw.get("state") if isinstance(raw.get("state"), str) else None,
        cmdline=tuple(str(c) for c in cmd),
        tool_format=fmt,
        threads=threads,
        errors=tuple(str(e) for e in errors),
    )


def parse_dump(text: str, rel: str) -> StackDump:
    """One dump file's record; ValueError (one line) when it is not one."""
    match = DUMP_NAME.fullmatch(os.path.basename(rel))
    if match is None:
        raise ValueError(f"{rel}: not a dump file name")
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{rel}: not JSON ({exc.msg})") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise ValueError(f"{rel}: schema is not {SCHEMA}")
    if not isinstance(record.get("pid"), int) or not isinstance(record.get("processes"), list):
        raise ValueError(f"{rel}: no pid or processes")
    try:
        processes = tuple(_process(p) for p in record["processes"])
    except ValueError as exc:
        raise ValueError(f"{rel}: {exc}") from None
    taken = record.get("taken_at")
    try:
        taken_at = datetime.fromisoformat(taken.replace("Z", "+00:00")) if isinstance(taken, str) else None
    except ValueError:
        taken_at = None
    return StackDump(
        path=rel,
        host=match["host"],
        cycle=int(match["cycle"]),
        rank=int(match["rank"]),
        number=int(match["n"]),
        pid=record["pid"],
        taken_at=taken_at,
        trigger=record.get("trigger") if isinstance(record.get("trigger"), dict) else {},
        tool=record.get("tool") if isinstance(record.get("tool"), str) else None,
        processes=processes,
    )


def read_dumps(run_dir: Path) -> tuple[StackDumps | None, SourceStatus]:
    """Every dump of the run, in the order they were taken; a file that cannot be read is a problem of its
    own (said in the source's reason), never a reason to drop the others."""
    folder = run_dir / DUMPS
    if not folder.is_dir():
        return StackDumps(()), SourceStatus("stack_dumps", ok=True, reason=f"{DUMPS}/ is absent: no dump")
    if not inside(folder, run_dir):
        return None, missing("stack_dumps", f"{DUMPS}/ resolves outside the run directory")
    try:
        names = sorted(n for n in os.listdir(folder) if DUMP_NAME.fullmatch(n))
    except OSError as exc:
        return None, missing("stack_dumps", f"{DUMPS}/ cannot be listed: {exc.strerror or exc}")
    items, problems = [], []
    for name in names[:MAX_DUMPS]:
        rel = f"{DUMPS}/{name}"
        path = folder / name
        try:
            if not inside(path, run_dir) or path.stat().st_size > MAX_DUMP_BYTES:
                raise ValueError(f"{rel}: outside the run directory or over {MAX_DUMP_BYTES >> 20} MiB")
            items.append(parse_dump(path.read_text(encoding="utf-8", errors="replace"), rel))
        except (OSError, ValueError) as exc:
            problems.append(str(exc) if isinstance(exc, ValueError) else f"{rel}: {exc.strerror or exc}")
    if len(names) > MAX_DUMPS:
        problems.append(f"{len(names)} dump files: only the first {MAX_DUMPS} were read")
    items.sort(key=lambda d: (d.taken_at is None, d.taken_at or datetime.min, d.path))
    status = SourceStatus(
        "stack_dumps",
        ok=True,
        complete=not problems,
        reason="; ".join(problems[:3]),
        paths=tuple(d.path for d in items),
    )
    return StackDumps(tuple(items), tuple(problems)), status


# What held the rank


def _waiting(frame: Frame) -> bool:
    return not frame.native and bool(WAITING_FILES.search(frame.file))


def _native_call(frames: tuple[Frame, ...]) -> Frame | None:
    """The innermost named native frame of a library that is not plumbing (libc, libstdc++, the interpreter),
    else the innermost named one."""
    inner = []
    for f in frames:  # only the native frames below the first Python frame
        if not f.native:
            break
        inner.append(f)
    named = [f for f in inner if not f.function.startswith("0x")]
    chosen = next((f for f in named if not PLUMBING_LIBS.match(f.file)), None)
    return chosen or (named[0] if named else None)


def _holding_thread(process: DumpedProcess) -> tuple[Thread, str] | None:
    if not process.threads:
        return None
    gil = next((t for t in process.threads if t.owns_gil and not t.main), None)
    if gil is not None:
        return gil, f"thread {gil.name} holds the GIL"
    main = next((t for t in process.threads if t.main), process.threads[-1])
    return main, "main thread"


def holder_of(dump: StackDump) -> str | None:
    """Who holds the rank and where, without the native call and the children: "main thread in
    torch/utils/data/dataloader.py `..._clean_up_worker` -> `BaseProcess.join`" (what a series of dumps is
    grouped by); None when the dump has no stack of the rank."""
    found = _holder(dump)
    return found[0] if found else None


def _holder(dump: StackDump) -> tuple[str, Thread, list[Frame]] | None:
    process = dump.rank_process
    if process is None:
        return None
    chosen = _holding_thread(process)
    if chosen is None:
        return None
    thread, who = chosen
    python = [f for f in thread.frames if not f.native]
    if not python:
        native = _native_call(thread.frames)
        return f"{who} in native code only ({native.said() if native else 'no named frame'})", thread, python
    waits = []
    holder = None
    for frame in python:
        if _waiting(frame):
            waits.append(frame)
            continue
        holder = frame
        break
    if holder is None:  # waiting frames all the way out: the outermost names the caller
        holder = waits.pop()
    line = f"{who} in {holder.file} `{holder.function[:NAME_WIDTH]}`"
    if waits:
        line += f" -> `{waits[-1].function[:NAME_WIDTH]}`"  # the primitive the holder called
    return line, thread, python


def held_by(dump: StackDump) -> str | None:
    """What held the rank when `dump` was taken, in one line: the holder (holder_of), the innermost named
    native call, a stopped process, and the child processes it waits on, grouped by where each is; None when
    the dump has no stack of the rank."""
    found = _holder(dump)
    if found is None:
        return None
    line, thread, python = found
    if not python:
        return line
    native = _native_call(thread.frames)
    if native is not None:
        line += f" (native: {native.said()})"
    process = dump.rank_process
    if process is not None and process.state in ("T", "t"):
        line += " in a stopped process (SIGSTOP)"
    children = [c for c in dump.children if c.ppid == dump.pid] or list(dump.children)
    joined = any(
        re.search(r"join|wait|poll|_clean_up_worker|_shutdown_workers", f.function) for f in python[:6]
    )
    if children and joined:
        line += f", waiting on {len(children)} child process{'es' if len(children) > 1 else ''}: "
        line += _children_said(children)
    return line


def _children_said(children: list[DumpedProcess]) -> str:
    """`6 in torch/utils/data/_utils/worker.py `_worker_loop`, 1 in ...`: the children grouped by where
    their main thread is, the largest group first, three groups at most; a lone child by its pid."""
    groups: dict[str, list[int]] = {}
    for child in children:
        groups.setdefault(_child_where(child), []).append(child.pid)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    said = [
        f"pid {pids[0]} {where}".rstrip() if len(pids) == 1 else f"{len(pids)} {where or 'without a stack'}"
        for where, pids in ordered[:3]
    ]
    rest = sum(len(pids) for _, pids in ordered[3:])
    return ", ".join(said) + (f" and {rest} more" if rest else "")


def _child_where(child: DumpedProcess) -> str:
    if child.state == "Z":
        return "exited, not yet reaped"
    thread = next((t for t in child.threads if t.main), child.threads[0] if child.threads else None)
    frames = [f for f in thread.frames if not f.native and not _waiting(f)] if thread else []
    return f"in {frames[0].file} `{frames[0].function[:NAME_WIDTH]}`" if frames else ""


def dump_problem(dump: StackDump) -> str | None:
    """Why the rank's own stack is missing from `dump`, in one line (the tool's errors), else None."""
    process = dump.rank_process
    if process is None:
        return "the rank had exited when the dump was taken"
    if process.threads:
        return None
    return "; ".join(process.errors[-2:]) or "the tool gave no stack"
