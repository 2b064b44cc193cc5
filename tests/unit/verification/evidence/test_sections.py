"""Measured FT sections (ftqual.verification.evidence.sections) on recorded H200 runs, and the check
timeouts_not_exceeded on them and on edited copies (a healthy step over its timeout; no timestamps)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ftqual.verification.checks import run_plan_from
from ftqual.verification.checks.section_times import timeouts_not_exceeded
from ftqual.verification.evidence import build_snapshot
from ftqual.verification.evidence.sections import run_sections
from ftqual.verification.verify import build_report, check_by_id

DATA = Path(__file__).resolve().parents[3] / "data"
KILL = DATA / "megatron-h200-1gpu" / "kill"
HANG = DATA / "megatron-h200-1gpu" / "hang"


def _lines(figure) -> list[tuple[str, int]]:
    return [(ref.path, ref.line) for ref in figure.evidence]


def test_kill_fixture_figures_and_their_lines():
    sections = run_sections(build_snapshot(KILL))
    first, second = sections.cycles
    # cycle 0: the setup section opened by 15:35:48.035744 (Megatron's `after in-job setup` milestone,
    # train_cycle0.log:874) -> first step start 15:35:53.097574 - 1.369 s
    assert first.setup.seconds == pytest.approx(3.693, abs=1e-3)
    assert first.setup.bound == "lower"
    assert _lines(first.setup) == [("logs/train_cycle0.log", 874), ("logs/train_cycle0.log", 990)]
    assert first.first_step.seconds == pytest.approx(1.369, abs=1e-3)
    assert _lines(first.first_step) == [("logs/train_cycle0.log", 990)]
    assert first.step_max.seconds == pytest.approx(0.7277, abs=1e-3)  # iteration 2
    # the first save (the persistent checkpoint worker starts): 15:35:53.329314 -> 15:36:05.877743
    assert first.first_save.seconds == pytest.approx(12.548, abs=1e-3)
    assert _lines(first.first_save) == [("logs/train_cycle0.log", 1018), ("logs/train_cycle0.log", 1040)]
    assert first.save_max.seconds == pytest.approx(0.449, abs=1e-3)  # iteration 10: lines 1051 -> 1052
    assert _lines(first.save_max) == [("logs/train_cycle0.log", 1051), ("logs/train_cycle0.log", 1052)]
    assert not first.loaded and second.loaded
    # the replacement's setup holds its checkpoint load
    assert second.setup.seconds == pytest.approx(3.947, abs=1e-3)
    assert second.first_step.seconds == pytest.approx(1.556, abs=1e-3)
    assert second.first_save.seconds == pytest.approx(9.246, abs=1e-3)
    overall = sections.overall()
    assert overall["setup"].seconds == pytest.approx(3.947, abs=1e-3)
    assert overall["step"].seconds == pytest.approx(1.556, abs=1e-3)
    assert overall["checkpointing"].seconds == pytest.approx(12.548, abs=1e-3)
    assert 0 < overall["out_of_section"].seconds < 0.2


def test_hang_cycle_names_its_section_and_is_left_out():
    snap = build_snapshot(HANG)
    sections = run_sections(snap)
    assert [c.hung for c in sections.cycles] == ["step", None]
    result = timeouts_not_exceeded(snap, run_plan_from(snap.meta))
    assert result.status == "pass", result.detail
    assert any("held the injected hang" in note for note in result.notes)


@pytest.mark.parametrize(
    ("run", "setup", "step", "checkpointing"),
    [
        ("megatron-h200-1gpu/baseline", 6.584, 3.085, 10.30),
        ("megatron-h200x2-tp2-workflow/kill", 4.325, 1.709, 11.57),
        ("megatron-h200x2-pp2/kill", 5.553, 2.320, 9.221),
    ],
)
def test_recorded_figures_pass(run, setup, step, checkpointing):
    report = build_report(DATA / run)
    overall = report["sections"]["overall"]
    assert overall["setup"]["s"] == pytest.approx(setup, abs=0.02)
    assert overall["step"]["s"] == pytest.approx(step, abs=0.002)
    assert overall["checkpointing"]["s"] == pytest.approx(checkpointing, abs=0.01)
    assert overall["setup"]["evidence"] and overall["checkpointing"]["evidence"]
    check = check_by_id(report, "timeouts_not_exceeded")
    assert check["status"] == "pass" and check["gates"]
    assert check["values"]["step"]["timeout_s"] == report["expected"]["timeouts"]["step"]


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(KILL, run, symlinks=True)
    return run


def test_a_healthy_step_over_its_timeout_fails(tmp_path):
    run = _copy(tmp_path)
    log = run / "logs" / "train_cycle1.log"
    text = log.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "iteration       20/" in line)
    lines[at] = re.sub(r"\(ms\): [\d.]+", "(ms): 125000.0", lines[at])
    log.write_text("".join(lines), encoding="utf-8")
    report = build_report(run)
    check = check_by_id(report, "timeouts_not_exceeded")
    assert check["status"] == "fail"
    assert "cycle 1: step took 125.00 s >= its timeout 120 s" in check["detail"]
    assert {"path": "logs/train_cycle1.log", "line": at + 1} == {
        k: check["evidence"][0][k] for k in ("path", "line")
    }
    assert report["verdict"] == "fail"


def test_a_save_over_the_checkpointing_timeout_fails(tmp_path):
    run = _copy(tmp_path)
    log = run / "logs" / "train_cycle0.log"
    text = log.read_text(encoding="utf-8")
    text = text.replace("[2026-11-29 15:36:05.877743] scheduled", "[2026-11-29 15:46:05.877743] scheduled")
    log.write_text(text, encoding="utf-8")
    check = check_by_id(build_report(run), "timeouts_not_exceeded")
    assert check["status"] == "fail"
    assert "cycle 0: checkpointing took 612.55 s" in check["detail"]


def test_logs_without_timestamps_are_inconclusive(tmp_path):
    run = _copy(tmp_path)
    for log in (run / "logs").glob("train_cycle*.log"):
        text = log.read_text(encoding="utf-8")
        log.write_text(re.sub(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\] ", "", text), encoding="utf-8")
    report = build_report(run)
    check = check_by_id(report, "timeouts_not_exceeded")
    assert check["status"] == "inconclusive"
    assert "setup not measured" in check["detail"] and "checkpointing not measured" in check["detail"]
    assert report["sections"]["overall"]["setup"]["s"] is None
    assert "no timestamp" in report["sections"]["overall"]["setup"]["reason"]


def _drop_setup_milestones(run: Path) -> None:
    """An older Megatron's log: no `[after in-job setup and before initialize_megatron]` milestone."""
    for log in (run / "logs").glob("train_cycle*.log"):
        lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
        log.write_text("".join(x for x in lines if "after in-job setup" not in x), encoding="utf-8")


