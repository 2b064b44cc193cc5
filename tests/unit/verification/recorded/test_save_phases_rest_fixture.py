"""The remaining save phases on one H100 (tests/data/megatron-h100-save-phases-rest-1gpu): the asynchronous
save staged and the synchronous save's shards partly written were survived (the tracker's checkpoint
restored, never the save in flight); the synchronous save's finalize ran to its end before the kill landed,
which is inconclusive (the phase passed), never a finding against the stack that restored that save."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

RUNS = Path(__file__).resolve().parents[3] / "data" / "megatron-h100-save-phases-rest-1gpu" / "runs"


def _interrupted(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == "interrupted_save_discarded")


@pytest.mark.parametrize(("scenario", "save"), [("kill_save_staged", 15), ("sync_save_shards_partial", 10)])
def test_a_kill_before_the_shards_were_complete_resumed_from_the_tracked_checkpoint(scenario, save):
    run = next(RUNS.glob(f"{scenario}-*"))
    marker = json.loads((run / "fault_injected.json").read_text())
    assert (marker["save_iteration"], marker["checkpoint_iteration"]) == (save, 5)
    assert marker["on_disk"]["metadata"] is False
    report = build_report(run, next(RUNS.glob("baseline-*")))
    check = _interrupted(report)
    assert check["status"] == "pass" and check["values"]["restored_iteration"] == 5, check["detail"]
    assert report["verdict"] == "pass", report.get("cause")


def test_a_save_that_finalized_before_the_kill_landed_is_inconclusive_not_a_finding():
    run = next(RUNS.glob("sync_save_finalized-*"))
    marker = json.loads((run / "fault_injected.json").read_text())
    assert marker["on_disk"]["metadata"] is True and "freeze" not in marker  # the rank killed itself
    report = build_report(run, next(RUNS.glob("baseline-*")))
    check = _interrupted(report)
    assert check["status"] == "inconclusive" and check["values"]["restored_iteration"] == 10
    assert "finalized in cycle 0, 0.2 ms after the injection was claimed" in check["detail"]
    assert report["verdict"] == "inconclusive" and "run the scenario again" in report["cause"]
