"""Reading the workflow config: YAML/JSON, defaults, environment fallbacks, scenario overrides, bad input."""

from __future__ import annotations

import json

import pytest

from ftqual.preflight.config import ConfigError, load_config, parse_config


def test_yaml_and_json_read_the_same(tmp_path):
    data = {
        "workload": "megatron",
        "megatron_path": "/opt/mlm",
        "gpus_per_node": 1,
        "scenarios": {"kill": {"fault": "kill", "rank": 0}},
    }
    (tmp_path / "c.json").write_text(json.dumps(data))
    (tmp_path / "c.yaml").write_text(
        "workload: megatron\nmegatron_path: /opt/mlm\ngpus_per_node: 1\n"
        "scenarios:\n  kill: {fault: kill, rank: 0}\n"
    )
    assert load_config(tmp_path / "c.json", env={}) == load_config(tmp_path / "c.yaml", env={})


def test_defaults_are_the_workflow_schema_defaults():
    cfg = parse_config({}, env={})
    assert cfg.workload == "smoke" and cfg.nnodes == 1 and cfg.gpus_per_node == 2
    assert [s.name for s in cfg.scenarios] == ["baseline", "kill", "hang"]
    assert cfg.work_dir is None  # empty: the workflow's working directory


def test_megatron_path_falls_back_to_the_environment():
    cfg = parse_config({"workload": "megatron", "megatron_path": ""}, env={"MEGATRON_PATH": "/opt/mlm"})
    assert cfg.megatron_path == "/opt/mlm" and cfg.megatron_path_source == "env MEGATRON_PATH"
    assert parse_config({"megatron_path": ""}, env={}).megatron_path_source == "unset"


def test_scenario_overrides_and_the_resolved_form():
    # The workflow's preflight rule passes every scenario fully resolved (rules/common.smk).
    raw = {
        "timeouts": {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180},
        "scenarios": {
            "baseline": {"fault": "none", "rank": None, "world_size": 2},
            "hang_slow": {"fault": "hang", "timeouts": {"step": 30}, "gpus_per_node": 4, "rank": 3},
        },
    }
    cfg = parse_config(raw, env={})
    base, hang = cfg.scenarios
    assert base.rank is None and base.timeouts.step == 120
    assert hang.timeouts.step == 30 and hang.timeouts.setup == 900 and hang.world_size == 4


def test_fault_rank_defaults_to_the_seeds_one():
    cfg = parse_config({"scenarios": {"kill": {"fault": "kill"}}}, env={})
    assert cfg.scenarios[0].rank == 1


def test_scenario_table_tsv_replaces_config_scenarios(tmp_path):
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text("workload: smoke\n")
    table = tmp_path / "scenarios.tsv"
    table.write_text("name\tfault\trank\ttrain_iters\nbase\tnone\t\t20\nkill0\tkill\t0\t30\n")
    cfg = load_config(cfg_path, table, env={})
    assert [(s.name, s.fault, s.rank, s.train_iters) for s in cfg.scenarios] == [
        ("base", "none", None, 20),
        ("kill0", "kill", 0, 30),
    ]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"nnodes": "two"}, "nnodes must be an integer"),
        ({"workload": "gpu"}, "workload must be one of smoke|megatron"),
        ({"dist_optimizer": "maybe"}, "dist_optimizer must be one of"),
        ({"timeouts": {"step": "slow"}}, "timeouts.step must be a number"),
        ({"timeouts": {"warmup": 5}}, "timeouts.warmup is not one of"),
        ({"scenarios": {"kill": "yes"}}, "scenarios.kill must be a mapping"),
        ({"gpus_per_node": 0}, "gpus_per_node must be a positive integer"),
    ],
)
def test_bad_types_are_one_line_config_errors(raw, words):
    with pytest.raises(ConfigError, match=words) as info:
        parse_config(raw, env={})
    assert "\n" not in str(info.value)


def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: [smoke\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config(listed)
