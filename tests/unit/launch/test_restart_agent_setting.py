"""restart_agent: NVRx's restart agent as a setting (NVRX_RESTART_AGENT off|log|stop), the attribution flags
in ft_launcher's command only when on, the environment and the key file the launcher gives it, recorded in
run.json, and left out of every earlier scenario's fingerprint while off."""

from __future__ import annotations

import dataclasses
import fcntl
import threading
from pathlib import Path

import yaml
from snakemake.utils import update_config

from ftqual.launch import command, run, settings
from ftqual.launch import restart_agent as agent
from ftqual.scenario import model as scenarios
from ftqual.stack import resolve as stack

REPO = Path(__file__).resolve().parents[3]
VAR = "NVRX_RESTART_AGENT"


def record_for(env: dict[str, str]) -> dict:
    s = settings.load_settings(env, pid=1)
    choice = stack.resolve("local", "off", stack.Probe(False, False, False))
    return run.run_record(s, command.build_plan(s, choice, 1, "x"), choice, {}, "h").to_json()


def test_the_variable_is_part_of_the_launchers_interface():
    assert VAR in settings.VARIABLES
    assert agent.MODES == ("off", "log", "stop")


def test_the_dry_run_shows_the_flags_only_when_on(base_env, run_launch):
    stop = run_launch({**base_env, VAR: "stop"})
    assert stop.rc == 0, stop.err
    assert "--ft-attribution-endpoint=localhost" in stop.argv
    assert "--ft-attribution-analysis-backend=lib" in stop.argv
    assert "--ft-attribution-stop-action=no-restart" in stop.argv
    key = [a for a in stop.argv if a.startswith("--ft-attribution-llm-api-key-file=")]
    assert len(key) == 1 and key[0].endswith("/runs/r1/restart_agent/no-llm.key")
    # the flags are ft_launcher's: before the worker wrapper
    assert stop.argv.index("--ft-attribution-endpoint=localhost") < stop.argv.index("--entrypoint")
    log = run_launch({**base_env, VAR: "log"})
    assert "--ft-attribution-stop-action=log" in log.argv
    for env in (base_env, {**base_env, VAR: "off"}):
        plain = run_launch(env)
        assert plain.rc == 0, plain.err
        assert "--ft-attribution" not in plain.out


def test_a_bad_value_is_one_line_and_exit_2(base_env, run_launch):
    result = run_launch({**base_env, VAR: "no-restart"})
    assert result.rc == 2 and result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and VAR in lines[0]


def test_run_json_records_it(base_env):
    assert record_for({**base_env, VAR: "log"})["restart_agent"] == "log"
    assert record_for(base_env)["restart_agent"] == "off"


def test_the_environment_runs_it_deterministic_with_a_job_id(tmp_path):
    assert agent.agent_env("off", {}, "r1") == {}
    assert agent.agent_env("stop", {}, "r1") == {agent.ENRICHMENT_ENV: "false", "SLURM_ARRAY_JOB_ID": "r1"}
    # under Slurm the scheduler's job id is the agent's history key: never replaced
    assert agent.agent_env("log", {"SLURM_JOB_ID": "77"}, "r1") == {agent.ENRICHMENT_ENV: "false"}
    agent.prepare("stop", tmp_path)
    key = tmp_path / agent.KEY_FILE
    assert key.is_file() and key.read_bytes() == b""
    agent.prepare("off", tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_runs_with_the_agent_take_turns_on_its_port(tmp_path, monkeypatch):
    monkeypatch.setenv(agent.LOCK_ENV, str(tmp_path / "lock"))
    with agent.port_turn("stop"):
        with open(tmp_path / "lock") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held = False
            except BlockingIOError:
                held = True
    assert held
    # off takes no turn at all
    done = threading.Event()
    with agent.port_turn("stop"):
        thread = threading.Thread(target=lambda: (agent.port_turn("off").__enter__(), done.set()))
        thread.start()
        thread.join(5)
    assert done.is_set()


def merged(*names: str) -> dict:
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    return config


def test_the_config_key_reaches_the_launcher_and_keeps_old_fingerprints():
    base = merged("config.yaml")
    cfg = scenarios.resolve(base, env={})
    kill = cfg.by_name["kill"]
    assert kill.restart_agent == "off"
    assert VAR not in scenarios.launcher_env(cfg, kill)
    assert "restart_agent" not in cfg.shaping_settings(kill)
    on = scenarios.resolve({**base, "restart_agent": "stop"}, env={})
    assert scenarios.launcher_env(on, on.by_name["kill"])[VAR] == "stop"
    assert on.fingerprint(on.by_name["kill"]) != cfg.fingerprint(kill)
    assert cfg.fingerprint(dataclasses.replace(kill, restart_agent="off")) == cfg.fingerprint(kill)
    per = merged("config.yaml")
    per["scenarios"]["kill"]["restart_agent"] = "log"
    one = scenarios.resolve(per, env={})
    assert (one.by_name["kill"].restart_agent, one.by_name["hang"].restart_agent) == ("log", "off")
    assert scenarios.from_resolved(one.to_json()) == one
