"""workloads/smoke_train.py on 2 ranks with gradient accumulation (global batch 8, micro batch 1: 4
micro-batches per rank) and evaluation every 3 iterations (2 eval iters): the iteration lines' global batch
and consumed samples, Megatron's validation blocks after the right iterations, and the replay invariant (a
run resumed from iteration 3 prints the losses, validation's included, of the run that never stopped)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.integration.workload.test_smoke_workload import ITERATION, smoke_env

VALIDATION = re.compile(
    r"^ validation loss at iteration (\d+)( on (?:validation|test) set)? \| lm loss value: (\S+) \| "
    r"lm loss PPL: \S+ \| $"
)
WORLD = 2


def run(repo_root: Path, ckpt: Path, train_iters: int) -> list[list[str]]:
    """Both ranks' stdout lines (rank 0, rank 1) of one run."""
    base = smoke_env()
    procs = []
    for rank in range(WORLD):
        env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(WORLD)}
        cmd = [sys.executable, str(repo_root / "workloads" / "smoke_train.py"), f"--save={ckpt}"]
        cmd += [f"--load={ckpt}", "--save-interval=3", f"--train-iters={train_iters}", "--async-save"]
        cmd += ["--global-batch-size=8", "--micro-batch-size=1", "--eval-interval=3", "--eval-iters=2"]
        cmd += ["--smoke-step-seconds=0", "--smoke-eval-step-seconds=0"]
        procs.append(
            subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
        outs.append(out.splitlines())
    return outs


def validations(lines: list[str]) -> list[tuple[int, str, str]]:
    return [(int(m[1]), (m[2] or "").strip(), m[3]) for m in map(VALIDATION.match, lines) if m]


def test_accumulation_and_evaluation_as_megatron(repo_root, tmp_path):
    rank0, last = run(repo_root, tmp_path / "full", 7)
    iterations = [m for m in map(ITERATION.match, last) if m]
    assert [int(m[1]) for m in iterations] == list(range(1, 8))
    assert [int(m[3]) for m in iterations] == [8 * i for i in range(1, 8)]  # consumed samples
    assert all("global batch size:     8 |" in m[0] for m in iterations)
    # evaluations after iterations 3 and 6 (in the loop), then the validation and test sets after training
    assert [(i, on) for i, on, _ in validations(last)] == [
        (3, ""),
        (6, ""),
        (7, "on validation set"),
        (7, "on test set"),
    ]
    # each block: the `evaluate` timer, then dashes around the results line, right after its iteration line
    at = last.index(next(line for line in last if line.startswith(" validation loss at iteration 3 |")))
    assert last[at - 1] == last[at + 1] == "-" * (len(last[at]) + 1)
    assert last[at - 2].startswith("    evaluate ...") and ITERATION.match(last[at - 4])
    assert ITERATION.match(last[at - 4])[1] == "3"
    assert not validations(rank0)  # from the last rank only; rank 0 prints the verbose final lines
    assert rank0.count("Evaluating on 16 samples") == 2 and "Evaluating iter 2/2" in rank0

    # replay: stop after 4 (saves at 3 and 4), set the tracker back to 3, resume to 7
    resumed = tmp_path / "resumed"
    run(repo_root, resumed, 4)
    (resumed / "latest_checkpointed_iteration.txt").write_text("3")
    _, again = run(repo_root, resumed, 7)
    losses = {int(m[1]): m[4] for m in map(ITERATION.match, last) if m}
    replayed = {int(m[1]): m[4] for m in map(ITERATION.match, again) if m}
    assert sorted(replayed) == [4, 5, 6, 7]
    assert all(replayed[i] == losses[i] for i in replayed)
    assert [v for v in validations(again) if v[0] == 6] == [v for v in validations(last) if v[0] == 6]
    assert validations(again)[-2:] == validations(last)[-2:]  # the final evaluations too


def test_a_global_batch_not_divisible_is_refused_as_megatron_does(repo_root, tmp_path):
    cmd = [sys.executable, str(repo_root / "workloads" / "smoke_train.py"), "--train-iters=1"]
    cmd += ["--global-batch-size=3", "--micro-batch-size=2", f"--save={tmp_path}"]
    done = subprocess.run(cmd, env=smoke_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert (
        "AssertionError: global batch size (3) is not divisible by micro batch size (2) times data parallel "
        "size (1)" in done.stderr
    )
