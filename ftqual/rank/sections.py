"""NVRx's sections as the rank sees them (RankMonitorClient wrapped), and the link to the rank sentinel.

NVRx's sections as this process sees them (RankMonitorClient's methods wrapped), and the rank sentinel
(ftqual.rank.sentinel) told of every section start and end, which dumps this rank's stacks before a
timeout's kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from ftqual.rank.markers import log
from ftqual.rank.procfs import module_env


class SectionWatch:
    """The NVRx sections this process has open, as seen through RankMonitorClient's methods."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: list[str] = []
        self.on_start = None  # called with the section name after a section opened
        self.on_end = None  # called with the section name after a section closed (the monitor knows)
        self.on_closing = None  # called with the section name before the monitor is told it closed
        # the rank sentinel's link: told of every section start and end, with the timeouts in force
        self.sentinel: SentinelLink | None = None

    def started(self, name: str, client=None) -> None:
        with self.lock:
            self.open.append(name)
        if self.sentinel is not None:
            self.sentinel.send({"event": "start", "section": name, "timeouts": timeouts_in_force(client)})
        if self.on_start is not None:
            self.on_start(name)

    def closing(self, name: str) -> None:
        if self.on_closing is not None:
            self.on_closing(name)

    def ended(self, name: str | None, client=None) -> None:
        with self.lock:
            if name is None:
                self.open.clear()
            elif name in self.open:
                self.open.remove(name)
        if self.sentinel is not None:
            self.sentinel.send({"event": "end", "section": name, "timeouts": timeouts_in_force(client)})

    def closed(self, name: str) -> None:
        if self.on_end is not None:
            self.on_end(name)

    def current(self) -> str | None:
        with self.lock:
            return self.open[-1] if self.open else None

    def inside(self, name: str) -> bool:
        with self.lock:
            return name in self.open


def install_section_hooks(watch: SectionWatch) -> bool:
    """Wrap RankMonitorClient's section methods in this process; False when NVRx is not importable."""
    try:
        from nvidia_resiliency_ext.fault_tolerance.rank_monitor_client import RankMonitorClient
    except Exception:  # any import failure means: no hooks, inject immediately
        return False
    original_start = RankMonitorClient.start_section
    original_end = RankMonitorClient.end_section
    original_end_all = RankMonitorClient.end_all_sections

    def start_section(self, section):
        result = original_start(self, section)
        watch.started(section, self)  # after the monitor knows, so an injection lands inside the section
        return result

    def end_section(self, section):
        watch.closing(section)  # a setup hang lands here: the section is still open for the monitor
        watch.ended(section, self)
        result = original_end(self, section)
        watch.closed(section)  # an in_save kill lands here, once the monitor saw the section end
        return result

    def end_all_sections(self):
        watch.ended(None, self)
        return original_end_all(self)

    RankMonitorClient.start_section = start_section
    RankMonitorClient.end_section = end_section
    RankMonitorClient.end_all_sections = end_all_sections
    return True


def timeouts_in_force(client) -> dict | None:
    """The section and out-of-section timeouts a RankMonitorClient holds now (calculated ones included), as
    {section: seconds, "out_of_section": seconds}; None when it holds none yet."""
    held = getattr(client, "section_timeouts", None)
    sections = getattr(held, "section", None)
    if not isinstance(sections, dict):
        return None
    found = {str(k): v for k, v in sections.items() if v is None or isinstance(v, (int, float))}
    found["out_of_section"] = getattr(held, "out_of_section", None)
    return found


class SentinelLink:
    """The write end of the rank sentinel's stdin: one JSON event per line, never blocking the rank (an event
    the pipe cannot take now is dropped, a sentinel that is gone is forgotten)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.fd: int | None = process.stdin.fileno()
        os.set_blocking(self.fd, False)
        self.lock = threading.Lock()

    def send(self, event: dict) -> None:
        with self.lock:
            if self.fd is None:
                return
            try:
                os.write(self.fd, (json.dumps(event) + "\n").encode())
            except BlockingIOError:
                pass
            except OSError:
                self.fd = None


# The signal the rank's faulthandler answers with every thread's stack (the sentinel's fallback without
# py-spy): a real-time signal nothing in the stack uses (NVRx's rank monitor takes SIGUSR1 and SIGUSR2).
FAULTHANDLER_SIGNAL = signal.SIGRTMIN + 5 if hasattr(signal, "SIGRTMIN") else None


SENTINEL = "ftqual.rank.sentinel"  # run as `python -m`, the checkout that holds it first on its path
CHECKOUT = Path(__file__).resolve().parents[2]


def start_sentinel(
    dump_dir: Path, tool: str | None, timeouts: dict, host: str, cycle: int, rank: int
) -> SentinelLink | None:
    """Register the faulthandler fallback and start this rank's sentinel (ftqual.rank.sentinel), which
    dumps this process's stacks before a timeout's kill; None, logged, when it cannot start (the run goes on:
    dumps are evidence, not a condition of training)."""
    prefix = f"{host}.cycle{cycle}.rank{rank}"
    argv = [sys.executable, "-m", SENTINEL, "--pid", str(os.getpid()), "--dump-dir", str(dump_dir)]
    argv += ["--prefix", prefix, "--tool", tool or "", "--timeouts", json.dumps(timeouts)]
    try:
        dump_dir.mkdir(parents=True, exist_ok=True)
        if FAULTHANDLER_SIGNAL is not None:
            import faulthandler

            path = dump_dir / f"{prefix}.faulthandler.txt"
            handle = open(path, "a")  # noqa: SIM115 - kept open for the process's life: the handler writes to it
            faulthandler.register(FAULTHANDLER_SIGNAL, file=handle, all_threads=True, chain=False)
            argv += ["--faulthandler-file", str(path), "--faulthandler-signal", str(int(FAULTHANDLER_SIGNAL))]
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, close_fds=True, env=module_env(CHECKOUT)
        )
    except (OSError, RuntimeError, ValueError) as exc:
        log(f"cannot start the rank sentinel (no stack dumps of this rank): {exc}")
        return None
    allow_tracer(process.pid)
    return SentinelLink(process)


PR_SET_PTRACER = 0x59616D61


def allow_tracer(pid: int) -> None:
    """Let `pid` and its children (the sentinel's py-spy) ptrace this process where Yama's ptrace_scope is 1,
    which otherwise lets a process trace only its own descendants; nothing elsewhere."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PTRACER, pid, 0, 0, 0)
    except (OSError, AttributeError):
        pass
