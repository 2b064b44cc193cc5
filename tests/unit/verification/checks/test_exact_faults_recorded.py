"""The recorded exactness faults (tests/data/smoke-exact-faults), verified with and without their checkpoints.

The kill's checkpoint at M is the baseline's, each negative control FAILs naming the group that differs, and
the verdicts stay once the checkpoints are gone (checkpoint_equal reads checkpoint_record/digests/, never the
checkpoint directory)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ftqual.verification.verify import DEFAULT_BASELINE_TOLERANCE, DEFAULT_REPLAY_TOLERANCE, build_report

DATA = Path(__file__).resolve().parents[3] / "data" / "smoke-exact-faults"
# run -> (verdict, checkpoint_equal's status, the group its first difference is named in)
EXPECTED = {
    "kill": ("pass", "pass", None),
    "stale-save": ("fail", "fail", "optimizer"),
    "optimizer-not-restored": ("fail", "fail", "optimizer"),
    "rng-not-restored": ("fail", "fail", "rng"),
    "data-position-lost": ("fail", "fail", "data_position"),
}


def verdict(run: Path, baseline: Path) -> tuple[str, str, str | None]:
    report = build_report(str(run), str(baseline), DEFAULT_REPLAY_TOLERANCE, DEFAULT_BASELINE_TOLERANCE)
    check = next(c for c in report["checks"] if c["id"] == "checkpoint_equal")
    first = (check.get("values") or {}).get("first_difference") or {}
    return report["verdict"], check["status"], first.get("group")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_verdict_names_what_differs_and_outlives_the_checkpoints(name, tmp_path):
    assert verdict(DATA / name, DATA / "baseline") == EXPECTED[name]
    for run in (name, "baseline"):
        shutil.copytree(DATA / run, tmp_path / run)
        shutil.rmtree(tmp_path / run / "checkpoints")
    assert verdict(tmp_path / name, tmp_path / "baseline") == EXPECTED[name]


def test_the_stale_save_is_told_from_a_lost_restore():
    """The note says where the difference began: the restored checkpoint itself (a save that wrote the
    wrong state), or only after it (the restore lost part of it)."""
    for name, began_in_the_save in (("stale-save", True), ("optimizer-not-restored", False)):
        report = build_report(
            str(DATA / name), str(DATA / "baseline"), DEFAULT_REPLAY_TOLERANCE, DEFAULT_BASELINE_TOLERANCE
        )
        check = next(c for c in report["checks"] if c["id"] == "checkpoint_equal")
        assert (check["values"]["restored_differs"] is not None) is began_in_the_save, name
