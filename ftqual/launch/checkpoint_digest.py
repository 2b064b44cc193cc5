"""Per-tensor digests of a run's checkpoints: `<run>/checkpoint_record/digests/`, written when a run ends.

The checkpoint is the proof that a recovered run holds the state an uninterrupted one would: the verifier's
`checkpoint_equal` compares the recovered run's checkpoint at an iteration M with the baseline's, tensor by
tensor. The checkpoints themselves may be purged before the verifier runs, so the launcher (which runs in the
training environment, with torch) reads every saved iteration when the run ends and keeps, per tensor:

```
checkpoint_record/digests/index.json          ftqual.checkpoint_digest/v1: the iterations, or why none
checkpoint_record/digests/iter_XXXXXXX.json   one per saved iteration: its groups, each tensor's digest
```

`iter_XXXXXXX.json`: `iteration`, `format` (`torch_dist`), `readable` (false: this environment cannot read the
checkpoint's format, `problem` says why; the check is then inconclusive, never a pass), and `groups`:
`model`, `optimizer`, `rng`, `scheduler`, `data_position`, `filler` (GROUPS; a key's group is `group_of` its
first name), each `{key: {"sha256", "dtype", "shape", "max_abs", "norm"}}`. `sha256` is of the tensor's raw
bytes in row-major order (an object saved as bytes, such as Megatron's RNG state, is hashed in a canonical
walk of its values); `max_abs` and `norm` (the L2 norm, in float64) of a numeric tensor let a non-exact
comparison bound the largest relative difference from below, since | max|a| - max|b| | <= max|a - b| and
| ||a|| - ||b|| | <= ||a - b||: a difference the statistics show is certain, a difference they hide is not
ruled out (the hashes say whether there is one at all).

Every save is digested while a run's saves total at most ALL_SAVES_BYTES (the smoke workload's, a small
model's); above it only the newest save and the ones the injection markers name (the checkpoint the
replacement restored), so a large model's run pays a few saves' reads at its end. The digests are computed in
a subprocess (`python -m ftqual.launch.checkpoint_digest CKPT_DIR OUT_DIR`), so
the launcher never imports torch, and each checkpoint is read in batches of at most BATCH_BYTES of tensors, so
memory stays bounded by the larger of that and the largest tensor. Megatron's `common.pt` (torch.save of the
iteration, its arguments and the scheduler) is not read: its unpickling needs Megatron; only the
torch_dist payload (`.metadata` and `*.distcp`) is digested.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ftqual.jsonfile import write_json_atomic

SCHEMA = "ftqual.checkpoint_digest/v1"
DIGESTS_DIR = "digests"
INDEX = "index.json"
GROUPS = ("model", "optimizer", "rng", "scheduler", "data_position", "filler")
# `filler`: the smoke workload's random payload (--smoke-checkpoint-mb), new bytes in every run: digested
# (its cost is the benchmark's), never compared.
COMPARED_GROUPS = GROUPS[:5]
BATCH_BYTES = 256 << 20
# Every save is digested while the run's saves total at most this; above it, only the newest save and those
# the injection markers name (the checkpoint restored): what checkpoint_equal compares, at a cost that stays
# a few saves' reads however long the run (a large model's save is tens of GB).
ALL_SAVES_BYTES = 4 << 30
DIGEST_THREADS = max(1, min(8, os.cpu_count() or 1))
TIMEOUT_S = 3600.0  # a digest subprocess past it is stopped: the record says so, the run's exit stays
ITER_DIR = re.compile(r"iter_([0-9]{7})")
MAX_DIGEST_FILE_BYTES = 64 << 20


def group_of(key: str) -> str:
    """The group of a checkpoint key, by its first name: the smoke workload's (`model`, `optimizer`,
    `rng`, `scheduler`, `progress`, `smoke_payload`) and Megatron's torch_dist keys (`optimizer.*`,
    `rng_state`, `opt_param_scheduler`; every other key is a model tensor)."""
    head = key.split(".", 1)[0]
    if head.startswith("optimizer"):
        return "optimizer"
    if head.startswith("rng"):
        return "rng"
    if head in ("scheduler", "opt_param_scheduler", "lr_scheduler"):
        return "scheduler"
    if head in ("progress", "data_position", "consumed_train_samples", "train_iterator"):
        return "data_position"
    if head == "smoke_payload":
        return "filler"
    return "model"


def digest_name(iteration: int) -> str:
    return f"iter_{iteration:07d}.json"


# ---------------------------------------------------------------------------------------------
# the digest itself (torch: the subprocess only)


def _canonical(value, digest) -> None:
    """Feed `value` to `digest` in a walk that depends on its values only (dict keys sorted)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        digest.update(f"T{value.dtype}{tuple(value.shape)}".encode())
        digest.update(_raw(value))
    elif isinstance(value, Mapping):
        digest.update(b"{")
        for key in sorted(value, key=repr):
            digest.update(repr(key).encode())
            _canonical(value[key], digest)
        digest.update(b"}")
    elif isinstance(value, list | tuple):
        digest.update(b"[")
        for item in value:
            _canonical(item, digest)
        digest.update(b"]")
    elif hasattr(value, "tobytes") and hasattr(value, "dtype"):  # a numpy array (NumPy's RNG state)
        digest.update(f"A{value.dtype}{getattr(value, 'shape', ())}".encode())
        digest.update(value.tobytes())
    else:
        digest.update(repr(value).encode())


