"""The one scenario model (ftqual.scenario.model): defaults from the schema only, overrides, the rules the
schema
cannot express, the fingerprint, and a drift test per shipped config: the workflow, the preflight and the
launcher see the same settings."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from ftqual.rank.ids import CHECKPOINT_DAMAGES
from ftqual.scenario import config_problems
from ftqual.scenario import model as scenarios
from ftqual.scenario.model import ConfigError, resolve

REPO = Path(__file__).resolve().parents[3]
SHIPPED = [
    ("config.yaml",),
    ("config.yaml", "megatron-h200.yaml"),
    ("config.yaml", "megatron-h200.yaml", "megatron-h200-1gpu.yaml"),
    ("config.yaml", "timeouts.yaml"),
    ("config.yaml", "megatron-h200.yaml", "timeouts.yaml"),
    ("config.yaml", "megatron-h200.yaml", "megatron-h200-1.3b.yaml"),
    ("config.yaml", "megatron-h200.yaml", "job-example.yaml"),
]


def merged(*names: str) -> dict:
    """The config Snakemake holds for `--configfile` over the Snakefile's configfile (deep merge)."""
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    return config


def test_defaults_come_from_the_schema_only():
    schema = scenarios.load_schema()
    cfg = resolve({}, env={})
    top = schema["properties"]
    assert cfg.defaults.train_iters == top["train_iters"]["default"]
    assert cfg.defaults.timeouts.as_dict() == {k: float(v) for k, v in top["timeouts"]["default"].items()}
    assert [s.name for s in cfg.scenarios] == list(top["scenarios"]["default"])
    # the shipped config.yaml restates the schema's defaults: an empty config and it resolve alike
    assert resolve(merged("config.yaml"), env={}) == cfg


def test_overrides_merge_key_by_key_and_yaml_booleans_read_as_on_off():
    cfg = resolve(
        {
            "dist_optimizer": False,
            "smoke": {"step_seconds": 1.5},
            "scenarios": {
                "baseline": {"fault": "none"},
                "slow": {"fault": "hang", "timeouts": {"step": 30}, "dist_optimizer": True, "rank": 0},
            },
        },
        env={},
    )
    base, slow = cfg.scenarios
    assert base.dist_optimizer == "off" and slow.dist_optimizer == "on"
    assert slow.timeouts.step == 30 and slow.timeouts.setup == base.timeouts.setup
    assert base.smoke.step_seconds == 1.5 and base.smoke.save_seconds == 0.0  # the schema's other value
    assert base.rank is None and slow.rank == 0
    assert (
        resolve({"scenarios": {"baseline": {"fault": "none"}, "k": {"fault": "kill"}}}, env={})
        .by_name["k"]
        .rank
        == scenarios.DEFAULT_FAULT_RANK
    )


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"train_iter": 5}, "unknown setting"),
        ({"scenarios": {"baseline": {"fault": "none", "fault_rank": 1}}}, "unknown setting"),
        ({"train_iters": 1e23}, "is greater than the maximum of 10000000"),
        ({"scenarios": {"baseline": {"fault": "none"}, "n" * 65: {"fault": "kill"}}}, "is too long"),
        ({"timeouts": {"setup": 1, "step": 1e300, "checkpointing": 1, "out_of_section": 1}}, "maximum"),
        (
            {"scenarios": {"kill": {"fault": "kill"}}},
            "baseline_scenario 'baseline' is not an enabled scenario",
        ),
        ({"scenarios": {"baseline": {"fault": "kill"}}}, "must have fault: none"),
        ({"tp": 3, "gpus_per_node": 3}, "TP=3 must divide the model's 8 attention heads"),
        ({"pp": 3, "gpus_per_node": 3}, "PP=3 must divide the model's 4 layers"),
        ({"gpus_per_node": 3, "tp": 2}, "World size 3 (nnodes*gpus_per_node) must be divisible by tp*pp=2"),
        ({"scenarios": {"baseline": {"fault": "none"}, "k": {"fault": "kill", "rank": 2}}}, "use 0..1"),
    ],
)
def test_bad_configs_are_one_config_error(config, words):
    with pytest.raises(ConfigError, match="invalid config") as err:
        resolve(config, env={})
    assert words in str(err.value)


