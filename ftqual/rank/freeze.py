"""The save-phase kill's helper process: stops the rank, sees the phase again, claims the marker, kills.

The save-phase kill, made by a helper process (this module run with `-m`): the rank frozen while its phase
is confirmed on disk. The kill is made by a helper process (freeze_helper): it stops the rank, sees the phase
again on disk, and only then claims the marker and kills; a phase gone by the stop lets the rank go on.
save_finalized (`.metadata` to the tracker in one finalize, milliseconds) is awaited by the helper itself
(wait_for_metadata: inotify on iter_S) once the poller sees a save S newer than the tracker."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from ftqual.rank.ids import INJECT_PREFIX
from ftqual.rank.markers import claim_marker, utc_now
from ftqual.rank.procfs import last_cpu, module_env, threads_stopped
from ftqual.rank.save_phases import DCP_METADATA, PHASE_POLL_SECONDS, SaveOnDisk, look_at_save, phase_reached
from ftqual.rank.tracker import TRACKER_NAME, iteration_dir_name, poll_tracker

CHECKOUT = Path(__file__).resolve().parents[2]  # the folder that holds ftqual/: the helper's path


FREEZE_STOP_WAIT_S = 2.0  # the longest wait for every thread to show stopped (one in a long disk write)


FREEZE_METHOD = (
    "SIGSTOP of the rank by its injector's helper (pid {pid}), the phase seen again on disk, SIGKILL"
)


def phase_still_holds(request: dict) -> tuple[str | None, SaveOnDisk | None]:
    """(None, iter_S's contents) when the disk still shows the poll's phase of save S with the tracker
    before S; else (what the disk shows instead, what iter_S held)."""
    checkpoint_dir = Path(request["checkpoint_dir"])
    save = int(request["save_iteration"])
    tracker = poll_tracker(checkpoint_dir / TRACKER_NAME)
    on_disk = look_at_save(checkpoint_dir / iteration_dir_name(save))
    if tracker is None or tracker >= save:
        return f"the tracker reads {tracker} (the save of {save} was finalized)", on_disk
    if on_disk is None:
        return f"{iteration_dir_name(save)} cannot be listed", None
    names, total = on_disk.signature()
    same = [list(names), total] == request["signature"]
    stable = int(request["stable"]) + 1 if same else 1
    if not phase_reached(request["phase"], on_disk, stable, request["reference"]):
        return f"{iteration_dir_name(save)} holds {on_disk.record()}: past {request['phase']}", on_disk
    return None, on_disk


WATCHED_PHASE = "save_finalized"


IN_CLOSE_WRITE = 0x00000008


IN_MOVED_TO = 0x00000080


INOTIFY_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of NUL-padded name


WATCH_LOOK_S = 0.05  # with inotify: how often the watch looks at the disk anyway (a save finalized unseen)


TRIGGER_RANK_POLL = "rank poll"  # the rank's poller saw the phase and asked for the kill


TRIGGER_INOTIFY = "inotify"  # the helper's watch: the event of `.metadata`


TRIGGER_HELPER_POLL = "helper poll"  # the helper's watch: `.metadata` found by a look


def inotify_watch(directory: Path, mask: int) -> int | None:
    """A non-blocking inotify descriptor watching `directory` for `mask`; None where there is none (not
    Linux, no such libc symbol, the watch limit reached, the directory gone)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(str(directory)), mask) < 0:
        os.close(fd)
        return None
    return fd