def _raw(tensor) -> memoryview:
    """The tensor's bytes in row-major order, without a copy where it is contiguous already."""
    flat = tensor.detach().cpu().contiguous().reshape(-1)
    return memoryview(flat.view(__import__("torch").uint8).numpy())


def tensor_digest(tensor) -> dict:
    torch = sys.modules["torch"]
    out = {
        "sha256": hashlib.sha256(_raw(tensor)).hexdigest(),
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "shape": list(tensor.shape),
        "max_abs": None,
        "norm": None,
    }
    if tensor.numel() and (tensor.is_floating_point() or tensor.dtype in (torch.int32, torch.int64)):
        values = tensor.detach()
        low, high = torch.aminmax(values)  # one pass, no |x| copy
        out["max_abs"] = max(abs(float(low)), abs(float(high)))
        # float32 accumulation (a half type widened): its rounding (~1e-7 relative) is far below any
        # tolerance the bound is held to; integers (a step count) in float64, exactly for any count saved
        wide = torch.float64 if not values.is_floating_point() else torch.float32
        out["norm"] = float(torch.linalg.vector_norm(values.to(wide) if values.dtype != wide else values))
    return out


def object_digest(value) -> dict:
    digest = hashlib.sha256()
    _canonical(value, digest)
    return {"sha256": digest.hexdigest(), "dtype": "object", "shape": [], "max_abs": None, "norm": None}


def _batches(items: list, size_of) -> list[list]:
    batches: list[list] = [[]]
    used = 0
    for item in items:
        size = size_of(item)
        if batches[-1] and used + size > BATCH_BYTES:
            batches.append([])
            used = 0
        batches[-1].append(item)
        used += size
    return [b for b in batches if b]


