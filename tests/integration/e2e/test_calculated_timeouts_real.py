"""Calculated timeouts end to end on CPU (the real ft_launcher, the smoke workload with `--calc-ft-timeouts`,
as Megatron's ft_integration): a kill after the first of four checkpoints; the replacement cycle loads a
checkpoint, so NVRx calculates setup, then step (after 16 iterations) and, at the end, the out-of-section
timeout, and persists them in ft_state.json. `calculated_timeouts` reports each value per cycle and judges
the final ones against the measured healthy sections. Negative controls (edited copies): an update whose step
timeout is below the healthy step FAILs (it would fire on a healthy run), and a run whose ft_state.json is
gone FAILs (the updates were not persisted)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.integration.e2e.test_fault_catalog_real import check
from tests.support.launch import launch_smoke, verify_run

CALC = "calculated_timeouts"


@pytest.fixture(scope="module")
def calc_run(repo_root, tmp_path_factory):
    work = tmp_path_factory.mktemp("calc")
    env = {
        "TRAIN_ITERS": "40",
        "SAVE_INTERVAL": "10",
        "NVRX_CALC_FT_TIMEOUTS": "1",
        "NVRX_SECTION_TIMEOUTS": "setup:120,step:10,checkpointing:60",
        "NVRX_OUT_OF_SECTION_TIMEOUT": "30",
    }
    run_dir = launch_smoke(repo_root, work, "kill-calc", "kill", ["--smoke-step-seconds=0.05"], env, 240)
    return run_dir


def test_nvrx_calculates_persists_and_the_check_reports_each_value(repo_root, calc_run):
    run = json.loads((calc_run / "run.json").read_text())
    assert run["calc_ft_timeouts"] is True and "--calc-ft-timeouts" in run["command"]
    assert (calc_run / "checkpoints" / "ft_state.json").is_file()
    code, report = verify_run(repo_root, calc_run)
    assert code == 0 and report["verdict"] == "pass", report.get("cause")
    assert check(report, "fixed_timeouts_in_force")["status"] == "skip"
    calc = check(report, CALC)
    assert calc["status"] == "pass", calc["detail"]
    cycles = calc["values"]["cycles"]
    assert [c["cycle"] for c in cycles] == [0, 1] and not cycles[0]["updates"]  # killed before 16 steps
    final = calc["values"]["final"]
    assert final["setup"] < 120 and final["step"] < 10  # calculated, far below the initial values
    assert calc["values"]["sections"]["step"]["hang_detected_within_s"] == pytest.approx(final["step"] + 5)


def test_a_calculated_timeout_below_the_healthy_section_fails(repo_root, calc_run, tmp_path):
    copy = tmp_path / calc_run.name
    shutil.copytree(calc_run, copy, symlinks=True)
    log = copy / "logs" / "train_cycle1.log"
    text = log.read_text()
    forged = re.sub(
        r"(FT: updated timeouts saved to .*?sections=\[setup=[\d.]+, step=)[\d.]+", r"\g<1>0.001", text
    )
    assert forged != text
    log.write_text(forged)
    code, report = verify_run(repo_root, copy)
    calc = check(report, CALC)
    assert code == 1 and calc["status"] == "fail", calc["detail"]
    assert "calculated step timeout 0.001 s would fire on the healthy run" in calc["detail"]


def test_updates_that_were_not_persisted_fail(repo_root, calc_run, tmp_path):
    copy = tmp_path / calc_run.name
    shutil.copytree(calc_run, copy, symlinks=True)
    (copy / "checkpoints" / "ft_state.json").unlink()
    code, report = verify_run(repo_root, copy)
    calc = check(report, CALC)
    assert code == 1 and calc["status"] == "fail" and "no ft_state.json" in calc["detail"], calc["detail"]
