"""Hang-shaped runs built from the kill fixture: the launcher reports a rank-monitor timeout, not an exit."""

from __future__ import annotations

import pytest

from ftqual.verification.verify import check_by_id as check

LAUNCHER = "logs/launcher.log"
PREFIX = "2026-11-29 14:19:09,846 [WARNING] [vm] [workload:?({rank}) infra:?(?)] rank_monitor_server.py:522 "
SECTION = "[Cycle 0] Section 'step' has been open for 120.04 seconds. Timeout is 120.00 seconds."
OUT_OF_SECTION = "[Cycle 0] Was out of section for 180.01 seconds. Timeout is 180.00 seconds."


def make_hang(run, message: str, rank: int = 1, keep_exit: bool = False) -> None:
    run.set_json("run.json", fault="hang", scenario="hang")
    run.set_json("fault_injected.json", fault="hang")
    line = PREFIX.format(rank=rank) + message
    if keep_exit:
        run.insert_after(LAUNCHER, lambda text: "Updated num_warmup_iterations" in text, [line])
    else:
        run.sub(LAUNCHER, r"^E1129 14:19:09\.846000 .*failed \(exitcode: -9\).*$", line)


def test_hang_shaped_run_reports_section_step(kill_run, verify):
    make_hang(kill_run, SECTION)
    code, report = verify(kill_run)
    assert code == 0, [(c["id"], c["status"], c["detail"]) for c in report["checks"]]
    assert report["metrics"]["detected_by"] == "section:step"
    assert report["metrics"]["detection_s"] == pytest.approx(0.102, abs=0.001)
    item = check(report, "failure_detected_and_restarted")
    assert item["status"] == "pass"
    assert "section 'step'" in item["detail"]
    assert item["values"]["detected_by"] == "section:step"
    assert item["values"]["timeout_s"] == 120.0


def test_hang_with_out_of_section_timeout(kill_run, verify):
    make_hang(kill_run, OUT_OF_SECTION)
    code, report = verify(kill_run)
    assert code == 0
    assert report["metrics"]["detected_by"] == "out_of_section"


def test_hang_timeout_then_exit_is_detected_by_the_timeout(kill_run, verify):
    make_hang(kill_run, SECTION, keep_exit=True)
    code, report = verify(kill_run)
    assert code == 0
    assert report["metrics"]["detected_by"] == "section:step"
    assert "then exited with code -9" in check(report, "failure_detected_and_restarted")["detail"]


def test_hang_reported_on_a_peer_rank_passes_with_a_note(kill_run, verify):
    make_hang(kill_run, SECTION, rank=0)
    code, report = verify(kill_run)
    assert code == 0
    item = check(report, "failure_detected_and_restarted")
    assert item["status"] == "pass"
    assert item["values"]["reported_rank_is_injected"] is False
    assert any("peer" in note for note in item["notes"])
    assert report["metrics"]["detected_local_rank"] == 0


def test_hang_without_timeout_line_fails(kill_run, verify):
    kill_run.set_json("run.json", fault="hang", scenario="hang")
    code, report = verify(kill_run)
    item = check(report, "failure_detected_and_restarted")
    assert item["status"] == "fail" and "no section or out-of-section timeout" in item["detail"]


def test_hang_timeout_differing_from_run_json_fails_fixed_timeouts(kill_run, verify):
    make_hang(kill_run, SECTION.replace("Timeout is 120.00", "Timeout is 60.00"))
    code, report = verify(kill_run)
    assert check(report, "fixed_timeouts_in_force")["status"] == "fail"
