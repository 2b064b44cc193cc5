"""Unit tests of the check machinery: replay classification, verdicts, findings, legitimate variations."""

from __future__ import annotations

import math

import pytest

from ftqual.verification.checks.replay import Pair, classify, relative_difference
from ftqual.verification.checks.result import CheckResult, Findings, verdict
from ftqual.verification.evidence.model import Ref
from ftqual.verification.evidence.train_log import IterationLine
from ftqual.verification.verify import check_by_id as check


def line(iteration: int, loss: float | None) -> IterationLine:
    return IterationLine(0, iteration, 30, iteration * 2, 2, loss, None, None, Ref("x", iteration))


def pairs_of(diffs: list[float]) -> list[Pair]:
    return [Pair(i, line(i, 1.0), line(i, 1.0 + d), d) for i, d in enumerate(diffs, start=6)]


@pytest.mark.parametrize(
    ("diffs", "kind"),
    [
        ([0, 0, 0, 0], "identical"),
        ([0, 0.03, 0, 0, 0], "transient"),  # the H200 pattern: second iteration after the restore only
        ([0.03, 0.02, 0, 0], "transient"),
        ([0, 0.03], "uncovered_after"),  # nothing after the difference is covered
        ([0, 0.03, 0.05, 0.04], "divergent"),
        ([0, 0, 0, 0.03], "divergent"),  # a difference past the first iterations after the restore
        ([0, 0, 0.03, 0, 0], "divergent"),
        ([0.03, 0.03, 0.03, 0.03, 0], "divergent"),  # several divergent iterations are never "isolated"
    ],
)
def test_replay_classification(diffs, kind):
    assert classify(pairs_of(diffs), 1e-3, 5)[0] == kind


def test_relative_difference_edge_cases():
    assert relative_difference(6.185080, 6.185080) == 0.0
    assert math.isinf(relative_difference(None, None))
    assert math.isinf(relative_difference(1.0, None))
    assert math.isinf(relative_difference(1.0, float("nan")))
    assert math.isinf(relative_difference(float("nan"), float("nan")))  # NaN never matches, not even NaN
    assert math.isinf(relative_difference(float("inf"), float("inf")))
    assert relative_difference(6.529403, 6.357241) == pytest.approx(0.02637, abs=1e-5)


def test_verdict_precedence():
    def result(status: str) -> CheckResult:
        return CheckResult("x", status, "")

    assert verdict([result("pass"), result("skip")]) == "pass"
    assert verdict([result("pass"), result("inconclusive")]) == "inconclusive"
    assert verdict([result("inconclusive"), result("fail")]) == "fail"


def test_findings_decide():
    f = Findings("c")
    f.fact("ok", Ref("a", 1))
    assert f.result().status == "pass"
    f.missing_fact("gone", source_complete=False)
    assert f.result().status == "inconclusive" and "cut short" in f.result().detail
    f.missing_fact("gone", source_complete=True)
    result = f.result()
    assert result.status == "fail" and result.detail == "gone"
    assert result.as_dict()["evidence"] == [{"path": "a", "line": 1}]


# legitimate variations (the CPU smoke workload differs from Megatron in these ways) ---------------------


def test_passes_without_scheduled_async_lines(kill_run, verify):
    kill_run.delete_lines("logs/train_cycle0.log", lambda text: "scheduled an async" in text)
    kill_run.delete_lines("logs/train_cycle1.log", lambda text: "scheduled an async" in text)
    code, report = verify(kill_run)
    assert code == 0


def test_passes_with_other_hostnames_and_paths(kill_run, verify):
    kill_run.sub("logs/launcher.log", r"\[vm\]", "[gpu-node-17.cluster]")
    kill_run.set_json("fault_injected.json", host="gpu-node-17.cluster")
    kill_run.sub("logs/train_cycle1.log", r"/lus/nvrx/runs/kill/checkpoints", "/somewhere/else/ckpt")
    code, report = verify(kill_run)
    assert code == 0


def test_passes_without_arguments_block_with_a_note(kill_run, verify):
    kill_run.delete_lines("logs/train_cycle1.log", lambda text: text.startswith("0:   ") and " ...." in text)
    code, report = verify(kill_run)
    assert code == 0
    assert any("arguments" in note for note in check(report, "resumed_from_checkpoint")["notes"])


def test_tz_offset_converts_log_times(kill_run, verify):
    """Logs printed in UTC+1 local time: with tz_offset_s the metrics stay the same."""
    kill_run.set_json("run.json", tz_offset_s=3600)
    for rel in ("logs/train_cycle0.log", "logs/train_cycle1.log"):
        kill_run.sub(rel, r"\[2026-11-29 14:", "[2026-11-29 15:")
        kill_run.sub(rel, r"datetime: 2026-11-29 14:", "datetime: 2026-11-29 15:")  # Megatron's milestones
    kill_run.sub("logs/launcher.log", r"^2026-11-29 14:", "2026-11-29 15:")
    kill_run.sub("logs/launcher.log", r"^([EWI]1129) 14:", r"\1 15:")
    code, report = verify(kill_run)
    assert code == 0
    assert report["clock"] == {
        "tz_offset_s": 3600.0,
        "assumed_utc": False,
        "note": "naive log timestamps converted with tz_offset_s=3600 from run.json",
    }
    assert report["metrics"]["detection_s"] == pytest.approx(0.102, abs=0.001)
    assert report["metrics"]["failure_to_first_step_s"] == pytest.approx(31.585, abs=0.001)
    assert report["notes"] == []


def test_global_batch_size_from_run_json_when_line_lacks_it(kill_run, verify):
    kill_run.sub("logs/train_cycle1.log", r"global batch size:\s+2 \| ", "")
    kill_run.set_json("run.json", global_batch_size=2)
    code, report = verify(kill_run)
    assert code == 0
    assert "6 x 2" in check(report, "resumed_from_checkpoint")["detail"]


def test_legacy_inject_line_is_ignored(kill_run, verify):
    code, report = verify(kill_run)
    assert "exactly one injection" in check(report, "clean_finish")["detail"]
