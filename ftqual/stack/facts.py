"""What software stack this node has, and which Megatron settings `auto` resolves to on it.

Probes return plain facts and never import the heavy packages into this process: torch is asked in a
subprocess with a timeout (a broken CUDA install must not hang preflight), Transformer Engine and Apex
are only located (`find_spec` + distribution metadata), Megatron's version is read from its source text.
`resolve_for_stack` hands those facts to the launcher's resolution (ftqual/stack/resolve.py), the only one.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ftqual.stack.resolve import Probe, StackChoice, module_present, resolve

# Distribution names under which the optional packages are published (first installed one wins).
TE_DISTS = (
    "transformer_engine",
    "transformer-engine",
    "transformer_engine_torch",
    "transformer-engine-cu12",
    "transformer-engine-cu13",
)
APEX_DISTS = ("apex",)
NVRX_DIST = "nvidia-resiliency-ext"
# Apex's wgrad-accumulation kernel (see ftqual/stack/resolve.py for why it matters).
APEX_WGRAD_EXT = "fused_weight_gradient_mlp_cuda"
# The versions this project was qualified with (README, "Qualified versions"); others get a warning, not a
# failure.
QUALIFIED_NVRX = "0.7.0"
QUALIFIED_MEGATRON = re.compile(r"^0\.19\.")

TORCH_PROBE = r"""
import json, sys
out = {}
try:
    import torch
except Exception as exc:  # noqa: BLE001
    print(json.dumps({"error": f"import torch failed: {exc!r}"})); sys.exit(0)
