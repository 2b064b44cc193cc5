"""The checkpoint digests' cost against the storage's read floor (docs/benchmarks.md, "Checkpoint digests").

    .venv/bin/python bench/checkpoint_digest.py [--mib 512] [--tensors 64] [--out bench/out] [--repeat 3]

Writes one torch_dist checkpoint of `--mib` MiB (float32 tensors of the model, optimizer and RNG groups,
as the smoke workload saves them), then times, each from a cold page cache for those files (their pages
dropped with posix_fadvise DONTNEED after an fsync, which needs no privilege), best of `--repeat`:

- read floor: every file of the checkpoint read once in 1 MiB chunks (what any digest must at least pay);
- sha256 floor: the same bytes read and hashed (hashlib, one stream per file);
- digests: ftqual.launch.checkpoint_digest.digest_checkpoint (torch's reader, per-tensor sha256, max-abs and
  norm, in batches of BATCH_BYTES).

Prints one JSON line: MiB, seconds and MiB/s of each, and the digest's share of the read floor's throughput.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHUNK = 1 << 20


def write_checkpoint(folder: Path, mib: int, tensors: int) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    per = max(1, (mib << 20) // 4 // tensors)
    gen = torch.Generator().manual_seed(0)
    model = {f"layer{i}.weight": torch.randn(per, generator=gen) for i in range(tensors // 2)}
    rest = range(tensors - tensors // 2)
    optim = {f"state.layer{i}.exp_avg": torch.randn(per, generator=gen) for i in rest}
    state = {"model": model, "optimizer": optim, "rng": torch.get_rng_state()}
    dcp.save(state, checkpoint_id=str(folder), no_dist=True)


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file())


def drop_cache(folder: Path) -> None:
    for path in files_of(folder):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_all(folder: Path, hashing: bool) -> int:
    total = 0
    for path in files_of(folder):
        digest = hashlib.sha256() if hashing else None
        with open(path, "rb", buffering=0) as handle:
            while chunk := handle.read(CHUNK):
                total += len(chunk)
                if digest is not None:
                    digest.update(chunk)
    return total


def best_of(repeat: int, folder: Path, run) -> float:
    times = []
    for _ in range(repeat):
        drop_cache(folder)
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--tensors", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    import warnings

    warnings.filterwarnings("ignore")  # torch's "no process group: one process" notice
    from ftqual.launch.checkpoint_digest import digest_checkpoint

    folder = args.out / "digest-bench" / "iter_0000001"
    shutil.rmtree(folder.parent, ignore_errors=True)
    folder.parent.mkdir(parents=True)
    write_checkpoint(folder, args.mib, args.tensors)
    size = sum(p.stat().st_size for p in files_of(folder)) / (1 << 20)
    read_s = best_of(args.repeat, folder, lambda: read_all(folder, hashing=False))
    sha_s = best_of(args.repeat, folder, lambda: read_all(folder, hashing=True))
    digest_s = best_of(args.repeat, folder, lambda: digest_checkpoint(folder))
    result = {
        "mib": round(size, 1),
        "read_floor": {"s": round(read_s, 3), "mib_s": round(size / read_s, 1)},
        "sha256_floor": {"s": round(sha_s, 3), "mib_s": round(size / sha_s, 1)},
        "digests": {"s": round(digest_s, 3), "mib_s": round(size / digest_s, 1)},
        "digest_share_of_read_floor": round(read_s / digest_s, 3),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result))
    if not args.keep:
        shutil.rmtree(folder.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