def inotify_names(fd: int) -> list[str]:
    """The names of the events waiting on `fd` (none when there are none)."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return []
    names, offset = [], 0
    while offset + INOTIFY_EVENT.size <= len(data):
        length = INOTIFY_EVENT.unpack_from(data, offset)[3]
        start = offset + INOTIFY_EVENT.size
        names.append(os.fsdecode(data[start : start + length].rstrip(b"\0")))
        offset = start + length
    return names


# The helper is woken by the rank's own write of `.metadata`, and the kernel tends to queue a woken task on
# the waker's CPU, where it waits until the rank yields: on a 2-CPU machine the wakeup came only once a
# writer spinning 3 ms after the rename had finished (bench/save_finalized_window.py), which is the whole
# window. A real-time policy makes the wakeup preempt; without the privilege for it the watch keeps itself
# off the CPU the rank's main thread (the one that finalizes) last ran on.
WAKEUP_REALTIME = "SCHED_FIFO"


WAKEUP_OFF_RANK_CPU = "off the rank's CPU"


def prompt_wakeups() -> str:
    """Make this process's wakeups preempt the rank (WAKEUP_REALTIME) where allowed, else say the watch
    must keep off the rank's CPU (WAKEUP_OFF_RANK_CPU). The helper mostly sleeps; every loop of it waits."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        return WAKEUP_REALTIME
    except (OSError, AttributeError):  # no CAP_SYS_NICE, or no such call here
        return WAKEUP_OFF_RANK_CPU


def avoid_cpu_of(pid: int, allowed: set[int]) -> None:
    """Run on any of `allowed` except the CPU `pid`'s main thread last ran on (/proc/<pid>/stat's
    `processor`); unchanged where that cannot be read or no other CPU is allowed."""
    cpu = last_cpu(pid)
    if cpu is None:
        return
    try:
        others = allowed - {cpu}
        if others and others != os.sched_getaffinity(0):
            os.sched_setaffinity(0, others)
    except (OSError, ValueError, IndexError):
        pass


def metadata_written(iter_dir: Path) -> bool:
    try:
        return (iter_dir / DCP_METADATA).stat().st_size > 0
    except OSError:
        return False


def closed(fd: int | None) -> bool:
    """Whether the rank closed its end of the requests (finish(): the workload ended); never blocks."""
    if fd is None:
        return False
    import select

    return bool(select.select([fd], [], [], 0)[0])


def wait_for_metadata(
    request: dict,
    stop_fd: int | None,
    use_inotify: bool = True,
    avoid_pid: int | None = None,
    on_seen=lambda: None,
) -> tuple[str | None, str | None]:
    """Wait until iter_S's `.metadata` is written: (trigger, None) with trigger TRIGGER_INOTIFY or
    TRIGGER_HELPER_POLL, `on_seen()` (the rank's stop) called the moment it is seen, before anything else:
    closing an inotify descriptor waits for the kernel's grace period (8 to 16 ms measured), longer than
    the window; (None, why) when the save went past without it being seen (the tracker reached S, iter_S
    gone); (None, None) when the rank closed the requests (`stop_fd` readable: its end). With `avoid_pid`,
    the watch keeps off that process's CPU at every look (avoid_cpu_of)."""
    import select

    allowed = os.sched_getaffinity(0) if avoid_pid is not None else set()

    checkpoint_dir = Path(request["checkpoint_dir"])
    save = int(request["save_iteration"])
    iter_dir = checkpoint_dir / iteration_dir_name(save)
    fd = inotify_watch(iter_dir, IN_CLOSE_WRITE | IN_MOVED_TO) if use_inotify else None
    look_every = WATCH_LOOK_S if fd is not None else PHASE_POLL_SECONDS
    waiting = [x for x in (fd, stop_fd) if x is not None]
    try:
        while True:
            # the events first (a non-blocking read), so that a look never takes credit for what one said
            if fd is not None and DCP_METADATA in inotify_names(fd):
                on_seen()
                return TRIGGER_INOTIFY, None
            if metadata_written(iter_dir):  # written before the watch began, or without an event
                on_seen()
                return TRIGGER_HELPER_POLL, None
            tracker = poll_tracker(checkpoint_dir / TRACKER_NAME)
            if tracker is None or tracker >= save:
                return None, f"the tracker reads {tracker}: the save of {save} was finalized unseen"
            if not iter_dir.is_dir():
                return None, f"{iteration_dir_name(save)} is gone"
            if avoid_pid is not None:
                avoid_cpu_of(avoid_pid, allowed)
            ready: list[int] = []
            if waiting:
                ready = select.select(waiting, [], [], look_every)[0]
            else:
                time.sleep(look_every)
            if stop_fd in ready and fd not in ready:
                return None, None
    finally:
        if fd is not None:
            os.close(fd)
        if avoid_pid is not None and allowed:
            os.sched_setaffinity(0, allowed)


