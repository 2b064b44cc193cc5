"""The goodput projection against hand-computed numbers."""

from __future__ import annotations

import math

import pytest

from ftqual.verification.campaign.goodput import (
    DEFAULT_MTBF,
    FALLBACK_INTERVAL_S,
    GoodputInputs,
    MtbfPoint,
    inputs_from_metrics,
    project,
    young_interval,
)


def test_given_interval_hand_computed():
    # detect 1 s, restart 29 s, saves block 2 s every 600 s, MTBF 1 h:
    # t_lost = 300 s, t_ckpt = 3600/600 * 2 = 12 s, waste = 1 + 29 + 300 + 12 = 342 s, goodput = 1 - 342/3600
    p = project(GoodputInputs(1.0, 29.0, 2.0, "given", ckpt_interval_s=600.0), MtbfPoint(1.0))
    assert p.mtbf_s == 3600.0
    assert p.t_lost_s == 300.0 and p.t_ckpt_s == 12.0 and p.waste_s == 342.0
    assert p.goodput == pytest.approx(0.905)
    assert p.interval_source == "given"


def test_young_interval_hand_computed():
    # tau* = sqrt(2 * 2 s * 3600 s) = 120 s; t_lost = t_ckpt = 60 s; goodput = 1 - (1 + 29 + 60 + 60)/3600
    assert young_interval(2.0, 3600.0) == pytest.approx(120.0)
    p = project(GoodputInputs(1.0, 29.0, 2.0, "measured"), MtbfPoint(1.0, 8))
    assert p.interval_s == pytest.approx(120.0)
    assert p.t_lost_s == pytest.approx(60.0) and p.t_ckpt_s == pytest.approx(60.0)
    assert p.goodput == pytest.approx(1 - 150.0 / 3600.0)
    assert p.gpus == 8


def test_default_mtbf_are_the_published_figures():
    assert [(p.hours, p.gpus) for p in DEFAULT_MTBF] == [(7.9, 1024), (1.8, 16384)]


def test_kill_fixture_numbers():
    # the recorded kill run: detection 0.102 s, fault -> first step 31.585 s; a save blocking 0.3 s
    inputs, why = inputs_from_metrics(
        {"detection_s": 0.102, "failure_to_first_step_s": 31.585}, 0.3, "given", None, 0.37
    )
    assert why is None and inputs.t_restart_s == pytest.approx(31.483)
    p = project(inputs, MtbfPoint(7.9, 1024))
    tau = math.sqrt(2 * 0.3 * 7.9 * 3600)
    expected = 1 - (0.102 + 31.483 + tau / 2 + 7.9 * 3600 / tau * 0.3) / (7.9 * 3600)
    assert p.goodput == pytest.approx(expected)
    assert 0.99 < p.goodput < 0.995


def test_no_blocking_time_falls_back_to_a_stated_interval():
    p = project(GoodputInputs(0.1, 30.0, None, "not measured"), MtbfPoint(2.0))
    assert p.interval_s == FALLBACK_INTERVAL_S and p.t_ckpt_s == 0.0
    assert p.interval_source.startswith("assumed")


def test_waste_larger_than_mtbf_clamps_to_zero():
    p = project(GoodputInputs(600.0, 600.0, 0.0, "given", ckpt_interval_s=3600.0), MtbfPoint(0.5))
    assert p.goodput == 0.0


def test_missing_measurements_say_why():
    inputs, why = inputs_from_metrics({"detection_s": 0.1}, None, "", None, None)
    assert inputs is None and why == "not measured: failure_to_first_step_s"