def digest_checkpoint(folder: Path) -> dict:
    """The digests of one torch_dist checkpoint folder (its `.metadata` and shards), read in batches."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, TensorStorageMetadata

    metadata = dcp.FileSystemReader(str(folder)).read_metadata().state_dict_metadata
    groups: dict[str, dict] = {name: {} for name in GROUPS}
    tensors = sorted(k for k, v in metadata.items() if isinstance(v, TensorStorageMetadata))
    objects = sorted(k for k, v in metadata.items() if isinstance(v, BytesStorageMetadata))
    unknown = sorted(set(metadata) - set(tensors) - set(objects))

    def nbytes(key: str) -> int:
        meta = metadata[key]
        count = 1
        for dim in meta.size:
            count *= dim
        return count * torch.empty((), dtype=meta.properties.dtype).element_size()

    for batch in _batches(tensors, nbytes):
        state = {k: torch.empty(tuple(metadata[k].size), dtype=metadata[k].properties.dtype) for k in batch}
        dcp.load(state, storage_reader=dcp.FileSystemReader(str(folder)), no_dist=True)
        # hashlib and torch's reductions release the GIL: the tensors of a batch are digested in parallel
        with ThreadPoolExecutor(max_workers=DIGEST_THREADS) as pool:
            for key, digest in zip(batch, pool.map(tensor_digest, (state[k] for k in batch)), strict=True):
                groups[group_of(key)][key] = digest
        del state
    if objects:
        state = {k: None for k in objects}
        dcp.load(state, storage_reader=dcp.FileSystemReader(str(folder)), no_dist=True)
        for key in objects:
            groups[group_of(key)][key] = object_digest(state[key])
    problem = f"entries of unknown kind: {', '.join(unknown[:5])}" if unknown else None
    return {"groups": groups, "problem": problem}


def saved_iterations(checkpoint_dir: Path) -> list[tuple[int, Path]]:
    """Every `iter_XXXXXXX` folder below `checkpoint_dir` with a torch_dist `.metadata`, in order."""
    try:
        folders = sorted(checkpoint_dir.iterdir())
    except OSError:
        return []
    found = []
    for folder in folders:
        match = ITER_DIR.fullmatch(folder.name)
        if match is not None and folder.is_dir() and (folder / ".metadata").is_file():
            found.append((int(match[1]), folder))
    return found


def _bytes(folder: Path) -> int:
    try:
        return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    except OSError:
        return 0


def chosen(saved: list[tuple[int, Path]], named: frozenset[int]) -> list[tuple[int, Path]]:
    """The saves to digest: all of them while they total at most ALL_SAVES_BYTES; else the newest and the
    ones in `named` (the iterations the injection markers name)."""
    if sum(_bytes(folder) for _, folder in saved) <= ALL_SAVES_BYTES:
        return saved
    return [(i, f) for n, (i, f) in enumerate(saved) if n == len(saved) - 1 or i in named]


def digest_folder(checkpoint_dir: Path, out: Path, named: frozenset[int] = frozenset()) -> int:
    """Write `out/iter_XXXXXXX.json` for every saved iteration below `checkpoint_dir` (`chosen`), then
    `out/index.json`. Returns 0; a checkpoint that cannot be read is recorded as unreadable, with why."""
    out.mkdir(parents=True, exist_ok=True)
    iterations = []
    started = time.perf_counter()
    total_bytes = 0
    for iteration, folder in chosen(saved_iterations(checkpoint_dir), named):
        doc = {"schema": SCHEMA, "iteration": iteration, "format": "torch_dist", "readable": True}
        try:
            doc.update(digest_checkpoint(folder))
        except Exception as exc:  # any reader failure: this environment cannot read it, said in one line
            doc.update(readable=False, problem=f"format not readable here: {type(exc).__name__}: {exc}"[:400])
            doc["groups"] = {}
        total_bytes += _bytes(folder)
        write_json_atomic(out / digest_name(iteration), doc)
        iterations.append(iteration)
    index = {
        "schema": SCHEMA,
        "iterations": iterations,
        "problem": None,
        "bytes_read": total_bytes,
        "seconds": round(time.perf_counter() - started, 3),
    }
    write_json_atomic(out / INDEX, index)
    return 0


def write_digests(
    checkpoint_dir: Path, out: Path, named: frozenset[int] = frozenset(), timeout_s: float = TIMEOUT_S
) -> None:
    """The launcher's call: digest every iteration in a subprocess of this interpreter (torch stays out of
    the launcher). A failed subprocess leaves `index.json` naming the problem, so a check reading it says
    inconclusive, never pass."""
    if not saved_iterations(checkpoint_dir):
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / INDEX, {"schema": SCHEMA, "iterations": [], "problem": None})
        return  # nothing saved: no interpreter to start
    problem = None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ftqual.launch.checkpoint_digest",
                str(checkpoint_dir),
                str(out),
                *map(str, sorted(named)),
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            tail = (done.stderr or "").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
            problem = f"the digest subprocess failed: {tail[0][:300]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = f"the digest subprocess did not finish: {exc}"[:400]
    if problem is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / INDEX, {"schema": SCHEMA, "iterations": [], "problem": problem})


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


# ---------------------------------------------------------------------------------------------
# the one reader (the verifier's)


@dataclass(frozen=True)
class Digests:
    """A run's checkpoint digests read back: `problem` (why there are none usable) or the iterations saved."""

    folder: Path
    problem: str | None
    iterations: tuple[int, ...]

    def at(self, iteration: int) -> dict | None:
        """The digest document of `iteration` (None when unreadable as JSON)."""
        path = self.folder / digest_name(iteration)
        try:
            if path.is_symlink() or path.stat().st_size > MAX_DIGEST_FILE_BYTES:
                return None
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("iteration") != iteration:
            return None
        return doc


def read_digests(record_folder: Path) -> Digests | None:
    """The digests below a run's checkpoint record; None when the run has none (written before digests)."""
    folder = record_folder / DIGESTS_DIR
    if not folder.is_dir() or folder.is_symlink():
        return None
    try:
        index = json.loads((folder / INDEX).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return Digests(folder, f"{DIGESTS_DIR}/{INDEX} unreadable: {exc}", ())
    if not isinstance(index, dict) or index.get("schema") != SCHEMA:
        return Digests(folder, f"{DIGESTS_DIR}/{INDEX} is not {SCHEMA}", ())
    raw = index.get("iterations")
    listed = raw if isinstance(raw, list) else []
    iterations = tuple(i for i in listed if isinstance(i, int) and not isinstance(i, bool))
    problem = index.get("problem")
    return Digests(folder, str(problem)[:400] if problem else None, iterations)


if __name__ == "__main__":
    if len(sys.argv) < 3 or not all(a.isdigit() for a in sys.argv[3:]):
        print(
            "usage: python -m ftqual.launch.checkpoint_digest CKPT_DIR OUT_DIR [ITERATION ...]",
            file=sys.stderr,
        )
        sys.exit(2)
    named_iterations = frozenset(int(a) for a in sys.argv[3:])
    sys.exit(digest_folder(Path(sys.argv[1]), Path(sys.argv[2]), named_iterations))
