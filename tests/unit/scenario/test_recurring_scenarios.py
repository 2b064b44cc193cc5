"""config/recurring_faults.yaml resolves over config/config.yaml: the three faults that come back, each with
max_restarts 5 (NVRx's no-progress stop comes first) and synchronous saves, the curable control with two
injections; a recurring fault never takes an injection count, and no campaign ever draws one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from ftqual.contract import RANK_FAULTS, RECURRING_FAULTS, family_of
from ftqual.scenario import campaign_setup
from ftqual.scenario import model as scenarios
from ftqual.scenario.model import ConfigError

REPO = Path(__file__).resolve().parents[3]


def merged(*names: str) -> dict:
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    return config


def test_the_recurring_config_resolves_after_the_default_three():
    cfg = scenarios.resolve(merged("config.yaml", "recurring_faults.yaml"), env={})
    names = [s.name for s in cfg.scenarios]
    assert names == ["baseline", "kill", "hang", *RECURRING_FAULTS, "flaky_exception"]
    for fault in RECURRING_FAULTS:
        s = cfg.by_name[fault]
        assert (s.fault, s.rank, s.max_restarts, s.async_save, s.injections) == (fault, 1, 5, False, 1)
        assert family_of(s.fault) == "recurring"
    control = cfg.by_name["flaky_exception"]
    assert (control.fault, control.injections, control.injections * control.save_interval) == (
        "exception",
        2,
        10,
    )
    assert control.injections * control.save_interval < control.train_iters


def test_a_recurring_fault_never_takes_an_injection_count():
    raw = merged("config.yaml")
    raw["scenarios"]["loop"] = {"fault": "nan_loss", "rank": 1, "injections": 2}
    with pytest.raises(ConfigError, match="nan_loss comes back in every cycle by itself"):
        scenarios.resolve(raw, env={})


def test_no_campaign_draws_a_recurring_fault():
    assert not set(RECURRING_FAULTS) & set(RANK_FAULTS)
    assert not set(RECURRING_FAULTS) & set(campaign_setup.default_kinds("megatron"))
