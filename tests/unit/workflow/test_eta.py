"""How long is left (ftqual.workflow.eta), by hand, and the progress line that carries it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from ftqual.workflow import eta


@dataclass
class Timeouts:
    step: float = 60.0

    def as_dict(self) -> dict[str, float]:
        return {"step": self.step}


@dataclass
class Scenario:
    name: str
    fault: str
    train_iters: int = 100
    save_interval: int = 10
    injections: int = 1
    timeouts: Timeouts = field(default_factory=Timeouts)


PACE = eta.Pace(s_per_iteration=0.5, startup_s=20.0)


def test_a_scenario_by_hand():
    assert eta.scenario_s(Scenario("baseline", "none"), PACE) == pytest.approx(20 + 100 * 0.5)
    # a crash: 1 s to detect, a restart's start-up, half a save interval replayed
    assert eta.scenario_s(Scenario("kill", "kill"), PACE) == pytest.approx(70 + 1 + 20 + 10 * 0.5 / 2)
    # a hang: the step timeout and the monitor's interval
    assert eta.scenario_s(Scenario("hang", "hang"), PACE) == pytest.approx(70 + 65 + 20 + 2.5)
    assert eta.scenario_s(Scenario("k3", "kill", injections=3), PACE) == pytest.approx(70 + 3 * 23.5)


def test_what_is_left_of_a_run_and_of_the_workflow(tmp_path):
    hang = Scenario("hang", "hang")
    assert eta.run_left_s(hang, PACE, 40, injected=False, detected=False) == pytest.approx(60 * 0.5 + 87.5)
    assert eta.run_left_s(hang, PACE, 40, injected=True, detected=True) == pytest.approx(30.0)
    results = tmp_path / "results"
    (results / "baseline" / "abc-1").mkdir(parents=True)
    metrics = {"iterations_per_s": 4.0, "time_to_first_step_s": 12.0}
    (results / "baseline" / "abc-1" / "verify.json").write_text(json.dumps({"metrics": metrics}))
    assert eta.baseline_pace(results, "baseline") == eta.Pace(0.25, 12.0)
    keys = {"baseline": "abc", "kill": "def", "hang": "ghi"}
    assert eta.pending(results, keys, "hang") == ["kill"]
    # a verdict under other settings (another key) is not this run's: the baseline is still to run
    assert eta.pending(results, {**keys, "baseline": "abd"}, "hang") == ["baseline", "kill"]
    assert (
        eta.phrase(75, 30, 600)
        == "75 s elapsed; about 30 s left in this scenario, about 10 min in the workflow"
    )


def test_the_iteration_line_carries_the_estimate(tmp_path):
    from ftqual.workflow import progress
    from ftqual.workflow.run_scenario import Say, show_progress

    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    line = (
        "0:  [2026-12-06 10:00:00.000000] iteration        4/      20 | consumed samples:            8 | "
        "elapsed time per iteration (ms): 500.0 | learning rate: 1.000000E-04 | global batch size:     2 |"
    )
    (run / "logs" / "train_cycle0.log").write_text(line + "\n")
    log, console = tmp_path / "rule.log", tmp_path / "console.txt"
    with open(log, "w") as fh, open(console, "w") as out:
        show_progress(Say("kill", fh, out), progress.Watcher(run), {}, lambda: "9 s elapsed; about 8 s left")
    said = console.read_text()
    assert "iteration 4/20 (0.50 s/it); 9 s elapsed; about 8 s left" in said, said
