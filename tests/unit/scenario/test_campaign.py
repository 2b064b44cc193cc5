"""The campaign scenario without a launch: the seeded plan, the launcher's and the config's refusals in one
line, the workflow's environment, and the wrapper's reading of the plan. The campaign itself runs end to end
in tests/integration/e2e/test_e2e_campaign.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from snakemake.utils import validate

from ftqual.launch import settings
from ftqual.rank.injector import Injector
from ftqual.rank.sections import SectionWatch
from ftqual.rank.worker import read_campaign_plan
from ftqual.scenario import campaign_plan, campaign_setup
from ftqual.scenario.model import ConfigError, launcher_env, resolve
from ftqual.verification.campaign.cycles import trend
from tests.unit.scenario.test_fault_catalog import SCHEMA, merged

REPO = Path(__file__).resolve().parents[3]
ENV = {"NVRX_CAMPAIGN_FAULTS": "8", "NVRX_CAMPAIGN_SEED": "3", "NVRX_CAMPAIGN_MTTI": "4"}


def launch_env(tmp_path, **extra) -> dict[str, str]:
    return {
        "NVRX_WORK_DIR": str(tmp_path),
        "NVRX_WORKLOAD": "smoke",
        "NVRX_DEMO_FAULT": "campaign",
        "TRAIN_ITERS": "30",
        "SAVE_INTERVAL": "2",
        **ENV,
        **extra,
    }


def test_a_seed_always_draws_the_same_plan_and_another_seed_another():
    one = campaign_setup.plan_from_env(ENV, "smoke", 2, 2)
    assert one == campaign_setup.plan_from_env(ENV, "smoke", 2, 2)
    assert one != campaign_setup.plan_from_env({**ENV, "NVRX_CAMPAIGN_SEED": "4"}, "smoke", 2, 2)
    assert [f.index for f in one.faults] == list(range(1, 9))
    arms = [f.arm_iteration for f in one.faults]
    assert all(b - a >= 2 and (b - a) % 2 == 0 for a, b in zip([0, *arms], arms, strict=False))
    assert {f.fault for f in one.faults} <= set(campaign_plan.SMOKE_KINDS)
    assert {f.rank for f in one.faults} <= {0, 1}


def test_the_plan_round_trips_through_its_file(tmp_path):
    plan = campaign_setup.plan_from_env(ENV, "smoke", 2, 2)
    campaign_plan.write(plan, tmp_path)
    back = campaign_plan.read(tmp_path)
    assert back.faults == plan.faults and back.seed == 3 and back.written_at is not None
    (tmp_path / campaign_plan.PLAN_JSON).write_text("{}")
    with pytest.raises(campaign_plan.PlanError, match="not a ftqual.campaign_plan/v1 plan"):
        campaign_plan.read(tmp_path)


def test_the_launcher_draws_the_plan_and_restarts_follow_from_k(tmp_path):
    s = settings.load_settings(launch_env(tmp_path))
    assert s.campaign is not None and s.campaign.count == 8 and s.injections == 8 and s.max_restarts == 8
    assert s.fault_rank is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"TRAIN_ITERS": "20"},
            "TRAIN_ITERS=20 is too short for the campaign: seed 3 plans 8 faults",
        ),
        ({"NVRX_MAX_RESTARTS": "3"}, "NVRX_MAX_RESTARTS=3 is below the campaign's 8 faults"),
        ({"NVRX_CAMPAIGN_KINDS": "kill,gpu_hang"}, "NVRX_CAMPAIGN_KINDS names gpu_hang, GPU-only"),
        ({"NVRX_CAMPAIGN_KINDS": "kill,crash"}, "NVRX_CAMPAIGN_KINDS must list some of"),
        ({"NVRX_INJECTIONS": "2"}, "NVRX_INJECTIONS does not apply to a campaign"),
    ],
)
def test_the_launcher_refuses_a_campaign_in_one_line(tmp_path, extra, message):
    with pytest.raises(settings.SettingsError) as err:
        settings.load_settings(launch_env(tmp_path, **extra))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    if "TRAIN_ITERS=20" in message:
        assert "set TRAIN_ITERS=28 (or more)" in str(err.value)


def test_campaign_settings_without_a_campaign_are_refused(tmp_path):
    env = {**launch_env(tmp_path), "NVRX_DEMO_FAULT": "kill"}
    with pytest.raises(settings.SettingsError, match="NVRX_CAMPAIGN_FAULTS applies only to NVRX_DEMO_FAULT"):
        settings.load_settings(env)


def test_campaign_yaml_validates_resolves_and_reaches_the_launcher():
    config = merged("config.yaml", "campaign.yaml")
    validate(config, SCHEMA)
    s = resolve(config, env={}).by_name["campaign"]
    assert (s.fault, s.rank, s.injections, s.max_restarts) == ("campaign", None, 10, 10)
    cfg = resolve(config, env={})
    env = launcher_env(cfg, s)
    assert env["NVRX_DEMO_FAULT"] == "campaign" and env["NVRX_CAMPAIGN_FAULTS"] == "10"
    assert env["NVRX_INJECTIONS"] == "1"


def test_a_campaign_too_long_for_its_run_is_refused_by_the_config():
    config = merged("config.yaml", "campaign.yaml", override={"scenarios": {"campaign": {"train_iters": 40}}})
    with pytest.raises(ConfigError, match="train_iters=40 is too short for the campaign"):
        resolve(config, env={})


def test_the_wrapper_reads_the_plan_and_refuses_a_malformed_one(tmp_path):
    plan = campaign_setup.plan_from_env(ENV, "smoke", 2, 2)
    path = campaign_plan.write(plan, tmp_path)
    faults = read_campaign_plan(path)
    assert [(f["fault"], f["rank"], f["arm_iteration"]) for f in faults] == [
        (f.fault, f.rank, f.arm_iteration) for f in plan.faults
    ]
    data = json.loads(path.read_text())
    data["faults"][2]["index"] = 7
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="entry 3 is malformed"):
        read_campaign_plan(path)


def test_the_worker_arms_a_campaign_fault_only_at_its_planned_checkpoint(tmp_path):
    injector = Injector(
        fault="kill",
        placement="step",
        tracker=tmp_path / "t",
        marker=tmp_path / "m",
        baseline=4,
        identity={},
        watch=SectionWatch(),
        arm_iteration=8,
        plan_index=3,
    )
    assert injector.on_tracker(6) is False and injector.armed_at is None
    assert injector.on_tracker(8) is True and injector.armed_at == 8


def test_the_trend_rule_flags_growth_beyond_its_tolerance():
    assert trend([2.0, 2.1, 2.0, 2.2, 2.1, 2.3], 0.5, 2.0)["grows"] is False
    assert trend([2.0, 2.1, 2.0, 5.0, 8.0, 9.0], 0.5, 2.0)["grows"] is True
    assert (
        trend([2.0, 2.1, 2.0, 5.5, 6.0], 0.5, 2.0)["grows"] is True
    )  # limit 5.05: both of the last two over


def test_one_slow_cycle_at_the_end_is_noise_not_growth():
    # 8 faults: a third is 2 cycles; one slow replacement start (18.3 s) carries their median to 12.3 s, over
    # the limit 5.2 * 1.5 + 2 = 9.8 s, yet the other stayed at 6.3 s: nothing accumulates
    t = trend([5.2, 5.3, 6.0, 5.9, 6.1, 6.2, 6.3, 18.3], 0.5, 2.0)
    assert t["last_third_median"] == 12.3 and t["limit"] == 9.875 and t["grows"] is False
    assert trend([5.2, 5.3, 6.0, 5.9, 6.1, 6.2, 10.0, 18.3], 0.5, 2.0)["grows"] is True


def test_the_campaign_markdown_shows_every_fault_on_one_time_axis():
    from ftqual.verification.campaign.text import campaign_markdown

    row = {
        "fault_index": 1,
        "fault": "hang",
        "rank": 0,
        "cycle": 0,
        "checkpoint_iteration": 2,
        "injected_at": "2026-12-02T15:00:00+00:00",
        "detection_s": 10.5,
        "detected_by": "section:step",
        "failure_to_first_step_s": 16.0,
        "restored_iteration": 2,
        "restart_s": 2.3,
        "checkpoint_load_s": None,
        "recovery_s": 5.5,
        "lost_iterations": 1,
        "alive_at_start": 0,
        "shm_segments": 0,
        "agent_open_fds": 28,
    }
    later = {**row, "fault_index": 2, "fault": "kill", "injected_at": "2026-12-02T15:00:30+00:00"}
    text = campaign_markdown({"run_id": "r", "campaign": {"seed": 3, "planned": 2, "cycles": [row, later]}})
    assert "| 1 | hang | 0 | 0 | 2 | 0.00 | 10.50 (section:step) | 16.00 | 2 |" in text
    assert "| 2 | kill | 0 | 0 | 2 | 30.00 |" in text
    assert campaign_markdown({"run_id": "r"}) == ""
