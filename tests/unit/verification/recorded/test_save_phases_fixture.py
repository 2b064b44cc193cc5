"""Kills in the phases of an asynchronous save on one H200 (tests/data/megatron-h200-save-phases-1gpu):
two phases seen and survived; `save_finalized` never seen on core_v0.19.0 (its `.metadata` is written by the
same finalize that moves the tracker), which fails loudly as never injected rather than passing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

RUNS = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-save-phases-1gpu" / "runs"


@pytest.mark.parametrize("phase", ["save_shards_partial", "save_shards_complete"])
def test_a_kill_while_shards_were_written_resumed_from_the_tracked_checkpoint(phase):
    run = next(RUNS.glob(f"kill_{phase}-*"))
    marker = json.loads((run / "fault_injected.json").read_text())
    assert (marker["save_iteration"], marker["checkpoint_iteration"]) == (10, 5)
    assert marker["on_disk"]["metadata"] is False and marker["on_disk"]["shards"] >= 1
    report = build_report(run, None)
    check = next(c for c in report["checks"] if c["id"] == "interrupted_save_discarded")
    assert check["status"] == "pass" and check["values"]["restored_iteration"] == 5
    assert report["verdict"] == "pass"


def test_a_phase_never_seen_fails_as_never_injected():
    run = next(RUNS.glob("kill_save_finalized-*"))
    assert not (run / "fault_injected.json").exists()
    report = build_report(run, None)
    assert report["verdict"] == "fail" and "the kill was never injected" in report["cause"]
