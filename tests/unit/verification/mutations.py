"""The mutation corpus: broken runs derived from every recorded run in tests/data, each labelled with the
invariant it breaks.

`corpus()` lists Mutation specs (nothing is copied until a test applies one). A mutation that breaks an
invariant must never verify as pass (exit 0); a benign control (`breaks=False`) must keep the original
verdict. Every mutation must finish quickly and without a traceback. Classes (`klass`), one per kind of broken
evidence:

  nonfinite       1. a non-finite loss after the restore (NaN never matches, not even NaN)
  after_window    2. losses after the replayed window changed (judged against the baseline / plausibility)
  divergence      3. several divergent iterations, or one past the first iterations after the restore
  checkpoint      4. the tracker's or the restored checkpoint folder missing or not finalized
  marker          5. the injection marker not tied to the request (fault, rank, run id), or forged
  detection       6. the detection line from before the injection, another cycle, another rank, or absent
  no_injection       a fault run without any injection
  hostile         8. FIFOs, /dev/zero, unlistable folders, malformed values
  outside         8. evidence links leaving the run directory
  linear          8. inputs that are quadratic or unbounded for a naive parser
  truncate, delete, reorder, numbers, cycles, timestamps: the generic corruptions
  benign             controls that must keep the verdict
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import traceback
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from ftqual.verification.evidence import RunMetaError, build_snapshot, derive
from ftqual.verification.verify import build_report, exit_code_for

DATA = Path(__file__).resolve().parents[2] / "data"
LAUNCHER = "logs/launcher.log"
MARKER = "fault_injected.json"
TRACKER = "checkpoints/latest_checkpointed_iteration.txt"
FINISHED = "worker group successfully finished"  # the launcher's line for a run that ended well
CLASSES = (
    "nonfinite",
    "after_window",
    "divergence",
    "checkpoint",
    "marker",
    "detection",
    "no_injection",
    "hostile",
    "outside",
    "linear",
    "truncate",
    "delete",
    "reorder",
    "numbers",
    "cycles",
    "timestamps",
    "benign",
)

Edit = Callable[[Path], None]
DEFAULT_STRIDE = 4  # about 500 of the 2,000 mutations per test run; FTQUAL_MUTATIONS=all runs every one


@dataclass(frozen=True)
class Mutation:
    id: str
    run: str  # relative to tests/data
    klass: str
    invariant: str  # what the mutated run no longer shows ("" for a benign control)
    apply: Edit = field(repr=False, compare=False)
    baseline: str | None = None  # relative to tests/data: verify with --baseline
    breaks: bool = True


@dataclass(frozen=True)
class Outcome:
    code: int  # 0 pass, 1 fail, 3 inconclusive, 2 usage, -1 crash
    seconds: float
    error: str = ""

    @property
    def label(self) -> str:
        return {0: "pass", 1: "fail", 2: "usage", 3: "inconclusive"}.get(self.code, "crash")


# editing helpers -------------------------------------------------------------------------------------------


def read(root: Path, rel: str) -> str:
    return (root / rel).read_text(encoding="utf-8", errors="replace")


def write(root: Path, rel: str, text: str) -> None:
    (root / rel).write_text(text, encoding="utf-8")


def sub(root: Path, rel: str, pattern: str, repl: str | Callable[[re.Match], str], count: int = 0) -> None:
    new, n = re.subn(pattern, repl, read(root, rel), count=count, flags=re.MULTILINE)
    assert n, f"mutation generator: {pattern!r} matched nothing in {rel}"
    write(root, rel, new)


def set_json(root: Path, rel: str, **updates: object) -> None:
    data = json.loads(read(root, rel))
    data.update(updates)
    write(root, rel, json.dumps(data, indent=2))


def remove(root: Path, rel: str) -> None:
    path = root / rel
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def replace_with(root: Path, rel: str, make: Callable[[Path], None]) -> None:
    remove(root, rel)
    make(root / rel)


_LOSS_LINE = r"(iteration\s+(\d+)/\s*\d+ \| .*?lm loss: )([^ |]+)"


def edit_losses(root: Path, rel: str, change: Callable[[int, float], float | None]) -> None:
    """Rewrite the lm loss of the iteration lines of `rel` for which `change` returns a value."""
    hits = 0

    def repl(m: re.Match) -> str:
        nonlocal hits
        new = change(int(m[2]), float(m[3]))
        if new is None:
            return m[0]
        hits += 1
        return f"{m[1]}{new:.6E}"

    sub(root, rel, _LOSS_LINE, repl)
    assert hits, f"mutation generator: no loss changed in {rel}"


def shift_times(root: Path, rel: str, line_filter: str, hours: float) -> None:
    """Move the timestamp prefix (NVRx `YYYY-mm-dd HH:MM:SS,fff` or glog `Emmdd HH:MM:SS.ffffff`)."""
    delta = timedelta(hours=hours)

    def repl(m: re.Match) -> str:
        line = m[0]
        if line_filter not in line:
            return line
        if nvrx := re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})", line):
            t = datetime.strptime(nvrx[1], "%Y-%m-%d %H:%M:%S") + delta
            return t.strftime("%Y-%m-%d %H:%M:%S") + line[len(nvrx[1]) :]
        if glog := re.match(r"([IWEF])(\d{4} \d\d:\d\d:\d\d)", line):
            t = datetime.strptime("2026" + glog[2], "%Y%m%d %H:%M:%S") + delta
            return glog[1] + t.strftime("%m%d %H:%M:%S") + line[len(glog[0]) :]
        return line

    text = read(root, rel)
    new = re.sub(r"^.*$", repl, text, flags=re.MULTILINE)
    assert new != text, f"mutation generator: no timestamp of {line_filter!r} lines moved in {rel}"
    write(root, rel, new)


def swap_lines(root: Path, rel: str, first: str, second: str) -> None:
    lines = read(root, rel).splitlines(keepends=True)
    i = next(n for n, line in enumerate(lines) if first in line)
    j = next(n for n, line in enumerate(lines) if second in line)
    lines[i], lines[j] = lines[j], lines[i]
    write(root, rel, "".join(lines))


def drop_lines(root: Path, rel: str, contains: str) -> None:
    lines = read(root, rel).splitlines(keepends=True)
    kept = [line for line in lines if contains not in line]
    assert len(kept) < len(lines), f"mutation generator: no {contains!r} line in {rel}"
    write(root, rel, "".join(kept))


def outside_copy(root: Path, rel: str) -> None:
    """Move `rel` out of the run directory and leave a symlink to it: identical bytes, but not evidence."""
    target = root.parent / f"outside-{rel.replace('/', '_')}"
    shutil.move(str(root / rel), target)
    (root / rel).symlink_to(target, target_is_directory=target.is_dir())


def fifo(path: Path) -> None:
    os.mkfifo(path)


def link_to(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


# facts of a recorded run ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunFacts:
    rel: str
    fault: str
    baseline: str | None
    recovered: bool  # a fault run whose replacement restored a checkpoint and trained on
    k: int | None  # restored iteration
    overlap: tuple[int, ...]  # iterations of the first attempt after K
    final: int | None
    world: int
    fault_rank: int | None
    replacement_log: str | None
    files: tuple[str, ...]  # evidence files present (relative)
    cycle_records: tuple[str, ...]
    finished: bool = True  # launcher.log says the worker group finished (not a recorded negative control)
    timed_out: bool = False  # a timeout, not a worker's exit, detected the fault (a hang, a stalled writer)


def recorded_runs() -> list[Path]:
    return sorted(p.parent for p in DATA.glob("*/*/run.json"))


def facts_of(run: Path) -> RunFacts:
    snap = build_snapshot(run)
    rel = run.relative_to(DATA).as_posix()
    base = run.parent / "baseline"
    baseline = base.relative_to(DATA).as_posix() if base.is_dir() and base != run else None
    restored = derive.restore(snap)
    k = restored.iteration if restored else None
    repl = snap.train_log(derive.replacement_cycle(snap))
    first = snap.train_log(derive.fault_cycle(snap))
    overlap = (
        tuple(sorted(i.iteration for i in first.iterations if k is not None and i.iteration > k))
        if first
        else ()
    )
    # The recovery mutations edit one fault's replacement cycle that ran to the end: runs with several
    # injections, or that ended without finishing (restarts exhausted), get the generic ones only.
    recovered = (
        snap.meta.fault != "none"
        and k is not None
        and repl is not None
        and len(repl.iterations) > 5
        and len(snap.markers) == 1
        and snap.meta.injections == 1
        and (run / LAUNCHER).is_file()
        and FINISHED in read(run, LAUNCHER)
    )
    if recovered:
        start = derive.injected_at(snap)
        overlap = tuple(
            sorted(i.iteration for i in first.iterations if i.iteration > k and (i.t is None or i.t <= start))
        )
    candidates = [
        MARKER,
        LAUNCHER,
        TRACKER,
        *(f"logs/{p.name}" for p in sorted((run / "logs").glob("train_cycle*.log"))),
    ]
    records = tuple(
        f"cycle_infos/{p.name}" for p in sorted((run / "cycle_infos").glob("cycle_info..*.[0-9]"))
    )
    return RunFacts(
        rel=rel,
        fault=snap.meta.fault,
        baseline=baseline if snap.meta.fault != "none" else None,
        recovered=recovered,
        k=k,
        overlap=overlap,
        final=snap.meta.train_iters,
        world=snap.meta.world_size or 1,
        fault_rank=snap.meta.fault_rank,
        replacement_log=repl.path if repl else None,
        files=tuple(c for c in candidates if (run / c).exists()),
        cycle_records=records,
        finished=(run / LAUNCHER).is_file() and FINISHED in read(run, LAUNCHER),
        timed_out=_timed_out(snap),
    )


def _timed_out(snap) -> bool:
    found = derive.detection(snap) if snap.marker is not None else None
    return found is not None and found.timeout is not None


# the corpus ------------------------------------------------------------------------------------------


def _generic(f: RunFacts) -> Iterator[tuple[str, str, str, Edit, bool]]:
    """(name, class, invariant, edit, breaks) for every run."""
    for rel in (*f.files, *f.cycle_records):
        name = rel.replace("/", ":")

        def cut(root: Path, rel: str = rel) -> None:
            data = (root / rel).read_bytes()
            (root / rel).write_bytes(data[: len(data) // 2])

        def gone(root: Path, rel: str = rel) -> None:
            remove(root, rel)

        yield f"truncate-half:{name}", "truncate", "every evidence file complete", cut, True
        yield f"delete:{name}", "delete", "every evidence file present", gone, True
        yield (
            f"fifo:{name}",
            "hostile",
            "evidence is a regular file (and verify never blocks)",
            (lambda root, rel=rel: replace_with(root, rel, fifo)),
            True,
        )
    for rel in (LAUNCHER, *[r for r in f.files if "train_cycle" in r][-1:], MARKER, TRACKER):
        if rel in f.files:
            yield (
                f"devzero:{rel.replace('/', ':')}",
                "hostile",
                "evidence is a bounded regular file",
                (lambda root, rel=rel: replace_with(root, rel, link_to("/dev/zero"))),
                True,
            )
            yield (
                f"outside-link:{rel.replace('/', ':')}",
                "outside",
                "evidence lies inside the run directory",
                (lambda root, rel=rel: outside_copy(root, rel)),
                True,
            )
    if LAUNCHER in f.files:
        yield (
            "etc-passwd:launcher.log",
            "outside",
            "evidence lies inside the run directory",
            (lambda root: replace_with(root, LAUNCHER, link_to("/etc/passwd"))),
            True,
        )
    for folder in ("logs", "cycle_infos", "checkpoints"):
        if not (DATA / f.rel / folder).is_dir():
            continue
        # A run that recorded its checkpoint evidence (checkpoint_record/) verifies alike without its
        # checkpoints: deleting them is then a control that must keep the verdict.
        recorded = folder == "checkpoints" and (DATA / f.rel / "checkpoint_record").is_dir()
        yield (
            f"delete-dir:{folder}",
            "delete",
            "the checkpoint record stands in for a purged checkpoint directory"
            if recorded
            else f"{folder}/ present",
            (lambda root, d=folder: remove(root, d)),
            not recorded,
        )
        yield (
            f"fifo-dir:{folder}",
            "hostile",
            f"{folder}/ is a directory",
            (lambda root, d=folder: replace_with(root, d, fifo)),
            True,
        )
        yield (
            f"outside-dir:{folder}",
            "outside",
            f"{folder}/ lies inside the run directory",
            (lambda root, d=folder: outside_copy(root, d)),
            True,
        )
    if os.geteuid() != 0:  # root lists any folder
        yield (
            "unlistable:logs",
            "hostile",
            "logs/ can be listed",
            (lambda root: (root / "logs").chmod(0)),
            True,
        )
    for key, value in (
        ("tz_offset_s", 1e300),
        ("tz_offset_s", "NaN"),
        ("fault_rank", "²"),
        ("fault_rank", "٣"),
        ("fault", "KILL"),
        ("nested", json.loads("[" * 100 + "]" * 100)),
    ):
        yield (
            f"run.json:{key}={str(value)[:12]}",
            "hostile",
            "run.json values are well formed",
            (lambda root, k=key, v=value: set_json(root, "run.json", **{k: v})),
            True,
        )
    yield (
        "run.json:deep-nesting",
        "hostile",
        "run.json is a usable object",
        (lambda root: write(root, "run.json", "[" * 200000 + "]" * 200000)),
        True,
    )
    yield (
        "run.json:fifo",
        "hostile",
        "run.json is a regular file",
        (lambda root: replace_with(root, "run.json", fifo)),
        True,
    )
    if f.cycle_records:
        rec = f.cycle_records[0]
        yield (
            "cycle:active_nodes-huge-range",
            "linear",
            "active_nodes names the run's nodes",
            (lambda root: set_json(root, rec, active_nodes="n[0-99999999]")),
            f.fault != "none",  # a baseline does not judge nodes: there it only has to finish quickly
        )
        yield (
            "cycle:deep-nesting",
            "hostile",
            "cycle records are usable objects",
            (lambda root: write(root, rec, '{"a":' * 50000 + "1" + "}" * 50000)),
            True,
        )
    if MARKER in f.files:
        yield (
            "marker:deep-nesting",
            "hostile",
            "the marker is a usable object",
            (lambda root: write(root, MARKER, '{"a":' * 50000 + "1" + "}" * 50000)),
            True,
        )
    logs = [r for r in f.files if "train_cycle" in r]
    if logs:
        last = logs[-1]
        for head in ("loading distributed checkpoint from ", "successfully loaded checkpoint from "):
            yield (
                f"megabyte-line:{head.split()[0]}",
                "linear",
                "",
                (lambda root, h=head: _append(root, last, "0:  " + h * (1_000_000 // len(h)) + "\n")),
                False,
            )
        ft = "FT: initialized. Timeouts=SectionTimeouts(out_of_section=1, sections=[], calculated_sections="
        yield (
            "megabyte-line:ft-init",
            "linear",
            "",
            (lambda root: _append(root, last, "0: " + ft + "], calculated_sections=" * 40000 + "\n")),
            False,
        )
        yield (
            "megabyte-line:no-newline-run",
            "linear",
            "",
            (lambda root: _append(root, logs[0], "0: " + "x" * 3_000_000 + "\n")),
            False,
        )
        if "------ arguments ------" in (DATA / f.rel / last).read_text(errors="replace"):
            yield (
                "argument-spaces",
                "linear",
                "",
                (
                    lambda root: _insert_after(
                        root, last, "------ arguments ------", "0:   zzz " + " " * 300_000 + "x\n"
                    )
                ),
                False,
            )
    yield "identity", "benign", "", (lambda root: None), False
    yield (
        "cycle-tmp-file",
        "benign",
        "",
        (lambda root: write(root, "cycle_infos/cycle_info..0.9.tmp", "{")),
        False,
    )
    if (Path(DATA / f.rel) / "cycle_infos" / "cycle_info..current").exists():
        yield (
            "fifo:current",
            "benign",
            "",
            (lambda root: replace_with(root, "cycle_infos/cycle_info..current", fifo)),
            False,
        )


def _insert_after(root: Path, rel: str, anchor: str, text: str) -> None:
    lines = read(root, rel).splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if anchor in line)
    write(root, rel, "".join([*lines[: at + 1], text, *lines[at + 1 :]]))


def _append(root: Path, rel: str, text: str) -> None:
    with (root / rel).open("a", encoding="utf-8") as handle:
        handle.write(text)


def _recovered(f: RunFacts) -> Iterator[tuple[str, str, str, Edit, bool | None]]:
    """Mutations of a fault run that recovered. `bool | None` at the end: verify with the baseline (None:
    both with and without)."""
    k, repl, overlap, final = f.k, f.replacement_log, f.overlap, f.final
    assert k is not None and repl is not None and final is not None
    first_log = f"logs/train_cycle{0}.log"
    end = max(overlap) if overlap else k
    late = min(final - 2, end + 5)

    def losses(change: Callable[[int, float], float | None], rel: str = repl) -> Edit:
        return lambda root: edit_losses(root, rel, change)

    # 1. non-finite
    if overlap:
        yield (
            "replayed-inf",
            "nonfinite",
            "losses after the restore are finite",
            losses(lambda i, v: float("inf") if i in overlap else None),
            None,
        )
        yield (
            "replayed-nan",
            "nonfinite",
            "losses after the restore are finite",
            losses(lambda i, v: float("nan") if i in overlap else None),
            None,
        )

        def nan_both(root: Path) -> None:
            edit_losses(root, repl, lambda i, v: float("nan") if i == overlap[-1] else None)
            edit_losses(root, first_log, lambda i, v: float("nan") if i == overlap[-1] else None)

        yield "nan-vs-nan", "nonfinite", "NaN never matches", nan_both, None
    yield (
        "late-nan",
        "nonfinite",
        "losses after the restore are finite",
        losses(lambda i, v: float("nan") if i == late else None),
        None,
    )
    yield (
        "negative-loss",
        "nonfinite",
        "losses are not negative",
        losses(lambda i, v: -v if i == late else None),
        None,
    )
    # 2. after the replay window
    yield (
        "after-window-x1000",
        "after_window",
        "losses after the window agree / stay plausible",
        losses(lambda i, v: v * 1000 if i > end else None),
        None,
    )
    yield (
        "after-window-nan",
        "after_window",
        "losses after the window are finite",
        losses(lambda i, v: float("nan") if i > end else None),
        None,
    )
    if f.baseline:
        yield (
            "after-window-x1.01",
            "after_window",
            "losses after the window agree with the baseline",
            losses(lambda i, v: v * 1.01 if i > end else None),
            True,
        )
        yield (
            "late-single-x1.05",
            "divergence",
            "no difference past the first iterations after the restore",
            losses(lambda i, v: v * 1.05 if i == final - 3 else None),
            True,
        )
    # 3. divergence
    yield (
        "k+1..k+4-doubled",
        "divergence",
        "several divergent iterations are a divergence",
        losses(lambda i, v: v * 2 if k < i <= k + 4 else None),
        True,
    )
    if len(overlap) >= 5:
        yield (
            "k+4-only",
            "divergence",
            "a difference past the first iterations after the restore fails",
            losses(lambda i, v: v * 1.5 if i == k + 4 else None),
            False,
        )
        yield (
            "overlap-lasting",
            "divergence",
            "a lasting divergence fails",
            losses(lambda i, v: v * 1.2 if i >= k + 3 else None),
            False,
        )
    # 4. the checkpoints
    fin = f"checkpoints/iter_{final:07d}"
    kdir = f"checkpoints/iter_{k:07d}"
    yield (
        "delete-final-iter-dir",
        "checkpoint",
        "the tracker's checkpoint exists",
        lambda root: remove(root, fin),
        None,
    )
    yield (
        "empty-final-metadata",
        "checkpoint",
        "the tracker's checkpoint is finalized",
        lambda root: write(root, f"{fin}/.metadata", ""),
        None,
    )
    yield (
        "dir-final-metadata",
        "checkpoint",
        ".metadata is a regular file",
        lambda root: replace_with(root, f"{fin}/.metadata", lambda p: p.mkdir()),
        None,
    )
    yield (
        "dangling-final-metadata",
        "checkpoint",
        ".metadata resolves",
        lambda root: replace_with(root, f"{fin}/.metadata", link_to("missing-file")),
        None,
    )
    yield (
        "outside-final-metadata",
        "checkpoint",
        ".metadata lies inside the run",
        lambda root: replace_with(root, f"{fin}/.metadata", link_to("/etc/hostname")),
        None,
    )
    yield (
        "outside-final-iter-dir",
        "outside",
        "the checkpoint lies inside the run",
        lambda root: outside_copy(root, fin),
        None,
    )
    yield (
        "delete-restored-iter-dir",
        "checkpoint",
        "the restored checkpoint exists",
        lambda root: remove(root, kdir),
        None,
    )
    yield (
        "empty-restored-metadata",
        "checkpoint",
        "the restored checkpoint is finalized",
        lambda root: write(root, f"{kdir}/.metadata", ""),
        None,
    )
    yield (
        "tracker-points-back",
        "checkpoint",
        "the tracker names the final iteration",
        lambda root: write(root, TRACKER, f"{k}\n"),
        None,
    )
    # 5. the marker and the request
    other = (f.fault_rank + 1) % f.world if f.world > 1 and f.fault_rank is not None else 1
    yield (
        "request-other-rank",
        "marker",
        "the injected rank is the requested one",
        lambda root: set_json(root, "run.json", fault_rank=other),
        None,
    )
    yield (
        "marker-other-kind",
        "marker",
        "the injected fault is the requested one",
        lambda root: set_json(root, MARKER, fault="hang" if f.fault == "kill" else "kill"),
        None,
    )
    yield (
        "marker-other-run",
        "marker",
        "the marker belongs to this run",
        lambda root: set_json(root, MARKER, run_id="another-run"),
        None,
    )
    yield (
        "marker-no-run-id",
        "marker",
        "the marker names its run",
        lambda root: set_json(root, MARKER, run_id=None),
        None,
    )
    yield (
        "request-other-kind",
        "marker",
        "the run is the requested scenario",
        lambda root: set_json(root, "run.json", fault="hang" if f.fault == "kill" else "kill"),
        None,
    )
    yield (
        "marker-later-checkpoint",
        "marker",
        "the marker names a checkpoint completed before the fault",
        (lambda root: set_json(root, MARKER, checkpoint_iteration=k + 5)),
        None,
    )
    yield (
        "marker-no-advance",
        "marker",
        "the checkpoint advanced past the baseline",
        lambda root: set_json(root, MARKER, baseline_iteration=k),
        None,
    )
    yield (
        "marker-other-cycle",
        "cycles",
        "the marker names the cycle that was hit",
        lambda root: set_json(root, MARKER, cycle=1),
        None,
    )

    def swap_rank(root: Path) -> None:
        set_json(root, MARKER, rank=other, local_rank=other)
        set_json(root, "run.json", fault_rank=other)
        if "[ftqual-inject]" in read(root, first_log):
            sub(root, first_log, r'("rank": )\d+(, "local_rank": )\d+', rf"\g<1>{other}\g<2>{other}")

    if f.fault == "kill":  # a stopped rank is not named by any line: only the kill's exit shows the rank
        yield "swap-injected-rank", "marker", "the detected failure is the injected rank's", swap_rank, None
    # 6. detection
    if f.fault == "hang" or f.timed_out:
        yield (
            "timeout-before-injection",
            "detection",
            "the timeout follows the injection",
            lambda root: shift_times(root, LAUNCHER, "has been open for", -1),
            None,
        )
        yield (
            "timeout-other-cycle",
            "detection",
            "the timeout is in the injection's cycle",
            lambda root: sub(root, LAUNCHER, r"\[Cycle 0\] Section", "[Cycle 1] Section"),
            None,
        )
        yield (
            "timeout-deleted",
            "detection",
            "a hang is detected by a timeout",
            lambda root: drop_lines(root, LAUNCHER, "has been open for"),
            None,
        )
    else:
        yield (
            "exit-before-injection",
            "detection",
            "the exit follows the injection",
            lambda root: shift_times(root, LAUNCHER, "failed (exitcode:", -1),
            None,
        )
        yield (
            "exit-other-rank",
            "detection",
            "the exit is the killed rank's",
            lambda root: sub(root, LAUNCHER, r"local_rank: \d+ \(pid", f"local_rank: {7} (pid"),
            None,
        )
        yield (
            "exit-deleted",
            "detection",
            "a kill is detected by the exit",
            lambda root: drop_lines(root, LAUNCHER, "failed (exitcode:"),
            None,
        )

    def no_injection(root: Path) -> None:
        remove(root, MARKER)
        if "[ftqual-inject]" in read(root, first_log):
            drop_lines(root, first_log, "[ftqual-inject]")

    yield "no-injection", "no_injection", "the requested fault was injected", no_injection, None
    # reorder / numbers / cycles / timestamps
    a, b = late, late + 1
    yield (
        "swap-iteration-lines",
        "reorder",
        "iterations go forward",
        lambda root: swap_lines(root, repl, f"iteration {a:>8}/", f"iteration {b:>8}/"),
        None,
    )
    if f.baseline:

        def swap_losses(root: Path) -> None:
            seen = {int(m[2]): float(m[3]) for m in re.finditer(_LOSS_LINE, read(root, repl))}
            edit_losses(root, repl, lambda i, v: seen[b] if i == a else seen[a] if i == b else None)

        yield "swap-losses", "reorder", "losses agree with the baseline", swap_losses, True
    yield (
        "consumed-samples",
        "numbers",
        "consumed samples follow the iterations",
        lambda root: sub(
            root,
            repl,
            rf"(iteration {late:>8}/\s*\d+ \| consumed samples:\s+)(\d+)",
            lambda m: f"{m[1]}{int(m[2]) + 2}",
        ),
        None,
    )
    yield (
        "iteration-missing",
        "numbers",
        "every iteration after the restore is logged",
        lambda root: drop_lines(root, repl, f"iteration {late:>8}/"),
        None,
    )
    yield (
        "iteration-repeated",
        "numbers",
        "iterations never repeat",
        lambda root: sub(root, repl, rf"iteration {late + 1:>8}/", f"iteration {late - 1:>8}/"),
        None,
    )
    yield (
        "restored-iteration",
        "numbers",
        "the restored iteration is where training continues",
        lambda root: sub(root, repl, rf"(checkpoint from .* at iteration) {k}$", rf"\g<1> {k + 5}"),
        None,
    )
    yield (
        "later-save-renumbered",
        "numbers",
        "the later checkpoint exists",
        lambda root: sub(
            root,
            repl,
            r"(successfully saved checkpoint from iteration\s+)(\d+)",
            lambda m: f"{m[1]}{int(m[2]) + 1}",
        ),
        None,
    )
    yield (
        "final-iteration-gone",
        "numbers",
        "the final iteration is reached",
        lambda root: drop_lines(root, repl, f"iteration {final:>8}/"),
        None,
    )

    def swap_cycles(root: Path) -> None:
        tmp = root / "logs" / "swap.tmp"
        (root / first_log).rename(tmp)
        (root / repl).rename(root / first_log)
        tmp.rename(root / repl)

    yield "swap-train-logs", "cycles", "cycle 0 is the first attempt", swap_cycles, None
    yield (
        "one-cycle-record",
        "cycles",
        "a replacement cycle was recorded",
        lambda root: set_json(root, "cycle_infos/cycle_info..0.1", cycle_number=0),
        None,
    )
    yield (
        "replacement-starts-early",
        "cycles",
        "the replacement starts after the failed cycle ended",
        (lambda root: set_json(root, "cycle_infos/cycle_info..0.1", cycle_start_time="2020-01-01T00:00:00Z")),
        None,
    )
    yield (
        "injected-hour-later",
        "timestamps",
        "the detection follows the injection",
        lambda root: _shift_marker(root, 1),
        None,
    )
    yield (
        "injected-hour-earlier",
        "timestamps",
        "the checkpoint completed before the injection",
        (lambda root: _shift_marker(root, -1)),
        None,
    )
    yield (
        "cycle-end-missing",
        "timestamps",
        "the failed cycle ended",
        lambda root: set_json(root, "cycle_infos/cycle_info..0.0", cycle_end_time=None),
        None,
    )
    yield (
        "exit-code-1",
        "numbers",
        "ft_launcher exited 0",
        lambda root: set_json(root, "run.json", exit_code=1),
        None,
    )


def _shift_marker(root: Path, hours: float) -> None:
    data = json.loads(read(root, MARKER))
    t = datetime.fromisoformat(data["injected_at"].replace("Z", "+00:00")) + timedelta(hours=hours)
    set_json(root, MARKER, injected_at=t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))


def _baseline_run(f: RunFacts) -> Iterator[tuple[str, str, str, Edit]]:
    final = f.final
    assert final is not None
    log = "logs/train_cycle0.log"
    yield (
        "baseline-nan",
        "nonfinite",
        "every loss finite",
        lambda root: edit_losses(root, log, lambda i, v: float("nan") if i == final - 2 else None),
    )
    fin = f"checkpoints/iter_{final:07d}"
    yield (
        "baseline-delete-final-iter-dir",
        "checkpoint",
        "the tracker's checkpoint exists",
        lambda root: remove(root, fin),
    )
    yield (
        "baseline-empty-final-metadata",
        "checkpoint",
        "the final checkpoint is finalized",
        lambda root: write(root, f"{fin}/.metadata", ""),
    )
    yield (
        "baseline-forged-marker",
        "marker",
        "no injection in a baseline",
        lambda root: write(
            root, MARKER, json.dumps({"fault": "kill", "rank": 0, "injected_at": "2026-11-29T14:19:09Z"})
        ),
    )
    yield "baseline-exit-1", "numbers", "exit 0", lambda root: set_json(root, "run.json", exit_code=1)
    yield (
        "baseline-final-gone",
        "numbers",
        "the final iteration is reached",
        lambda root: drop_lines(root, log, f"iteration {final:>8}/"),
    )
    if f.finished:  # a recorded negative control (its baseline crashed) has no such line to remove
        yield (
            "baseline-success-line-gone",
            "delete",
            "the launcher finished the worker group",
            lambda root: drop_lines(root, LAUNCHER, FINISHED),
        )


def corpus(stride: int | None = None) -> list[Mutation]:
    """Every mutation of every recorded run, thinned for the test suite's time budget: with stride S a
    run keeps the mutations whose name hashes to its index modulo S (each kind still meets an S-th of the
    runs, every run keeps some of each source, identity controls stay on all). FTQUAL_MUTATIONS=all (or
    stride=1) keeps everything."""
    if stride is None:
        stride = 1 if os.environ.get("FTQUAL_MUTATIONS") == "all" else DEFAULT_STRIDE
    out: list[Mutation] = []
    for index, run in enumerate(recorded_runs()):
        f = facts_of(run)
        found: list[Mutation] = []
        for name, klass, invariant, edit, breaks in _generic(f):
            found.append(Mutation(f"{f.rel}/{name}", f.rel, klass, invariant, edit, f.baseline, breaks))
        if f.recovered:
            for name, klass, invariant, edit, with_baseline in _recovered(f):
                modes = (
                    [f.baseline, None] if with_baseline is None else [f.baseline if with_baseline else None]
                )
                for base in dict.fromkeys(modes):
                    suffix = "" if base == f.baseline else "+no-baseline"
                    found.append(Mutation(f"{f.rel}/{name}{suffix}", f.rel, klass, invariant, edit, base))
        if f.fault == "none" and f.final:
            for name, klass, invariant, edit in _baseline_run(f):
                found.append(Mutation(f"{f.rel}/{name}", f.rel, klass, invariant, edit, None))
        out += [m for m in found if m.id.endswith("/identity") or _bucket(m, stride) == index % stride]
    return out


def _bucket(mutation: Mutation, stride: int) -> int:
    name = mutation.id[len(mutation.run) + 1 :]
    return zlib.crc32(name.encode()) % stride


# running one -----------------------------------------------------------------------------------------


def materialize(mutation: Mutation, workdir: Path) -> tuple[Path, Path | None]:
    """Copy the recorded run under workdir, apply the mutation, return (run, baseline) paths."""
    root = workdir / "run"
    shutil.copytree(DATA / mutation.run, root, symlinks=True)
    mutation.apply(root)
    # the baseline is only read (verify never writes into run directories): no copy needed
    return root, (DATA / mutation.baseline if mutation.baseline is not None else None)


def verify_in_process(run: Path, baseline: Path | None) -> Outcome:
    start = time.monotonic()
    try:
        report = build_report(run, baseline)
    except RunMetaError:
        return Outcome(2, time.monotonic() - start)
    except Exception:  # noqa: BLE001 - a traceback is what the corpus hunts for
        return Outcome(-1, time.monotonic() - start, traceback.format_exc())
    return Outcome(exit_code_for(report), time.monotonic() - start, _inconsistent(report))


def _inconsistent(report: dict) -> str:
    """'' when the report agrees with itself: the detection the check names is the metrics' one, and
    every evidence path is relative and stays inside the run directory."""
    checks = {c["id"]: c for c in report["checks"]}
    named = checks["failure_detected_and_restarted"].get("values", {}).get("detected_by")
    if named is not None and named != report["metrics"].get("detected_by"):
        return f"check says detected_by={named}, metrics say {report['metrics'].get('detected_by')}"
    for check in report["checks"]:
        for item in check["evidence"]:
            if item["path"].startswith("/") or ".." in Path(item["path"]).parts:
                return f"{check['id']} cites {item['path']}"
    return ""


def cleanup(workdir: Path) -> None:
    """Make a mutated copy removable (unlistable folders) before tmp_path cleanup."""
    for path in workdir.rglob("*"):
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