out["torch"] = torch.__version__.split("+")[0]
out["torch_full"] = torch.__version__
out["cuda"] = torch.version.cuda
try:
    v = torch.cuda.nccl.version()
    out["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
except Exception:  # noqa: BLE001
    out["nccl"] = None
try:
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
except Exception:  # noqa: BLE001
    n = 0
out["gpu_count"] = n
try:
    out["gpu_model"] = torch.cuda.get_device_name(0) if n else None
except Exception:  # noqa: BLE001
    out["gpu_model"] = None
try:
    sizes = [torch.cuda.get_device_properties(i).total_memory for i in range(n)]
    out["gpu_memory_bytes"] = min(sizes) if sizes else None
except Exception:  # noqa: BLE001
    out["gpu_memory_bytes"] = None
import torch.distributed as dist
out["nccl_backend"] = bool(dist.is_available() and dist.is_nccl_available())
out["gloo_backend"] = bool(dist.is_available() and dist.is_gloo_available())
print(json.dumps(out))
"""


@dataclass(frozen=True)
class StackFacts:
    """The node's stack. Versions are strings, None when absent; `errors` says why a probe gave nothing."""

    python: str
    torch: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    gpu_model: str | None = None
    gpu_count: int = 0
    driver: str | None = None
    nvrx: str | None = None
    megatron: str | None = None
    transformer_engine: str | None = None
    apex: str | None = None
    host: str = ""
    apex_wgrad_ext: bool = False
    nccl_backend: bool = False
    gloo_backend: bool = False
    errors: dict[str, str] = field(default_factory=dict)
    gpu_memory_bytes: int | None = (
        None  # the smallest visible GPU's memory (torch); judged, not fingerprinted
    )

    def fingerprint(self) -> dict:
        """The `stack` object of preflight.json (docs/interfaces.md), plus the extension flags."""
        data = asdict(self)
        data.pop("errors")
        data.pop("gpu_memory_bytes")
        return data


# ------------------------------------------------------------------------------------------------ probes


def ft_launcher_executable(python: str = sys.executable) -> str | None:
    """ft_launcher beside the interpreter (a virtualenv), else the one on PATH: the one the launcher runs
    (ftqual.launch.command), the stack identity digests and the preflight asks for the training
    interpreter's."""
    beside = Path(python).parent / "ft_launcher"
    if beside.is_file():
        return str(beside)
    return shutil.which("ft_launcher")


DUMP_TOOL_ENV = "FTQUAL_DUMP_TOOL"
DUMP_TOOL = "py-spy"


def stack_dump_tool(env: Mapping[str, str], python: str = sys.executable) -> str | None:
    """The tool the rank sentinels dump stacks with: FTQUAL_DUMP_TOOL (a path or a name on PATH; `none`: no
    tool, the ranks' faulthandler only), else py-spy beside the interpreter (a virtualenv), else on PATH;
    None when there is none (the preflight says so in one line)."""
    asked = env.get(DUMP_TOOL_ENV, "").strip()
    if asked.lower() == "none":
        return None
    if asked:
        return shutil.which(asked) or (asked if Path(asked).is_file() else None)
    beside = Path(python).parent / DUMP_TOOL
    if beside.is_file():
        return str(beside)
    return shutil.which(DUMP_TOOL)


def dist_version(*names: str) -> str | None:
    """Installed version of the first distribution found among `names` (metadata only, no import)."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def package_version(module: str, dists: tuple[str, ...]) -> str | None:
    """Version of an optional package: its metadata version, 'unknown' if only the module is found."""
    if not module_present(module):
        return None
    return dist_version(*dists) or "unknown"


def megatron_version(megatron_path: str | os.PathLike | None) -> str | None:
    """Megatron-Core's version from megatron/core/package_info.py, parsed as text (never imported)."""
    if not megatron_path:
        return None
    info = Path(megatron_path) / "megatron" / "core" / "package_info.py"
    try:
        tree = ast.parse(info.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue  # computed values (e.g. a git hash) are not needed
    if all(k in values for k in ("MAJOR", "MINOR", "PATCH")):
        version = f"{values['MAJOR']}.{values['MINOR']}.{values['PATCH']}"
        return version + str(values.get("PRE_RELEASE") or "")
    version = values.get("__version__")
    return version if isinstance(version, str) else None


def probe_torch(python: str = sys.executable, timeout_s: float = 120.0) -> dict:
    """torch/CUDA/NCCL facts from a child interpreter; {'error': ...} when it fails or hangs."""
    try:
        proc = subprocess.run(
            [python, "-c", TORCH_PROBE], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return {"error": f"torch probe did not answer within {timeout_s:.0f} s"}
    except OSError as exc:
        return {"error": f"cannot run {python}: {exc}"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"torch probe exited {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def probe_nvidia_smi(timeout_s: float = 20.0) -> dict:
    """GPU models and driver from nvidia-smi (all GPUs of the node, ignoring CUDA_VISIBLE_DEVICES)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {"error": "nvidia-smi not found"}
    try:
        proc = subprocess.run(
            [exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"nvidia-smi did not answer within {timeout_s:.0f} s"}
    if proc.returncode != 0:
        return {"error": f"nvidia-smi exited {proc.returncode}: {proc.stderr.strip()[:200]}"}
    rows = [[c.strip() for c in ln.split(",")] for ln in proc.stdout.splitlines() if ln.strip()]
    return {
        "gpu_count": len(rows),
        "gpu_model": rows[0][0] if rows else None,
        "driver": rows[0][1] if rows and len(rows[0]) > 1 else None,
        "rows": rows,  # [name, driver] per GPU
    }


def probe_stack(megatron_path: str | None = None, python: str = sys.executable) -> StackFacts:
    """Every stack fact of this node. Slow parts (torch, nvidia-smi) run in subprocesses with timeouts."""
    errors: dict[str, str] = {}
    torch_facts = probe_torch(python)
    if "error" in torch_facts:
        errors["torch"] = torch_facts["error"]
        torch_facts = {}
    smi = probe_nvidia_smi()
    if "error" in smi:
        errors["nvidia_smi"] = smi["error"]
        smi = {}
    # torch's count honours CUDA_VISIBLE_DEVICES and is what the workers will see; nvidia-smi only fills in
    # when torch itself could not be asked.
    gpu_count = torch_facts["gpu_count"] if "gpu_count" in torch_facts else smi.get("gpu_count", 0)
    return StackFacts(
        python=platform.python_version(),
        torch=torch_facts.get("torch"),
        cuda=torch_facts.get("cuda"),
        nccl=torch_facts.get("nccl"),
        gpu_model=torch_facts.get("gpu_model") or smi.get("gpu_model"),
        gpu_count=int(gpu_count),
        driver=smi.get("driver"),
        nvrx=dist_version(NVRX_DIST),
        megatron=megatron_version(megatron_path),
        transformer_engine=package_version("transformer_engine", TE_DISTS),
        apex=package_version("apex", APEX_DISTS),
        host=socket.gethostname(),
        apex_wgrad_ext=module_present(APEX_WGRAD_EXT),
        nccl_backend=bool(torch_facts.get("nccl_backend")),
        gloo_backend=bool(torch_facts.get("gloo_backend")),
        errors=errors,
        gpu_memory_bytes=torch_facts.get("gpu_memory_bytes"),
    )


# ------------------------------------------------------------------------------------------------ resolution

# The rules themselves live in the launcher (ftqual/stack/resolve.py), the single source: preflight only
# feeds it the facts probed here, so what preflight reports is what the launcher will run.


def stack_probe(stack: StackFacts) -> Probe:
    """The launcher's Probe for these facts."""
    return Probe(
        transformer_engine=stack.transformer_engine is not None,
        apex=stack.apex is not None,
        apex_grad_acc_fusion=stack.apex_wgrad_ext,
    )


def resolve_for_stack(
    stack: StackFacts, workload: str, transformer_impl: str, dist_optimizer: str
) -> StackChoice:
    """What `auto` becomes on this stack, as the launcher will resolve it."""
    if workload != "megatron":
        return StackChoice(
            transformer_impl="local",
            dist_optimizer=False,
            megatron_flags=[],
            reasons={"workload": f"{workload} workload: no Megatron, so no stack-dependent flags"},
            workload=workload,
        )
    return resolve(transformer_impl, dist_optimizer, stack_probe(stack))


def _main() -> int:
    """`python -m ftqual.stack.facts [MEGATRON_PATH]`: print the stack fingerprint (debugging aid)."""
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MEGATRON_PATH")
    print(json.dumps(probe_stack(path).fingerprint(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
