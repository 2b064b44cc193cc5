"""The faults a rank injects into itself: the dispatch tables that resolve a registry entry's names to code.

A fault's entry (ftqual.contract.FAULT_KINDS) names what the rank does for it; this module holds the code:
ACTIONS (the entry's `act` -> the call that injects it, which Injector.action looks up) and PREPARATIONS (the
entry's `rank_prepares` -> what is made before the marker is claimed, recorded in the marker, undone when the
marker was taken, and done right before the action). The Injector asks the entry through these tables, never
the fault's name."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from ftqual.contract import FAULT_KINDS
from ftqual.rank import recurring
from ftqual.rank.damage import DamageError
from ftqual.rank.leftovers import read_launcher_record
from ftqual.rank.markers import log
from ftqual.rank.procfs import descendants_of, is_alive, is_ancestor, parent_pids
from ftqual.rank.storage import FILLER_NAME, fill_filesystem, writers_of
from ftqual.rank.tracker import iteration_dir_name


class InjectedFault(Exception):
    """The `exception` fault: an exception of the training loop's thread, which nothing in it catches."""


GIL_SLEEP_S = 0xFFFFFFFF  # libc sleep()'s longest: 136 years


def hold_gil_forever(ready: threading.Event | None = None) -> None:
    """Call libc's sleep() through ctypes.PyDLL, which keeps the GIL for the whole call (ctypes.CDLL releases
    it): no other thread of this process runs Python again, yet the process lives. What does not block the
    GIL: time.sleep and any blocking I/O (they release it), and sys.setswitchinterval (it only sets how soon
    a holder is asked to drop the GIL at its next bytecode; a holder inside one C call never sees the ask).
    NVRx's lock_gil (a regular expression that backtracks for hours) holds it too, but burns a core the
    whole time, which a test machine of two cores cannot spare. Ours, not NVRx's, for that reason; a signal
    with a Python handler interrupts sleep(), hence the loop."""
    import ctypes

    libc = ctypes.PyDLL(None)
    libc.sleep.argtypes = [ctypes.c_uint]
    if ready is not None:
        ready.set()
    while True:
        libc.sleep(GIL_SLEEP_S)


def async_raise(thread_id: int, exc_type: type) -> None:
    """Raise `exc_type` in another thread at its next bytecode (NVRx's inject_fault.async_raise, which we do
    not import: its module imports torch at import time)."""
    import ctypes

    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_async_exc.argtypes = (ctypes.c_ulong, ctypes.py_object)
    set_async_exc.restype = ctypes.c_int
    if set_async_exc(thread_id, exc_type) != 1:
        set_async_exc(thread_id, None)
        raise RuntimeError(f"could not raise {exc_type.__name__} in thread {thread_id}")


def nvrx_injector():
    """NVRx's own injector module (nvidia_resiliency_ext.shared_utils.inject_fault), None when it cannot be
    imported; imported only at a GPU fault's injection (it imports torch, which the workload already did)."""
    try:
        from nvidia_resiliency_ext.shared_utils import inject_fault
    except Exception as exc:  # any import failure: the GPU fault cannot be injected, said in one line
        log(f"NVRx's inject_fault cannot be imported ({type(exc).__name__}: {exc}); not injecting")
        return None
    return inject_fault


def gpu_present() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:
        return False


# --- how each fault is injected: the dispatch table Injector.action looks a fault up in --------------------
#
# Ours (stdlib, in this process, at once) where NVRx's inject_fault does not suit the once-only contract: its
# injectors run after a delay on a thread or a forked process of their own, and its module imports torch. The
# signals and os.abort() are one call each; the segfault reads address 1 through ctypes, as NVRx's segfault
# injector does. The GPU faults are NVRx's own functions, called with no delay on the thread that injects
# (raise_gpu_error, gpu_sleep). Each action takes the injector (its fault, its kill, its rank, the writers its
# poll found) and gives (how the fault is injected, as the marker's `method` says it; the call that injects
# it), prepared before the marker is claimed; or None, with the reason logged, when it cannot be injected
# here.


def on_training_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def by_signal(injector, sig: signal.Signals) -> tuple[str, object]:
    pid = os.getpid()
    return f"os.kill(own pid, {sig.name})", lambda: injector.kill(pid, sig)


def by_segfault(injector) -> tuple[str, object]:
    import ctypes

    return "ctypes.string_at(1): a read of address 1 (SIGSEGV)", lambda: ctypes.string_at(1)


def by_abort(injector) -> tuple[str, object]:
    return "os.abort() (SIGABRT)", os.abort


def raise_injected(rank: int) -> None:
    raise InjectedFault(f"ftqual injected an exception on rank {rank}")


def by_exception(injector) -> tuple[str, object]:
    if on_training_thread():
        return "raise InjectedFault on the training thread", lambda: raise_injected(injector.identity["rank"])
    main = threading.main_thread().ident
    return "PyThreadState_SetAsyncExc(training thread, InjectedFault)", lambda: async_raise(
        main, InjectedFault
    )


