"""Never a crash: every evidence file cut at arbitrary points, or filled with garbage, gives a report."""

from __future__ import annotations

import pytest

from ftqual.verification.evidence import RunMetaError
from ftqual.verification.verify import build_report

FILES = [
    "fault_injected.json",
    "cycle_infos/cycle_info..0.0",
    "cycle_infos/cycle_info..0.1",
    "cycle_infos/cycle_info..current",
    "logs/launcher.log",
    "logs/train_cycle0.log",
    "logs/train_cycle1.log",
    "checkpoints/latest_checkpointed_iteration.txt",
    "checkpoints/iter_0000005/metadata.json",
]
CUTS = (0.0, 0.13, 0.5, 0.77, 0.9999)


@pytest.mark.parametrize("rel", FILES)
def test_cut_files_never_crash(kill_run, rel):
    path = kill_run.path(rel)
    data = path.read_bytes()
    for fraction in CUTS:
        path.write_bytes(data[: int(len(data) * fraction)])
        report = build_report(kill_run.root)
        assert report["verdict"] in ("pass", "fail", "inconclusive"), (rel, fraction)


@pytest.mark.parametrize("rel", FILES)
def test_garbage_files_never_crash(kill_run, rel):
    kill_run.path(rel).write_bytes(b"\xff\xfe\x00garbage\n{[\x80\n" * 3)
    report = build_report(kill_run.root)
    assert report["verdict"] in ("fail", "inconclusive", "pass")
    assert report["verdict"] != "pass" or rel.endswith(("metadata.json", ".current"))


def test_wrong_json_types_never_crash(kill_run):
    kill_run.path("cycle_infos/cycle_info..0.0").write_text('{"cycle_number": 0, "attempt_index": {"a": 1}}')
    kill_run.path("cycle_infos/cycle_info..0.1").write_text('{"cycle_number": [1], "attempt_index": [2]}')
    kill_run.path("fault_injected.json").write_text(
        '{"cycle": "x", "checkpoint_iteration": [5], "injected_at": 7}'
    )
    report = build_report(kill_run.root)
    assert report["verdict"] == "inconclusive"
    assert "unreadable" in report["sources"]["cycle_infos"]["reason"]


def test_odd_numbers_in_log_lines_never_crash(kill_run):
    kill_run.append(
        "logs/launcher.log",
        [
            "2026-11-29 14:20:03,000 [WARNING] [vm] [workload:?(1) infra:?(?)] "
            "x.py:1 [Cycle 1] Section 'step' has been open for 1.2.3 seconds."
        ],
    )
    kill_run.append(
        "logs/train_cycle1.log",
        ["1:     load-checkpoint ......: (1.2.3, 4)", "1: [ftqual-inject] {" + "[" * 5000 + "}"],
    )
    assert build_report(kill_run.root)["verdict"] in ("pass", "fail", "inconclusive")


@pytest.mark.parametrize("fraction", CUTS)
def test_cut_run_json_is_a_usage_error(kill_run, fraction):
    path = kill_run.path("run.json")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(RunMetaError):
        build_report(kill_run.root)
