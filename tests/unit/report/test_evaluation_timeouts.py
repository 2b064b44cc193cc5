"""The recommendation of a job that evaluates: eval steps are `step` sections, so the step recommendation
says whether an eval step decided it, or that no evaluation ran in the measured runs (then it covers none);
a job without evaluation keeps its summary's keys."""

from __future__ import annotations

import json
from pathlib import Path

from ftqual.report import recommend
from ftqual.report import timeouts as tm

TIMEOUTS = {"setup": 300, "step": 60, "checkpointing": 120, "out_of_section": 120}


def _doc(step: dict, evaluation: dict | None = None) -> dict:
    overall = {
        "setup": {"s": 20.0, "evidence": []},
        "step": step,
        "checkpointing": {"s": 9.0, "evidence": []},
        "out_of_section": {"s": 0.5, "evidence": []},
    }
    sections: dict = {"overall": overall}
    if evaluation is not None:
        sections["evaluation"] = evaluation
    return {"expected": {"fault": "none", "timeouts": TIMEOUTS}, "sections": sections, "checks": []}


EVAL_STEP = {"s": 14.0, "bound": "mean", "what": "evaluation step at iteration 1000", "evidence": []}
RAN = {"interval": 1000, "iters": 10, "source": "run.json", "count": 2, "longest_step": EVAL_STEP}
NONE_RAN = {"interval": 1000, "iters": 10, "source": "run.json", "count": 0, "longest_step": None}


def test_an_eval_step_decides_the_step_recommendation_and_the_report_says_so():
    table = tm.build_timeouts([("baseline", _doc(EVAL_STEP, RAN))])
    step = next(row for row in table["rows"] if row["section"] == "step")
    assert step["observed_s"] == 14.0 and step["recommended_s"] == 70.0  # 5 x 14 s, above the 60 s floor
    evaluation = table["evaluation"]
    assert evaluation["count"] == 2 and evaluation["interval"] == [1000]
    assert evaluation["note"] == "the longest step: an evaluation step at iteration 1000, 14.00 s"


def test_a_training_step_longer_than_every_eval_step_is_named_as_such():
    train = {"s": 20.0, "bound": "upper", "evidence": []}
    small = dict(RAN, longest_step=dict(EVAL_STEP, s=3.0))
    table = tm.build_timeouts([("baseline", _doc(train, small))])
    assert table["evaluation"]["note"] == (
        "the longest step: a training step, 20.00 s; the longest eval step 3.00 s "
        "(evaluation step at iteration 1000)"
    )


def test_no_evaluation_ran_the_recommendation_does_not_cover_it(tmp_path, capsys):
    """Negative control: the job evaluates every 1000 iterations, the runs were shorter: the report says the
    recommendation does not cover evaluation, and so does the snippet."""
    table = tm.build_timeouts([("baseline", _doc({"s": 2.0, "evidence": []}, NONE_RAN))])
    note = table["evaluation"]["note"]
    assert note.startswith("no evaluation ran in the measured runs: the job evaluates every 1000 iterations")
    assert "the recommendation does not cover it; run a scenario long enough to evaluate" in note
    results = tmp_path / "results"
    results.mkdir()
    (results / "summary.json").write_text(json.dumps({"verdict": "pass", "timeouts": table}))
    assert recommend.main([str(results)]) == 0
    assert f"evaluation: {note}" in capsys.readouterr().out
    assert f"# Evaluation: {note}." in (results / recommend.SNIPPET_NAME).read_text()


def test_a_job_without_evaluation_keeps_its_summary_keys(tmp_path: Path):
    table = tm.build_timeouts([("baseline", _doc({"s": 2.0, "evidence": []}))])
    assert "evaluation" not in table
    rec = recommend.recommendation(tmp_path / "summary.json", {"verdict": "pass", "timeouts": table})
    assert rec.evaluation is None
    assert "Evaluation" not in recommend.snippet(rec)
