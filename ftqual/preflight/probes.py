"""Probes: each returns facts about this node, nothing is judged here (the checks do that).

Every probe tolerates failure and records it, so one missing tool never stops the other checks. Probes
that start programs use timeouts.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sysconfig
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ftqual.preflight.dump_probe import DumpProbe
from ftqual.preflight.megatron_args import MegatronParse
from ftqual.preflight.mounts import Mount, mount_for, read_mount_table
from ftqual.preflight.nvrx_args import ParseResult
from ftqual.preflight.storage import StorageFloor
from ftqual.stack.facts import StackFacts
from ftqual.stack.resolve import module_present

NVRX_DEFAULT_LOG_PORT = 50051
# What Megatron core_v0.19's pretrain_gpt.py imports unguarded at module level (static scan of the tag).
MEGATRON_IMPORTS = ("torch", "numpy", "packaging", "typing_extensions", "triton")


@dataclass(frozen=True)
class DirFacts:
    """Where a directory is (or would be created), what filesystem holds it and how much room is there."""

    path: str
    absolute: bool
    exists: bool
    probe_path: str  # the nearest existing ancestor, what statvfs and the mount table were asked about
    writable: bool
    fs_type: str | None
    mount_point: str | None
    free_bytes: int | None
    error: str | None = None
    device: str | None = None  # the mount's source (ftqual/preflight/mounts.py)


@dataclass(frozen=True)
class ToolFacts:
    make: str | None
    cxx: str | None
    python3: str | None
    python3_version: str | None
    python3_config: str | None
    python3_config_suffix: str | None
    training_suffix: str | None
    pybind11: bool
    pybind11_error: str | None = None


@dataclass(frozen=True)
class MegatronFacts:
    path: str | None
    exists: bool
    pretrain_gpt: bool
    version: str | None
    datasets_writable: bool
    helper_built: bool
    missing_imports: tuple[str, ...] = ()


@dataclass(frozen=True)
class PortFacts:
    ephemeral_ok: bool
    default_in_use: bool
    error: str | None = None


@dataclass(frozen=True)
class LauncherArgs:
    """The ft_launcher argv of one scenario and NVRx's verdict on it."""

    scenario: str
    argv: tuple[str, ...]
    source: str  # which code built it
    result: ParseResult | None  # None when the launcher refused the settings before building a command
    settings_error: str | None = None
    adaptations: tuple = ()  # ftqual.launch.compat.Adaptation: flags changed for this Megatron version


@dataclass(frozen=True)
class Facts:
    stack: StackFacts
    python_executable: str
    tmpdir: str
    pid_max: int
    env: dict[str, str]
    work_dir: DirFacts | None
    tools: ToolFacts | None
    megatron: MegatronFacts | None
    ports: PortFacts
    launcher_args: tuple[LauncherArgs, ...] = ()
    megatron_args: tuple[MegatronParse, ...] = ()  # Megatron's own parser on each scenario's arguments
    ft_launcher_exe: str | None = None  # launch.command.ft_launcher_executable: what the launcher runs
    stack_dumps: DumpProbe | None = None  # whether the rank sentinels can dump stacks here (dump_probe)
    checkpoint_dir: DirFacts | None = None  # the config's checkpoint_dir (None: checkpoints go in work_dir)
    # ftqual.scenario.checkpoint_dir.checkpoint_dir_problems of the config's checkpoint_dir: one line each
    checkpoint_dir_problems: tuple[str, ...] = ()
    storage: StorageFloor | None = None  # the checkpoint directory's measured floor (storage.py)
    # why fault disk_full's size-capped filesystem cannot be made here (capped_fs_problem), None when it can
    # or no scenario needs it
    capped_fs: str | None = None


# ------------------------------------------------------------------------------------------------ filesystem

CAP_SYS_ADMIN = 21  # linux/capability.h: mount(2) needs it


def effective_capabilities(status_path: str = "/proc/self/status") -> int | None:
    """This process's effective capability set (CapEff), None when /proc does not say."""
    try:
        for line in Path(status_path).read_text().splitlines():
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        return None
    return None


def capped_fs_problem(
    path_env: str | None,
    euid: int | None = None,
    capabilities: int | None = None,
    loop_control: str = "/dev/loop-control",
) -> str | None:
    """Why fault disk_full's size-capped filesystem (ftqual.launch.capped_storage: `mkfs.ext4` an image,
    `mount -o loop` it as root) cannot be made on this node, in one line, or None. The launcher checks root
    and the tools only; a container's root without CAP_SYS_ADMIN or without loop devices passes that and fails
    at the mount, so those are asked here too. `path_env` is the PATH the runs inherit."""
    euid = os.geteuid() if euid is None else euid
    if euid != 0:
        return "fault disk_full mounts a size-capped filesystem and needs root; the runs are not root here"
    caps = effective_capabilities() if capabilities is None else capabilities
    if caps is not None and not (caps >> CAP_SYS_ADMIN) & 1:
        return (
            "fault disk_full mounts a size-capped filesystem; this root has no CAP_SYS_ADMIN (a container?)"
        )
    missing = [tool for tool in ("mkfs.ext4", "mount") if shutil.which(tool, path=path_env) is None]
    if missing:
        return f"fault disk_full makes a size-capped ext4 filesystem; {' and '.join(missing)} not on PATH"
    if not os.path.exists(loop_control):
        return f"fault disk_full mounts its filesystem on a loop device; {loop_control} is absent"
    return None


