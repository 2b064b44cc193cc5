"""The pure checks, fed made-up facts: every fail condition and the `auto` resolutions."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ftqual.preflight import checks as C
from ftqual.preflight import checks_host as H
from ftqual.preflight import checks_megatron as M
from ftqual.preflight import checks_stack as S
from ftqual.preflight.nvrx_args import ParseResult
from ftqual.preflight.probes import LauncherArgs, PortFacts
from ftqual.scenario.job import MODEL
from ftqual.scenario.model import ConfigError
from tests.support.preflight import GIB, H200_STACK, good_facts, good_tools

SEED_TIMEOUTS = {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180}
WITH_TE = replace(H200_STACK, transformer_engine="2.8.0")
WITH_APEX = replace(H200_STACK, apex="0.1", apex_wgrad_ext=True)


def by_id(results, check_id):
    return next(r for r in results if r.id == check_id)


# -------------------------------------------------------------------------------- dist optimizer


def test_dist_optimizer_on_without_te_and_apex_fails(make_ctx):
    r = M.check_dist_optimizer(make_ctx({"dist_optimizer": "on"}))
    assert r.status == "fail"
    assert "DistributedOptimizer.state_dict" in r.detail and "93" in r.detail
    assert "dist_optimizer: auto" in r.fix


def test_dist_optimizer_yaml_boolean_on_is_on(make_ctx):
    # YAML 1.1 reads a bare `on` as True; the config layer turns it back into "on".
    assert M.check_dist_optimizer(make_ctx({"dist_optimizer": True})).status == "fail"


def test_dist_optimizer_auto_without_te_and_apex_is_off_and_says_why(make_ctx):
    ctx = make_ctx({"dist_optimizer": "auto"})
    assert ctx.resolved.dist_optimizer is False
    r = M.check_dist_optimizer(ctx)
    assert r.status == "pass"
    assert r.detail.startswith("auto -> off")
    assert "DistributedOptimizer.state_dict" in r.detail


@pytest.mark.parametrize("stack", [WITH_TE, WITH_APEX], ids=["te", "apex"])
def test_dist_optimizer_auto_with_fused_adam_is_on(make_ctx, stack):
    ctx = make_ctx({"dist_optimizer": "auto"}, stack=stack)
    assert ctx.resolved.dist_optimizer is True
    assert M.check_dist_optimizer(ctx).status == "pass"
    assert M.check_dist_optimizer(make_ctx({"dist_optimizer": "on"}, stack=stack)).status == "pass"


def test_dist_optimizer_on_in_one_scenario_only_fails_naming_it(make_ctx):
    ctx = make_ctx(
        {"scenarios": {"baseline": {"fault": "none"}, "kill": {"fault": "kill", "dist_optimizer": "on"}}}
    )
    r = M.check_dist_optimizer(ctx)
    assert r.status == "fail" and "kill" in r.detail


def test_dist_optimizer_skipped_for_smoke(make_ctx):
    assert M.check_dist_optimizer(make_ctx({"workload": "smoke", "dist_optimizer": "on"})).status == "skip"


# -------------------------------------------------------------------------------- transformer impl


def test_auto_impl_without_te_is_local_with_the_te_less_flags(make_ctx):
    ctx = make_ctx()
    assert ctx.resolved.transformer_impl == "local"
    flags = ctx.resolved.megatron_flags
    for flag in (
        "--no-gradient-accumulation-fusion",
        "--no-persist-layer-norm",
        "--no-masked-softmax-fusion",
    ):
        assert flag in flags
    assert M.check_transformer_impl(ctx).status == "pass"


def test_auto_impl_with_te_and_apex_ext(make_ctx):
    ctx = make_ctx(stack=replace(WITH_TE, apex="0.1", apex_wgrad_ext=True))
    assert ctx.resolved.transformer_impl == "transformer_engine"
    assert "--no-gradient-accumulation-fusion" not in ctx.resolved.megatron_flags


def test_explicit_te_without_te_fails(make_ctx):
    ctx = make_ctx({"transformer_impl": "transformer_engine"})
    assert M.check_transformer_impl(ctx).status == "fail"
    assert M.check_transformer_engine(ctx).status == "fail"


def test_smoke_resolution_has_no_megatron_flags(make_ctx):
    ctx = make_ctx({"workload": "smoke"})
    assert ctx.resolved.to_json() == {
        "workload": "smoke",
        "transformer_impl": "local",
        "dist_optimizer": False,
        "megatron_flags": [],
        "reasons": ctx.resolved.reasons,
    }


# -------------------------------------------------------------------------------- stack


def test_fewer_gpus_than_gpus_per_node_fails_for_megatron(make_ctx):
    ctx = make_ctx({"gpus_per_node": 4})
    r = S.check_gpus(ctx)
    assert r.status == "fail" and "2 GPU(s)" in r.detail and "gpus_per_node is 4" in r.detail


def test_gpus_skipped_for_smoke_on_a_cpu_box(make_ctx):
    cpu = replace(H200_STACK, cuda=None, nccl=None, gpu_count=0, gpu_model=None, nccl_backend=False)
    ctx = make_ctx({"workload": "smoke"}, stack=cpu)
    assert S.check_gpus(ctx).status == "skip"
    assert S.check_cuda(ctx).status == "skip"
    assert S.check_torch(ctx).status == "pass"


def test_cpu_torch_fails_cuda_for_megatron(make_ctx):
    cpu = replace(H200_STACK, cuda=None, gpu_count=0, nccl_backend=False)
    assert S.check_cuda(make_ctx(stack=cpu)).status == "fail"


def test_missing_torch_fails(make_ctx):
    s = replace(H200_STACK, torch=None, errors={"torch": "import torch failed: ModuleNotFoundError"})
    r = S.check_torch(make_ctx(stack=s))
    assert r.status == "fail" and "ModuleNotFoundError" in r.detail


@pytest.mark.parametrize(("version", "status"), [("0.7.0", "pass"), ("0.6.0", "warn"), (None, "fail")])
def test_nvrx_version(make_ctx, version, status):
    assert S.check_nvrx(make_ctx(stack=replace(H200_STACK, nvrx=version))).status == status


def test_old_python_fails_and_311_warns_for_megatron(make_ctx):
    assert S.check_python(make_ctx(stack=replace(H200_STACK, python="3.10.12"))).status == "fail"
    assert S.check_python(make_ctx(stack=replace(H200_STACK, python="3.11.7"))).status == "warn"
    assert (
        S.check_python(make_ctx({"workload": "smoke"}, stack=replace(H200_STACK, python="3.11.7"))).status
        == "pass"
    )


# -------------------------------------------------------------------------------- ft_launcher


def _args(name, result=None, error=None):
    return LauncherArgs(name, ("--nnodes=1",), "built by ftqual.launch", result, error)


def test_ft_launcher_flags_pass_when_nvrx_reads_back_the_timeouts(make_ctx):
    parsed = {
        "rank_section_timeouts": {"setup": 900.0, "step": 120.0, "checkpointing": 600.0},
        "rank_out_of_section_timeout": 180.0,
    }
    ctx = make_ctx(
        {"timeouts": SEED_TIMEOUTS},
        launcher_args=tuple(_args(n, ParseResult(True, None, parsed)) for n in ("baseline", "kill")),
    )
    assert S.check_ft_launcher_flags(ctx).status == "pass"


def test_ft_launcher_flags_fail_on_a_rejected_value(make_ctx):
    bad = ParseResult(False, "argument --max-restarts: invalid int value: 'x'")
    r = S.check_ft_launcher_flags(make_ctx(launcher_args=(_args("kill", bad),)))
    assert r.status == "fail" and "kill" in r.detail and "invalid int value" in r.detail
    assert "vanish" in r.fix


def test_ft_launcher_flags_name_the_nvrx_version_that_lacks_a_flag(make_ctx):
    bad = ParseResult(False, "unrecognized arguments: --ft-checkpoint-iteration-file=/c/tracker")
    ctx = make_ctx(launcher_args=(_args("kill", bad),), stack=replace(H200_STACK, nvrx="0.5.0"))
    r = S.check_ft_launcher_flags(ctx)
    assert r.status == "fail" and "nvidia-resiliency-ext 0.5.0" in r.detail
    assert "--ft-checkpoint-iteration-file" in r.detail and "0.6.0" in r.fix


def test_ft_launcher_flags_fail_when_the_parser_cannot_run(make_ctx):
    broken = ParseResult(None, "cannot import NVRx's launcher: ModuleNotFoundError: grpc")
    assert S.check_ft_launcher_flags(make_ctx(launcher_args=(_args("kill", broken),))).status == "fail"


def test_ft_launcher_flags_fail_when_timeouts_read_back_differently(make_ctx):
    parsed = {
        "rank_section_timeouts": {"setup": 900.0, "step": 12.0, "checkpointing": 600.0},
        "rank_out_of_section_timeout": 180.0,
    }
    ctx = make_ctx(
        {"timeouts": SEED_TIMEOUTS, "scenarios": {"kill": {"fault": "kill"}}},
        launcher_args=(_args("kill", ParseResult(True, None, parsed)),),
    )
    assert S.check_ft_launcher_flags(ctx).status == "fail"


def test_launcher_settings_refusal_fails(make_ctx):
    ctx = make_ctx(
        launcher_args=(_args("kill", None, "NVRX_FAULT_RANK=5 is outside the world of 2 rank(s)"),)
    )
    r = S.check_launcher_settings(ctx)
    assert r.status == "fail" and "NVRX_FAULT_RANK=5" in r.detail
    assert S.check_ft_launcher_flags(ctx).status == "skip"


def test_missing_ft_launcher_executable_fails(make_ctx):
    assert S.check_ft_launcher(make_ctx(ft_launcher_exe=None)).status == "fail"
    assert S.check_ft_launcher(make_ctx()).status == "pass"


def test_node_local_tmpdir_env_fails(make_ctx):
    r = S.check_nvrx_env(make_ctx(env={"NVRX_NODE_LOCAL_TMPDIR": "/tmp/nvrx"}))
    assert r.status == "fail" and "unset NVRX_NODE_LOCAL_TMPDIR" in r.fix


# -------------------------------------------------------------------------------- megatron


def test_megatron_without_path_fails_with_a_fix(make_ctx):
    ctx = make_ctx({"megatron_path": ""}, megatron=None)
    r = M.check_megatron_path(ctx)
    assert r.status == "fail" and "MEGATRON_PATH" in r.fix and "pretrain_gpt.py" in r.fix


def test_megatron_version_other_than_019_warns(make_ctx):
    m = good_facts().megatron
    assert M.check_megatron_version(make_ctx(megatron=replace(m, version="0.13.0rc2"))).status == "warn"
    assert M.check_megatron_version(make_ctx()).status == "pass"


def test_missing_triton_fails_megatron_imports(make_ctx):
    m = replace(good_facts().megatron, missing_imports=("triton",))
    r = M.check_megatron_imports(make_ctx(megatron=m))
    assert r.status == "fail" and "pip install triton" in r.fix


@pytest.mark.parametrize("missing", ["make", "cxx", "python3_config"])
def test_missing_build_tool_fails(make_ctx, missing):
    r = M.check_build_tools(make_ctx(tools=replace(good_tools(), **{missing: None})))
    assert r.status == "fail"


def test_python3_config_for_another_python_fails(make_ctx):
    tools = replace(good_tools(), python3_config_suffix=".cpython-311-x86_64-linux-gnu.so")
    r = M.check_build_tools(make_ctx(tools=tools))
    assert r.status == "fail" and "PATH" in r.fix


def test_missing_pybind11_fails_unless_the_helper_is_built(make_ctx):
    tools = replace(good_tools(), pybind11=False, pybind11_error="No module named pybind11")
    assert M.check_build_tools(make_ctx(tools=tools)).status == "fail"
    built = replace(good_facts().megatron, helper_built=True)
    assert M.check_build_tools(make_ctx(tools=tools, megatron=built)).status == "warn"


def test_read_only_megatron_tree_without_helper_fails(make_ctx):
    ro = replace(good_facts().megatron, datasets_writable=False)
    assert M.check_build_tools(make_ctx(megatron=ro)).status == "fail"


def test_parallelism(make_ctx):
    assert M.check_parallelism(make_ctx({"tp": 2, "pp": 1})).status == "pass"
    for bad in ({"tp": 3}, {"gpus_per_node": 2, "tp": 2, "pp": 2}):
        with pytest.raises(ConfigError):
            make_ctx(bad)


# -------------------------------------------------------------------------------- storage


def test_multi_node_on_node_local_fs_warns_and_shared_fs_passes(make_ctx):
    local = replace(good_facts().work_dir, fs_type="overlay", mount_point="/")
    assert H.check_shared_fs(make_ctx({"nnodes": 2}, work_dir=local)).status == "warn"
    assert H.check_shared_fs(make_ctx({"nnodes": 2})).status == "pass"
    assert H.check_shared_fs(make_ctx({"nnodes": 1}, work_dir=local)).status == "pass"


def test_unwritable_work_dir_fails(make_ctx):
    w = replace(good_facts().work_dir, writable=False)
    assert H.check_work_dir(make_ctx(work_dir=w)).status == "fail"


def test_disk_estimate_for_the_seed_model():
    params = H.megatron_params(MODEL)
    assert 13_000_000 < params < 14_000_000


def test_too_little_disk_fails(make_ctx):
    ctx = make_ctx(work_dir=replace(good_facts().work_dir, free_bytes=1 * GIB))
    r = H.check_disk_space(ctx)
    assert r.status == "fail" and f"{H.DISK_MARGIN:g}x margin" in r.detail
    assert H.check_disk_space(make_ctx()).status == "pass"


# -------------------------------------------------------------------------------- host


def test_socket_path_is_the_longest_name_nvrx_binds():
    n, path = H.socket_path_len("/tmp", 4194304, 8)
    assert path == "/tmp/_ft_launcher9999999_to_rmon.socket" and n == len(path)
    n, path = H.socket_path_len("/tmp", 4194304, 10000)  # 5-digit local ranks outgrow "_to_rmon"
    assert path.endswith("_rmon9999.socket")


def test_tmpdir_boundary(make_ctx):
    base = len("/_ft_launcher4194303_to_rmon.socket")  # the longest name with a 7-digit pid
    fits = "/" + "t" * (H.SUN_PATH_MAX - base - 1)
    assert H.socket_path_len(fits, 4194304, 2)[0] == H.SUN_PATH_MAX
    assert H.check_tmpdir(make_ctx(tmpdir=fits)).status == "pass"
    r = H.check_tmpdir(make_ctx(tmpdir=fits + "u"))
    assert r.status == "fail" and r.fix == "export TMPDIR=/tmp"


def test_log_port_unbindable_fails(make_ctx):
    ports = PortFacts(ephemeral_ok=False, default_in_use=False, error="denied")
    assert H.check_log_server_port(make_ctx(ports=ports)).status == "fail"
    assert H.check_log_server_port(make_ctx()).status == "pass"


# -------------------------------------------------------------------------------- scenarios


def test_fault_rank_outside_the_world_is_a_config_error(make_ctx):
    with pytest.raises(ConfigError, match=r"0\.\.1"):
        make_ctx({"scenarios": {"kill": {"fault": "kill", "rank": 2}}})


def test_scenario_override_of_the_world_is_used_for_the_rank(make_ctx):
    ctx = make_ctx(
        {"scenarios": {"kill": {"fault": "kill", "rank": 3, "gpus_per_node": 4}}},
        stack=replace(H200_STACK, gpu_count=4),
    )
    assert H.check_scenarios(ctx)[0].status == "pass"


def test_too_few_iterations_for_a_checkpoint_after_the_resume_fails(make_ctx):
    ctx = make_ctx({"train_iters": 9, "save_interval": 5})
    results = {r.id: r for r in H.check_scenarios(ctx)}
    assert results["scenario:baseline"].status == "pass"
    assert results["scenario:kill"].status == "fail"
    assert "train_iters >= 10" in results["scenario:kill"].fix


def test_hang_detail_states_the_detection_budget(make_ctx):
    ctx = make_ctx({"timeouts": SEED_TIMEOUTS})
    hang = by_id(H.check_scenarios(ctx), "scenario:hang")
    assert hang.status == "pass" and "~120 s" in hang.detail and "600 s" in hang.detail


def test_disabled_scenarios_are_left_out(make_ctx):
    ctx = make_ctx(
        {"scenarios": {"baseline": {"fault": "none"}, "hang": {"fault": "hang", "enabled": False}}}
    )
    assert [r.id for r in H.check_scenarios(ctx)] == ["scenario:baseline"]


# -------------------------------------------------------------------------------- verdict


def test_verdict_and_a_clean_gpu_node(make_ctx, ok_parse):
    ctx = make_ctx(
        {"timeouts": SEED_TIMEOUTS},
        launcher_args=tuple(_args(n, ok_parse) for n in ("baseline", "kill", "hang")),
    )
    results = C.run_checks(ctx)
    bad = [r for r in results if r.status in ("fail", "warn")]
    assert not bad, bad
    assert C.verdict(results) == "pass"
    assert C.verdict([*results, C.CheckResult("x", "warn", "")]) == "warn"
    assert C.verdict([*results, C.CheckResult("x", "warn", ""), C.CheckResult("y", "fail", "")]) == "fail"
    assert all(r.detail and "\n" not in r.detail for r in results)


def test_stack_dumps_say_in_one_line_when_they_are_not_possible(make_ctx):
    """The run still runs (warn, never fail): without py-spy or ptrace a held rank is only not seen."""
    from ftqual.preflight.dump_probe import DumpProbe

    good = S.check_stack_dumps(make_ctx(stack_dumps=DumpProbe("/venv/bin/py-spy", "py-spy 0.4.3")))
    assert good.status == "pass" and "py-spy 0.4.3" in good.detail
    missing = S.check_stack_dumps(make_ctx(stack_dumps=DumpProbe(None)))
    assert missing.status == "warn" and "py-spy" in missing.fix and "\n" not in missing.detail
    refused = S.check_stack_dumps(
        make_ctx(
            stack_dumps=DumpProbe("/venv/bin/py-spy", "py-spy 0.4.3", "Permission denied", ptrace_scope="2")
        )
    )
    assert refused.status == "warn" and "ptrace_scope 2" in refused.detail and "SYS_PTRACE" in refused.fix
    assert S.check_stack_dumps(make_ctx(stack_dumps=DumpProbe(None, asked_none=True))).status == "pass"


def test_the_dump_probe_reads_a_real_process_here():
    """The probe does what a sentinel does: one dump of a process that is not its child's parent."""
    import os

    from ftqual.launch.command import stack_dump_tool
    from ftqual.preflight.dump_probe import probe_stack_dumps

    probe = probe_stack_dumps(os.environ)
    if stack_dump_tool(os.environ) is None:
        pytest.skip("py-spy is pinned in requirements.lock: CI has it")
    assert probe.error is None and probe.version.startswith("py-spy ")
    assert probe_stack_dumps({"FTQUAL_DUMP_TOOL": "none"}).tool is None
    broken = probe_stack_dumps({"FTQUAL_DUMP_TOOL": "/bin/false"})
    assert broken.tool == "/bin/false" and broken.error is not None


