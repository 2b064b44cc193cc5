"""The identity of the stack under test: what a verdict was earned on, and part of every attempt's key.

A PASS belongs to the stack that earned it. The identity is a small, ordered set of readable parts
(torch 2.11.0, Megatron tree digest, 1 x NVIDIA H200, driver 580.95, executor slurm, ...). Its digest
joins the settings' fingerprint in every attempt's key (ftqual.workflow.attempts), so a rerun after an upgrade
finds no attempt under the new key and requalifies, and `changes` names what differs from the attempt
before it.

Every probe here is cheap and spends no GPU time: versions come from distribution metadata and source
text (torch is never imported), trees are hashed by their source files (build outputs such as Megatron's
compiled dataset helper are left out, so a first run does not change its own tree's identity), the GPUs
and driver from `nvidia-smi`. Where the machine that trains is not this one (Slurm), `probe_machine` runs
on a training node, as `python -m ftqual stack --machine` inside a one-task Slurm step (ftqual.workflow.plan);
the node's name is recorded but not keyed, since Slurm may pick any node of the partition.

Parts a run records but that are not keyed (`UNKEYED`): a checkout's commit (the tree digest is what
counts: a commit touching only docs does not requalify) and the node a Slurm probe happened to get.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ftqual.stack.facts import (
    TE_DISTS,
    dist_version,
    ft_launcher_executable,
    megatron_version,
    package_version,
    probe_nvidia_smi,
)

SCHEMA = "ftqual.stack/v1"

# key -> how a reader sees it, in the order the report lists them.
LABELS: dict[str, str] = {
    "python": "Python",
    "torch": "torch",
    "torch_cuda": "torch built for CUDA",
    "nccl": "NCCL",
    "transformer_engine": "Transformer Engine",
    "apex": "Apex",
    "nvrx": "nvidia-resiliency-ext",
    "nvrx_sources": "NVRx sources digest",
    "ft_launcher": "ft_launcher",
    "megatron": "Megatron-LM",
    "megatron_tree": "Megatron-LM tree digest",
    "megatron_commit": "Megatron-LM commit",
    "executor": "executor",
    "host": "host",
    "slurm_partition": "Slurm partition",
    "slurm_account": "Slurm account",
    "slurm_nodes": "Slurm partition nodes and GRES",
    "gpus": "GPUs",
    "driver": "NVIDIA driver",
    "node": "probed on node",
}
UNKEYED = frozenset({"megatron_commit", "node"})
ABSENT = "absent"

# Source files of a tree: what can change what runs. Build outputs (.so, .o) and caches are left out.
SOURCE_SUFFIXES = frozenset({".py", ".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp"})
SOURCE_NAMES = frozenset({"Makefile"})
SKIP_DIRS = frozenset({"__pycache__", ".git", "build", ".pytest_cache"})
NCCL_DISTS = ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11")
NVRX_DIST = "nvidia-resiliency-ext"


@dataclass(frozen=True)
class StackIdentity:
    """Ordered parts (key -> readable value); the digest covers the keyed ones."""

    parts: dict[str, str] = field(default_factory=dict)
    # What the probe was asked (workload, megatron_path, executor, partition...): lets `ftqual status`
    # probe the same things again. Not part of the digest.
    inputs: dict[str, object] = field(default_factory=dict, compare=False)

    @property
    def keyed(self) -> dict[str, str]:
        return {k: v for k, v in self.parts.items() if k not in UNKEYED}

    @property
    def digest(self) -> str:
        text = json.dumps(self.keyed, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "digest": self.digest,
            "parts": dict(self.parts),
            "inputs": dict(self.inputs),
        }


def from_json(data: object) -> StackIdentity | None:
    """The identity a record carries, or None when it carries none (or a malformed one)."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None
    parts = data.get("parts")
    if not isinstance(parts, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in parts.items()
    ):
        return None
    inputs = data.get("inputs")
    return StackIdentity(dict(parts), dict(inputs) if isinstance(inputs, dict) else {})


