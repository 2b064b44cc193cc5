"""The pid records of pids/ and the leftovers record of a cycle's start.

The pid records of pids/ and the leftovers record of a cycle's start. On local rank 0 of every cycle >= 1,
before the workload starts, the wrapper
writes --leftovers-dir/<host>.cycle<c>.json (schema ftqual.leftovers/v1): the earlier cycles' processes of
this host (from --pid-dir) that still run, and the GPU memory they hold per nvidia-smi where it exists,
with this user's /dev/shm entries (sizes, allocated bytes) and the room left there (statvfs)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from ftqual.rank.ids import LEFTOVERS_SCHEMA
from ftqual.rank.markers import utc_now
from ftqual.rank.procfs import is_alive, proc_start_time

SHM_DIR = Path("/dev/shm")


SHM_MAX_ENTRIES = 100_000  # entries listed with their sizes; the totals count every one


NVIDIA_SMI_TIMEOUT_S = 10


NVIDIA_SMI_QUERY = ("--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits")


def write_pid_record(pid_dir: Path, host: str, cycle: int, rank: int, local_rank: int) -> Path:
    record = {
        "pid": os.getpid(),
        "pgid": os.getpgrp(),
        "start_time": proc_start_time(),
        "rank": rank,
        "local_rank": local_rank,
        "cycle": cycle,
        "host": host,
        "rank_code": str(Path(__file__).resolve().parent),  # the ftqual.rank this rank imported
    }
    path = pid_dir / f"{host}.cycle{cycle}.rank{rank}.json"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record) + "\n")
    os.replace(tmp, path)
    return path


def read_launcher_record(pid_dir: Path, host: str) -> dict | None:
    """pids/<host>.launcher.json (our launcher records ft_launcher's pid there), None when unreadable."""
    try:
        record = json.loads((pid_dir / f"{host}.launcher.json").read_text())
        return {"pid": int(record["pid"]), "start_time": int(record["start_time"])}
    except (OSError, ValueError, TypeError, KeyError):
        return None


def earlier_processes(pid_dir: Path, host: str, cycle: int) -> tuple[list[dict], list[str]]:
    """(pid records of this host's workers from cycles before `cycle`, names of unreadable records)."""
    earlier, unreadable = [], []
    for path in sorted(pid_dir.glob(f"{glob_escape(host)}.cycle*.rank*.json")):
        try:
            record = json.loads(path.read_text())
            item = {
                "pid": int(record["pid"]),
                "start_time": int(record["start_time"]),
                "cycle": int(record["cycle"]),
                "rank": int(record["rank"]),
            }
        except (OSError, ValueError, TypeError, KeyError):
            unreadable.append(path.name)
            continue
        if record.get("host") == host and item["cycle"] < cycle:
            earlier.append(item)
    earlier.sort(key=lambda r: (r["cycle"], r["rank"]))
    return earlier, unreadable


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def sample_gpu_apps(run=subprocess.run, which=shutil.which) -> dict:
    """nvidia-smi's compute apps: {"sampled", "error", "apps"}; every failure is recorded, none raised."""
    exe = which("nvidia-smi")
    if exe is None:
        return {"sampled": False, "error": "nvidia-smi not found", "apps": []}
    try:
        proc = run(
            [exe, *NVIDIA_SMI_QUERY],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return {"sampled": False, "error": f"nvidia-smi timed out after {NVIDIA_SMI_TIMEOUT_S} s", "apps": []}
    except (OSError, ValueError) as exc:
        return {"sampled": False, "error": f"nvidia-smi could not run: {exc}", "apps": []}
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout or "").strip().splitlines()
        detail = f": {said[-1][:200]}" if said else ""
        return {"sampled": False, "error": f"nvidia-smi exited {proc.returncode}{detail}", "apps": []}
    apps = []
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        pid_text, _, memory_text = (part.strip() for part in line.partition(","))
        if not pid_text.isdigit():
            return {"sampled": False, "error": f"unexpected nvidia-smi line: {line[:200]!r}", "apps": []}
        memory = int(memory_text) if memory_text.isdigit() else None  # [N/A] where memory is not reported
        apps.append({"pid": int(pid_text), "used_memory_mib": memory})
    return {"sampled": True, "error": None, "apps": apps}


def leftovers_record(pid_dir: Path, host: str, cycle: int, gpu: dict) -> dict:
    """What the earlier cycles of this host left behind, seen at the start of `cycle`."""
    earlier, unreadable = earlier_processes(pid_dir, host, cycle)
    alive = [item for item in earlier if is_alive(item["pid"], item["start_time"])]
    by_pid = {item["pid"]: item for item in alive}
    held = [
        {"pid": app["pid"], "used_memory_mib": app["used_memory_mib"], **_cycle_rank(by_pid[app["pid"]])}
        for app in gpu["apps"]
        if app["pid"] in by_pid
    ]
    return {
        "schema": LEFTOVERS_SCHEMA,
        "host": host,
        "cycle": cycle,
        "sampled_at": utc_now(),
        "earlier": earlier,
        "alive": alive,
        "gpu": {**gpu, "held_by_earlier": held},
        "unreadable_pid_records": unreadable,
        **resources_now(),
    }


def resources_now(shm: Path = SHM_DIR, parent: int | None = None) -> dict:
    """What a cycle inherits besides processes: this user's /dev/shm segments and the open file descriptors
    of the agent that starts the workers (ft_launcher); counts that grow cycle after cycle are a leak.
    `shm` also keeps each entry's size (st_size) and allocated bytes (st_blocks * 512) and the filesystem's
    size, free bytes and inodes (os.statvfs): what a leak costs, judged against the room it eats."""
    uid = os.getuid()
    entries, error = [], None
    try:
        with os.scandir(shm) as listing:
            for entry in listing:
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # gone between the listing and the stat
                if st.st_uid == uid:
                    entries.append({"name": entry.name, "size": st.st_size, "allocated": st.st_blocks * 512})
    except OSError as exc:
        entries, error = None, f"{shm} cannot be listed: {exc.strerror or exc}"
    if entries is not None:
        entries.sort(key=lambda item: item["name"])
    parent = os.getppid() if parent is None else parent
    try:
        fds = len(os.listdir(f"/proc/{parent}/fd"))
    except OSError:
        fds = None
    return {
        "shm_segments": [item["name"] for item in entries] if entries is not None else None,
        "shm": shm_usage(shm, entries, error),
        "agent_pid": parent,
        "agent_open_fds": fds,
    }


def shm_usage(shm: Path, entries: list[dict] | None, error: str | None) -> dict:
    """This user's entries with their sizes and totals, and the filesystem's room (statvfs), each part
    null with its error where it could not be read."""
    out: dict = {"path": str(shm), "error": error, "entries": None, "count": None}
    if entries is not None:
        out.update(
            entries=entries[:SHM_MAX_ENTRIES],
            count=len(entries),
            size_bytes=sum(item["size"] for item in entries),
            allocated_bytes=sum(item["allocated"] for item in entries),
        )
    try:
        vfs = os.statvfs(shm)
    except OSError as exc:
        out.update(fs=None, fs_error=f"statvfs({shm}) failed: {exc.strerror or exc}")
        return out
    out["fs"] = {
        "size_bytes": vfs.f_blocks * vfs.f_frsize,
        "free_bytes": vfs.f_bavail * vfs.f_frsize,  # what an unprivileged user can still write
        "inodes": vfs.f_files,  # 0: the filesystem reports no inode limit
        "free_inodes": vfs.f_favail,
    }
    out["fs_error"] = None
    return out


def _cycle_rank(item: dict) -> dict:
    return {"cycle": item["cycle"], "rank": item["rank"]}


def write_leftovers(
    leftovers_dir: Path, pid_dir: Path, host: str, cycle: int, gpu: dict | None = None
) -> Path:
    """Write leftovers/<host>.cycle<c>.json atomically (written once per node and cycle)."""
    record = leftovers_record(pid_dir, host, cycle, sample_gpu_apps() if gpu is None else gpu)
    leftovers_dir.mkdir(exist_ok=True)
    path = leftovers_dir / f"{host}.cycle{cycle}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w") as fh:
        fh.write(json.dumps(record, indent=2) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path
