"""Plots a reader trusts: series that coincide told apart, a panel without data saying why."""

from __future__ import annotations

from ftqual.report import plots


def test_coinciding_loss_series_get_their_own_marker_offset_and_width():
    kill, hang = plots.loss_style(0, 2, 0), plots.loss_style(1, 2, 0)
    assert kill["marker"] != hang["marker"]
    assert kill["markevery"] != hang["markevery"]  # markers never on the same points
    assert kill["linewidth"] > hang["linewidth"]  # the one drawn first stays visible underneath


def test_a_rates_panel_of_tiny_saves_says_why_instead_of_plotting_zero():
    note = plots.too_small_to_rate([4_096, 8_192])
    assert note is not None and "too small to rate" in note and "smoke workload" in note
    assert plots.too_small_to_rate([4_096, 18_423_668_783]) is None  # a real checkpoint is rated
    assert plots.too_small_to_rate([]) is None


def test_the_checkpoints_plot_of_a_smoke_run_still_draws(tmp_path):
    kill = {
        "saves": [{"iteration": 4, "bytes": 5000, "gbps": 0.0004}],
        "restarts": [{"cycle": 1, "detection_s": 0.2, "load_s": 0.1}],
    }
    section = {"by_scenario": {"kill": kill}}
    plots.render_checkpoints(section, tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
