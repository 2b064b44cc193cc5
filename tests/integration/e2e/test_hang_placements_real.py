"""A hang in each section, end to end on CPU (the real ft_launcher, the smoke workload): placed inside a
checkpointing section it is caught by the 'checkpointing' timeout, placed out of every section by the
out-of-section timeout, and `failure_detected_and_restarted` proves which one fired; a copy whose timeout
line names another section FAILs (the negative control)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from tests.integration.e2e.test_fault_catalog_real import launch
from tests.support.launch import verify_run

DETECTED = "failure_detected_and_restarted"
# Each section's own timeout short, the others long: only the section the hang sits in can catch it soon.
TIMEOUTS = {
    "checkpointing": ("setup:60,step:30,checkpointing:4", "30"),
    "out_of_section": ("setup:60,step:30,checkpointing:30", "4"),
}
FIRED = {"checkpointing": "section 'checkpointing' open", "out_of_section": "out of section open"}


@pytest.fixture(scope="module", params=sorted(TIMEOUTS))
def placed_hang(request, repo_root, tmp_path_factory):
    placement = request.param
    work = tmp_path_factory.mktemp(f"hang-{placement}")
    sections, out_of_section = TIMEOUTS[placement]
    run_dir = launch(
        repo_root,
        work,
        f"hang-{placement.replace('_', '-')}",
        "hang",
        [],
        NVRX_HANG_PLACEMENT=placement,
        NVRX_SECTION_TIMEOUTS=sections,
        NVRX_OUT_OF_SECTION_TIMEOUT=out_of_section,
        TRAIN_ITERS="12",
    )
    return placement, run_dir


def test_the_timeout_of_the_section_the_hang_sits_in_catches_it(repo_root, placed_hang):
    placement, run_dir = placed_hang
    marker = json.loads((run_dir / "fault_injected.json").read_text())
    assert marker["placement"] == placement
    assert marker["section"] == (None if placement == "out_of_section" else placement)
    code, report = verify_run(repo_root, run_dir)
    check = next(c for c in report["checks"] if c["id"] == DETECTED)
    assert code == 0 and report["verdict"] == "pass", (report.get("cause"), check["detail"])
    assert FIRED[placement] in check["detail"], check["detail"]


def test_a_timeout_of_another_section_fails(repo_root, placed_hang, tmp_path):
    """The same run with its timeout line rewritten to name another section: the check fails, saying so."""
    placement, run_dir = placed_hang
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy, symlinks=True)
    log = copy / "logs" / "launcher.log"
    text = log.read_text()
    rank = json.loads((copy / "fault_injected.json").read_text())["local_rank"]
    # Every timeout line made the stopped rank's own (a peer's may come first) and about another section.
    lines = []
    for line in text.splitlines(keepends=True):
        if "has been open for" in line or "Was out of section for" in line:
            line = re.sub(r"\[workload:\?\(\d+\)", f"[workload:?({rank})", line)
            line = re.sub(r"Section '\w+' has been open", "Section 'setup' has been open", line)
            line = re.sub(
                r"Was out of section for ([\d.]+) seconds",
                r"Section 'setup' has been open for \1 seconds",
                line,
            )
        lines.append(line)
    forged = "".join(lines)
    assert forged != text
    log.write_text(forged)
    code, report = verify_run(repo_root, copy)
    check = next(c for c in report["checks"] if c["id"] == DETECTED)
    assert code == 1 and check["status"] == "fail", check["detail"]
    assert "another section's timeout fired" in check["detail"], check["detail"]
