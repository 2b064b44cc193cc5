"""A live fault placed in a section must be caught by that section's timeout (recorded H200 runs): the hang
placed inside a step and caught by the step timeout passes; the same run whose marker says it was placed in a
checkpointing section (or out of every section) fails, naming both; an immediate placement, which lands
wherever the rank is, may be caught by any section's timeout (the walkthrough's own run)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-1gpu"
DETECTED = "failure_detected_and_restarted"


def detected(run_dir: Path) -> dict:
    return next(c for c in build_report(run_dir)["checks"] if c["id"] == DETECTED)


def copy_with_marker(tmp_path: Path, name: str, **edits) -> Path:
    dest = tmp_path / name
    shutil.copytree(DATA / name, dest)
    marker_path = dest / "fault_injected.json"
    marker_path.chmod(0o644)
    marker = json.loads(marker_path.read_text())
    marker.update(edits)
    marker_path.write_text(json.dumps(marker))
    return dest


def test_the_step_timeout_catches_a_hang_placed_in_a_step():
    assert detected(DATA / "hang")["status"] == "pass"


@pytest.mark.parametrize(
    ("placement", "section", "said"),
    [("checkpointing", "checkpointing", "placed section 'checkpointing'"),
     ("out_of_section", None, "placed out of every section")],
)  # fmt: skip
def test_another_sections_timeout_fails(tmp_path, placement, section, said):
    check = detected(copy_with_marker(tmp_path, "hang", placement=placement, section=section))
    assert check["status"] == "fail", check["detail"]
    assert said in check["detail"] and "the 'step' section timeout caught it" in check["detail"], check[
        "detail"
    ]


def test_an_immediate_placement_may_be_caught_by_any_section():
    """The walkthrough's placement: decided in a step, stopped inside a save, the checkpointing timeout."""
    run = DATA / "hang-seed-placement"
    marker = json.loads((run / "fault_injected.json").read_text())
    assert (marker["placement"], marker["section"]) == ("immediate", "step")
    assert detected(run)["status"] == "pass"


def test_a_peer_that_times_out_first_is_a_detection_with_its_note(tmp_path):
    """Two ranks (2 x H200): rank 1 stopped, its peer's 'step' timeout fired first, as the peer waited on it
    in a collective. Placed out of every section, the hang was still detected, by the peer: pass, said."""
    source = Path(__file__).resolve().parents[3] / "data" / "megatron-h200x2-dp2-workflow" / "hang"
    dest = tmp_path / "hang"
    shutil.copytree(source, dest)
    marker_path = dest / "fault_injected.json"
    marker_path.chmod(0o644)
    marker = json.loads(marker_path.read_text())
    assert marker["local_rank"] == 1
    marker.update(placement="out_of_section", section=None)
    marker_path.write_text(json.dumps(marker))
    check = detected(dest)
    assert check["status"] == "pass", check["detail"]
    assert any("a peer caught it first: local_rank 0's 'step' section timeout" in n for n in check["notes"])
