"""config/exact_faults.yaml resolves over config/config.yaml: the four faults that break exactness silently,
each a negative control that expects checkpoint_equal to fail; the megatron workload refuses them (its save
and restore call no hooks), and no campaign ever draws one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from ftqual.contract import EXACTNESS_FAULTS, family_of
from ftqual.scenario import campaign_setup
from ftqual.scenario import model as scenarios
from ftqual.scenario.model import ConfigError

REPO = Path(__file__).resolve().parents[3]


def merged(*names: str) -> dict:
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    return config


def test_the_exact_faults_config_resolves_after_the_default_three():
    cfg = scenarios.resolve(merged("config.yaml", "exact_faults.yaml"), env={})
    assert [s.name for s in cfg.scenarios] == ["baseline", "kill", "hang", *EXACTNESS_FAULTS]
    for fault in EXACTNESS_FAULTS:
        s = cfg.by_name[fault]
        assert (s.fault, s.rank, s.async_save, s.expect) == (fault, 1, False, "fail")
        assert tuple(s.expect_failing) == ("checkpoint_equal",)
        assert family_of(s.fault) == "exactness"


def test_the_megatron_workload_refuses_them_in_one_line():
    config = merged("config.yaml", "exact_faults.yaml")
    config["workload"] = "megatron"
    config["megatron_path"] = "/nonexistent"
    with pytest.raises(ConfigError, match="stale_save acts through the save and restore hooks"):
        scenarios.resolve(config, env={})


def test_no_campaign_draws_them():
    for workload in ("smoke", "megatron"):
        assert not set(EXACTNESS_FAULTS) & set(campaign_setup.default_kinds(workload))