def snakemake_config(*overrides: dict) -> dict:
    """The config the Snakefile validates: config/config.yaml with `--configfile`/`--config` overrides
    merged as Snakemake merges them."""
    config = merged("config.yaml")
    for override in overrides:
        update_config(config, override)
    return config


@pytest.mark.parametrize(
    ("override", "lines"),
    [
        ({"train_iter": 5}, ["invalid config at train_iter: unknown setting; did you mean train_iters?"]),
        ({"train_iters": 0}, ["invalid config at train_iters: 0 is less than the minimum of 1"]),
        ({"workload": "gpu"}, ["invalid config at workload: 'gpu' is not one of smoke, megatron"]),
        (
            {"workload": "megatorn"},
            ["invalid config at workload: 'megatorn' is not a choice; did you mean megatron?"],
        ),
        (
            {"hang_placement": "later"},
            [
                "invalid config at hang_placement: 'later' is not one of step, immediate, checkpointing, "
                "out_of_section, setup"
            ],
        ),
        (
            {"scenarios": {"kill": {"fault": "kill", "rnak": 0}}},  # a typo inside a scenario
            ["invalid config at scenarios.kill.rnak: unknown setting; did you mean rank?"],
        ),
        (
            {"scenarios": {"kill": {"fault": "sigkill"}}},
            ["invalid config at scenarios.kill.fault: 'sigkill' is not a choice; did you mean kill?"],
        ),
        (
            {"scenarios": {"kill": {"fault": "sigkil"}}},
            [
                "invalid config at scenarios.kill.fault: 'sigkil' is not a choice; "
                "did you mean sigint or kill?"
            ],
        ),
        (
            {"timeouts": {"step": -5}},
            ["invalid config at timeouts.step: -5 is less than or equal to the minimum of 0"],
        ),
        (
            {
                "save_intervall": 5,
                "timeouts": {"step": -5},
                "scenarios": {"hang": {"fault": "hang", "rnak": 1}},
            },
            [
                "invalid config at save_intervall: unknown setting; did you mean save_interval?",
                "invalid config at scenarios.hang.rnak: unknown setting; did you mean rank?",
                "invalid config at timeouts.step: -5 is less than or equal to the minimum of 0",
            ],
        ),
        (
            {"smoke": {"step_seconds": {"a": "b" * 200}}},
            ["invalid config at smoke.step_seconds: {'a': '" + "b" * 50 + "... is not a number"],
        ),
    ],
)
def test_every_config_mistake_is_one_line_with_a_suggestion(override, lines):
    """What rules/common.smk prints (a line per mistake, all at once; the CLI test in
    tests/integration/workflow/test_workflow_dryrun.py shows them on the console, nothing planned)."""
    with pytest.raises(scenarios.ConfigError) as err:
        scenarios.resolve(snakemake_config(override), env={})
    assert list(err.value.problems) == lines
    assert str(err.value).splitlines() == lines


def test_the_schema_problems_do_not_dump_the_schema_or_the_config():
    config = snakemake_config({"scenarios": {"kill": {"fault": "kill", "rnak": 0}}})
    lines = config_problems.schema_problems(config, scenarios.load_schema())
    assert len(lines) == 1 and len(lines[0]) < 120


def test_impossible_fault_rank_is_rejected():
    """The rule the schema cannot express, as rules/common.smk resolves the config (a WorkflowError there)."""
    config = snakemake_config({"scenarios": {"kill": {"fault": "kill", "rank": 5}}})
    with pytest.raises(scenarios.ConfigError) as err:
        scenarios.resolve(config)
    # at the settings it names: the scenario's own rank and the top-level world
    assert "at scenarios.kill.rank, nnodes, gpus_per_node: rank 5 is outside the world of 2 rank(s)" in str(
        err.value
    )


