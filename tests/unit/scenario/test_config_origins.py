"""A config mistake names where its value came from: the config file that set it (the user's
--configfile or config/config.yaml), --config on the command line, or the team's launch script's file:line;
a problem every scenario shares is said once; a YAML syntax error is file:line:column; --config mappings
are read as YAML; a bad scale is said in words with the schema's example."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from ftqual.scenario import config_problems
from ftqual.scenario import model as scenarios
from ftqual.workflow import plan

PROJECT = Path(__file__).resolve().parents[3]


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A working directory with the project's config/config.yaml, as Snakemake runs in it."""
    (tmp_path / "config").mkdir()
    shutil.copy(PROJECT / "config" / "config.yaml", tmp_path / "config" / "config.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(files: list[str], command_line: dict | None = None, env: dict | None = None) -> list[str]:
    """What rules/common.smk prints for config/config.yaml, then `files` (--configfile), then --config."""
    config = scenarios.read_config_file("config/config.yaml")
    for name in files:
        update_config(config, scenarios.read_config_file(name))
    update_config(config, dict(command_line or {}))
    with pytest.raises(scenarios.ConfigError) as err:
        scenarios.resolve(config, env=env or {})
    return plan.refusal_lines(str(err.value), ["config/config.yaml", *files], files, command_line)


def test_a_value_of_the_users_file_is_blamed_on_it_once(here):
    """save_interval: 50 in the user's file breaks the kill and the hang scenario alike: one line, the
    user's file and the setting, the other file's part named after it (was: config/config.yaml, twice)."""
    Path("mine.yaml").write_text("save_interval: 50\n")
    lines = refused(["mine.yaml"])
    assert lines == [
        "ftqual: mine.yaml: invalid config at save_interval: injections 1: each fault needs a new checkpoint "
        "before the last iteration, so injections*save_interval=50 must be below train_iters=20 "
        "(train_iters from config/config.yaml)"
    ]


def test_a_scenarios_own_value_stays_the_scenarios(here):
    """Negative control: a value one scenario sets itself is that scenario's line, in the file that sets
    it, and the other scenarios are not named."""
    Path("mine.yaml").write_text("scenarios:\n  kill:\n    fault: kill\n    save_interval: 50\n")
    lines = refused(["mine.yaml"])
    assert len(lines) == 1, lines
    assert lines[0].startswith("ftqual: mine.yaml: invalid config at scenarios.kill.save_interval: "), lines


def test_a_command_line_value_is_blamed_on_the_command_line(here):
    """--config train_iters=ten: the command line's, though config/config.yaml sets train_iters too."""
    lines = refused([], {"train_iters": "ten"})
    assert lines == ["ftqual: --config: invalid config at train_iters: 'ten' is not a whole number"]


TEAM = """\
#!/bin/bash
ARGS=(
    --num-layers 2 --hidden-size 64 --num-attention-heads 4
    --seq-length 64 --max-position-embeddings 64
    --micro-batch-size 1 --global-batch-size 4
    --tensor-model-parallel-size 3
)
torchrun pretrain_gpt.py ${ARGS[@]}
"""


def test_a_launch_scripts_flag_is_blamed_on_its_line_once(here):
    """--tensor-model-parallel-size 3 on 2 ranks: the script's file:line, once for every scenario."""
    Path("team.sh").write_text(TEAM)
    Path("team.yaml").write_text("megatron_args_file: team.sh\n")
    lines = refused(["team.yaml"])
    assert lines == [
        "ftqual: invalid config: team.sh:6: --tensor-model-parallel-size 3: World size 2 "
        "(nnodes*gpus_per_node) must be divisible by tp*pp=3"
    ]


def test_a_yaml_syntax_error_names_file_line_and_column(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train_iters: 20\nscenarios:\n  kill: {fault: kill\n")
    problem = config_problems.yaml_problem(bad)
    assert problem is not None and problem.startswith(f"{bad}:4:1: not valid YAML: "), problem
    tabbed = tmp_path / "tabs.yaml"
    tabbed.write_text("scenarios:\n\tkill: 1\n")
    assert str(config_problems.yaml_problem(tabbed)).startswith(f"{tabbed}:2:1: not valid YAML: found "), (
        tabbed
    )
    assert config_problems.yaml_problem(PROJECT / "config" / "config.yaml") is None  # control


def test_a_command_line_mapping_is_read_as_yaml(here):
    """Snakemake gives `--config 'scale={gpus: 4096, days: 30}'` as {'gpus': '4096', 'days': '30'} (its
    BaseLoader): read again as YAML, merged as Snakemake merges, the config is valid."""
    given = {"scale": {"gpus": "4096", "days": "30"}, "timeouts": {"step": "30"}, "train_iters": 20}
    typed = config_problems.typed_given(
        given, ["scale={gpus: 4096, days: 30}", "timeouts={step: 30}", "train_iters=20"]
    )
    assert typed == {"scale": {"gpus": 4096, "days": 30}, "timeouts": {"step": 30}, "train_iters": 20}
    config = scenarios.read_config_file("config/config.yaml")
    update_config(config, given)
    config_problems.overlay(config, typed)
    assert config["scale"] == {"gpus": 4096, "days": 30}
    assert config["timeouts"] == {"setup": 120, "step": 30, "checkpointing": 60, "out_of_section": 30}
    scenarios.resolve(config, env={})  # no ConfigError


@pytest.mark.parametrize(
    ("entry", "lines"),
    [
        (
            "scale={gpus: many, days: 30}",
            ["ftqual: --config: invalid config at scale.gpus: 'many' is not a whole number of GPUs; "
             "write scale: {gpus: 4096, days: 30}"],
        ),
        (
            "scale={gpus: 0, days: 0}",
            ["ftqual: --config: invalid config at scale.gpus: 0 is less than the minimum of 1; "
             "write scale: {gpus: 4096, days: 30}",
             "ftqual: --config: invalid config at scale.days: 0 is less than or equal to the minimum of 0; "
             "write scale: {gpus: 4096, days: 30}"],
        ),
        (
            "scale=4096:30",
            ["ftqual: --config: invalid config at scale: '4096:30' is not a mapping; "
             "write scale: {gpus: 4096, days: 30}"],
        ),
    ],
)  # fmt: skip
def test_a_bad_scale_is_said_in_words(here, entry, lines):
    """Never "is not of type 'null'": every mistake of the mapping, in words, with the schema's example."""
    key, _, text = entry.partition("=")
    raw = yaml.load(text, Loader=yaml.BaseLoader)  # as Snakemake's parse_config reads it
    given = config_problems.typed_given({key: raw}, [entry])
    assert refused([], given) == lines