def label(key: str) -> str:
    return LABELS.get(key, key)


def changes(old: StackIdentity, new: StackIdentity) -> list[str]:
    """What differs, keyed parts only, readable: ['torch 2.11.0 -> 2.12.0', 'ft_launcher added']."""
    out = []
    a, b = old.keyed, new.keyed
    for key in [*b, *(k for k in a if k not in b)]:
        before, after = a.get(key), b.get(key)
        if before == after:
            continue
        if before is None:
            out.append(f"{label(key)} {after} (not recorded before)")
        elif after is None:
            out.append(f"{label(key)} no longer recorded (was {before})")
        else:
            out.append(f"{label(key)} {before} -> {after}")
    return out


def describe_changes(old: StackIdentity, new: StackIdentity, limit: int = 4) -> str:
    found = changes(old, new)
    if len(found) > limit:
        found = [*found[:limit], f"{len(found) - limit} more"]
    return "; ".join(found) or "no keyed part differs"


# ------------------------------------------------------------------------------------------------ probes


def _package_dir(module: str) -> Path | None:
    """Where a top-level package lies, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def _module_version(module: str, dists: tuple[str, ...]) -> str:
    return package_version(module, dists) or ABSENT


def _torch_cuda(torch_dir: Path | None) -> str:
    """torch.version.cuda, read from torch/version.py's text (importing torch takes seconds)."""
    if torch_dir is None:
        return ABSENT
    try:
        tree = ast.parse((torch_dir / "version.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return "unknown"
    for node in tree.body:
        # `cuda = '13.0'` or, in newer releases, `cuda: Optional[str] = None`
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == "cuda" and node.value:
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return "unknown"
            return str(value) if value else "none (CPU build)"
    return "unknown"


def source_files(root: Path, under: Iterable[str] = ("",), top_level_py: bool = False) -> list[Path]:
    """Source files below root/<each of under>, sorted; top-level *.py of root too when asked."""
    found: set[Path] = set()
    for sub in under:
        base = root / sub if sub else root
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
            for name in files:
                if Path(name).suffix in SOURCE_SUFFIXES or name in SOURCE_NAMES:
                    found.add(Path(folder) / name)
    if top_level_py:
        try:
            found.update(p for p in root.iterdir() if p.suffix == ".py" and p.is_file())
        except OSError:
            pass
    return sorted(found)


def tree_digest(root: Path, files: list[Path]) -> str:
    """sha256 of (relative path, content) of every file; 'unreadable' when one cannot be read."""
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            return "unreadable"
        h.update(b"\0")
    return f"{h.hexdigest()[:16]} ({len(files)} files)"


def _git_commit(root: Path) -> str | None:
    """HEAD of a checkout, from .git's files (no git needed)."""
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head[:12]
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()[:12]
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0][:12]
    except OSError:
        return None
    return None


def megatron_parts(megatron_path: str | os.PathLike | None) -> dict[str, str]:
    if not megatron_path:
        return {"megatron": "no tree configured"}
    root = Path(megatron_path).resolve()
    if not (root / "megatron").is_dir():
        return {"megatron": f"no megatron/ under {root}"}
    parts = {
        "megatron": f"{megatron_version(root) or 'version unknown'} at {root}",
        "megatron_tree": tree_digest(root, source_files(root, ("megatron",), top_level_py=True)),
    }
    commit = _git_commit(root)
    if commit:
        parts["megatron_commit"] = commit
    return parts


def ft_launcher_part(python: str) -> str:
    exe = ft_launcher_executable(python)
    if not exe:
        return "not found"
    try:
        digest = hashlib.sha256(Path(exe).read_bytes()).hexdigest()[:12]
    except OSError:
        digest = "unreadable"
    return f"{exe} ({digest})"


def software_parts(workload: str, megatron_path: str | None, python: str = sys.executable) -> dict[str, str]:
    """The training environment's software: the interpreter running this (the rules run in it)."""
    torch_dir = _package_dir("torch")
    nvrx_dir = _package_dir("nvidia_resiliency_ext")
    parts = {
        "python": platform.python_version(),
        "torch": dist_version("torch") or (ABSENT if torch_dir is None else "present (version unknown)"),
        "torch_cuda": _torch_cuda(torch_dir),
        "nccl": dist_version(*NCCL_DISTS) or ("bundled with torch" if torch_dir else ABSENT),
        "transformer_engine": _module_version("transformer_engine", TE_DISTS),
        "apex": _module_version("apex", ("apex",)),
        "nvrx": dist_version(NVRX_DIST) or ABSENT,
        "nvrx_sources": tree_digest(nvrx_dir, source_files(nvrx_dir)) if nvrx_dir else ABSENT,
        "ft_launcher": ft_launcher_part(python),
    }
    if workload == "megatron":
        parts.update(megatron_parts(megatron_path))
    return parts


def probe_gpus() -> dict[str, str]:
    """GPU models and count, and the driver, from nvidia-smi (no CUDA context, no GPU time)."""
    smi = probe_nvidia_smi()
    if "error" in smi:
        absent = smi["error"] == "nvidia-smi not found"
        return {"gpus": "none (no nvidia-smi)" if absent else f"unknown ({smi['error']})",
                "driver": ABSENT if absent else "unknown"}  # fmt: skip
    models: dict[str, int] = {}
    for row in smi["rows"]:
        models[row[0]] = models.get(row[0], 0) + 1
    drivers = sorted({row[1] for row in smi["rows"] if len(row) > 1})
    return {
        "gpus": ", ".join(f"{n} x {m}" for m, n in models.items()) or "none",
        "driver": ", ".join(drivers) or ABSENT,
    }


def probe_machine(keyed_host: bool = True) -> dict[str, str]:
    """The machine that trains: its GPUs and driver, and its name (keyed for one box, recorded for Slurm)."""
    return {**probe_gpus(), ("host" if keyed_host else "node"): socket.gethostname()}


def slurm_parts(partition: str | None, account: str | None, timeout_s: float = 15.0) -> dict[str, str]:
    """What the submitting side sees of the cluster without a job: the partition's nodes and GRES."""
    parts = {"slurm_partition": partition or "default", "slurm_account": account or "default"}
    exe = shutil.which("sinfo")
    if not exe:
        parts["slurm_nodes"] = "unknown (no sinfo)"
        return parts
    cmd = [exe, "-h", "-o", "%N %G"] + ([f"--partition={partition}"] if partition else [])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        rows = sorted({" ".join(ln.split()) for ln in proc.stdout.splitlines() if ln.strip()})
        parts["slurm_nodes"] = "; ".join(rows) if proc.returncode == 0 and rows else "unknown (sinfo failed)"
    except (subprocess.TimeoutExpired, OSError):
        parts["slurm_nodes"] = "unknown (sinfo did not answer)"
    return parts


def main(argv: list[str] | None = None) -> int:
    """`python -m ftqual stack [--machine] [--workload W] [--megatron-path P]`: print the identity as JSON."""
    import argparse

    p = argparse.ArgumentParser(prog="ftqual stack", description=main.__doc__)
    p.add_argument("--machine", action="store_true", help="only this machine's part (GPUs, driver, node)")
    p.add_argument("--workload", default="smoke")
    p.add_argument("--megatron-path", default=os.environ.get("MEGATRON_PATH"))
    args = p.parse_args(argv)
    if args.machine:
        text = json.dumps(probe_machine(keyed_host=False), sort_keys=True)
    else:
        ident = StackIdentity({**software_parts(args.workload, args.megatron_path), **probe_machine()})
        text = json.dumps(ident.to_json(), indent=2)
    try:
        print(text, flush=True)
    except BrokenPipeError:  # `ftqual stack | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
