"""The preflight's judgement of each scenario (ftqual.preflight.applicability): what the stack cannot run
is not applicable, with its reason, and the preflight does not fail for it; a problem of the baseline's or
of the config's own stops every scenario, as before."""

from __future__ import annotations

import os
import shutil

import pytest

from ftqual.preflight import applicability, probes, report_schema
from ftqual.preflight import checks_host as H
from ftqual.preflight import checks_megatron as M
from ftqual.preflight import checks_stack as S
from ftqual.preflight.checks import run_checks, verdict
from ftqual.preflight.command import build_report, summary_lines
from ftqual.preflight.megatron_args import MegatronParse
from ftqual.preflight.nvrx_args import ParseResult
from ftqual.preflight.probes import LauncherArgs

VERIFIED = {"scenarios": {"kill": {"fault": "kill", "rank": 1}, "verified": {"fault": "kill", "rank": 1}}}
NO_FLAG = "unrecognized arguments: --verify-integrity"


def parses(**rejected: str) -> tuple[MegatronParse, ...]:
    names = ("baseline", "kill", "verified")
    return tuple(MegatronParse(n, n not in rejected, rejected.get(n)) for n in names)


def test_a_flag_only_one_scenario_adds_makes_it_not_applicable(make_ctx):
    ctx = make_ctx(VERIFIED, megatron_args=parses(verified=NO_FLAG))
    assert applicability.judge(ctx) == {
        "verified": "Megatron-Core 0.19.1 has no --verify-integrity (its own parser rejects this scenario's "
        "arguments)"
    }
    r = M.check_megatron_args(ctx)
    assert r.status == "pass" and "accepts 2 of 3" in r.detail and "verified: Megatron-Core" in r.detail
    scenario = next(c for c in H.check_scenarios(ctx) if c.id == "scenario:verified")
    assert scenario.status == "skip" and scenario.detail.startswith("not applicable on this stack: ")


def test_the_report_names_it_and_does_not_fail_for_it(make_ctx, ok_parse):
    launcher = tuple(
        LauncherArgs(n, ("--nnodes=1",), "ftqual.launch", ok_parse) for n in ("baseline", "kill", "verified")
    )
    ctx = make_ctx(VERIFIED, megatron_args=parses(verified=NO_FLAG), launcher_args=launcher)
    results = run_checks(ctx)
    assert not [r for r in results if r.status == "fail"], [r for r in results if r.status == "fail"]
    report = build_report(ctx, results)
    assert report["verdict"] == verdict(results) != "fail"
    assert list(report["not_applicable"]) == ["verified"]
    assert report_schema.problems(report) == []
    assert report_schema.not_applicable_of(report) == report["not_applicable"]
    assert summary_lines(report)[-1].endswith("; not applicable on this stack: verified (the others run)")


def test_the_baselines_own_rejection_stops_them_all(make_ctx):
    ctx = make_ctx(VERIFIED, megatron_args=parses(baseline=NO_FLAG, verified=NO_FLAG))
    assert applicability.judge(ctx) == {}
    r = M.check_megatron_args(ctx)
    assert r.status == "fail" and "rejects scenario baseline's arguments" in r.detail


@pytest.mark.parametrize(
    "error",
    [
        "argument --ckpt-format: invalid choice: 'zarr'",  # a bad value: the settings' mistake
        "unrecognized arguments: --my-flag",  # a flag the team wrote into this scenario itself
    ],
)
def test_a_mistake_of_the_config_is_no_gap_of_the_stack(make_ctx, error):
    raw = {**VERIFIED, "megatron_args": ["--my-flag"]}
    ctx = make_ctx(raw, megatron_args=parses(verified=error))
    assert applicability.judge(ctx) == {}
    assert M.check_megatron_args(ctx).status == "fail"


