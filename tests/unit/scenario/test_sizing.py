"""ftqual.scenario.sizing (the model) and ftqual.scenario.fit (a scenario judged by it): a fault scenario is
either long enough for its faults to be certain to come, or refused before launch with the length it needs;
the finalize lag is measured from recorded H200 baselines (ftqual.verification.evidence.finalize_lag)."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from ftqual.scenario import fit, sizing
from ftqual.scenario import model as scenarios
from ftqual.verification.evidence.finalize_lag import finalize_lag, measure_baseline
from ftqual.verification.evidence.snapshot import build_snapshot

DATA = Path(__file__).resolve().parents[2] / "data"


def simulate(train_iters: int, start: int, interval: int, injections: int, timing: str, lag: int) -> bool:
    """The arming rules of the worker wrapper (workloads/megatron_gpt_worker.py) on a stack whose async saves
    complete `lag` iterations after they begin (an unfinished save is completed by the end-of-training
    flush, after the last step). True when every injection arms with a step after it and the recovery after
    the last one reaches a later checkpoint."""
    restore = start
    for _ in range(injections):
        saves = range(restore + interval, train_iters + 1, interval)
        completed_at = {s: s + lag for s in saves}  # the iteration after which the tracker names s

        def tracker(after: int, saves=saves, completed_at=completed_at, restore=restore) -> int:
            return max((s for s in saves if completed_at[s] <= after), default=restore)

        armed = None
        if timing == "checkpoint":
            # at the start of step t+1 the tracker is read: armed once it passed the cycle's restore point
            armed = next((t for t in range(restore, train_iters) if tracker(t) > restore), None)
        else:
            # at the end of save s's checkpointing section: tracker past the restore point, s still in flight
            for s in saves:
                if s < train_iters and tracker(s) > restore and completed_at[s] > s:
                    armed = s
                    break
        if armed is None:
            return False
        restore = tracker(armed)  # the replacement resumes from the newest completed checkpoint
    return restore + interval <= train_iters  # a later checkpoint (the final one is flushed at the end)


@pytest.mark.parametrize("timing", ["checkpoint", "in_save"])
def test_every_length_is_either_certain_to_fault_or_refused(timing):
    """The property, over a grid of settings and lags: at or above needed_train_iters the model arms every
    fault and recovers to a later checkpoint; refusals are tight for `checkpoint` (one less would not)."""
    for start, interval, injections, lag in itertools.product(
        (0, 10, 30), (1, 2, 5, 7), (1, 2, 3), range(0, 16)
    ):
        if timing == "in_save" and (injections > 1 or lag == 0):
            continue  # in_save is one kill of a save in flight
        needed = sizing.needed_train_iters(start, interval, injections, timing, lag)
        for train_iters in range(needed, needed + 2 * interval + 1):
            assert simulate(train_iters, start, interval, injections, timing, lag), (
                start, interval, injections, lag, train_iters,
            )  # fmt: skip
        if timing == "checkpoint":
            assert not simulate(needed - 1, start, interval, injections, timing, lag)


def test_the_lag_of_recorded_h200_baselines():
    """On one H200 (and two) a save of a small GPT completes only when the next one begins: 5 iterations."""
    for rel in ("megatron-h200-1gpu/baseline", "megatron-h200x2-extended/baseline"):
        lag = finalize_lag(build_snapshot(DATA / rel).train_log(0))
        assert lag is not None and lag.iterations == 5, rel
        assert lag.reached_iteration == lag.save_iteration + 5
        assert "successfully saved checkpoint from iteration" in lag.text


def problem_of(run_dir, s):
    """What the run step asks: the baseline measured once, the scenario judged by that measurement."""
    return fit.scenario_problem(s, measure_baseline(run_dir))


def scenario(name, **settings):
    raw = {
        "scenarios": {
            "baseline": {"fault": "none"},
            "kill": {"fault": "kill"},
            "hang": {"fault": "hang", "enabled": False},
            "resume_existing": {"fault": "kill", "resume_from": "baseline"},
        },
        "train_iters": 30,
        "save_interval": 5,
    }
    cfg = scenarios.resolve(raw, env={})
    return replace(cfg.by_name[name], **settings)


def test_resume_existing_as_it_failed_on_one_h200_is_refused_with_the_length_it_needs():
    """The field report: resume from the baseline's checkpoint 30 with 40 iterations; the save at 35 was
    finalized only at the end with 40, so the fault never came. Refused before launch, naming 41."""
    run_dir = DATA / "megatron-h200-1gpu" / "baseline"
    old_default = scenario("resume_existing", train_iters=40)
    problem = problem_of(run_dir, old_default)
    assert problem is not None and problem.startswith("refused before launch: train_iters 40 is too short")
    assert "only after iteration 10 (a finalize lag of 5 iterations) [logs/train_cycle0.log:1057]" in problem
    assert "set train_iters: 41 (or more)" in problem and "\n" not in problem
    # the default is now three intervals past the baseline: it fits
    assert scenario("resume_existing").train_iters == 45
    assert problem_of(run_dir, scenario("resume_existing")) is None
    # the walkthrough's kill at 30 iterations fits too; at 10 it could not fault with a step after it
    assert problem_of(run_dir, scenario("kill")) is None
    assert "set train_iters: 11" in problem_of(run_dir, scenario("kill", train_iters=10))
    assert problem_of(run_dir, scenario("baseline")) is None


def test_without_a_measured_lag_the_static_rule_holds():
    assert sizing.sizing_problem(10, 0, 5, 1, "checkpoint", None) is None
    assert "set train_iters: 15" in sizing.sizing_problem(10, 0, 5, 2, "checkpoint", None)


def test_an_unusable_baseline_run_json_judges_nothing(tmp_path):
    """A baseline run directory whose run.json broke after its verdict (a hand edit, a partial copy): the
    sizing has nothing measured to judge by, so it refuses nothing, and never raises."""
    (tmp_path / "run.json").write_text('{"schema": "ftqual.run/v1", "fault": "meteor"}')
    cfg = scenarios.resolve({"scenarios": {"baseline": {"fault": "none"}, "kill": {"fault": "kill"}}}, env={})
    assert measure_baseline(tmp_path) is None
    assert problem_of(tmp_path, cfg.by_name["kill"]) is None


def test_a_campaign_is_sized_by_the_plan_its_own_workload_draws(tmp_path):
    """The launcher draws the plan from the workload's kinds; sizing against the baseline must draw the
    same one. Seed 3's 4 faults end at checkpoint 12 on smoke, at 24 with megatron's kinds (GPU ones too)."""
    import json
    import shutil

    campaign = {
        "fault": "campaign",
        "train_iters": 16,
        "save_interval": 2,
        "campaign": {"faults": 4, "seed": 3},
    }
    raw = {
        "scenarios": {
            "baseline": {"fault": "none"},
            "campaign": {**campaign, "campaign": {"mtti": 4, **campaign["campaign"]}},
        }
    }
    s = scenarios.resolve(raw, env={}).by_name["campaign"]
    run_dir = shutil.copytree(DATA / "megatron-h200-1gpu" / "baseline", tmp_path / "baseline")
    assert "checkpoint of iteration 24" in problem_of(run_dir, s)
    meta = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**meta, "workload": "smoke"}))
    # the same seed on smoke: the last fault at 12, which this H200 baseline's finalize lag stretches to 18
    assert "checkpoint of iteration 12" in problem_of(run_dir, s)