def test_the_jobs_checkpoints_are_judged_against_the_checkpoint_dirs_free_space(make_ctx):
    """1.3b: 18.4 GB a checkpoint, 2 written by each of the three runs (20 iterations, one every 10). Kept:
    110 GB, x1.25 margin: 128 GiB. Dropped once verified (auto, for a real model): one run's 2, 43 GiB."""
    job = {"model": "1.3b", "checkpoint_dir": "/team/ckpt", "train_iters": 20, "save_interval": 10}
    roomy = replace(good_facts().work_dir, path="/team/ckpt", probe_path="/team", free_bytes=600 * GIB)
    r = H.check_disk_space(make_ctx({**job, "checkpoint_payloads": "keep"}, checkpoint_dir=roomy))
    assert r.status == "pass" and "checkpoint_dir" in r.detail and "1.3b" in r.detail
    assert "x 6 checkpoints on the disk at once (3 runs, every run's kept)" in r.detail
    # the same job kept on a checkpoint directory with 100 GiB free: refused in one line (negative control)
    tight = replace(roomy, free_bytes=100 * GIB)
    r = H.check_disk_space(make_ctx({**job, "checkpoint_payloads": "keep"}, checkpoint_dir=tight))
    assert r.status == "fail" and "\n" not in r.detail
    # by default its payloads go once each run is verified: one run's checkpoints at a time fit there
    r = H.check_disk_space(make_ctx(job, checkpoint_dir=tight))
    assert r.status == "pass" and "x 2 checkpoints on the disk at once" in r.detail and "dropped" in r.detail
    # ... but not in 40 GiB
    r = H.check_disk_space(make_ctx(job, checkpoint_dir=replace(roomy, free_bytes=40 * GIB)))
    assert r.status == "fail"
    # the work dir's 500 GiB does not count where the checkpoints go elsewhere
    assert good_facts().work_dir.free_bytes > 400 * GIB