def test_the_fingerprint_follows_exactly_the_settings_that_shape_a_run():
    cfg = resolve({}, env={})
    kill = cfg.by_name["kill"]
    same = dataclasses.replace(kill, name="renamed")
    assert cfg.fingerprint(same) == cfg.fingerprint(kill)
    for change in ({"train_iters": 21}, {"rank": 0}, {"term_timeout": 6}, {"hang_placement": "immediate"}):
        assert cfg.fingerprint(dataclasses.replace(kill, **change)) != cfg.fingerprint(kill), change
    # where runs go is not a setting of the run
    assert resolve({"work_dir": "/elsewhere"}, env={}).fingerprint(kill) == cfg.fingerprint(kill)
    # the smoke workload's pace shapes smoke runs only
    faster = dataclasses.replace(kill, smoke=scenarios.SmokeOptions(0.05, 0.0))
    assert cfg.fingerprint(faster) != cfg.fingerprint(kill)
    mega = resolve({"workload": "megatron", "megatron_path": "/opt/mlm"}, env={})
    assert mega.fingerprint(faster) == mega.fingerprint(kill)
    assert mega.fingerprint(kill) != cfg.fingerprint(kill)


def test_megatron_path_falls_back_to_the_environment():
    cfg = resolve({"workload": "megatron"}, env={"MEGATRON_PATH": "/opt/mlm"})
    assert (cfg.megatron_path, cfg.megatron_path_source) == ("/opt/mlm", "env MEGATRON_PATH")
    assert resolve({"workload": "megatron"}, env={}).megatron_path_source == "unset"


def test_inherited_launcher_variables_never_reach_the_launcher():
    cfg = resolve({}, env={})
    env = scenarios.clean_environment({"NVRX_CHECKPOINT_DIR": "/shared/ckpt", "TP": "4", "HOME": "/root"})
    assert env == {"HOME": "/root"}
    assert "NVRX_CHECKPOINT_DIR" not in scenarios.launcher_env(cfg, cfg.by_name["kill"])


@pytest.mark.parametrize("names", SHIPPED, ids=lambda n: "+".join(n))
def test_workflow_preflight_and_launcher_see_the_same_settings(names, tmp_path):
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    from ftqual.launch.settings import load_settings
    from ftqual.preflight.flags import scenario_env

    megatron = tmp_path / "mlm"
    megatron.mkdir()
    (megatron / "pretrain_gpt.py").write_text("")
    raw = merged(*names)
    if raw["workload"] == "megatron":
        raw["megatron_path"] = str(megatron)
    here = {"megatron_path": raw["megatron_path"]}
    if raw.get("checkpoint_dir"):  # the team's storage of an example: one that exists here
        (tmp_path / "team-ckpt").mkdir()
        raw["checkpoint_dir"] = here["checkpoint_dir"] = str(tmp_path / "team-ckpt")
    ours = resolve(copy.deepcopy(raw), env={})

    # the workflow: the Snakefile's own resolution of the same config files
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump(here))
    with SnakemakeApi(OutputSettings(quiet=set())) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(configfiles=[REPO / "config" / n for n in names] + [extra]),
            snakefile=REPO / "Snakefile",
            workdir=tmp_path,
        )
        workflow = workflow_api._workflow
        assert workflow.globals["CFG"] == ours

    # the preflight: the resolved form it is given reads back the same
    assert scenarios.from_resolved(ours.to_json()) == ours

    # the launcher: its own parser on the environment each scenario gets
    for s in ours.scenarios:
        env = scenario_env(ours, s, str(tmp_path / "work"), 50123)
        assert {
            k: v for k, v in env.items() if k in scenarios.launcher_env(ours, s)
        } == scenarios.launcher_env(ours, s)
        settings = load_settings(env, (), pid=1)
        assert (settings.nnodes, settings.gpus_per_node, settings.tp, settings.pp) == (
            s.nnodes,
            s.gpus_per_node,
            s.tp,
            s.pp,
        )
        assert (settings.train_iters, settings.save_interval) == (s.train_iters, s.save_interval)
        assert (settings.fault, settings.fault_rank) == (s.fault, s.rank)
        assert settings.timeouts == s.timeouts
        assert (settings.max_restarts, settings.term_timeout) == (s.max_restarts, s.term_timeout)
        assert (settings.transformer_impl, settings.dist_optimizer, settings.hang_placement) == (
            s.transformer_impl,
            s.dist_optimizer,
            s.hang_placement,
        )
        assert settings.workload == ours.workload
        assert (settings.model, settings.megatron_args) == (s.model, s.megatron_args)
        assert settings.checkpoint_root == s.checkpoint_root