def test_a_flag_ft_launcher_lacks_for_one_scenario(make_ctx, ok_parse):
    lacking = ParseResult(False, "unrecognized arguments: --ft-new-flag=3")
    ctx = make_ctx(
        VERIFIED,
        launcher_args=(
            LauncherArgs("baseline", (), "ftqual.launch", ok_parse),
            LauncherArgs("kill", (), "ftqual.launch", ok_parse),
            LauncherArgs("verified", (), "ftqual.launch", lacking),
        ),
    )
    assert applicability.judge(ctx)["verified"].startswith(
        "ft_launcher of nvidia-resiliency-ext 0.7.0 has no --ft-new-flag "
    )
    assert S.check_ft_launcher_flags(ctx).status == "pass"
    # the baseline's command rejected too: every scenario's problem
    base = make_ctx(VERIFIED, launcher_args=(LauncherArgs("baseline", (), "ftqual.launch", lacking),))
    assert applicability.judge(base) == {}
    assert S.check_ft_launcher_flags(base).status == "fail"


def test_a_fault_this_machine_cannot_make(make_ctx):
    raw = {
        "scenarios": {"kill": {"fault": "kill", "rank": 1}, "disk_full": {"fault": "disk_full", "rank": 1}}
    }
    why = "fault disk_full mounts a size-capped filesystem and needs root; the runs are not root here"
    assert applicability.judge(make_ctx(raw, capped_fs=why)) == {"disk_full": why}
    assert applicability.judge(make_ctx(raw)) == {}  # it can: the scenario runs


def test_the_capped_filesystem_probe_says_what_is_missing(tmp_path):
    all_caps = (1 << 41) - 1
    assert "needs root" in probes.capped_fs_problem(os.environ.get("PATH"), euid=1000)
    no_admin = all_caps & ~(1 << probes.CAP_SYS_ADMIN)
    assert "no CAP_SYS_ADMIN" in probes.capped_fs_problem(os.environ.get("PATH"), 0, no_admin)
    empty = tmp_path / "bin"
    empty.mkdir()
    assert probes.capped_fs_problem(str(empty), 0, all_caps).endswith("mkfs.ext4 and mount not on PATH")
    path = os.environ.get("PATH")
    if shutil.which("mkfs.ext4", path=path) is None or shutil.which("mount", path=path) is None:
        pytest.skip("mkfs.ext4 or mount is not installed here")
    absent = str(tmp_path / "loop-control")
    assert probes.capped_fs_problem(path, 0, all_caps, absent).endswith(f"{absent} is absent")
    present = tmp_path / "present"
    present.write_text("")
    assert probes.capped_fs_problem(path, 0, all_caps, str(present)) is None


def test_this_process_capabilities_are_read_from_proc():
    caps = probes.effective_capabilities()
    assert caps is None or caps >= 0
    assert probes.effective_capabilities("/nonexistent/status") is None


@pytest.mark.parametrize("bad", [[], {"kill": ""}, {"kill": 3}])
def test_a_malformed_not_applicable_map_makes_the_report_malformed(bad):
    doc = {"schema": "ftqual.preflight/v1", "verdict": "pass", "checks": [], "not_applicable": bad}
    assert report_schema.problems(doc) and report_schema.verdict_of(doc) == "malformed"
    assert report_schema.not_applicable_of(doc) == {}


# --------------------------------------------------------------- what Megatron's own validate_args refuses

SCRIPT = """#!/bin/bash
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 16
    --step-batch-size-schedule "0:16 2.4B:320"
)
torchrun --nproc_per_node 1 pretrain_gpt.py ${TRAINING_ARGS[@]}
"""
BOTH = "ValueError: Cannot specify both --step-batch-size-schedule and --global-batch-size"