def test_setup_is_measured_from_the_section_opening_without_launcher_records(tmp_path):
    run = _copy(tmp_path)
    (run / "logs" / "launcher.log").unlink()
    shutil.rmtree(run / "cycle_infos")
    setup = run_sections(build_snapshot(run)).overall()["setup"]
    assert setup.seconds == pytest.approx(3.947, abs=1e-3) and setup.bound == "lower"


def test_without_the_milestone_setup_is_an_upper_bound_from_the_worker_start(tmp_path):
    run = _copy(tmp_path)
    _drop_setup_milestones(run)
    first, second = run_sections(build_snapshot(run)).cycles
    # worker start 15:35:25.517 (launcher.log:34) -> first step start 15:35:53.097574 - 1.369 s: the process
    # start and 22.5 s of imports before the section opened are in it
    assert first.setup.seconds == pytest.approx(26.21, abs=0.01) and first.setup.bound == "upper"
    assert _lines(first.setup) == [("logs/launcher.log", 34), ("logs/train_cycle0.log", 989)]
    assert second.setup.seconds == pytest.approx(23.6, abs=0.05)


def test_no_milestone_launcher_log_nor_cycle_infos_leaves_setup_unbounded(tmp_path):
    run = _copy(tmp_path)
    _drop_setup_milestones(run)
    (run / "logs" / "launcher.log").unlink()
    shutil.rmtree(run / "cycle_infos")
    sections = run_sections(build_snapshot(run))
    assert sections.overall()["setup"].seconds is None
    assert "worker start" in sections.overall()["setup"].reason
    assert sections.overall()["step"].seconds is not None


def _setup_timeout(run: Path, seconds: int) -> None:
    meta = run / "run.json"
    data = json.loads(meta.read_text(encoding="utf-8"))
    data["timeouts"]["setup"] = seconds
    meta.write_text(json.dumps(data, indent=2), encoding="utf-8")


def test_a_setup_section_over_its_timeout_fails(tmp_path):
    # Negative control: the measured section (3.69 s, 3.95 s: a lower bound) against a 3 s setup timeout.
    run = _copy(tmp_path)
    _setup_timeout(run, 3)
    check = check_by_id(build_report(run), "timeouts_not_exceeded")
    assert check["status"] == "fail"
    assert "cycle 0: setup took 3.69 s >= its timeout 3 s" in check["detail"]


def test_an_upper_bound_setup_over_its_timeout_proves_nothing(tmp_path):
    # 26.2 s from the worker start, 22.5 s of it imports the monitor does not time: a 10 s setup timeout
    # may or may not have been exceeded, so the check cannot pass, and must not fail.
    run = _copy(tmp_path)
    _drop_setup_milestones(run)
    _setup_timeout(run, 10)
    check = check_by_id(build_report(run), "timeouts_not_exceeded")
    assert check["status"] == "inconclusive"
    assert "setup took 26.21 s >= its timeout 10 s (an upper bound from the worker start" in check["detail"]