def test_scenarios_keep_the_configs_order_whatever_merging_does():
    cfg = resolve(
        {"scenarios": {"kill_rank0": {"fault": "kill", "rank": 0}, "hang": {"fault": "hang"},
                       "baseline": {"fault": "none"}, "kill": {"fault": "kill"}}},
        env={},
    )  # fmt: skip
    ordered = scenarios.in_config_order(cfg, ["baseline", "kill", "hang"])
    assert [s.name for s in ordered.scenarios] == ["baseline", "kill", "hang", "kill_rank0"]


def extended() -> dict:
    return merged("config.yaml", "extended.yaml")


def test_extended_config_adds_the_new_scenarios_after_the_walkthroughs_three():
    cfg = resolve(extended(), env={})
    names = [s.name for s in cfg.scenarios]
    assert names[:3] == ["baseline", "kill", "hang"]
    by = cfg.by_name
    assert by["kill_in_save"].fault_timing == "in_save" and by["kill_in_save"].fault == "kill"
    assert by["double_fault"].injections == 2 and by["double_fault"].max_restarts == 3
    exhausted = by["restarts_exhausted"]
    assert exhausted.injections > exhausted.max_restarts
    assert (exhausted.expect, exhausted.expect_failing) == ("fail", ("clean_finish",))
    assert by["no_resume"].checkpoint_load is False and by["no_resume"].expect_failing == (
        "resumed_from_checkpoint",
    )
    # resume_existing runs three save intervals past the baseline's final checkpoint unless told otherwise
    assert by["resume_existing"].train_iters == by["baseline"].train_iters + 3 * by["baseline"].save_interval
    gpu = resolve(merged("config.yaml", "megatron-h200.yaml", "extended.yaml"), env={})
    assert gpu.by_name["resume_existing"].train_iters == 115


def test_the_default_scenario_set_stays_the_walkthroughs_three():
    assert [s.name for s in resolve(merged("config.yaml"), env={}).scenarios] == ["baseline", "kill", "hang"]


def test_new_settings_reach_the_launcher_and_keep_old_fingerprints():
    cfg = resolve(extended(), env={})
    env = scenarios.launcher_env(cfg, cfg.by_name["restarts_exhausted"])
    assert env["NVRX_INJECTIONS"] == "2" and env["NVRX_MAX_RESTARTS"] == "1"
    assert scenarios.launcher_env(cfg, cfg.by_name["no_resume"])["NVRX_LOAD_CHECKPOINTS"] == "0"
    assert scenarios.launcher_env(cfg, cfg.by_name["kill_in_save"])["NVRX_FAULT_TIMING"] == "in_save"
    # settings at their defaults stay out of the fingerprint: the walkthrough's slots survive the upgrade
    kill = cfg.by_name["kill"]
    assert "injections" not in cfg.shaping_settings(kill)
    assert cfg.fingerprint(kill) == resolve(merged("config.yaml"), env={}).fingerprint(kill)
    for change in ({"injections": 2}, {"fault_timing": "in_save"}, {"checkpoint_load": False}):
        assert cfg.fingerprint(dataclasses.replace(kill, **change)) != cfg.fingerprint(kill), change
    # the expectation is part of it: a changed expectation is judged on a fresh attempt
    flipped = dataclasses.replace(kill, expect="fail", expect_failing=("clean_finish",))
    assert cfg.fingerprint(flipped) != cfg.fingerprint(kill)
    # the resolved form round-trips through the preflight's reader
    assert scenarios.from_resolved(cfg.to_json()) == cfg


