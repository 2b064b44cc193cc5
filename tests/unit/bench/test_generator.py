"""The synthetic run generator (tests/support/synthetic; its CLI is bench/make_run.py): deterministic, in the
recorded H200 formats, its runs get the verdicts they should."""

from __future__ import annotations

import io
import json
import pickletools
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.synthetic.runs import DEFECT_CHECK, Spec, generate

REPO = Path(__file__).resolve().parents[3]

SMALL = Spec(
    ranks=2, iters=30, restarts=1, seed=0, chatter_per_rank=8, noise_per_iter=2, legacy_inject_line=True
)


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gen") / "run"
    generate(SMALL, out)
    return out


# ------------------------------------------------------------------------------------- determinism


def test_same_seed_same_bytes(tmp_path, small_run):
    again = tmp_path / "again"
    generate(SMALL, again)
    assert tree(again) == tree(small_run)


def test_other_seed_other_bytes(tmp_path, small_run):
    other = tmp_path / "other"
    generate(replace(SMALL, seed=1), other)
    assert tree(other)["logs/train_cycle0.log"] != tree(small_run)["logs/train_cycle0.log"]


def test_cli_writes_and_refuses_an_existing_dir(tmp_path):
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        str(REPO / "bench" / "make_run.py"),
        "--ranks",
        "8",
        "--iters",
        "30",
        "--seed",
        "4",
    ]
    done = subprocess.run([*cmd, "--out", str(out), "--target-mb", "1"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert 0.7e6 < info["log_bytes"] < 1.3e6
    again = subprocess.run([*cmd, "--out", str(out)], capture_output=True, text=True)
    assert again.returncode == 2 and "exists" in again.stderr


# ------------------------------------------------------------------------------------- formats

# Kinds of lines the verifier reads; the generated ones must have the recorded shapes (digits, rank-prefix
# padding and the run directory normalised), and every kind the recording has must be generated too.
TRAIN_KINDS = {
    "iteration": r"\] iteration +\d+/",
    "saving": r"saving checkpoint at iteration",
    "scheduled": r"scheduled an async checkpoint save",
    "saved": r"successfully saved checkpoint",
    "loading": r"loading distributed checkpoint",
    "loaded": r"successfully loaded checkpoint",
    "fresh": r"could not find the metadata file|will not load any checkpoints",
    "ft": r"^\s*\d+: FT: ",
    "rerun": r"Overwriting rerun_state_machine",
    "inject": r"\[inject\]",
    "finalize": r"Unfinalized async checkpoint saves",
}
LAUNCHER_KINDS = {
    "exit": r"failed \(exitcode",
    "unhealthy": r"Worker group UNHEALTHY",
    "progress": r"made progress",
    "finished": r"successfully finished",
    "reader": r"Updated reader thread",
    "detected": r"Event: failure_detected",
    "ok": r"Agent \.run\(\) is OK",
}


def shape(line: str) -> str:
    line = re.sub(r"^\s*\d+: ", "R: ", line)
    line = re.sub(r"/lus/nvrx/runs/[^/\s']+", "RUN", line)
    line = re.sub(r"\d+", "9", line)
    return re.sub(r" +", " ", line)


def shapes(paths: list[Path], kinds: dict[str, str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {k: set() for k in kinds}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            for kind, pattern in kinds.items():
                if re.search(pattern, line):
                    out[kind].add(shape(line))
    return out


@pytest.mark.parametrize(
    ("kinds", "glob"), [(TRAIN_KINDS, "train_cycle*.log"), (LAUNCHER_KINDS, "launcher.log")]
)
def test_lines_have_the_recorded_shapes(small_run, shared_fixtures, kinds, glob):
    recorded = shapes(sorted((shared_fixtures / "kill-2gpu" / "logs").glob(glob)), kinds)
    generated = shapes(sorted((small_run / "logs").glob(glob)), kinds)
    for kind in kinds:
        assert generated[kind] <= recorded[kind], f"{kind}: {generated[kind] - recorded[kind]}"
        assert bool(generated[kind]) == bool(recorded[kind]), kind


def test_rank_prefix_right_aligned_and_iterations_from_last_rank(tmp_path):
    out = tmp_path / "r128"
    generate(Spec(ranks=128, iters=30, seed=3, chatter_per_rank=4, noise_per_iter=3), out)
    prefix = re.compile(r"^( {0,2}\d{1,3}): ")
    iteration = re.compile(
        r"^(\d+):  \[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}\] iteration +(\d+)/ +30 \| "
        r"consumed samples: +(\d+) \| elapsed time per iteration \(ms\): [\d.]+ \| "
        r"learning rate: 1\.000000E-04 \| global batch size: +128 \| lm loss: \d\.\d{6}E\+00 \| "
        r"loss scale: 1\.0 \| grad norm: [\d.]+ \| number of skipped iterations: +0 \| "
        r"number of nan iterations: +0 \|$"
    )
    seen_ranks = set()
    iters = []
    for line in (out / "logs" / "train_cycle1.log").read_text().splitlines():
        m = prefix.match(line)
        assert m and len(m.group(1)) == 3, line
        seen_ranks.add(int(m.group(1)))
        if " iteration " in line and "] iteration" in line:
            it = iteration.match(line)
            assert it, line
            assert it.group(1) == "127" and int(it.group(3)) == int(it.group(2)) * 128
            iters.append(int(it.group(2)))
    assert seen_ranks == set(range(128))
    assert iters == list(range(iters[0], 31)) and iters[0] > 1


def test_tree_matches_the_recorded_files(small_run, shared_fixtures):
    rec = shared_fixtures / "kill-2gpu"
    run = json.loads((small_run / "run.json").read_text())
    rec_run = json.loads((rec / "run.json").read_text())
    assert set(rec_run) <= set(run)
    assert {k: type(v) for k, v in rec_run.items()} == {k: type(run[k]) for k in rec_run}
    marker = json.loads((small_run / "fault_injected.json").read_text())
    assert list(marker) == list(json.loads((rec / "fault_injected.json").read_text()))
    assert marker["checkpoint_iteration"] in range(5, 30, 5) and marker["cycle"] == 0
    infos = sorted((small_run / "cycle_infos").iterdir())
    names = [p.name for p in infos]
    assert names == ["cycle_info.1000000.0.0", "cycle_info.1000000.0.1", "cycle_info.1000000.current"]
    assert (infos[2]).read_text() == "cycle_info.1000000.0.1"
    for mine, theirs in zip(infos[:2], sorted((rec / "cycle_infos").glob("cycle_info..0.*")), strict=True):
        assert list(json.loads(mine.read_text())) == list(json.loads(theirs.read_text()))
        assert not mine.read_text().endswith("\n")
    ckpt = small_run / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text() == "30"
    dirs = sorted(p.name for p in ckpt.glob("iter_*"))
    assert dirs == [f"iter_{i:07d}" for i in range(5, 31, 5)]
    meta_json = (rec / "checkpoints" / "iter_0000005" / "metadata.json").read_bytes()
    for d in dirs:
        assert (ckpt / d / "metadata.json").read_bytes() == meta_json
        data = (ckpt / d / ".metadata").read_bytes()
        assert len(data) < 8192 and b"optimizer.state.exp_avg" in data
        pickletools.dis(data, out=io.StringIO())  # a valid pickle; nothing is imported


def test_bench_expect_sidecar(small_run):
    expect = json.loads((small_run / "bench_expect.json").read_text())
    assert expect["verdict"] == "pass" and expect["failing_checks"] == []
    assert expect["log_bytes"] == sum(p.stat().st_size for p in (small_run / "logs").iterdir())


# ------------------------------------------------------------------------------------- verdicts


def verify(run: Path) -> tuple[int, dict]:
    report = run.parent / f"{run.name}.verify.json"
    done = subprocess.run(
        [sys.executable, "-m", "ftqual", "verify", str(run), "--json", str(report)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode in (0, 1, 3), done.stderr
    return done.returncode, json.loads(report.read_text())


def failing(report: dict) -> set[str]:
    return {c["id"] for c in report["checks"] if c["status"] == "fail"}


@pytest.mark.parametrize("fault", ["kill", "hang"])
def test_generated_64_rank_run_passes(tmp_path, fault):
    out = tmp_path / fault
    generate(Spec(ranks=64, iters=60, seed=9, fault=fault, chatter_per_rank=10), out)
    code, report = verify(out)
    assert (code, report["verdict"]) == (0, "pass"), [c for c in report["checks"] if c["status"] != "pass"]


def test_generated_baseline_passes(tmp_path):
    out = tmp_path / "baseline"
    generate(Spec(ranks=16, iters=30, restarts=0, seed=2), out)
    code, report = verify(out)
    assert (code, report["verdict"]) == (0, "pass")


def test_resumed_from_zero_caught_among_1024_ranks(tmp_path):
    out = tmp_path / "zero"
    generate(
        Spec(ranks=1024, iters=40, seed=2, chatter_per_rank=0, defect="resumed_from_zero_on_one_rank"), out
    )
    code, report = verify(out)
    assert (code, report["verdict"]) == (1, "fail")
    assert "resumed_from_checkpoint" in failing(report)


@pytest.mark.parametrize("defect", ["no_later_checkpoint", "final_iteration_missing", "loss_divergence"])
def test_each_defect_fails_its_check(tmp_path, defect):
    out = tmp_path / defect
    generate(Spec(ranks=16, iters=60, seed=5, defect=defect), out)
    code, report = verify(out)
    expect = json.loads((out / "bench_expect.json").read_text())
    assert (code, report["verdict"]) == (1, "fail")
    assert DEFECT_CHECK[defect] in failing(report)
    assert failing(report) <= set(expect["failing_checks"]) | set(expect["tolerated_failing_checks"])


def test_many_restarts_only_fail_the_tolerated_checks(tmp_path):
    out = tmp_path / "k3"
    generate(Spec(ranks=16, iters=100, restarts=3, seed=5), out)
    code, report = verify(out)
    expect = json.loads((out / "bench_expect.json").read_text())
    assert code in (0, 1)
    assert failing(report) <= set(expect["tolerated_failing_checks"])
    for cid in ("checkpoint_before_failure", "resumed_from_checkpoint", "progress_after_resume"):
        assert cid not in failing(report)
