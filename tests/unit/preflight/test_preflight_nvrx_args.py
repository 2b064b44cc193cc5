"""NVRx 0.7.0's own ft_launcher parser, run for real in a child interpreter."""

from __future__ import annotations

import sys

import pytest

from ftqual.preflight import flags
from ftqual.preflight.nvrx_args import parse_with_nvrx
from ftqual.scenario.model import resolve
from ftqual.stack.facts import dist_version

pytestmark = pytest.mark.skipif(
    dist_version("nvidia-resiliency-ext") is None,
    reason="nvidia-resiliency-ext is not installed in this interpreter",
)

GOOD = [
    "--nnodes=1",
    "--nproc-per-node=2",
    "--rdzv-backend=c10d",
    "--rdzv-endpoint=localhost:0",
    "--max-restarts=3",
    "--ft-rank-section-timeouts=setup:900,step:120,checkpointing:600",
    "--ft-rank-out-of-section-timeout=180",
    "--ft-per-cycle-applog-prefix=/r/logs/train.log",
    "--ft-nvrx-logfile=/r/logs/launcher.log",
    "--ft-log-server-port=50123",
    "worker.py",
    "--",
    "--bf16",
]


def test_parser_accepts_reads_back_and_rejects():
    good, flag, relative, orphan, timeouts = parse_with_nvrx(
        [
            GOOD,
            [
                "--nnodes=1",
                "--ft-param-rank_section_timeouts=setup:900",
                "worker.py",
            ],  # Megatron's obsolete syntax
            ["--nnodes=1", "--ft-per-cycle-applog-prefix=logs/train.log", "worker.py"],
            ["--nnodes=1", "--ft-nvrx-logfile=/r/logs/launcher.log", "worker.py"],
            ["--nnodes=1", "--ft-rank-section-timeouts=setup=900", "worker.py"],
        ],
        sys.executable,
        env={},
    )
    assert good.ok and good.parsed["rank_section_timeouts"] == {
        "setup": 900.0,
        "step": 120.0,
        "checkpointing": 600.0,
    }
    assert good.parsed["rank_out_of_section_timeout"] == 180.0 and good.parsed["log_server_port"] == 50123
    assert not flag.ok and "--ft-param-rank_section_timeouts" in flag.error
    assert not relative.ok and "absolute" in relative.error
    assert not orphan.ok and "requires --ft-per-cycle-applog-prefix" in orphan.error
    assert not timeouts.ok and "FT config" in timeouts.error


def test_a_missing_interpreter_is_reported_not_raised(tmp_path):
    [r] = parse_with_nvrx([GOOD], str(tmp_path / "no-python"), env={})
    assert r.ok is None and "cannot run" in r.error


def test_the_launchers_own_command_is_accepted(tmp_path):
    cfg = resolve(
        {
            "workload": "smoke",
            "timeouts": {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180},
        },
        env={},
    )
    from ftqual.stack import resolve as stack

    built = [flags.build_argv(cfg, s, stack.probe(), str(tmp_path), 50123) for s in cfg.scenarios]
    assert all(b.error is None and b.source == "built by ftqual.launch" for b in built)
    assert not (tmp_path / "runs").exists()  # building the command creates nothing
    results = parse_with_nvrx([b.argv for b in built], sys.executable, env={})
    assert all(r.ok for r in results), results


def test_launcher_refusal_comes_back_as_an_error(tmp_path):
    from dataclasses import replace

    from ftqual.stack import resolve as stack

    cfg = resolve({"workload": "smoke"}, env={})
    s = replace(cfg.by_name["kill"], rank=7)  # past the config's own rank rule: the launcher's turn
    b = flags.build_argv(cfg, s, stack.probe(), str(tmp_path), 50123)
    assert b.argv == [] and "NVRX_FAULT_RANK=7" in b.error