@pytest.mark.parametrize(
    ("scenario", "words"),
    [
        ({"fault": "kill", "expect": "fail"}, "expect: fail needs expect_failing"),
        ({"fault": "kill", "expect_failing": ["clean_finish"]}, "expect_failing is only for expect: fail"),
        ({"fault": "hang", "fault_timing": "in_save"}, "fault_timing in_save needs fault kill (got hang)"),
        ({"fault": "none", "injections": 2}, "injections need a fault"),
        ({"fault": "hang", "hang_placement": "setup"}, "hang_placement setup needs injections >= 2 (got 1)"),
        (
            {"fault": "hang", "hang_placement": "setup", "injections": 2, "fault_timing": "in_save"},
            "hang_placement setup needs fault_timing checkpoint",
        ),
        ({"fault": "kill", "injections": 4}, "injections*save_interval=20 must be below train_iters=20"),
        ({"fault": "kill", "resume_from": "kill"}, "resume_from must name the baseline scenario"),
        ({"fault": "kill", "resume_from": "baseline", "train_iters": 25}, "need train_iters >= 30"),
        ({"fault": "kill", "injections": 0}, "less than the minimum of 1"),
        ({"fault": "kill", "expect": "maybe"}, "is not one of"),
        ({"fault": "node_loss"}, "fault node_loss needs nnodes >= 2"),
        ({"fault": "node_loss", "rank": 0, "nnodes": 2, "gpus_per_node": 1}, "the first node, which hosts"),
        (
            {"fault": "node_loss", "rank": 1, "nnodes": 2, "gpus_per_node": 2},
            "needs a rank of a later node (2..3)",
        ),
        ({"fault": "node_loss", "nnodes": 2, "gpus_per_node": 1, "injections": 2}, "takes one injection"),
        (
            {
                "fault": "node_loss",
                "nnodes": 2,
                "gpus_per_node": 1,
                "expect": "fail",
                "expect_failing": ["x"],
            },
            "remove expect: fail",
        ),
        ({"fault": "kill", "join_timeout": 0}, "less than the minimum of 1"),
        ({"fault": "kill", "spare_nodes": 1}, "spare_nodes is for fault: node_loss"),
        (
            {"fault": "node_loss", "nnodes": 2, "gpus_per_node": 1, "spare_nodes": -1},
            "less than the minimum of 0",
        ),
    ],
)
def test_bad_new_scenario_settings_are_one_config_error(scenario, words):
    config = {"scenarios": {"baseline": {"fault": "none"}, "x": scenario}}
    with pytest.raises(ConfigError, match="invalid config") as err:
        resolve(config, env={})
    assert words in str(err.value)


def test_node_loss_scenario_is_in_the_extended_set_but_off_and_reaches_the_launcher():
    raw = extended()
    assert raw["scenarios"]["node_loss"]["enabled"] is False  # two nodes: Slurm only
    raw["scenarios"]["node_loss"]["enabled"] = True
    cfg = resolve(raw, env={})
    s = cfg.by_name["node_loss"]
    assert (s.fault, s.rank, s.nnodes, s.join_timeout) == ("node_loss", 1, 2, 60)
    env = scenarios.launcher_env(cfg, s)
    assert env["NVRX_DEMO_FAULT"] == "node_loss" and env["NVRX_RDZV_JOIN_TIMEOUT"] == "60"
    assert "NVRX_RDZV_JOIN_TIMEOUT" not in scenarios.launcher_env(cfg, cfg.by_name["kill"])
    # join_timeout is left out of the fingerprint at its default, in it when set
    kill = cfg.by_name["kill"]
    assert "join_timeout" not in cfg.shaping_settings(kill)
    assert cfg.fingerprint(dataclasses.replace(kill, join_timeout=60)) != cfg.fingerprint(kill)
    assert scenarios.from_resolved(cfg.to_json()) == cfg


def test_spare_nodes_allocate_one_more_node_each_and_reach_the_launcher():
    raw = extended()
    raw["scenarios"]["node_loss"].update(enabled=True, spare_nodes=1)
    cfg = resolve(raw, env={})
    s = cfg.by_name["node_loss"]
    assert (s.nnodes, s.spare_nodes, s.allocated_nodes, s.world_size, s.multinode) == (2, 1, 3, 2, True)
    assert scenarios.launcher_env(cfg, s)["NVRX_SPARE_NODES"] == "1"
    assert "NVRX_SPARE_NODES" not in scenarios.launcher_env(cfg, cfg.by_name["kill"])
    # one active node and a spare: two launchers, so Slurm (srun) is needed even with nnodes 1
    single = dataclasses.replace(s, nnodes=1, rank=0)
    assert single.multinode and single.allocated_nodes == 2
    assert "spare_nodes" not in cfg.shaping_settings(cfg.by_name["kill"])
    assert cfg.fingerprint(s) != cfg.fingerprint(dataclasses.replace(s, spare_nodes=0))
    assert scenarios.from_resolved(cfg.to_json()) == cfg