def fileno_or_none(stream) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError):  # io.StringIO in tests: no descriptor to wait on
        return None


def freeze_helper(rank_pid: int, requests, replies, kill=os.kill, wakeups=None) -> int:
    """The helper's loop: one JSON request per line (the marker's record and path, the phase and what the
    poll saw; with `watch`, save_finalized: wait_for_metadata first, and a save finalized unseen is a miss);
    it answers `missed` (the rank continued), `taken` (the marker existed: the rank continued) or
    `error` (the rank continued, nothing injected) on `replies`, or kills the rank. It ends at the end of
    `requests` (the rank is gone or done). A rank it stopped is never left stopped: that would be a hang,
    not the kill asked for."""

    def answer(result: str, why: str | None = None) -> None:
        kill(rank_pid, signal.SIGCONT)
        replies.write(json.dumps({"result": result, **({"why": why} if why else {})}) + "\n")
        replies.flush()

    stop_fd = fileno_or_none(requests)
    wakeup = None  # how a watch is woken promptly: `wakeups()` (prompt_wakeups) at the first watch
    for line in requests:
        request = json.loads(line)
        trigger = TRIGGER_RANK_POLL
        if request.get("watch"):
            if wakeup is None:
                wakeup = wakeups() if wakeups is not None else "default"
            avoid = rank_pid if wakeup == WAKEUP_OFF_RANK_CPU else None
            try:
                trigger, why = wait_for_metadata(
                    request, stop_fd, avoid_pid=avoid, on_seen=lambda: kill(rank_pid, signal.SIGSTOP)
                )
            except Exception as exc:  # noqa: BLE001 - the rank is not stopped: say why and end
                answer("error", f"{type(exc).__name__}: {exc}")
                return 1
            if trigger is None:
                if why is None:
                    return 0  # the rank closed the requests: the workload ended
                answer("missed", why)
                continue
        kill(rank_pid, signal.SIGSTOP)  # a watch stopped it already: a second SIGSTOP changes nothing
        if closed(stop_fd):  # the workload ended before the stop: no kill after its end
            kill(rank_pid, signal.SIGCONT)
            return 0
        try:
            record = dict(request["record"], injected_at=utc_now())
            start = time.monotonic()
            stopped = threads_stopped(rank_pid)
            while stopped is False and time.monotonic() - start < FREEZE_STOP_WAIT_S:
                time.sleep(0.0002)
                stopped = threads_stopped(rank_pid)
            why, on_disk = phase_still_holds(request)
            if why is not None:
                answer("missed", why)
                continue
            record["on_disk"] = on_disk.record()
            record["method"] = FREEZE_METHOD.format(pid=os.getpid())
            record["freeze"] = {
                "helper_pid": os.getpid(),
                "threads_stopped": stopped,
                "stop_wait_ms": round((time.monotonic() - start) * 1000, 3),
                "polled_on_disk": request["polled_on_disk"],
                "missed_before": int(request["missed_before"]),
                "trigger": trigger,
                **({"wakeup": wakeup} if request.get("watch") else {}),
            }
            claimed = claim_marker(Path(request["marker"]), record)
        except Exception as exc:  # noqa: BLE001 - whatever it was, the stopped rank must go on
            answer("error", f"{type(exc).__name__}: {exc}")
            return 1
        if not claimed:
            answer("taken")
            return 0
        print(f"{INJECT_PREFIX} {json.dumps(record)}", file=sys.stderr, flush=True)
        kill(rank_pid, signal.SIGKILL)
        return 0
    return 0


class FreezeHelper:
    """The rank's side: the helper process (this module run with `-m`, the checkout that holds it first on
    its path, installed or not) and its two pipes."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ftqual.rank.freeze", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=module_env(CHECKOUT),
        )

    def ask(self, request: dict) -> dict:
        """Send one request; the helper's answer (when it kills this rank, none comes: the rank is gone)."""
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise OSError(f"the freeze helper (pid {self.process.pid}) ended without an answer")
        return json.loads(answer)

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()


if __name__ == "__main__":
    sys.exit(freeze_helper(int(sys.argv[1]), sys.stdin, sys.stdout, wakeups=prompt_wakeups))