def by_device_failure(injector) -> tuple[str, object]:
    """setup_crash: the error a failing device raises, on the training thread (at a step's start after the
    first checkpoint, then at the start of every cycle's setup section)."""
    rank, where = injector.identity["rank"], f"cycle {injector.identity['cycle']}"
    if on_training_thread():
        return "raise InjectedDeviceFailure on the training thread", lambda: recurring.raise_device_failure(
            rank, where
        )
    main = threading.main_thread().ident
    return "PyThreadState_SetAsyncExc(training thread, InjectedDeviceFailure)", lambda: async_raise(
        main, recurring.InjectedDeviceFailure
    )


def by_poisoned_batch(injector) -> tuple[str, object] | None:
    """nan_loss: NaN into this iteration's embeddings (recurring.Poison); the job's own NaN check raises."""
    if "torch" not in sys.modules:
        log("fault nan_loss needs the workload's torch, not imported in this process; not injecting")
        return None
    return (
        "a torch forward hook adds NaN to every embedding's output for this iteration (a poisoned batch); "
        "the job's NaN check must raise",
        injector.poison_batch,
    )


def lock_gil() -> None:
    ready = threading.Event()
    threading.Thread(target=hold_gil_forever, args=(ready,), name="ftqual-gil-lock", daemon=True).start()
    ready.wait()
    time.sleep(1.0)  # releases the GIL: the holder takes it, and this thread never runs again


def by_gil_lock(injector) -> tuple[str, object]:
    if on_training_thread():
        return (
            "thread ftqual-gil-lock holds the GIL (libc sleep() through ctypes.PyDLL); the training "
            "thread waits for it",
            lock_gil,
        )
    return "libc sleep() through ctypes.PyDLL on the injector's thread (GIL held)", hold_gil_forever


def by_filler(injector) -> tuple[str, object]:
    return "posix_fallocate of a filler file on the checkpoint filesystem (made before the marker)", (
        lambda: None
    )


def by_stopping_writers(injector) -> tuple[str, object]:
    pids = [w["pid"] for w in injector.writers]
    return f"os.kill(writer pid(s) {pids}, SIGSTOP)", lambda: [
        injector._signal(pid, signal.SIGSTOP) for pid in pids
    ]


def nvrx_on_the_gpu(injector):
    """NVRx's injector module, None (logged) when this process has no CUDA device or cannot import it."""
    if not gpu_present():
        log(f"fault {injector.fault} needs a CUDA device and this process sees none; not injecting")
        return None
    return nvrx_injector()


def by_gpu_error(injector) -> tuple[str, object] | None:
    nvrx = nvrx_on_the_gpu(injector)
    if nvrx is None:
        return None
    method = "NVRx inject_fault.raise_gpu_error: an out-of-bounds index on the device"
    return method, lambda: nvrx.raise_gpu_error(0.0, None)


def by_gpu_sleep(injector) -> tuple[str, object] | None:
    nvrx = nvrx_on_the_gpu(injector)
    if nvrx is None:
        return None
    torch = sys.modules["torch"]
    device = torch.cuda.current_device()
    method = "NVRx inject_fault.gpu_sleep: torch.cuda._sleep(1 << 62) on the current stream"
    return method, lambda: nvrx.gpu_sleep(0.0, device, None)


# A fault entry's `act` -> its action. `sigkill` alone may be made by the freeze helper instead (FREEZABLE):
# a save-phase kill from outside the stopped rank (ftqual.rank.freeze).
ACTIONS: dict[str, Callable] = {
    "sigkill": partial(by_signal, sig=signal.SIGKILL),
    "sigstop": partial(by_signal, sig=signal.SIGSTOP),
    "sigterm": partial(by_signal, sig=signal.SIGTERM),
    "sigint": partial(by_signal, sig=signal.SIGINT),
    "segfault": by_segfault,
    "abort": by_abort,
    "exception": by_exception,
    "poisoned_batch": by_poisoned_batch,
    "device_failure": by_device_failure,
    "gil_lock": by_gil_lock,
    "nothing_more": by_filler,
    "stop_writers": by_stopping_writers,
    "gpu_error": by_gpu_error,
    "gpu_sleep": by_gpu_sleep,
}
FREEZABLE = ("sigkill",)


def act_of(fault: str) -> str | None:
    """The registry entry's `act` of `fault`, None for a name it does not know or a fault with none."""
    kind = FAULT_KINDS.get(fault)
    return kind.act if kind is not None else None


def freezable(fault: str) -> bool:
    """Whether a save-phase injection of `fault` may be made by the freeze helper (FREEZABLE)."""
    return act_of(fault) in FREEZABLE