def nearest_existing(path: Path) -> Path:
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def probe_dir(path: str, base: str | None = None, mounts: list[Mount] | None = None) -> DirFacts:
    raw = Path(os.path.expanduser(path))
    absolute = raw.is_absolute()
    full = raw if absolute else Path(base or os.getcwd()) / raw
    full = Path(os.path.normpath(full))
    probe = nearest_existing(full)
    mount = mount_for(os.path.realpath(probe), read_mount_table() if mounts is None else mounts)
    try:
        free = shutil.disk_usage(probe).free
        error = None
    except OSError as exc:
        free, error = None, str(exc)
    return DirFacts(
        path=str(full),
        absolute=absolute,
        exists=full.is_dir(),
        probe_path=str(probe),
        writable=probe.is_dir() and os.access(probe, os.W_OK | os.X_OK),
        fs_type=mount.fs_type if mount else None,
        mount_point=mount.point if mount else None,
        free_bytes=free,
        error=error,
        device=mount.device if mount else None,
    )


# ------------------------------------------------------------------------------------------------ tools


def _run(cmd: list[str], timeout_s: float = 30.0) -> tuple[int, str, str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return 124, "", f"{cmd[0]} did not answer within {timeout_s:.0f} s"
    except OSError as exc:
        return 127, "", str(exc)
    return proc.returncode, proc.stdout.strip(), proc.stderr.strip()


def probe_tools(path_env: str | None = None) -> ToolFacts:
    """What Megatron's `make -C megatron/core/datasets` will find on PATH.

    Its Makefile calls the literal `python3 -m pybind11 --includes` and `python3-config --extension-suffix`,
    so those must be the training interpreter's, or the helper builds for the wrong Python.
    """
    which = lambda name: shutil.which(name, path=path_env)  # noqa: E731
    python3 = which("python3")
    version = pybind_err = suffix = None
    pybind = False
    if python3:
        rc, out, err = _run([python3, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"])
        version = out if rc == 0 else None
        rc, out, err = _run([python3, "-m", "pybind11", "--includes"])
        pybind = rc == 0
        pybind_err = None if pybind else ((err.splitlines() or [f"exit {rc}"])[-1])
    config = which("python3-config")
    if config:
        rc, out, _ = _run([config, "--extension-suffix"])
        suffix = out if rc == 0 else None
    cxx_name = os.environ.get("CXX", "g++")
    return ToolFacts(
        make=which("make"),
        cxx=which(cxx_name),
        python3=python3,
        python3_version=version,
        python3_config=config,
        python3_config_suffix=suffix,
        training_suffix=sysconfig.get_config_var("EXT_SUFFIX"),
        pybind11=pybind,
        pybind11_error=pybind_err,
    )


def probe_megatron(path: str | None, version: str | None) -> MegatronFacts:
    if not path:
        return MegatronFacts(
            path=None,
            exists=False,
            pretrain_gpt=False,
            version=None,
            datasets_writable=False,
            helper_built=False,
        )
    root = Path(path)
    datasets = root / "megatron" / "core" / "datasets"
    missing = tuple(m for m in MEGATRON_IMPORTS if not module_present(m))
    return MegatronFacts(
        path=str(root),
        exists=root.is_dir(),
        pretrain_gpt=(root / "pretrain_gpt.py").is_file(),
        version=version,
        datasets_writable=datasets.is_dir() and os.access(datasets, os.W_OK),
        helper_built=any(datasets.glob("helpers_cpp*.so")) if datasets.is_dir() else False,
        missing_imports=missing,
    )


# ------------------------------------------------------------------------------------------------ ports


def _port_free(port: int, host: str = "0.0.0.0") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def probe_ports() -> PortFacts:
    """Can the log server get a port? The launcher picks a free one per run."""
    try:
        ephemeral = _port_free(0)
        error = None
    except OSError as exc:
        ephemeral, error = False, str(exc)
    return PortFacts(
        ephemeral_ok=ephemeral,
        default_in_use=not _port_free(NVRX_DEFAULT_LOG_PORT),
        error=error,
    )


# ------------------------------------------------------------------------------------------------ misc


def pid_max(path: str = "/proc/sys/kernel/pid_max") -> int:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return 4194304  # the kernel's 64-bit upper bound: the longest pid NVRx could put into a socket name


ENV_KEYS = ("TMPDIR", "NVRX_NODE_LOCAL_TMPDIR", "MEGATRON_PATH", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID")


def env_subset(env: Mapping[str, str]) -> dict[str, str]:
    return {k: env[k] for k in ENV_KEYS if k in env}


def gettempdir() -> str:
    # The same function NVRx calls for its socket paths (launcher.py), honouring TMPDIR/TEMP/TMP.
    tempfile.tempdir = None  # re-read the environment, not a cached value
    return tempfile.gettempdir()
