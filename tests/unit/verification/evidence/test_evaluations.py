"""Evaluations in a training log (ftqual.verification.evidence.evaluations, train_log's results lines): the
iteration each followed, its `evaluate` timer and its window, the eval step measured against the step
timeout, the evaluation taken out of the out-of-section interval; and no evaluation where none was printed."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.evaluations import evaluation_spans
from ftqual.verification.evidence.sections import configured_evaluation, cycle_sections
from ftqual.verification.evidence.train_log import parse_train_log

T0 = datetime(2026, 12, 6, 10, 0, 0)
REL = "logs/train_cycle0.log"


def _stamp(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f")


def _iteration(i: int, at: float, elapsed_ms: float = 500.0, total: int = 12) -> str:
    """Megatron core_v0.19's iteration line, from the last rank (1)."""
    return (
        f"1:  [{_stamp(at)}] iteration {i:8d}/{total:8d} | consumed samples: {8 * i:12d} | elapsed time per "
        f"iteration (ms): {elapsed_ms:.1f} | learning rate: 1.000000E-04 | global batch size:     8 | "
        "lm loss: 4.200000E+00 | loss scale: 1.0 | grad norm: 0.500 | number of skipped iterations:   0 | "
        "number of nan iterations:   0 |"
    )


def _evaluation(i: int, timer_ms: float, on: str = "") -> list[str]:
    text = (
        f" validation loss at iteration {i}{on} | lm loss value: 4.215212E+00 | lm loss PPL: 6.770851E+01 | "
    )
    dashes = "-" * (len(text) + 1)
    return [
        "1: INFO:megatron.core.timers:(min, max) time across ranks (ms):",
        f"1:     {'evaluate '.ljust(48, '.')}: ({timer_ms - 50:.2f}, {timer_ms:.2f})",
        f"1: {dashes}",
        f"1: {text}",
        f"1: {dashes}",
    ]


def _log(tmp_path: Path, evaluate: bool = True, warmup: int = 0) -> Path:
    """12 iterations of 0.5 s on 2 ranks, evaluating every 3 with 2 eval iters; the evaluation after 3
    takes 3.0 s, the others 1.2 s; a save (0.2 s synchronous) after 3 and 9, the next iteration line after
    it; the final evaluations after training."""
    lines = [
        "0: ------------------------ arguments ------------------------",
        "0:   eval_interval ................................... 3",
        "0:   eval_iters ...................................... 2",
        f"0:   ft_num_warmup_iters ............................. {warmup}",
        "0:   log_interval .................................... 1",
        "0: -------------------- end of arguments ---------------------",
        "0: > building train, validation, and test datasets ...",
        "0:     validation: 96",
        f"0: [after in-job setup and before initialize_megatron] datetime: {_stamp(0)} ",
    ]
    t = 1.0
    for i in range(1, 13):
        lines.append(_iteration(i, t))
        after = t + 0.1  # the logging after the step
        if i % 3 == 0 and evaluate:
            took = 3.0 if i == 3 else 1.2
            lines += _evaluation(i, took * 1000)
            after += took + 0.1
        if i in (3, 9):
            lines.append(
                f"0: [{_stamp(after)}] saving checkpoint at iteration {i:7d} to /ck in torch_dist format"
            )
            lines.append(
                f"0:   [{_stamp(after + 0.2)}] scheduled an async checkpoint save at iteration {i:7d} to /ck"
            )
            after += 0.2
        t = after + 0.5
    lines.append(f"0: [after training is done] datetime: {_stamp(t)} ")
    if evaluate:
        lines += _evaluation(12, 1200.0, " on validation set") + _evaluation(12, 1300.0, " on test set")
    lines.append("0: FT: closed.")
    path = tmp_path / "train_cycle0.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def _parse(path: Path):
    return parse_train_log(path, REL, 0, Clock())


