"""exact_replay: bitwise equality of every printed figure after the restore, the loss-accumulator finding."""

from __future__ import annotations

import pytest

from ftqual.verification.checks.exact import QUIRK, differing, is_mean, judge
from ftqual.verification.evidence.figures import Printed, figures_of
from ftqual.verification.evidence.model import Ref

MEGATRON = (
    "0:  [2026-11-29 15:36:36.236830] iteration        6/      30 | consumed samples:            6 | elapsed "
    "time per iteration (ms): 1556.0 | learning rate: 6.000000E-05 | global batch size:     1 | lm loss: "
    "6.439997E+00 | loss scale: 1.0 | grad norm: 6.359 | num zeros: 0.0 | number of skipped iterations: "
    "  0 | number of nan iterations:   0 |"
)
K = 5
LOSSES = {6: "6.439997E+00", 7: "6.399268E+00", 8: "6.350000E+00", 9: "6.300000E+00"}


def line(iteration: int, **figures: str) -> Printed:
    values = {
        "loss": LOSSES[iteration],
        "grad norm": "6.359",
        "learning rate": "6.000000E-05",
        "loss scale": "1.0",
        "skipped iterations": "0",
        "nan iterations": "0",
    }
    values.update({name.replace("_", " "): text for name, text in figures.items()})
    return Printed(
        iteration, tuple(values.items()), Ref("logs/train_cycle1.log", iteration, f"it {iteration}")
    )


def baseline() -> dict[int, Printed]:
    return {it: line(it) for it in LOSSES}


def test_figures_of_reads_every_figure_megatron_prints_as_text():
    assert dict(figures_of(MEGATRON)) == {
        "loss": "6.439997E+00",
        "grad norm": "6.359",
        "learning rate": "6.000000E-05",
        "loss scale": "1.0",
        "skipped iterations": "0",
        "nan iterations": "0",
        "zeros in grads": "0.0",
    }


def test_a_bitwise_equal_recovery_passes():
    result = judge(baseline(), baseline(), K, (K,), "base")
    assert result.status == "pass"
    assert result.values["exact"] == "bitwise"
    assert result.values["compared_iterations"] == 4


@pytest.mark.parametrize(
    ("figure", "printed", "expected"),
    [
        ("loss", "6.439998E+00", "6.439997E+00"),
        ("grad_norm", "6.360", "6.359"),
        ("learning_rate", "5.999500E-05", "6.000000E-05"),
        ("loss_scale", "0.5", "1.0"),
        ("skipped_iterations", "1", "0"),
        ("nan_iterations", "1", "0"),
    ],
)
def test_any_figure_that_differs_fails_naming_the_first_iteration_and_figure(figure, printed, expected):
    ours = baseline()
    ours[6] = line(6, **{figure: printed})
    result = judge(ours, baseline(), K, (K,), "base")
    assert result.status == "fail"
    first = result.values["first_difference"]
    assert (first["iteration"], first["figure"], first["printed"], first["baseline"]) == (
        6,
        figure.replace("_", " "),
        printed,
        expected,
    )
    assert f"{figure.replace('_', ' ')} at K+1 (iteration 6): {printed} against {expected}" in result.detail


def test_no_tolerance_and_no_transient_window():
    """A last-digit difference at K+2 with every later line equal is what the tolerance check forgives: the
    exact check fails it (it is not the mean of K+1 and K+2)."""
    ours = baseline()
    ours[7] = line(7, loss="6.399269E+00")
    result = judge(ours, baseline(), K, (K,), "base")
    assert result.status == "fail"
    assert result.values["first_difference"]["after_restore"] == 2


def test_the_loss_accumulator_quirk_is_named_as_a_finding_of_the_stack():
    ours = baseline()
    ours[7] = line(7, loss="6.419632E+00")  # (6.439997 + 6.399268) / 2 = 6.4196325
    result = judge(ours, baseline(), K, (K,), "base")
    assert result.status == "pass"
    assert result.values["exact"] == "bitwise_except_stack_finding"
    assert result.values["stack_finding"]["id"] == QUIRK
    assert result.values["stack_finding"]["iterations"] == [7]
    assert "finding of the stack" in " ".join(result.notes)


def test_a_mean_with_another_figure_differing_is_no_quirk():
    ours = baseline()
    ours[7] = line(7, loss="6.419632E+00", grad_norm="6.360")
    assert judge(ours, baseline(), K, (K,), "base").status == "fail"


def test_a_mean_anywhere_but_k_plus_2_is_no_quirk():
    ours = baseline()
    ours[8] = line(8, loss="6.374634E+00")  # the mean of 7 and 8, at K+3
    assert judge(ours, baseline(), K, (K,), "base").status == "fail"


def test_a_difference_after_the_quirk_still_fails():
    ours = baseline()
    ours[7] = line(7, loss="6.419632E+00")
    ours[9] = line(9, learning_rate="5.999500E-05")
    result = judge(ours, baseline(), K, (K,), "base")
    assert result.status == "fail"
    assert result.values["first_difference"]["iteration"] == 9


def test_iterations_the_baseline_lacks_are_inconclusive():
    ours = baseline()
    theirs = {it: p for it, p in baseline().items() if it < 9}
    assert judge(ours, theirs, K, (K,), "base").status == "inconclusive"


def test_is_mean_at_the_printed_precision():
    assert is_mean("6.419632E+00", "6.439997E+00", "6.399268E+00")
    assert not is_mean("6.419640E+00", "6.439997E+00", "6.399268E+00")
    assert not is_mean("6.399268E+00", "6.399268E+00", "6.399268E+00")  # equal: nothing to explain
    assert not is_mean("nan", "6.4", "6.3")


def test_a_figure_printed_by_one_line_only_differs():
    ours = line(6, zeros_in_grads="0.0")
    assert differing(ours, line(6)) == [("zeros in grads", "0.0", None)]
