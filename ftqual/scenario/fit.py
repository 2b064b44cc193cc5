"""Whether a fault scenario fits the length its baseline measured: `scenario_problem`.

The baseline's run is measured elsewhere (ftqual.verification.evidence.finalize_lag.measure_baseline, a
`sizing.Baseline` of plain numbers); here a single fault is judged by ftqual.scenario.sizing's model and a
campaign by the plan the launcher will draw from the baseline's workload (ftqual.scenario.campaign_setup).
"""

from __future__ import annotations

from ftqual.contract import family_of
from ftqual.rank.ids import IN_SAVE_TIMINGS
from ftqual.scenario import campaign_setup
from ftqual.scenario.campaign_plan import PlanError
from ftqual.scenario.sizing import Baseline, sizing_problem


def scenario_problem(scenario, baseline: Baseline | None) -> str | None:
    """`sizing_problem` for a scenario (ftqual.scenario.model.Scenario) judged by what its baseline measured
    (None: nothing measured, nothing refused), and for `resume_from` the baseline's last completed
    checkpoint as the start. One line starting "refused before launch: ", or None."""
    if family_of(scenario.fault) == "none" or baseline is None:
        return None
    if family_of(scenario.fault) == "campaign" and scenario.campaign is not None:
        # The plan the launcher will draw: its default kinds are the workload's (the baseline ran the same
        # one), and another workload's kinds draw other faults at other iterations from the same seed.
        try:
            plan = campaign_setup.plan_from_env(
                scenario.campaign.env(), baseline.workload, scenario.world_size, scenario.save_interval
            )
        except PlanError:
            return None  # the config's own check says why
        lag = baseline.lag.iterations if baseline.lag is not None else 0
        problem = campaign_setup.sizing_problem(plan, scenario.train_iters, "train_iters", lag)
        return None if problem is None else f"refused before launch: {problem}"
    # A fault placed in a checkpointing section lands in the next save after the tracker passed, as an
    # in-save kill does: it needs that save to begin with training left.
    in_a_save = scenario.fault_timing in IN_SAVE_TIMINGS or scenario.hang_placement == "checkpointing"
    timing = "in_save" if in_a_save else scenario.fault_timing
    start = baseline.last_completed_save if scenario.resume_from else 0
    problem = sizing_problem(
        scenario.train_iters, start, scenario.save_interval, scenario.injections, timing, baseline.lag
    )
    return None if problem is None else f"refused before launch: {problem}"
