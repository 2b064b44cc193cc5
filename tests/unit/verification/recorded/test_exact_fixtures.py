"""The exact comparison over the recorded GPU runs (tests/data), which did not train in deterministic mode:
what it finds, pinned (docs/checks.md, "exact_replay", says it in words).

Over every recorded recovery with a baseline, every printed figure after the restore equals the
uninterrupted run's except the loss at K+2, the mean of K+1's and K+2's (Megatron-LM's loss accumulator not
reset after a restore: a finding of the stack); two runs differ otherwise: the two-GPU data-parallel kill
(a last-digit loss difference at K+1, no deterministic mode) and the corrupted shard that was restored
(loss and grad norm from K+2 on)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftqual.verification.checks.exact import QUIRK, compare_runs
from ftqual.verification.evidence.snapshot import build_snapshot

DATA = Path(__file__).resolve().parents[3] / "data"


def _one(pattern: str) -> Path:
    return next(DATA.glob(pattern))


def _compare(run: str, baseline: str):
    return compare_runs(build_snapshot(_one(run)), build_snapshot(_one(baseline)))


@pytest.mark.parametrize(
    ("run", "baseline", "iterations"),
    [
        ("megatron-h200-1gpu/kill", "megatron-h200-1gpu/baseline", [7]),
        ("megatron-h200-1gpu/hang", "megatron-h200-1gpu/baseline", [7]),
        ("megatron-h200x2-tp2-workflow/kill", "megatron-h200x2-tp2-workflow/baseline", [7]),
        (
            "megatron-h200-extended-1gpu/second/runs/double_fault-*",
            "megatron-h200-extended-1gpu/second/runs/baseline-*",
            [7, 12],
        ),
    ],
)
def test_recorded_recoveries_are_bitwise_but_for_the_loss_accumulator_at_k_plus_2(run, baseline, iterations):
    result = _compare(run, baseline)
    assert result.status == "pass", result.detail
    assert result.values["exact"] == "bitwise_except_stack_finding"
    finding = result.values["stack_finding"]
    assert (finding["id"], finding["iterations"]) == (QUIRK, iterations)
    assert result.values["restored_iteration"] + 2 == iterations[0]


def test_the_two_gpu_data_parallel_kill_differs_in_the_last_digit_of_the_loss_at_k_plus_1():
    result = _compare("megatron-h200-2gpu-dp2/kill-2gpu", "megatron-h200-2gpu-dp2/baseline-2gpu")
    assert result.status == "fail"
    first = result.values["first_difference"]
    assert (first["after_restore"], first["figures"], first["printed"], first["baseline"]) == (
        1,
        ["loss"],
        "6.185080E+00",
        "6.185040E+00",
    )


def test_a_restored_corrupted_shard_differs_in_loss_and_grad_norm_and_is_no_quirk():
    result = _compare(
        "megatron-h100-storage-corruption-1gpu/runs/shard_corrupted-*",
        "megatron-h100-storage-corruption-1gpu/runs/baseline-*",
    )
    assert result.status == "fail"
    first = result.values["first_difference"]
    assert (first["after_restore"], first["figures"]) == (2, ["loss", "grad norm"])
