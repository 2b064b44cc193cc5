"""NVRx's fault catalog as configuration: config/faults.yaml merged over the shipped configs, the new fault
values in the schema, the contract's detection paths, and the GPU-only faults refused on the smoke workload
by the config, the launcher and the wrapper, each in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from snakemake.exceptions import WorkflowError
from snakemake.utils import update_config, validate

from ftqual import contract
from ftqual.launch import main as launch_main
from ftqual.launch import settings
from ftqual.rank.faults import gpu_present
from ftqual.rank.injector import Injector
from ftqual.rank.worker import parse_args
from ftqual.scenario.model import ConfigError, resolve

REPO = Path(__file__).resolve().parents[3]
SCHEMA = str(REPO / "config" / "schema.yaml")
CATALOG = ("segfault", "abort", "exception", "sigterm", "sigint", "gil_lock", "gpu_error", "gpu_hang")


def merged(*names: str, override: dict | None = None) -> dict:
    config: dict = {}
    for name in names:
        update_config(config, yaml.safe_load((REPO / "config" / name).read_text()))
    if override:
        update_config(config, override)
    return config


def test_every_catalog_fault_has_one_detection_path():
    assert set(CATALOG) <= set(contract.FAULTS) and set(CATALOG) <= set(contract.RANK_FAULTS)
    assert not set(contract.EXIT_CODES) & set(contract.LIVE_FAULTS)
    for fault in contract.RANK_FAULTS:
        assert contract.detection_path(fault) in ("exit", "timeout"), fault
        assert fault in contract.FAULT_ACTIONS
    assert [contract.detection_path(f) for f in ("gil_lock", "gpu_hang", "hang")] == ["timeout"] * 3
    assert contract.EXIT_CODES["segfault"] == (-11, 139) and contract.EXIT_CODES["abort"] == (-6, 134)
    assert contract.detection_path("none") is None and contract.detection_path("node_loss") == "node"


@pytest.mark.parametrize("base", [("config.yaml",), ("config.yaml", "megatron-h200.yaml")])
def test_faults_yaml_validates_and_resolves_over_the_shipped_configs(base):
    config = merged(*base, "faults.yaml")
    validate(config, SCHEMA)
    cfg = resolve(config, env={})
    enabled = {s.name: s for s in cfg.scenarios}
    for fault in ("segfault", "abort", "exception", "sigterm", "sigint", "gil_lock"):
        s = enabled[fault]
        assert (s.fault, s.rank, s.expect, s.fault_timing) == (fault, 1, "pass", "checkpoint")
    assert not {"gpu_error", "gpu_hang"} & set(enabled)  # GPU-only: off unless a GPU config turns them on
    assert {"baseline", "kill", "hang"} <= set(enabled)  # the walkthrough's stay


def test_faults_yaml_says_why_the_gpu_faults_are_off():
    text = (REPO / "config" / "faults.yaml").read_text()
    raw = yaml.safe_load(text)["scenarios"]
    for fault in contract.GPU_ONLY_FAULTS:
        assert raw[fault]["enabled"] is False and raw[fault]["fault"] == fault
    assert "the smoke workload has no GPU" in text


def test_every_fault_value_is_in_the_schema():
    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())
    assert tuple(schema["$defs"]["scenario"]["properties"]["fault"]["enum"]) == contract.FAULTS


def test_an_unknown_fault_fails_the_schema():
    with pytest.raises(WorkflowError) as err:
        validate(merged("config.yaml", override={"scenarios": {"x": {"fault": "sigkill"}}}), SCHEMA)
    assert "'sigkill' is not one of" in str(err.value)


@pytest.mark.parametrize("fault", contract.GPU_ONLY_FAULTS)
def test_a_gpu_only_fault_enabled_on_the_smoke_workload_is_one_config_error(fault):
    config = merged("config.yaml", "faults.yaml", override={"scenarios": {fault: {"enabled": True}}})
    validate(config, SCHEMA)  # the schema accepts it: the rule is the workload's
    with pytest.raises(ConfigError) as err:
        resolve(config, env={})
    lines = [line for line in str(err.value).splitlines() if "GPU-only" in line]
    assert len(lines) == 1, str(err.value)
    assert f"scenarios.{fault}: fault {fault} is GPU-only: the smoke workload runs on CPU" in lines[0]


def test_a_gpu_only_fault_is_refused_on_smoke_only():
    assert contract.gpu_only_problem("gpu_hang", "megatron") is None
    assert contract.gpu_only_problem("segfault", "smoke") is None
    assert "GPU-only" in contract.gpu_only_problem("gpu_hang", "smoke")


@pytest.mark.parametrize("fault", contract.GPU_ONLY_FAULTS)
def test_the_launcher_refuses_a_gpu_only_fault_on_smoke_in_one_line(fault, tmp_path, capsys):
    env = {"NVRX_WORK_DIR": str(tmp_path), "NVRX_WORKLOAD": "smoke", "NVRX_RUN_ID": "r1", "NVRX_DRY_RUN": "1"}
    with pytest.raises(settings.SettingsError, match=f"NVRX_DEMO_FAULT={fault} is GPU-only"):
        settings.load_settings({**env, "NVRX_DEMO_FAULT": fault}, pid=1)
    rc = launch_main([], env={**env, "NVRX_DEMO_FAULT": fault})
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "is GPU-only" in err[0], err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("fault", [f for f in CATALOG if f not in contract.GPU_ONLY_FAULTS])
def test_the_launcher_passes_each_cpu_fault_to_the_wrapper(fault, tmp_path, capsys):
    env = {"NVRX_WORK_DIR": str(tmp_path), "NVRX_WORKLOAD": "smoke", "NVRX_RUN_ID": "r1", "NVRX_DRY_RUN": "1"}
    assert launch_main([], env={**env, "NVRX_DEMO_FAULT": fault}) == 0
    out = capsys.readouterr().out
    assert f"--fault {fault} --fault-rank 1" in out


@pytest.mark.parametrize("fault", contract.GPU_ONLY_FAULTS)
def test_the_wrapper_refuses_a_gpu_only_fault_on_the_smoke_workload(fault, capsys):
    argv = ["--entrypoint", "workloads/smoke_train.py", "--checkpoint-dir", "c", "--fault-marker", "m"]
    with pytest.raises(SystemExit) as exc:
        parse_args([*argv, "--fault", fault, "--fault-rank", "1"])
    assert exc.value.code == 2
    assert f"--fault {fault} is GPU-only" in capsys.readouterr().err
    args, _ = parse_args(
        ["--entrypoint", "m/pretrain_gpt.py", *argv[2:], "--fault", fault, "--fault-rank", "1"]
    )
    assert args.fault == fault


def test_the_wrapper_prepares_each_cpu_fault_with_its_method(tmp_path):
    """Injector.action names how each fault is injected (the marker's `method`) without injecting it."""
    for fault in ("kill", "hang", "segfault", "abort", "exception", "sigterm", "sigint", "gil_lock"):
        injector = Injector(
            fault=fault,
            placement="step",
            tracker=tmp_path / "t",
            marker=tmp_path / "m.json",
            baseline=0,
            identity={"run_id": "r", "rank": 1, "local_rank": 1, "host": "h", "cycle": 0},
            watch=None,
            kill=lambda pid, sig: None,
        )
        method, act = injector.action()
        assert method and callable(act), fault
    gpu = Injector(
        fault="gpu_error",
        placement="step",
        tracker=tmp_path / "t",
        marker=tmp_path / "m.json",
        baseline=0,
        identity={"run_id": "r", "rank": 1, "local_rank": 1, "host": "h", "cycle": 0},
        watch=None,
    )
    if not gpu_present():
        assert gpu.action() is None  # no CUDA device: not injected (and the marker never claimed)
