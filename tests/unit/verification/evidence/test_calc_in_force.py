"""Under calc_ft_timeouts the detection bound and the healthy-section check judge by the timeouts in force
in the cycle (ftqual.verification.evidence.in_force), not run.json's initial ones: a recorded hang edited into
a
calculated run (an `FT: updated timeouts` line before the injection) passes or fails by the calculated
value, and says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.verify import DEFAULT_BASELINE_TOLERANCE, DEFAULT_REPLAY_TOLERANCE, build_report

HANG = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-1gpu" / "hang"
INJECT = "[ftqual-inject]"


def update_line(step: float, setup: float = 900.0) -> str:
    return (
        "0: FT: updated timeouts saved to /ckpt/ft_state.json. SectionTimeouts(out_of_section=180.00, "
        f"sections=[setup={setup:.2f}, step={step:.2f}, checkpointing=600.00, ], "
        "calculated_sections={'step'}, is_out_of_section_calculated=False)\n"
    )


def calculated_copy(tmp_path: Path, line: str, before_injection: bool = True, cycle: int = 0) -> Path:
    """The recorded hang as a calc_ft_timeouts run with `line` printed in `cycle` (cycle 0: before the
    injection, or at the log's end; a later one: right after its FT init line), and an ft_state.json."""
    run = tmp_path / "hang"
    shutil.copytree(HANG, run, symlinks=True)
    meta = json.loads((run / "run.json").read_text())
    meta["calc_ft_timeouts"] = True
    (run / "run.json").write_text(json.dumps(meta))
    log = run / "logs" / f"train_cycle{cycle}.log"
    lines = log.read_text().splitlines(keepends=True)
    if cycle:
        at = next(i for i, text in enumerate(lines) if "FT: initialized" in text) + 1
    else:
        at = next(i for i, text in enumerate(lines) if INJECT in text) if before_injection else len(lines)
    lines.insert(at, line)
    log.write_text("".join(lines))
    (run / "checkpoints" / "ft_state.json").write_text("{}")
    return run


def check(run: Path, cid: str) -> dict:
    report = build_report(str(run), None, DEFAULT_REPLAY_TOLERANCE, DEFAULT_BASELINE_TOLERANCE)
    return next(c for c in report["checks"] if c["id"] == cid)


def test_the_recorded_hang_is_within_its_fixed_step_timeout():
    result = check(HANG, "detected_within_timeout")
    assert result["status"] == "pass" and result["values"]["timeout_s"] == 120.0
    assert "in force" not in result["detail"]


def test_a_calculated_step_timeout_below_the_detection_fails_the_bound(tmp_path):
    """The hang took ~121 s: a calculated step timeout of 60 s in force at the injection cannot explain it."""
    result = check(calculated_copy(tmp_path, update_line(60.0)), "detected_within_timeout")
    assert result["status"] == "fail", result["detail"]
    assert result["values"]["timeout_s"] == 60.0
    assert "in force at the injection: NVRx's calculation in cycle 0" in result["detail"]


def test_a_calculation_after_the_injection_is_not_in_force(tmp_path):
    run = calculated_copy(tmp_path, update_line(60.0), before_injection=False)
    result = check(run, "detected_within_timeout")
    assert result["status"] == "pass", result["detail"]
    assert result["values"]["timeout_s"] == 120.0
    assert "cycle 0's start (initial)" in result["detail"]


@pytest.mark.parametrize(("step", "status"), [(0.5, "fail"), (100.0, "pass")])
def test_healthy_steps_are_judged_by_the_calculated_step_timeout(tmp_path, step, status):
    """A calculated step timeout below the healthy steps measured after it would fire on a healthy run."""
    result = check(calculated_copy(tmp_path, update_line(step), cycle=1), "timeouts_not_exceeded")
    if status == "fail":
        assert result["status"] == "fail", result["detail"]
        assert f"its timeout {step:g} s (in force: NVRx's calculation in cycle 1" in result["detail"]
    else:
        assert result["status"] != "fail", result["detail"]