def test_the_jobs_gpu_memory_is_judged_against_the_gpus(make_ctx):
    h200 = replace(good_facts().stack, gpu_memory_bytes=139 * GIB)
    ok = H.check_gpu_memory(make_ctx({"model": "1.3b"}, stack=h200))
    assert ok.status == "pass" and "1.3b" in ok.detail
    small = replace(h200, gpu_memory_bytes=16 * GIB)
    bad = H.check_gpu_memory(make_ctx({"model": "1.3b"}, stack=small))
    assert bad.status == "fail" and "does not fit" in bad.detail and "\n" not in bad.detail
    assert H.check_gpu_memory(make_ctx({"model": "8b"}, stack=h200)).status == "fail"
    assert H.check_gpu_memory(make_ctx({"model": "tiny"}, stack=small)).status == "pass"
    assert H.check_gpu_memory(make_ctx({"workload": "smoke"}, stack=small)).status == "skip"


def test_checkpoint_dir_missing_fails_in_one_line(make_ctx):
    """The config's checkpoint_dir must exist and be writable: its problems (gathered by the probe,
    ftqual.scenario.checkpoint_dir) fail the preflight in one line."""
    said = (
        "checkpoint_dir /nonexistent/ckpt does not exist (its nearest existing parent is /): create it on "
        "the filesystem you want qualified (ftqual makes only each run's folder below it), or fix the path"
    )
    ctx = make_ctx({"checkpoint_dir": "/nonexistent/ckpt"}, checkpoint_dir_problems=(said,))
    r = H.check_checkpoint_dir(ctx)
    assert r.status == "fail" and r.detail == said and "\n" not in r.detail and r.fix
    assert C.verdict(C.run_checks(ctx)) == "fail"
    # the free space of the disk above a missing root is not judged: it is not where the runs would write
    assert H.check_disk_space(ctx).status == "skip"
    two = make_ctx({"checkpoint_dir": "/x"}, checkpoint_dir_problems=("one", "two"))
    assert H.check_checkpoint_dir(two).detail == "one; two"


def test_checkpoint_dir_names_the_filesystem_it_is_on(make_ctx):
    where = replace(
        good_facts().work_dir, path="/lus/team/ckpt", mount_point="/lus", device="10.0.0.1@tcp:/fs"
    )
    r = H.check_checkpoint_dir(make_ctx({"checkpoint_dir": "/lus/team/ckpt"}, checkpoint_dir=where))
    assert r.status == "pass"
    assert r.detail == (
        "/lus/team/ckpt: an existing, writable directory on lustre at /lus (device 10.0.0.1@tcp:/fs), "
        "500.00 GiB free"
    )


def test_checkpoint_dir_not_set_is_skipped(make_ctx):
    assert H.check_checkpoint_dir(make_ctx()).status == "skip"
