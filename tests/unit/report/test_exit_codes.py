"""The exit-code table (ftqual.report.exit_codes): every scenario's final exits and what each means for a
scheduler; an exit 0 before the last iteration is a silent end, never 'finished'."""

from __future__ import annotations

from ftqual.report.exit_codes import build_exit_codes, markdown_lines
from ftqual.report.inputs import ScenarioInput
from ftqual.report.markdown import exit_codes_section
from ftqual.verification.evidence.endings import EXIT_MEANINGS, exit_meaning


def _item(name: str, **metrics) -> ScenarioInput:
    return ScenarioInput(name, f"{name}/verify.json", {"metrics": metrics})


def test_each_code_means_what_a_scheduler_needs():
    rows = build_exit_codes([
        _item("baseline", launcher_exit_code=0, rank_exit_codes=[0]),
        _item("loop", launcher_exit_code=93, rank_exit_codes=[1]),
        _item("exhausted", launcher_exit_code=1, rank_exit_codes=[-9]),
        _item("older"),  # a verify report written before the exits were recorded: left out
    ])  # fmt: skip
    by = {r["scenario"]: r for r in rows}
    assert set(by) == {"baseline", "loop", "exhausted"}
    assert (by["baseline"]["meaning"], by["baseline"]["requeue"]) == ("finished", "no")
    assert by["loop"]["requeue"] == "no: a loop" and "no-progress" in by["loop"]["meaning"]
    assert by["exhausted"]["requeue"] == "yes, after looking"
    assert by["exhausted"]["ranks_meaning"] == ["-9: killed (SIGKILL)"]


def test_an_exit_0_before_the_last_iteration_is_a_silent_end():
    (row,) = build_exit_codes(
        [
            _item(
                "broken",
                launcher_exit_code=0,
                rank_exit_codes=[0],
                silent_end={"iteration": 20, "train_iters": 30},
            )
        ]
    )
    assert row["silent_end"] is True
    assert row["meaning"].startswith("silent end") and "iteration 20 of 30" in row["meaning"]
    assert row["requeue"] != EXIT_MEANINGS[0][1]
    assert "finished" not in markdown_lines([row])[2]


def test_an_exit_0_after_a_damaged_load_or_unseen_failed_saves_is_no_finish():
    def judged(name, check_id, outcome, code=0):
        check = {"id": check_id, "status": "fail", "values": {"outcome": outcome}}
        doc = {"metrics": {"launcher_exit_code": code, "rank_exit_codes": [code]}, "checks": [check]}
        return ScenarioInput(name, f"{name}/verify.json", doc)

    rows = build_exit_codes([
        judged("corrupted", "checkpoint_break_outcome", "loaded_damaged"),
        judged("full", "storage_fault_outcome", "saves_failed_silently"),
        judged("stopped", "checkpoint_break_outcome", "stopped_loudly", code=93),
        judged("recovered", "checkpoint_break_outcome", "recovered"),
    ])  # fmt: skip
    by = {r["scenario"]: r for r in rows}
    assert by["corrupted"]["meaning"] == "finished, but a replacement loaded the damaged checkpoint"
    assert by["corrupted"]["requeue"].startswith("no: investigate")
    assert by["full"]["meaning"] == "finished, but saves failed unseen"
    # the negative controls: a loud stop and a recovery keep their plain meanings
    assert "no-progress" in by["stopped"]["meaning"]
    assert (by["recovered"]["meaning"], by["recovered"]["requeue"]) == ("finished", "no")


def test_the_section_appears_only_with_rows():
    assert exit_codes_section(None) == [] and exit_codes_section([]) == []
    rows = build_exit_codes([_item("kill", launcher_exit_code=0, rank_exit_codes=[0])])
    lines = exit_codes_section(rows)
    assert lines[0] == "## Exit codes" and any(
        line.startswith("| kill | 0 | 0: finished |") for line in lines
    )


def test_unlisted_codes_are_the_workloads_own():
    assert exit_meaning(None) == ("not recorded", "unknown")
    assert "own code" in exit_meaning(42)[0]


def test_an_exit_0_after_a_restart_from_scratch_says_so():
    (row,) = build_exit_codes(
        [
            _item(
                "tracker_removed",
                launcher_exit_code=0,
                rank_exit_codes=[0],
                scratch_restarts=[{"cycle": 1, "checkpoint": 5}],
            )
        ]
    )
    assert row["meaning"] == "finished, but cycle 1 restarted from scratch"
    assert row["requeue"] == "no: investigate, the checkpoint was not loaded"


def test_megatron_s_rerun_exit_asks_for_another_gpu():
    """Megatron's NaN check exits 16 to be resumed on another GPU (seen on one H100: a restart in place
    exits 16 again); an unlisted code stays the workload's own."""
    (row,) = build_exit_codes([_item("nan_loss", launcher_exit_code=93, rank_exit_codes=[16])])
    assert row["ranks_meaning"][0].startswith("16: Megatron's rerun state machine: resume on another GPU")
    assert exit_meaning(17)[0].startswith("Megatron's result validation failed")
    assert exit_meaning(42) == ("exit 42: the workload's own code", "after looking")
