#!/usr/bin/env python3
"""Benchmark `ftqual verify` on generated run directories from fixture size up to gigabytes of logs.

    .venv/bin/python bench/bench_verify.py                      # the default ladder, up to 2 GB / 1,024 ranks
    .venv/bin/python bench/bench_verify.py --max-mb 100         # a quick subset
    .venv/bin/python bench/bench_verify.py --workflow-results results --write-docs

For every size: generate a run with bench/make_run.py, then run `python -m ftqual verify` once per size in
its own subprocess pinned to one CPU, timing it and reading that child's peak RSS from os.wait4. Also times
`snakemake -n` on the default config (median of 3, in a temporary copy of the project) and, given the
results of a finished workflow, the share of its wall time spent outside the training runs. Prints a
Markdown table; --write-docs replaces this benchmark's section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.workflow_overhead import overhead_report  # noqa: E402
from tests.support.synthetic.runs import Spec, chatter_for_target, generate  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "data" / "megatron-h200-2gpu-dp2"
SECTION = "## Verifier at scale"
TARGET_MBPS = 100.0
TARGET_DRYRUN_S = 3.0
TARGET_OVERHEAD = 0.05
VERDICTS = {0: "pass", 1: "fail", 2: "bad input", 3: "inconclusive"}
FINDINGS = """\
### Findings and changes (2026-11-29)

- **Where verify spends its time**: parsing `logs/train_cycle<N>.log`. Everything else (launcher log,
  cycle_infos, checkpoints, checks, report) takes under 0.2 s even at 1,024 ranks and 128 nodes.
- **First version** (100 MB / 908 k lines: 7.3 s, 14 MB/s): every line was decoded, matched against the
  rank-prefix regex, stripped and run through a chain of `startswith` / regex tests. Under cProfile (14.3 s)
  `train_log.py:_Collector.line` took 10.5 s, `re.Pattern.match` 1.8 s (1.8 M calls), `str.startswith`
  1.4 s (3.6 M calls). A keyword pre-filter before `line()` (`_interesting`: 10 `in` tests per line) then
  gave about 40 MB/s; that pre-filter (1.1 s) and the text-mode line loop (0.7 s) were the new hot spots.
- **Change** (`ftqual/verification/evidence/train_log.py: parse_train_log`): read 4 MB binary blocks cut at a
newline,
  find each keyword with `bytes.find`, decode and parse only the lines holding one (and every line of the
  argument dump), count newlines with `bytes.count` for line numbers. A block holding a carriage return
  takes the text-mode path, so universal newlines behave as before. The output is identical:
  `tests/unit/bench/test_parser_parity.py` compares it with a plain parse that hands every line to the
  collector,
  on the recorded runs, generated runs and fuzzed logs (CR, invalid UTF-8, argument dumps cut by block ends,
  no final newline) at block sizes from 7 bytes to 4 MB; `tests/unit/verification` passes unchanged. The ten
  `bytes.find` scans are now the hot spot (0.49 s of 0.87 s at 100 MB): about 160 MB/s for the parser.
- **Memory**: facts only, never lines, one block at a time: the peak RSS follows the number of ranks,
  iterations and checkpoints (facts), not the bytes of chatter.
- **`snakemake -n`** (about 1.8 s idle; up to 5 s while other jobs shared the 2 cores): about 1.4 s is
  importing Snakemake and its plugins (the Slurm executor plugin's `efficiency_report` alone imports pandas
  and sqlmodel, about 0.5 s); our Snakefile, schema validation and DAG take about 0.36 s.
