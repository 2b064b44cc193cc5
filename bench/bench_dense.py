#!/usr/bin/env python3
"""Benchmark `ftqual verify` on iteration-dense logs: cost independent of the run's length.

    .venv/bin/python bench/bench_dense.py                 # all three shapes, 50 MB to 2 GB
    .venv/bin/python bench/bench_dense.py --max-mb 100    # a quick subset
    .venv/bin/python bench/bench_dense.py --shape dense --sizes 50 2000

Three shapes, each grown from 50 MB to 2 GB of training logs:
- `dense`: 8 ranks, one iteration line per step (`--log-interval=1`), almost no chatter: the logs grow by
  iterations (about 3,100 per MB; the fault lands at 40 %, so from 1 GB on the cycle after the restore holds
  more than 1,500,000 iterations);
- `1k ranks`: 1,024 ranks and 100,000 iterations, grown by per-rank chatter (`--target-mb`);
- `saves`: `dense` with a checkpoint every 1,000 iterations, as a long run saves (6,200 saves and
  checkpoint folders at 2 GB; `dense` saves 10 times whatever its length): the logs grow by iterations and
  by checkpoints.
Each run is generated (bench/make_run.py), verified `--repeat` times (default 1) in its own
`python -m ftqual verify` child pinned to one CPU (wall time: the median, fastest and slowest; peak RSS from
os.wait4, the largest), then deleted. On a shared VM one core's speed varies by 20-40 % from run to run
(user time, not waiting), so small sizes are best read as the median of several. Sizes run one after the
other, never in parallel.
The package's bytecode is compiled first (`compileall`, as installing a wheel does), so that the children do
not compile ftqual's modules from source at every start where PYTHONDONTWRITEBYTECODE is set (about 0.1 s a
run); --no-compile measures without it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_verify import VERDICTS, log_bytes, run_verify  # noqa: E402
from tests.support.synthetic.runs import Spec, chatter_for_target, generate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SIZES_MB = (50, 100, 500, 1000, 2000)
ITERS_PER_MB = 3_100  # dense shape: 8 ranks, one ~320-byte iteration line per step
SHAPES = ("dense", "1k ranks", "saves")
SAVE_INTERVAL = 1_000  # the `saves` shape


@dataclass(frozen=True)
class Result:
    shape: str
    target_mb: int
    size_mb: float
    iters: int
    after_restore: int  # iterations of the last cycle (after the restore)
    gen_s: float
    wall_s: float  # the median of the repeats
    fastest_s: float
    slowest_s: float
    repeats: int
    rss_mib: float
    verdict: str

    @property
    def mbps(self) -> float:
        return self.size_mb / self.wall_s if self.wall_s > 0 else float("inf")


def spec_for(shape: str, target_mb: int) -> Spec:
    if shape in ("dense", "saves"):
        spec = Spec(ranks=8, iters=ITERS_PER_MB * target_mb, seed=16, chatter_per_rank=1)
        return replace(spec, save_interval=SAVE_INTERVAL) if shape == "saves" else spec
    spec = Spec(ranks=1024, iters=100_000, seed=16, chatter_per_rank=0)
    return replace(spec, chatter_per_rank=chatter_for_target(spec, target_mb))


def last_cycle_iterations(expect: dict, spec: Spec) -> int:
    faults = expect.get("fault_iterations") or []
    return spec.iters - faults[-1] if faults else spec.iters


def measure(shape: str, target_mb: int, work: Path, keep: bool, repeat: int = 1) -> Result:
    spec = spec_for(shape, target_mb)
    run = work / f"{shape.replace(' ', '')}-{target_mb}mb"
    shutil.rmtree(run, ignore_errors=True)
    t0 = time.perf_counter()
    expect = generate(spec, run)
    gen_s = time.perf_counter() - t0
    size_mb = log_bytes(run) / 1e6
    walls, peaks, codes = zip(
        *(run_verify(run, work / f"verify-{run.name}.json", pin=True) for _ in range(repeat)), strict=True
    )
    wall, rss = statistics.median(walls), max(peaks)
    verdicts = {VERDICTS.get(code, f"exit {code}") for code in codes}
    verdict = " / ".join(sorted(verdicts))
    if not keep:
        shutil.rmtree(run, ignore_errors=True)
    result = Result(
        shape,
        target_mb,
        size_mb,
        spec.iters,
        last_cycle_iterations(expect, spec),
        gen_s,
        wall,
        min(walls),
        max(walls),
        repeat,
        rss,
        verdict,
    )
    print(
        f"  {shape} {target_mb} MB: {size_mb:.0f} MB, {spec.iters} iterations, verify {wall:.2f} s "
        f"(median of {repeat}: {', '.join(f'{w:.2f}' for w in walls)}; {result.mbps:.0f} MB/s), "
        f"{rss:.0f} MiB, {verdict}",
        file=sys.stderr,
        flush=True,
    )
    return result


def table(results: list[Result]) -> str:
    lines = [
        "| shape | logs | iterations (after the restore) | verify wall (1 core): median, fastest-slowest "
        "| throughput (median) | peak RSS | verdict |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        spread = f" ({r.fastest_s:.2f}-{r.slowest_s:.2f} s, {r.repeats} runs)" if r.repeats > 1 else ""
        lines.append(
            f"| {r.shape} | {r.size_mb:,.0f} MB | {r.iters:,} ({r.after_restore:,}) "
            f"| {r.wall_s:.2f} s{spread} | {r.mbps:.0f} MB/s | {r.rss_mib:.0f} MiB | {r.verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=SHAPES, action="append", help="default: all")
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES_MB), help="MB of logs")
    p.add_argument("--max-mb", type=int, help="leave out larger sizes")
    p.add_argument("--work", type=Path, default=REPO / "bench" / "out", help="where runs are generated")
    p.add_argument("--keep", action="store_true", help="keep the generated runs")
    p.add_argument("--no-compile", action="store_true", help="do not compile ftqual's bytecode first")
    p.add_argument("--repeat", type=int, default=1, help="verify each run this many times (the median)")
    a = p.parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    if not a.no_compile:
        compile_cmd = [sys.executable, "-m", "compileall", "-q", str(REPO / "ftqual")]
        subprocess.run(compile_cmd, check=True, stdout=subprocess.DEVNULL)
    print(f"ftqual bytecode compiled first: {not a.no_compile}", file=sys.stderr)
    sizes = [s for s in a.sizes if a.max_mb is None or s <= a.max_mb]
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    if a.repeat < 1:
        p.error("--repeat must be at least 1")
    results = [
        measure(shape, size, a.work, a.keep, a.repeat) for shape in a.shape or SHAPES for size in sizes
    ]
    print(f"load average after: {os.getloadavg()}", file=sys.stderr)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