def refusing_ctx(make_ctx, ok_parse, tmp_path, refused: tuple[str, ...], **raw):
    """The team's launch script (Megatron's 175B example's batch lines) with validate_args' refusal of
    the scenarios `refused`; each scenario's ft_launcher command carries the team's arguments after `--`."""
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    ctx = make_ctx({**VERIFIED, "megatron_args_file": str(script), **raw})
    names = ("baseline", "kill", "verified")
    team = list(ctx.cfg.by_name["baseline"].megatron_args)
    launcher = tuple(
        LauncherArgs(n, ("--nnodes=1", "w.py", "--", "--lr=0.1", *team), "ftqual.launch", ok_parse)
        for n in names
    )
    parsed = tuple(
        MegatronParse(n, False, BOTH, "validate_args") if n in refused else MegatronParse(n, True)
        for n in names
    )
    return make_ctx(
        {**VERIFIED, "megatron_args_file": str(script), **raw},
        megatron_args=parsed,
        launcher_args=launcher,
    )


def test_a_refusal_every_scenario_shares_fails_once_naming_the_script_s_lines(make_ctx, ok_parse, tmp_path):
    ctx = refusing_ctx(make_ctx, ok_parse, tmp_path, ("baseline", "kill", "verified"))
    assert applicability.judge(ctx) == {}  # the baseline's own: every scenario's, none launched
    r = M.check_megatron_args(ctx)
    assert r.status == "fail" and "\n" not in r.detail
    script = tmp_path / "train.sh"
    assert r.detail == (
        f"Megatron-Core 0.19.1's validate_args refuses every scenario's arguments (3): {BOTH}; written at "
        f"{script}:5 --step-batch-size-schedule, {script}:4 --global-batch-size"
    )
    results = run_checks(ctx)
    assert verdict(results) == "fail"
    assert [x.id for x in results if x.status == "fail" and x.id == "megatron_args"] == ["megatron_args"]


def test_a_refusal_of_one_scenario_s_arguments_makes_it_not_applicable(make_ctx, ok_parse, tmp_path):
    ctx = refusing_ctx(make_ctx, ok_parse, tmp_path, ("verified",))
    why = applicability.judge(ctx)
    assert list(why) == ["verified"] and why["verified"].startswith(
        f"Megatron-Core 0.19.1's validate_args refuses this scenario's arguments: {BOTH}; written at "
    )
    r = M.check_megatron_args(ctx)
    assert r.status == "pass" and "not applicable on this stack: verified: " in r.detail
    scenario = next(c for c in H.check_scenarios(ctx) if c.id == "scenario:verified")
    assert scenario.status == "skip" and "validate_args refuses" in scenario.detail
    report = build_report(ctx, run_checks(ctx))
    assert list(report["not_applicable"]) == ["verified"]


def test_the_config_key_is_named_where_the_arguments_came_from_the_config(make_ctx, ok_parse, tmp_path):
    raw = {**VERIFIED, "megatron_args": ["--global-batch-size", "16", "--step-batch-size-schedule", "0:16"]}
    names = ("baseline", "kill", "verified")
    launcher = tuple(LauncherArgs(n, ("--", *raw["megatron_args"]), "ftqual.launch", ok_parse) for n in names)
    parsed = tuple(MegatronParse(n, False, BOTH, "validate_args") for n in names)
    r = M.check_megatron_args(make_ctx(raw, megatron_args=parsed, launcher_args=launcher))
    assert r.status == "fail" and r.detail.endswith(
        "written at megatron_args[2] --step-batch-size-schedule, megatron_args[0] --global-batch-size"
    )


def test_arguments_validate_args_could_not_judge_here_are_a_warning_never_a_pass(make_ctx):
    parsed = tuple(MegatronParse(n, True) for n in ("baseline", "kill"))
    ctx = make_ctx(megatron_args=parsed)
    judged = M.check_megatron_args(ctx)
    assert judged.status == "pass" and "its validate_args too" in judged.detail
    cuda = "RuntimeError: Found no NVIDIA driver on your system"
    ctx = make_ctx(megatron_args=(parsed[0], MegatronParse("kill", True, unvalidated=cuda)))
    r = M.check_megatron_args(ctx)
    assert r.status == "warn" and cuda in r.detail and "validate_args too" not in r.detail