- **Workflow overhead** is a fixed cost of about 11 s, measured on the CPU smoke workflow (2 ranks,
  20 iterations, 20-45 s per scenario): preflight about 4 s (two child interpreters importing torch and
  NVRx's launcher parser; they contend on 2 cores), summary about 3 s (matplotlib, three plots), Snakemake's
  start-up about 1.8 s, run_scenario around ft_launcher about 1.8 s, verify about 0.3 s per scenario. It does
  not grow with run length: against the recorded H200 runs (baseline 44 s, kill 85 s, a hang adds the 120 s
  step timeout) the same 11 s would be about 3-4% (an estimate from the fixtures, not a GPU measurement).
  On the smoke workflow itself it stays above 5% unless preflight and summary get cheaper (for example the
  torch probe sharing one child interpreter with the NVRx parse, and plots drawn only on request).
- Logs here are read from the page cache right after being written; on a network file system a cold read
  may be bound by I/O instead.
"""


@dataclass(frozen=True)
class Case:
    label: str
    ranks: int
    iters: int
    restarts: int
    target_mb: float | None  # None: generator default chatter

    def spec(self, seed: int) -> Spec:
        return Spec(ranks=self.ranks, iters=self.iters, restarts=self.restarts, seed=seed)


LADDER = (
    Case("tiny", 2, 30, 1, None),
    Case("64 ranks", 64, 100, 1, 10),
    Case("256 ranks", 256, 200, 1, 100),
    Case("1k ranks", 1024, 400, 1, 500),
    Case("1k ranks, 3 restarts", 1024, 1000, 3, 1000),
    Case("1k ranks, 2 GB", 1024, 1000, 1, 2000),
)


@dataclass
class Row:
    label: str
    size_mb: float
    ranks: int
    iters: int
    restarts: int
    gen_s: float
    wall_s: float
    rss_mb: float
    verdict: str
    expected: str

    @property
    def mbps(self) -> float:
        return self.size_mb / self.wall_s if self.wall_s > 0 else float("inf")


def log_bytes(run: Path) -> int:
    return sum(p.stat().st_size for p in (run / "logs").iterdir() if p.is_file())


def run_verify(run: Path, report: Path, pin: bool) -> tuple[float, float, int]:
    """(wall seconds, peak RSS MiB, exit code) of one `python -m ftqual verify` child."""
    cmd = [sys.executable, "-m", "ftqual", "verify", str(run), "--json", str(report)]

    def one_cpu() -> None:  # runs in the child before exec
        if pin and hasattr(os, "sched_setaffinity"):
            cpus = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {cpus[-1]})

    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=one_cpu
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode not in VERDICTS:
        print(f"  verify exited {proc.returncode}: {err.strip()[-500:]}", file=sys.stderr)
    return wall, usage.ru_maxrss / 1024.0, proc.returncode


def measure(
    case: Case | None, fixture: Path | None, work: Path, seed: int, pin: bool, keep: bool, repeat: int = 1
) -> Row:
    if fixture is not None:
        run, gen_s, expected = fixture, 0.0, "pass"
        run_json = json.loads((run / "run.json").read_text())
        label, ranks, iters = f"fixture {fixture.name}", run_json["world_size"], run_json["train_iters"]
        restarts = len(list((run / "cycle_infos").glob("cycle_info.*.*.*"))) - 1
    else:
        assert case is not None
        spec = case.spec(seed)
        if case.target_mb is not None:
            from dataclasses import replace

            spec = replace(spec, chatter_per_rank=chatter_for_target(spec, case.target_mb))
        run = work / f"run-{case.ranks}r-{case.iters}i-{case.restarts}k"
        t0 = time.perf_counter()
        expect = generate(spec, run)
        gen_s = time.perf_counter() - t0
        expected = expect["verdict"]
        if expect["tolerated_failing_checks"]:
            expected += " (may fail: " + ", ".join(expect["tolerated_failing_checks"]) + ")"
        label, ranks, iters, restarts = case.label, case.ranks, case.iters, case.restarts
    size_mb = log_bytes(run) / 1e6
    report = work / f"verify-{label.replace(' ', '_').replace(',', '')}.json"
    runs = [run_verify(run, report, pin) for _ in range(max(1, repeat))]
    wall = min(r[0] for r in runs)  # the least disturbed run: other processes share this machine
    rss = max(r[1] for r in runs)
    code = runs[-1][2]
    verdict = VERDICTS.get(code, f"exit {code}")
    if report.exists():
        try:
            data = json.loads(report.read_text())
            failing = [c["id"] for c in data.get("checks", []) if c.get("status") == "fail"]
            if failing:
                verdict += " (" + ", ".join(failing) + ")"
        except (OSError, ValueError, KeyError, TypeError):
            pass
    if fixture is None and not keep:
        shutil.rmtree(run, ignore_errors=True)
    print(f"  {label}: {size_mb:.1f} MB, verify {wall:.2f} s, {rss:.0f} MiB, {verdict}", file=sys.stderr)
    return Row(label, size_mb, ranks, iters, restarts, gen_s, wall, rss, verdict, expected)


def snakemake_dry_run(runs: int = 3) -> tuple[list[float] | None, str]:
    if not (REPO / "Snakefile").exists():
        return None, "no Snakefile yet: skipped"
    skip = {
        ".git",
        ".venv",
        ".snakemake",
        "results",
        "runs",
        "logs",
        "out",
        "__pycache__",
        ".pytest_cache",
        ".ruff_cache",
        ".whl",
        ".megatron",
    }
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ftqual-dryrun-") as tmp:
        dest = Path(tmp) / "project"
        shutil.copytree(REPO, dest, ignore=lambda d, names: [n for n in names if n in skip])
        for _ in range(runs):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "snakemake", "-n"], cwd=dest, capture_output=True, text=True
            )
            times.append(time.perf_counter() - t0)
            if proc.returncode != 0:
                return None, f"`snakemake -n` failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}"
    return times, ""


def machine() -> dict[str, str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "nproc": str(cpus),
        "cpu": model,
        "ram": ram,
        "python": platform.python_version(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "load": " / ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def memory_pair(rows: list[Row]) -> tuple[Row, Row] | None:
    """The smallest and largest run with the same rank count (so only the log size differs much)."""
    best: tuple[Row, Row] | None = None
    for ranks in {r.ranks for r in rows}:
        same = sorted((r for r in rows if r.ranks == ranks), key=lambda r: r.size_mb)
        if len(same) >= 2 and same[-1].size_mb >= 2 * same[0].size_mb:
            if best is None or same[-1].size_mb / same[0].size_mb > best[1].size_mb / best[0].size_mb:
                best = (same[0], same[-1])
    return best


def render(
    rows: list[Row],
    dry: tuple[list[float] | None, str],
    overhead: dict | None,
    pin: bool,
    load_before: str = "",
    repeat: int = 1,
) -> str:
    m = machine()
    out = [SECTION, ""]
    out.append(
        f"Measured {m['date']} on {m['nproc']} CPU(s) ({m['cpu']}), {m['ram']} RAM, Python {m['python']}, "
        f"by `bench/bench_verify.py` ({'verify pinned to one CPU' if pin else 'verify not pinned'}; logs "
        "freshly written, so read from the page cache). Runs come from `bench/make_run.py`: the recorded "
        "H200 formats, per-rank start-up chatter (Python warnings, NCCL INFO) making up the size. "
        f"Verify wall time is the fastest of {repeat} run(s) per size; the machine is shared (load average "
        f"1/5/15 min: {load_before or '?'} before, {m['load']} after), so times are upper bounds."
    )
    out.append("")
    out.append(
        "| case | logs (MB) | ranks | iterations | restarts | generate (s) | verify wall (s) | MB/s "
        "| peak RSS (MiB) | verdict | expected |"
    )
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        out.append(
            f"| {r.label} | {r.size_mb:,.1f} | {r.ranks:,} | {r.iters:,} | {r.restarts} | {r.gen_s:.1f} "
            f"| {r.wall_s:.2f} | {r.mbps:,.0f} | {r.rss_mb:,.0f} | {r.verdict} | {r.expected} |"
        )
    out.append("")
    big = [r for r in rows if r.size_mb >= 50]
    out.append("Targets:")
    if big:
        worst = min(big, key=lambda r: r.mbps)
        ok = worst.mbps >= TARGET_MBPS
        out.append(
            f"- verify throughput >= {TARGET_MBPS:.0f} MB/s on one core (runs of 50 MB and more): "
            f"slowest {worst.mbps:,.0f} MB/s ({worst.label}): **{'met' if ok else 'NOT met'}**"
        )
    pair = memory_pair(rows)
    if pair:
        small, large = pair
        per_gb = (large.rss_mb - small.rss_mb) / max(1e-9, (large.size_mb - small.size_mb) / 1000)
        ok = large.rss_mb <= 1.25 * small.rss_mb + 8
        out.append(
            f"- memory does not grow with log size (same {large.ranks:,} ranks): {small.rss_mb:,.0f} MiB at "
            f"{small.size_mb:,.0f} MB, {large.rss_mb:,.0f} MiB at {large.size_mb:,.0f} MB "
            f"({per_gb:+,.1f} MiB per GB of logs; all sizes: {min(r.rss_mb for r in rows):,.0f}-"
            f"{max(r.rss_mb for r in rows):,.0f} MiB): **{'met' if ok else 'NOT met'}**"
        )
    times, note = dry
    if times:
        med = statistics.median(times)
        out.append(
            f"- `snakemake -n` on the default config < {TARGET_DRYRUN_S:.0f} s: median of {len(times)} "
            f"{med:.2f} s ({', '.join(f'{t:.2f}' for t in times)}): "
            f"**{'met' if med < TARGET_DRYRUN_S else 'NOT met'}**"
        )
    else:
        out.append(f"- `snakemake -n` < {TARGET_DRYRUN_S:.0f} s: {note}")
    if overhead:
        share = overhead["overhead_share"]
        out.append(
            f"- workflow overhead < {TARGET_OVERHEAD:.0%} of wall time: {share:.1%} "
            f"(**{'met' if share < TARGET_OVERHEAD else 'NOT met'}**); see below"
        )
        out.append("")
        out.append(overhead["markdown"])
    else:
        out.append(
            f"- workflow overhead < {TARGET_OVERHEAD:.0%}: not measured (pass `--workflow-results DIR` of "
            "a finished workflow run)"
        )
    out.append("")
    out.append(FINDINGS)
    out.append(
        "Reproduce: `.venv/bin/python bench/bench_verify.py --write-docs` (add `--workflow-results "
        "results` after a workflow run; `--max-mb 100` for a quick subset)."
    )
    return "\n".join(out) + "\n"


def write_docs(section: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    start = text.find(SECTION)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        nxt = text.find("\n## ", start + len(SECTION))
        end = len(text) if nxt < 0 else nxt + 1
        text = text[:start] + section + ("\n" + text[end:] if nxt >= 0 else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-mb", type=float, default=float("inf"), help="skip ladder cases above this size")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--work-dir", type=Path, help="where generated runs go (default: a temp dir under bench/out)"
    )
    p.add_argument("--keep", action="store_true", help="keep the generated run directories")
    p.add_argument("--repeat", type=int, default=1, help="verify each size N times; report the fastest")
    p.add_argument("--no-pin", action="store_true", help="do not pin the verifier to one CPU")
    p.add_argument("--fixtures", type=Path, default=FIXTURES, help="recorded run directories to include")
    p.add_argument("--skip-dry-run", action="store_true")
    p.add_argument("--workflow-results", type=Path, help="results/ of a finished workflow run")
    p.add_argument("--snakemake-log", type=Path, help="its .snakemake/log/*.snakemake.log (default: newest)")
    p.add_argument("--write-docs", action="store_true", help="write the section into docs/benchmarks.md")
    p.add_argument("--json", type=Path, help="also write the figures as JSON")
    a = p.parse_args(argv)
    pin = not a.no_pin
    load_before = machine()["load"]
    base = a.work_dir or REPO / "bench" / "out"
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-", dir=base))
    rows: list[Row] = []
    try:
        fixture = a.fixtures / "kill-2gpu"
        if fixture.is_dir():
            rows.append(measure(None, fixture, work, a.seed, pin, a.keep, a.repeat))
        for case in LADDER:
            if case.target_mb is not None and case.target_mb > a.max_mb:
                continue
            rows.append(measure(case, None, work, a.seed, pin, a.keep, a.repeat))
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    dry: tuple[list[float] | None, str] = (None, "skipped (--skip-dry-run)")
    if not a.skip_dry_run:
        dry = snakemake_dry_run()
    overhead = None
    if a.workflow_results:
        startup = statistics.median(dry[0]) if dry[0] else 0.0
        overhead = overhead_report(a.workflow_results, a.snakemake_log, startup)
    section = render(rows, dry, overhead, pin, load_before, a.repeat)
    print(section)
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "rows": [r.__dict__ | {"mbps": r.mbps} for r in rows],
                    "dry_run_s": dry[0],
                    "overhead": overhead,
                    "machine": machine(),
                },
                indent=2,
            )
            + "\n"
        )
    if a.write_docs:
        write_docs(section, REPO / "docs" / "benchmarks.md")
        print(f"wrote {REPO / 'docs' / 'benchmarks.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
