"""A hang in a replacement's setup, end to end on CPU (the real ft_launcher, the smoke workload): injection
1 hangs a step (the step timeout), injection 2 stops the replacement as it closes its setup section, and
`failure_detected_and_restarted` proves the 'setup' timeout caught it; a copy whose setup timeout line
names another section FAILs (the negative control)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.integration.e2e.test_fault_catalog_real import launch
from tests.support.launch import verify_run

DETECTED = "failure_detected_and_restarted"
# One rank: with two, the peer waiting in its first step of the replacement times out first whenever its
# step timeout is the shorter (seen here with step 4 s under setup 15 s). Setup above a healthy setup's upper
# bound (imports included), step short for injection 1.
ENV = {
    "GPUS_PER_NODE": "1",
    "NVRX_FAULT_RANK": "0",
    "NVRX_HANG_PLACEMENT": "setup",
    "NVRX_INJECTIONS": "2",
    "NVRX_MAX_RESTARTS": "2",
    "NVRX_SECTION_TIMEOUTS": "setup:15,step:4,checkpointing:30",
    "NVRX_OUT_OF_SECTION_TIMEOUT": "30",
    "TRAIN_ITERS": "12",
}


@pytest.fixture(scope="module")
def setup_hang(repo_root, tmp_path_factory):
    return launch(repo_root, tmp_path_factory.mktemp("setup-hang"), "hang-setup", "hang", [], **ENV)


def test_the_setup_timeout_catches_a_hang_in_a_replacements_setup(repo_root, setup_hang):
    first = json.loads((setup_hang / "fault_injected.json").read_text())
    second = json.loads((setup_hang / "fault_injected.2.json").read_text())
    assert (first["placement"], first["section"], first["cycle"]) == ("step", "step", 0)
    assert (second["placement"], second["section"], second["cycle"]) == ("setup", "setup", 1)
    assert second["checkpoint_iteration"] == second["baseline_iteration"] >= 1
    code, report = verify_run(repo_root, setup_hang)
    check = next(c for c in report["checks"] if c["id"] == DETECTED)
    assert code == 0 and report["verdict"] == "pass", (report.get("cause"), check["detail"])
    fired = "fired in cycle 1: section 'setup' open"  # whichever rank's monitor reported it
    assert fired in check["detail"], check["detail"]
    bound = next(c for c in report["checks"] if c["id"] == "detected_within_timeout")
    assert bound["values"]["injections"][1]["section"] == "setup", bound["detail"]
    assert bound["values"]["injections"][1]["timeout_s"] == 15.0


def test_a_timeout_of_another_section_fails(repo_root, setup_hang, tmp_path):
    copy = tmp_path / setup_hang.name
    shutil.copytree(setup_hang, copy, symlinks=True)
    log = copy / "logs" / "launcher.log"
    text = log.read_text()
    forged = re.sub(r"Section 'setup' has been open", "Section 'step' has been open", text)
    assert forged != text
    log.write_text(forged)
    code, report = verify_run(repo_root, copy)
    check = next(c for c in report["checks"] if c["id"] == DETECTED)
    assert code == 1 and check["status"] == "fail", check["detail"]
    assert "injection 2: the fault was placed section 'setup'" in check["detail"], check["detail"]
    assert "another section's timeout fired" in check["detail"]