def _snap(log, evaluation=None):
    return SimpleNamespace(
        launcher=None,
        cycles=None,
        meta=SimpleNamespace(evaluation=evaluation),
        train_logs=(log,),
        ok=lambda name: True,
    )


def test_each_evaluation_with_its_iteration_timer_and_window(tmp_path):
    log = _parse(_log(tmp_path))
    assert [(e.iteration, e.on) for e in log.evaluations] == [
        (3, None),
        (6, None),
        (9, None),
        (12, None),
        (12, "validation"),
        (12, "test"),
    ]
    spans = evaluation_spans(log)
    first = spans[0]
    assert first.steps == 2  # the log's eval_iters
    assert first.timer_s == pytest.approx(3.0)
    # iteration 3's line (t=2.0) -> the save's `saving checkpoint` line (t=5.2): the upper bound
    assert first.window_s == pytest.approx(3.2, abs=1e-6)
    assert first.training_s is None
    assert first.step_s == pytest.approx(1.5) and first.step_bound == "mean"
    # after 6 the next timestamped line is iteration 7's: its interval (0.5 s) is training inside the window
    second = spans[1]
    assert second.window_s == pytest.approx(1.9, abs=1e-6)
    assert second.training_s == pytest.approx(0.5)
    lines = [ref.line for ref in second.evidence]
    assert lines == sorted(lines) and len(lines) == 4  # iteration 6, the timer, the results, iteration 7
    # pretrain()'s evaluations: from the `after training is done` milestone; the test set's has no window
    final_valid, final_test = spans[4], spans[5]
    assert final_valid.on == "validation" and final_valid.window_s is None  # nothing timestamped after it
    assert final_test.timer_s == pytest.approx(1.3)


def test_eval_steps_meet_the_step_timeout_and_leave_the_out_of_section_interval(tmp_path):
    log = _parse(_log(tmp_path))
    cycle = cycle_sections(_snap(log), log)
    assert cycle.eval_step is not None
    assert cycle.eval_step.seconds == pytest.approx(1.5)  # 3.0 s over 2 eval steps
    assert cycle.eval_step.what == "evaluation step at iteration 3"
    assert cycle.eval_step in cycle.by_section()["step"]
    assert cycle.as_dict()["eval_step"]["what"] == "evaluation step at iteration 3"
    # iteration 3 -> 4: 3.9 s, less the save's 0.2 s and the evaluation's 3.0 s
    assert cycle.out_of_section.seconds == pytest.approx(0.7, abs=1e-3)


def test_eval_steps_out_of_any_section_stay_in_the_out_of_section_figure(tmp_path):
    """--ft-num-warmup-iters 5: an evaluation's first 5 eval steps run outside every section."""
    log = _parse(_log(tmp_path, warmup=5))
    cycle = cycle_sections(_snap(log), log)
    assert cycle.out_of_section.seconds == pytest.approx(3.7, abs=1e-3)


def test_no_evaluation_is_invented(tmp_path):
    """Negative control: the job's arguments name an evaluation and the log speaks of a validation set, but
    no results line was printed: no evaluation, no eval-step figure, the verify.json keys unchanged."""
    log = _parse(_log(tmp_path, evaluate=False))
    assert log.evaluations == ()
    assert evaluation_spans(log) == ()
    cycle = cycle_sections(_snap(log), log)
    assert cycle.eval_step is None
    assert "eval_step" not in cycle.as_dict()
    assert len(cycle.by_section()["step"]) == 2
    assert cycle.out_of_section.seconds == pytest.approx(0.6, abs=1e-3)


def test_the_evaluation_configured_reads_run_json_then_the_log(tmp_path):
    log = _parse(_log(tmp_path, evaluate=False))
    assert configured_evaluation(_snap(log, {"interval": 100, "iters": 10})) == (100, 10, "run.json")
    assert configured_evaluation(_snap(log)) == (3, 2, f"{REL}'s arguments")  # an older run.json
