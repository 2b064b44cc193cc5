"""max_no_progress_cycles: NVRx's no-progress stop as a setting (NVRX_MAX_NO_PROGRESS_CYCLES), passed to
ft_launcher as --ft-max-no-progress-cycles only when set, recorded in run.json (null when not), and left out
of every earlier scenario's fingerprint while unset."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml
from snakemake.utils import update_config

from ftqual.launch import command, run, settings
from ftqual.scenario import model as scenarios
from ftqual.stack import resolve as stack

REPO = Path(__file__).resolve().parents[3]
FLAG = "--ft-max-no-progress-cycles"


def record_for(env: dict[str, str]) -> dict:
    s = settings.load_settings(env, pid=1)
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    return run.run_record(s, command.build_plan(s, choice, 1, "x"), choice, {}, "h").to_json()


def merged(*names: str) -> dict:
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    return config


def test_the_variable_is_part_of_the_launchers_interface():
    assert "NVRX_MAX_NO_PROGRESS_CYCLES" in settings.VARIABLES


def test_the_dry_run_shows_the_flag_only_when_set(base_env, run_launch):
    result = run_launch({**base_env, "NVRX_MAX_NO_PROGRESS_CYCLES": "2"})
    assert result.rc == 0, result.err
    assert f"{FLAG}=2" in result.out
    plain = run_launch(base_env)
    assert plain.rc == 0, plain.err
    assert FLAG not in plain.out
    # 0 is NVRx's own "tracking off", passed as given
    assert f"{FLAG}=0" in run_launch({**base_env, "NVRX_MAX_NO_PROGRESS_CYCLES": "0"}).out


def test_run_json_records_it_null_when_unset(base_env):
    assert record_for({**base_env, "NVRX_MAX_NO_PROGRESS_CYCLES": "2"})["max_no_progress_cycles"] == 2
    assert record_for(base_env)["max_no_progress_cycles"] is None


def test_a_bad_value_is_one_line_and_exit_2(base_env, run_launch):
    result = run_launch({**base_env, "NVRX_MAX_NO_PROGRESS_CYCLES": "-1"})
    assert result.rc == 2 and result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and "NVRX_MAX_NO_PROGRESS_CYCLES" in lines[0]


def test_the_config_key_reaches_the_launcher_and_keeps_old_fingerprints():
    base = merged("config.yaml")
    cfg = scenarios.resolve(base, env={})
    kill = cfg.by_name["kill"]
    assert kill.max_no_progress_cycles is None
    assert "NVRX_MAX_NO_PROGRESS_CYCLES" not in scenarios.launcher_env(cfg, kill)
    assert "max_no_progress_cycles" not in cfg.shaping_settings(kill)
    set_ = scenarios.resolve({**base, "max_no_progress_cycles": 2}, env={})
    assert scenarios.launcher_env(set_, set_.by_name["kill"])["NVRX_MAX_NO_PROGRESS_CYCLES"] == "2"
    assert set_.fingerprint(set_.by_name["kill"]) != cfg.fingerprint(kill)
    assert cfg.fingerprint(dataclasses.replace(kill, max_no_progress_cycles=None)) == cfg.fingerprint(kill)
    # per scenario too, and the resolved form round-trips
    per = merged("config.yaml")
    per["scenarios"]["kill"]["max_no_progress_cycles"] = 4
    one = scenarios.resolve(per, env={})
    assert (one.by_name["kill"].max_no_progress_cycles, one.by_name["hang"].max_no_progress_cycles) == (
        4,
        None,
    )
    assert scenarios.from_resolved(one.to_json()) == one