def action(injector) -> tuple[str, object] | None:
    """The action of `injector.fault` (its entry's act, in ACTIONS), prepared, its method prefixed by its
    preparation's (PREPARATIONS); None, logged, for a fault without one."""
    act = ACTIONS.get(act_of(injector.fault) or "")
    if act is None:
        log(f"no way to inject fault {injector.fault!r}; not injecting")
        return None
    prepared = act(injector)
    prep = preparation_of(injector.fault)
    if prepared is None or prep is None or not prep.method_prefix:
        return prepared
    return prep.method_prefix + prepared[0], prepared[1]


# --- what a fault needs before its action: the dispatch table of an entry's `rank_prepares` ----------------


def _nothing(injector, made: dict) -> None:
    return None


@dataclass(frozen=True)
class Preparation:
    """What the rank makes for a fault before its marker is claimed. `make(injector)`: the record (the
    marker's `key`), or None with the reason logged (a fault not made must not pass as one met: not injected).
    `undo(injector, record)`: the marker was taken by another process, so the fault is not made. `before_act(
    injector, record)`: right before the action. `look(injector, iteration)`: at a save-phase poll, what the
    injection needs to be armed (an empty list: not yet, look again)."""

    key: str
    make: Callable[..., dict | None]
    undo: Callable[..., None] = _nothing
    before_act: Callable[..., None] = _nothing
    method_prefix: str = ""
    look: Callable[..., list] | None = None


def _freeze_node(injector) -> dict | None:
    return injector.freeze_node()


def _thaw_launcher(injector, node: dict) -> None:
    injector._signal(node["launcher_pid"], signal.SIGCONT)


def _kill_node(injector, node: dict) -> None:
    # The node goes at once, as a lost node does: every process below its ft_launcher (workers, their
    # children, rank monitors), then ft_launcher itself, then this rank.
    for pid in node["processes"]:
        injector._signal(pid, signal.SIGKILL)
    injector._signal(node["launcher_pid"], signal.SIGKILL)


def _fill(injector) -> dict | None:
    if injector.marker.exists():
        log(f"marker {injector.marker} already exists; not filling the filesystem, not injecting")
        return None
    try:
        return fill_filesystem(injector.tracker.parent, injector.armed_at)
    except (DamageError, OSError) as exc:
        log(f"{injector.fault} after iteration {injector.armed_at} cannot be made: {exc}; not injecting")
        return None


def _remove_filler(injector, made: dict) -> None:
    (injector.tracker.parent / FILLER_NAME).unlink(missing_ok=True)  # ours: the fault is not made


def _writers_found(injector) -> dict | None:
    return {"kind": injector.fault, "iteration": injector.save_iteration, "writers": injector.writers}


def _look_for_writers(injector, iteration: int) -> list:
    return writers_of(injector.tracker.parent / iteration_dir_name(iteration))


PREPARATIONS: dict[str, Preparation] = {
    "freeze_node": Preparation(
        "node",
        _freeze_node,
        undo=_thaw_launcher,
        before_act=_kill_node,
        method_prefix=(
            "SIGSTOP of the node's ft_launcher, then SIGKILL of every process below it, of it, and "
        ),
    ),
    "fill_filesystem": Preparation("storage", _fill, undo=_remove_filler),
    "find_writers": Preparation("storage", _writers_found, look=_look_for_writers),
}


def preparation_of(fault: str) -> Preparation | None:
    """The registry entry's preparation of `fault` (PREPARATIONS), None for one that needs none."""
    kind = FAULT_KINDS.get(fault)
    return PREPARATIONS[kind.rank_prepares] if kind is not None and kind.rank_prepares else None


def freeze_node(host: str, pid_dir: Path | None, send) -> dict | None:
    """node_loss: stop this node's ft_launcher (SIGSTOP through `send(pid, signal)`, so it cannot react or
    start replacements) and list every process below it; None, with the reason logged, when the launcher is
    not provably ours."""
    if (os.environ.get("NVRX_NODE_RANK") or os.environ.get("SLURM_NODEID")) == "0":
        # NVRx chose where this rank runs (with a spare node, any node may hold it): never the first
        # node, whose ft_launcher hosts the rendezvous store and log server every node needs.
        log("node_loss: this rank runs on the first node, which hosts the rendezvous store; not injecting")
        return None
    if pid_dir is None:
        log("node_loss needs --pid-dir (pids/<host>.launcher.json names the node's ft_launcher)")
        return None
    launcher = read_launcher_record(pid_dir, host)
    if launcher is None:
        log(f"node_loss: no readable {pid_dir}/{host}.launcher.json; not injecting")
        return None
    pid = launcher["pid"]
    if not is_alive(pid, launcher["start_time"]) or not is_ancestor(pid, os.getpid(), parent_pids()):
        log(f"node_loss: the recorded ft_launcher (pid {pid}) is not this worker's live ancestor")
        return None
    send(pid, signal.SIGSTOP)
    own = os.getpid()
    processes = [p for p in descendants_of(pid, parent_pids()) if p != own]
    return {"host": host, "launcher_pid": pid, "processes": processes}
