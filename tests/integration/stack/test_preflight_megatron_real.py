"""The preflight, for real: `ftqual preflight` in a subprocess on this machine's stack (torch, NVRx, the
ft_launcher beside them) over fake Megatron trees of each version (their parts: tests/unit/preflight/
test_megatron_compat.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftqual.launch import compat
from tests.unit.preflight.test_megatron_compat import REPO, dry_run_workload, fake_tree, versions

# ------------------------------------------------------------------------------- the preflight, for real


def preflight(tmp_path: Path, tree: Path, extra: str = "") -> tuple[subprocess.CompletedProcess, dict]:
    config = tmp_path / "config.yaml"
    config.write_text(f"workload: megatron\nmegatron_path: {tree}\n{extra}")
    out = tmp_path / "preflight.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": "/tmp"}
    env.pop("NVRX_NODE_LOCAL_TMPDIR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ftqual", "preflight", "--config", str(config), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    return proc, json.loads(out.read_text())


def check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["id"] == name)


def test_preflight_names_the_rejected_argument_on_one_line(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 20, 0), versions(our_options)["renamed"])
    proc, report = preflight(tmp_path, tree)
    c = check(report, "megatron_args")
    assert c["status"] == "fail" and proc.returncode == 1
    assert "Megatron-Core 0.20.0 rejects scenario" in c["detail"]
    assert "unrecognized arguments: --use-persistent-ckpt-worker" in c["detail"]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("FAIL megatron_args"))
    assert "--use-persistent-ckpt-worker" in line and "fix:" in line


def test_preflight_reports_the_adaptation_and_the_parser_accepts_it(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 14, 0), versions(our_options)["old"], "_NUM_WARMUP_ITERS = 1\n")
    proc, report = preflight(tmp_path, tree)
    c = check(report, "megatron_args")
    assert c["status"] == "pass", c
    assert f"{compat.WARMUP_FLAG} omitted" in c["detail"]
    (a,) = report["resolved"]["adaptations"]
    assert a["flag"] == compat.WARMUP_FLAG and "fixed warm-up of 1" in a["reason"]


def test_preflight_refuses_a_version_whose_adaptation_would_change_the_meaning(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 13, 1), versions(our_options)["old"], "_NUM_WARMUP_ITERS = 10\n")
    proc, report = preflight(tmp_path, tree)
    c = check(report, "launcher_settings")
    assert c["status"] == "fail" and "fixed fault-tolerance warm-up of 10" in c["detail"]
    assert proc.returncode == 1


def test_a_tree_that_shuts_the_ft_client_down_before_its_last_section_is_refused(tmp_path, our_options):
    tree = fake_tree(tmp_path, (0, 15, 3), our_options)
    (tree / "megatron" / "training" / "training.py").write_text(
        "def train():\n    ft_integration.get_rank_monitor_client().shutdown_workload_monitoring()\n"
    )
    with pytest.raises(compat.IncompatibleStack, match="RankMonitorClientError") as exc:
        compat.resolve(tree, 5, "0.15.3", vocab_size=1024)
    assert "0.15.3" in str(exc.value) and "core_v0.16.0" in str(exc.value)
    rc, args, err = dry_run_workload(tmp_path, tree)
    assert rc == 2 and args == [] and "RankMonitorClientError" in err and len(err.strip().splitlines()) == 1
    (tree / "megatron" / "training" / "training.py").write_text("def train():\n    pass\n")
    assert compat.resolve(tree, 5, "0.15.3", vocab_size=1024) == compat.Compat()  # a fork without the call


def test_a_scenario_asking_for_verify_integrity_on_a_tree_without_it_is_not_applicable(tmp_path, our_options):
    # `verify_integrity: true` adds --verify-integrity, which Megatron-LM trees before core_v0.19 lack: the
    # preflight's own-parser check names that scenario not applicable on this stack (the others run), rather
    # than every cycle's launch failing on it.
    extra = (
        "scenarios:\n  baseline:\n    fault: none\n  kill:\n    fault: kill\n"
        "    checkpoint_damage: shard_corrupted\n    verify_integrity: true\n"
    )
    assert "--verify-integrity" not in our_options
    without = fake_tree(tmp_path / "a", (0, 18, 0), our_options)
    proc, report = preflight(tmp_path / "a", without, extra)
    c = check(report, "megatron_args")
    assert c["status"] == "pass", c  # (the fake tree fails other checks: no GPU, no imports)
    assert list(report["not_applicable"]) == ["kill"], report["not_applicable"]
    assert "has no --verify-integrity" in report["not_applicable"]["kill"]
    assert "kill: Megatron-Core 0.18.0 has no --verify-integrity" in c["detail"], c["detail"]

    with_flag = fake_tree(tmp_path / "b", (0, 19, 1), {**our_options, "--verify-integrity": "flag"})
    proc, report = preflight(tmp_path / "b", with_flag, extra)
    assert check(report, "megatron_args")["status"] == "pass", check(report, "megatron_args")


# ------------------------------------------------------------- Megatron's own validate_args, in the preflight

TEAM_SCRIPT = """#!/bin/bash
# Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh, its batch lines, fitted to one GPU
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 16
    --step-batch-size-schedule "0:16 2.4B:320"
)
torchrun --nproc_per_node 1 pretrain_gpt.py ${TRAINING_ARGS[@]}
"""
BOTH = "Cannot specify both --step-batch-size-schedule and --global-batch-size"


def test_preflight_refuses_what_validate_args_refuses_in_one_line_and_nothing_launches(tmp_path, our_options):
    """The team's script gives the example's own pair: the parser takes it, validate_args refuses it. The
    preflight says so once for every scenario, naming the script's lines, and no scenario may launch."""
    from ftqual.scenario.model import load
    from ftqual.workflow.run_scenario import refusal

    tree = fake_tree(tmp_path, (0, 18, 2), {**our_options, "--step-batch-size-schedule": "str"})
    script = tmp_path / "train.sh"
    script.write_text(TEAM_SCRIPT)
    extra = (
        f"megatron_args_file: {script}\nscenarios:\n  baseline:\n    fault: none\n  kill:\n    fault: kill\n"
    )
    proc, report = preflight(tmp_path, tree, extra)
    c = check(report, "megatron_args")
    assert c["status"] == "fail" and proc.returncode == 1, c
    assert c["detail"] == (
        f"Megatron-Core 0.18.2's validate_args refuses every scenario's arguments (2): ValueError: {BOTH}; "
        f"written at {script}:6 --step-batch-size-schedule, {script}:5 --global-batch-size"
    )
    [line] = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAIL megatron_args")]
    assert f"{script}:6" in line and "fix:" in line
    assert report["not_applicable"] == {}
    cfg = load(tmp_path / "config.yaml")
    for name in ("baseline", "kill"):
        assert refusal(cfg, name, tmp_path / "preflight.json", None).startswith("the preflight failed")

    # negative control: the same script without the schedule passes validate_args
    script.write_text(TEAM_SCRIPT.replace('    --step-batch-size-schedule "0:16 2.4B:320"\n', ""))
    proc, report = preflight(tmp_path, tree, extra)
    c = check(report, "megatron_args")
    assert c["status"] == "pass" and "its validate_args too" in c["detail"], c


REAL_TREE = os.environ.get("FTQUAL_MEGATRON_TREE", "")


@pytest.mark.skipif(not REAL_TREE, reason="FTQUAL_MEGATRON_TREE (a real Megatron-LM checkout) is not set")
def test_a_real_megatron_s_validate_args_refuses_its_own_example_s_pair(tmp_path):
    """A real checkout (core_v0.18.2 and later): the arguments our launcher hands it, with the 175B
    example's --step-batch-size-schedule beside --global-batch-size, refused on this machine, no GPU."""
    from ftqual.preflight.megatron_args import parse_with_megatron

    rc, args, err = dry_run_workload(tmp_path, Path(REAL_TREE))
    assert rc == 0 and "--global-batch-size" in " ".join(args), err
    schedule = ["--step-batch-size-schedule", "0:16 2.4B:320"]
    refused, fine = parse_with_megatron(REAL_TREE, {"baseline": [*args, *schedule], "plain": args})
    if fine.unvalidated:
        pytest.skip(f"validate_args cannot run here: {fine.unvalidated}")
    assert fine.ok is True, fine
    assert refused.ok is False and refused.stage == "validate_args" and BOTH in refused.error, refused