def test_new_settings_at_their_defaults_keep_every_recorded_fingerprint():
    """Attempts recorded by an earlier ftqual stay reused after an upgrade: a setting added since (a
    campaign, timeouts_from, calc_ft_timeouts, ...) left at its default must not enter the fingerprint. The
    literals are the fingerprints the walkthrough's scenarios had before those settings existed. `replay`
    left at its default, tolerance, keeps them; exact is another run (deterministic training, judged
    bitwise): an earlier attempt must not stand for it."""
    cfg = resolve({}, env={})
    assert all(s.replay == "tolerance" for s in cfg.scenarios)
    recorded = {"baseline": "7170af5c1c32", "kill": "ba0df1af543a", "hang": "2022076db393"}
    assert {s.name: cfg.fingerprint(s) for s in cfg.scenarios} == recorded
    exact = resolve({"replay": "exact"}, env={})
    assert all(s.replay == "exact" for s in exact.scenarios)
    assert not {s.name: exact.fingerprint(s) for s in exact.scenarios}.items() & recorded.items()


def test_checkpoint_faults_config_breaks_a_checkpoint_per_scenario_and_keeps_the_walkthroughs_three():
    cfg = resolve(merged("config.yaml", "checkpoint_faults.yaml"), env={})
    names = [s.name for s in cfg.scenarios]
    assert names[:3] == ["baseline", "kill", "hang"]
    damaged = {s.name: s.checkpoint_damage for s in cfg.scenarios if s.checkpoint_damage != "none"}
    assert sorted(set(damaged.values())) == sorted(CHECKPOINT_DAMAGES)
    verified = [name for name in damaged if cfg.by_name[name].verify_integrity]
    assert verified == ["shard_corrupted_verified"]
    assert damaged["shard_corrupted_verified"] == "shard_corrupted"
    verified_env = scenarios.launcher_env(cfg, cfg.by_name["shard_corrupted_verified"])
    assert verified_env["NVRX_VERIFY_INTEGRITY"] == "1"
    assert "NVRX_VERIFY_INTEGRITY" not in scenarios.launcher_env(cfg, cfg.by_name["shard_corrupted"])
    for name in damaged:
        s = cfg.by_name[name]
        assert (s.fault, s.fault_timing, s.injections, s.expect) == ("kill", "checkpoint", 1, "pass")
        assert scenarios.launcher_env(cfg, s)["NVRX_CHECKPOINT_DAMAGE"] == damaged[name]
    kill = cfg.by_name["kill"]
    assert "checkpoint_damage" not in cfg.shaping_settings(kill)
    assert cfg.fingerprint(kill) == resolve(merged("config.yaml"), env={}).fingerprint(kill)
    assert cfg.fingerprint(dataclasses.replace(kill, checkpoint_damage="tracker_removed")) != cfg.fingerprint(
        kill
    )
    assert scenarios.from_resolved(cfg.to_json()) == cfg


@pytest.mark.parametrize(
    ("scenario", "words"),
    [
        (
            {"fault": "hang", "checkpoint_damage": "tracker_removed"},
            "checkpoint_damage tracker_removed needs fault kill (got hang)",
        ),
        (
            {"fault": "kill", "checkpoint_damage": "shard_truncated", "injections": 2},
            "needs fault_timing checkpoint and injections 1",
        ),
        ({"fault": "none", "checkpoint_damage": "shard_truncated"}, "checkpoint_damage need a fault"),
        ({"fault": "kill", "checkpoint_damage": "half"}, "is not one of"),
    ],
)
def test_a_damage_the_kill_cannot_leave_is_refused_by_the_config(scenario, words):
    raw = {"scenarios": {"baseline": {"fault": "none"}, "x": scenario}}
    with pytest.raises(scenarios.ConfigError, match=None) as err:
        resolve(raw, env={})
    assert words in str(err.value)
