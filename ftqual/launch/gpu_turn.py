"""Scenario runs that share a GPU take turns on it, when the workflow runs scenarios itself (no Slurm).

Why: ft_launcher (NVRx 0.7.0) starts a restart only once GPUs 0 to local_world_size-1 (NVML's indexes,
whatever CUDA_VISIBLE_DEVICES says) hold 512 MB or less, waiting up to `--ft-gpu-memory-reclaim-timeout`
(50 s). A scenario beside another therefore saw the other's memory and waited out the whole 50 s at every
restart: a "latency over budget" that ftqual itself caused (1 x H200, kill beside hang: restart 52.5 s; alone
2.6-4.4 s). Runs on one GPU also share its compute, so every timing they report is someone else's too.

What a run holds: one lock per GPU (NVML index) of the machine, none on a machine without GPUs.
- Exclusive on the GPUs its workers compute on: the first gpus_per_node of CUDA_VISIBLE_DEVICES, or of the
  machine's GPUs where it is unset; none for the smoke workload (CPU) or where CUDA_VISIBLE_DEVICES names
  no GPU ("", "-1").
- Shared on the others that its ft_launcher's memory check looks at (0 to gpus_per_node-1): runs that only
  look (smoke runs, runs given other GPUs) do not disturb each other there; a run computing on it would.
So runs on disjoint GPUs run side by side, runs that share one take turns. A lock per GPU rather than one per
GPU set: sets that overlap without being equal (0,1 and 1,2) must exclude each other too.

How: `flock` on one file per GPU per user in the temporary directory, taken in GPU order and kept while
waiting for the next (so no two runs can wait for each other), polling so that the run script still answers
SIGTERM and notices a vanished workflow; taken before ft_launcher starts and kept until what the run left
behind is cleaned up. The kernel drops a lock when its holder dies. Each holder writes who it is (scenario,
run, checkout, pid) into a file beside the lock, for the message of whoever waits. Under Slurm the scheduler
gives each job its own GPUs, so no turn is taken there.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

LOCK_ENV = "FTQUAL_GPU_LOCK"  # another base name for the locks (tests; users who share GPUs and a folder)
# The machine's GPUs (NVML indexes, comma-separated; "" for none) instead of asking the driver (tests).
GPUS_ENV = "FTQUAL_MACHINE_GPUS"
PROC_GPUS = Path("/proc/driver/nvidia/gpus")  # one entry per GPU while the NVIDIA driver is loaded
SMI_TIMEOUT_S = 10.0


def lock_path(env: Mapping[str, str] | None = None) -> Path:
    """The base name of the locks: GPU g's is `<stem>-gpu<g><suffix>` beside it."""
    env = os.environ if env is None else env
    chosen = env.get(LOCK_ENV)
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / f"ftqual-gpus-{os.getuid()}.lock"


def needed(env: Mapping[str, str] | None = None) -> bool:
    """A turn is taken unless Slurm placed this run (it gives each job its own GPUs)."""
    env = os.environ if env is None else env
    return not env.get("SLURM_JOB_ID")


def _order(gpu: str) -> tuple[int, int, str]:
    return (0, int(gpu), "") if gpu.isdigit() else (1, 0, gpu)


def _smi_uuids() -> dict[str, str]:
    """UUID -> NVML index of every GPU and MIG device (a MIG device's is its GPU's), from `nvidia-smi -L`;
    {} where it cannot be asked. No CUDA context, no GPU time."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    uuids: dict[str, str] = {}
    gpu = None
    for line in out.stdout.splitlines():
        head = re.match(r"GPU (\d+):", line)
        gpu = head.group(1) if head else gpu
        uuid = re.search(r"\(UUID: ([^)\s]+)\)", line)
        if uuid and gpu is not None:
            uuids[uuid.group(1)] = gpu
    return uuids


def machine_gpus(env: Mapping[str, str] | None = None) -> list[str]:
    """NVML indexes of this machine's GPUs: the driver's list in /proc, else `nvidia-smi -L`; [] without."""
    env = os.environ if env is None else env
    chosen = env.get(GPUS_ENV)
    if chosen is not None:
        return sorted({str(int(g)) for g in chosen.replace(",", " ").split()}, key=_order)
    try:
        return [str(i) for i in range(len(os.listdir(PROC_GPUS)))]
    except OSError:
        pass
    return sorted(set(_smi_uuids().values()), key=_order)


def visible_gpus(value: str, machine: Sequence[str]) -> list[str]:
    """The machine's GPUs that CUDA_VISIBLE_DEVICES=`value` shows, in its order. As CUDA reads it, the list
    ends at the first entry naming no GPU ("-1", an index the machine lacks). An index is taken as NVML's
    (CUDA's order is the same on a machine of one GPU model); a UUID (GPU-..., MIG-...) is looked up with
    nvidia-smi, and kept as it is where that cannot be done."""
    uuids: dict[str, str] | None = None
    shown: list[str] = []
    for entry in (e.strip() for e in value.split(",")):
        if entry.isdigit():
            gpu = str(int(entry))
            if gpu not in machine:
                break
        elif entry.startswith(("GPU-", "MIG-")):
            uuids = _smi_uuids() if uuids is None else uuids
            wanted = entry.removeprefix("MIG-").split("/")[0] if entry.startswith("MIG-GPU-") else entry
            found = [index for uuid, index in uuids.items() if uuid.startswith(wanted)]
            gpu = found[0] if len(found) == 1 else re.sub(r"[^A-Za-z0-9.-]", "_", entry)
        else:
            break
        if gpu not in shown:
            shown.append(gpu)
    return shown


@dataclass(frozen=True)
class GpuSet:
    """The GPUs one run holds: `exclusive`, those it computes on; `shared`, those it only looks at."""

    exclusive: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.exclusive or self.shared)

    def order(self) -> list[str]:
        return sorted({*self.exclusive, *self.shared}, key=_order)

    def label(self) -> str:
        gpus = self.order()
        return f"GPU{'s' if len(gpus) > 1 else ''} {','.join(gpus)}"


def run_gpus(
    gpus_per_node: int,
    workload: str,
    env: Mapping[str, str] | None = None,
    machine: Sequence[str] | None = None,
) -> GpuSet:
    """What a run of `gpus_per_node` ranks of `workload` holds (see the module's docstring)."""
    env = os.environ if env is None else env
    machine = machine_gpus(env) if machine is None else list(machine)
    if not machine:
        return GpuSet()
    used: list[str] = []
    if workload != "smoke":  # the smoke workload runs on CPU
        visible = env.get("CUDA_VISIBLE_DEVICES")
        used = (machine if visible is None else visible_gpus(visible, machine))[:gpus_per_node]
    watched = [g for g in machine if g.isdigit() and int(g) < gpus_per_node and g not in used]
    return GpuSet(tuple(used), tuple(watched))


def for_run(
    gpus_per_node: int, workload: str, holder: str, env: Mapping[str, str] | None = None
) -> GpuTurn | None:
    """The turn a run of the workflow takes; None under Slurm and where the run holds no GPU."""
    env = os.environ if env is None else env
    if not needed(env):
        return None
    gpus = run_gpus(gpus_per_node, workload, env)
    return GpuTurn(lock_path(env), gpus, holder) if gpus else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


@dataclass
class GpuTurn:
    """The GPUs of one run: take() until it returns True, release() when the run is over."""

    base: Path  # lock_path()
    gpus: GpuSet
    holder: str  # written beside each lock while held: who has the GPU (shown to whoever waits)
    fds: dict[str, int] = field(default_factory=dict)  # GPU -> its lock's descriptor, held
    blocked: str | None = None  # the GPU the last take() could not have
    token: str = field(default_factory=lambda: f"{os.getpid()}-{secrets.token_hex(4)}")

    def lock_file(self, gpu: str) -> Path:
        return self.base.with_name(f"{self.base.stem}-gpu{gpu}{self.base.suffix}")

    def _holder_file(self, gpu: str, token: str) -> Path:
        return Path(f"{self.lock_file(gpu)}.holder-{token}")  # token: the holder's pid, a dash, a nonce

    def _holder_files(self, gpu: str) -> list[tuple[Path, bool]]:
        """The holder files beside `gpu`'s lock, each with whether its process is alive."""
        lock = self.lock_file(gpu)
        found = []
        for path in sorted(lock.parent.glob(f"{_glob_escape(lock.name)}.holder-*")):
            pid = path.name.rsplit(".holder-", 1)[1].split("-")[0]
            found.append((path, pid.isdigit() and _alive(int(pid))))
        return found

    def take(self) -> bool:
        """Try once for each GPU not held yet, in order; True when this run now has them all."""
        for gpu in self.gpus.order():
            if gpu in self.fds:
                continue
            fd = os.open(self.lock_file(gpu), os.O_RDWR | os.O_CREAT, 0o644)
            exclusive = gpu in self.gpus.exclusive
            try:
                fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                self.blocked = gpu
                return False
            self.fds[gpu] = fd
            for path, alive in self._holder_files(gpu):
                if exclusive or not alive:  # a holder that died without release()
                    path.unlink(missing_ok=True)
            self._holder_file(gpu, self.token).write_text(f"{self.holder}\n")
        self.blocked = None
        return True

    def holders(self, gpu: str) -> list[str]:
        """Who holds `gpu` now, as those runs wrote it."""
        found = []
        for path, alive in self._holder_files(gpu):
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").strip()[:300] if alive else ""
                if text:
                    found.append(text)
        return found

    def waiting_for(self) -> str:
        """The GPU the last take() could not have and who holds it, e.g. 'GPU 1 of GPUs 0,1: held by ...'."""
        gpu = self.blocked
        if gpu is None:
            return ""
        of = f" of {self.gpus.label()}" if len(self.gpus.order()) > 1 else ""
        who = "; ".join(self.holders(gpu)) or f"another run (see {self.lock_file(gpu)})"
        return f"GPU {gpu}{of}: held by {who}"

    def release(self) -> None:
        for gpu, fd in self.fds.items():
            self._holder_file(gpu, self.token).unlink(missing_ok=True)
            os.close(fd)  # closing drops the flock
        self.fds, self.blocked = {}, None


def _glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)
