"""Checks of the software stack: Python, torch/CUDA/GPUs, NVRx and the ft_launcher command lines."""

from __future__ import annotations

from ftqual.preflight import applicability
from ftqual.preflight.check_base import FAIL, PASS, SKIP, WARN, CheckResult, Context
from ftqual.stack.facts import QUALIFIED_NVRX


def check_workload(ctx: Context) -> CheckResult:
    if ctx.cfg.workload not in ("smoke", "megatron"):
        return CheckResult(
            "workload", FAIL, f"unknown workload {ctx.cfg.workload!r}", "set workload: smoke or megatron"
        )
    shapes = sorted({f"{s.nnodes}x{s.gpus_per_node}" for s in ctx.runs})
    return CheckResult(
        "workload",
        PASS,
        f"workload {ctx.cfg.workload}, {len(ctx.cfg.scenarios)} scenario(s), "
        f"nodes x ranks per node: {', '.join(shapes)}",
    )


def check_python(ctx: Context) -> CheckResult:
    v = ctx.facts.stack.python
    major_minor = tuple(int(x) for x in v.split(".")[:2])
    if major_minor < (3, 11):
        return CheckResult(
            "python",
            FAIL,
            f"Python {v}; ftqual and NVRx's modules need 3.11+",
            "use a Python 3.11+ (3.12 for Megatron) interpreter for the venv",
        )
    if ctx.megatron and major_minor < (3, 12):
        return CheckResult(
            "python",
            WARN,
            f"Python {v}; Megatron core 0.19 declares requires-python >=3.12 and "
            "NVRx 0.7.0 wheels are CPython 3.12 only",
            "train with Python 3.12",
        )
    return CheckResult("python", PASS, f"Python {v} ({ctx.facts.python_executable})")


def check_torch(ctx: Context) -> CheckResult:
    s = ctx.facts.stack
    if s.torch is None:
        why = s.errors.get("torch", "torch is not importable")
        return CheckResult("torch", FAIL, why, "install torch into the interpreter that runs the workflow")
    if not ctx.megatron and not s.gloo_backend:
        return CheckResult(
            "torch",
            FAIL,
            f"torch {s.torch} has no gloo backend (the smoke workload uses it)",
            "install a torch build with torch.distributed and gloo",
        )
    return CheckResult("torch", PASS, f"torch {s.torch}, CUDA {s.cuda or 'none'}, NCCL {s.nccl or 'none'}")


def check_cuda(ctx: Context) -> CheckResult:
    s = ctx.facts.stack
    if not ctx.megatron:
        return CheckResult("cuda", SKIP, f"the {ctx.cfg.workload} workload runs on CPU (gloo)")
    if s.torch is None:
        return CheckResult("cuda", FAIL, "torch is missing", "install a CUDA build of torch")
    if not s.cuda:
        return CheckResult(
            "cuda",
            FAIL,
            f"torch {s.torch} is a CPU-only build",
            "install a CUDA build of torch matching the driver",
        )
    if not s.nccl_backend:
        return CheckResult(
            "cuda",
            FAIL,
            f"torch {s.torch} (CUDA {s.cuda}) has no NCCL backend",
            "install a torch build with NCCL",
        )
    return CheckResult("cuda", PASS, f"CUDA {s.cuda}, NCCL {s.nccl}")


def check_gpus(ctx: Context) -> CheckResult:
    s = ctx.facts.stack
    have, need = s.gpu_count, ctx.max_gpus_per_node
    seen = f"{have} GPU(s) visible" + (f" ({s.gpu_model}, driver {s.driver})" if have else "")
    if not ctx.megatron:
        return CheckResult("gpus", SKIP, f"{seen}; the {ctx.cfg.workload} workload runs on CPU")
    if have < need:
        why = s.errors.get("torch") or s.errors.get("nvidia_smi") or ""
        return CheckResult(
            "gpus",
            FAIL,
            f"{seen}, gpus_per_node is {need}" + (f" ({why})" if why else ""),
            f"run on a node with {need} GPUs (check CUDA_VISIBLE_DEVICES) or lower gpus_per_node",
        )
    if have > need:
        return CheckResult(
            "gpus",
            PASS,
            f"{seen}, using {need} per node; NVRx checks GPU memory on indices "
            f"0..{need - 1}, so expose exactly the GPUs the job uses when others are busy",
        )
    return CheckResult("gpus", PASS, f"{seen}, gpus_per_node {need}")


def check_nvrx(ctx: Context) -> CheckResult:
    v = ctx.facts.stack.nvrx
    if v is None:
        return CheckResult(
            "nvrx",
            FAIL,
            "nvidia-resiliency-ext is not installed (no distribution metadata)",
            "install nvidia-resiliency-ext==0.7.0 (tools/install_nvrx.py on Python 3.11)",
        )
    if v != QUALIFIED_NVRX:
        return CheckResult(
            "nvrx",
            WARN,
            f"nvidia-resiliency-ext {v}; this workflow was qualified with {QUALIFIED_NVRX}",
            f"install nvidia-resiliency-ext=={QUALIFIED_NVRX}, or treat the results as a new qualification",
        )
    return CheckResult("nvrx", PASS, f"nvidia-resiliency-ext {v}")


def check_ft_launcher(ctx: Context) -> CheckResult:
    exe = ctx.facts.ft_launcher_exe
    if exe is None:
        return CheckResult(
            "ft_launcher",
            FAIL,
            "no ft_launcher beside the Python that runs the workflow, nor on PATH (the launcher exits 2)",
            "install nvidia-resiliency-ext into this interpreter's environment",
        )
    return CheckResult("ft_launcher", PASS, f"ft_launcher at {exe}")


def check_stack_dumps(ctx: Context) -> CheckResult:
    """Stack dumps of ranks that hang or linger (ftqual.rank.sentinel) need py-spy and ptrace
    permission;
    without them a run still runs and is judged the same, but cannot say where a held rank waited."""
    probe = ctx.facts.stack_dumps
    if probe is None:
        return CheckResult("stack_dumps", SKIP, "not probed")
    fallback = (
        "ranks that hang or linger get Python's faulthandler only (no child processes, no native frames, "
        "nothing from a stopped rank)"
    )
    if probe.tool is None:
        if probe.asked_none:
            return CheckResult("stack_dumps", PASS, f"FTQUAL_DUMP_TOOL=none: {fallback}")
        return CheckResult(
            "stack_dumps",
            WARN,
            f"stack dumps not possible with py-spy: not found beside {ctx.facts.python_executable} nor on "
            f"PATH; {fallback}",
            "pip install py-spy==0.4.3 into the training environment (or set FTQUAL_DUMP_TOOL to its path)",
        )
    if probe.error is not None:
        scope = f" (kernel.yama.ptrace_scope {probe.ptrace_scope})" if probe.ptrace_scope else ""
        return CheckResult(
            "stack_dumps",
            WARN,
            f"stack dumps not possible: {probe.tool} could not read a process here{scope}: {probe.error}; "
            f"{fallback}",
            "allow ptrace for the job (CAP_SYS_PTRACE, e.g. a container's --cap-add SYS_PTRACE, or "
            "kernel.yama.ptrace_scope <= 1)",
        )
    return CheckResult(
        "stack_dumps",
        PASS,
        f"{probe.version or 'py-spy'} at {probe.tool} read a process here (ptrace allowed)",
    )


def check_launcher_settings(ctx: Context) -> CheckResult:
    """Our launcher validates its environment first (exit 2, one line); the same code runs here."""
    args = ctx.facts.launcher_args
    refused = [a for a in args if a.settings_error]
    if refused:
        a = refused[0]
        return CheckResult(
            "launcher_settings",
            FAIL,
            f"the launcher refuses scenario {a.scenario}: {a.settings_error}",
            "change the scenario's settings as the message says",
        )
    if not args:
        return CheckResult("launcher_settings", SKIP, "no scenario to build a command for")
    return CheckResult(
        "launcher_settings",
        PASS,
        f"the launcher builds a command for all {len(args)} scenario(s) ({args[0].source})",
    )


def check_ft_launcher_flags(ctx: Context) -> CheckResult:
    args = [a for a in ctx.facts.launcher_args if a.result is not None]
    if not args:
        return CheckResult("ft_launcher_flags", SKIP, "no scenario command line to check")
    broken = [a for a in args if a.result.ok is None]
    if broken:
        return CheckResult(
            "ft_launcher_flags",
            FAIL,
            f"NVRx's ft_launcher parser could not run: {broken[0].result.error}",
            "repair the nvidia-resiliency-ext install "
            "(python -c 'import nvidia_resiliency_ext.fault_tolerance.launcher')",
        )
    gaps = applicability.judge(ctx)  # a flag only one scenario adds: that scenario is not applicable here
    rejected = [a for a in args if not a.result.ok and a.scenario not in gaps]
    if rejected:
        a = rejected[0]
        error = a.result.error or ""
        who = f"ft_launcher of nvidia-resiliency-ext {ctx.facts.stack.nvrx or '(version unknown)'}"
        if "unrecognized arguments:" in error:
            # Our launcher writes every ft_launcher flag itself: one NVRx does not know is a version gap
            # (0.5.0 has no --ft-checkpoint-iteration-file, for example), not a user's typo. Name the flags,
            # not their values (paths of a placeholder run).
            unknown = [w.split("=", 1)[0] for w in error.split(":", 1)[1].split() if w.startswith("--")]
            error = f"it has no {', '.join(unknown)}" if unknown else error
            fix = (
                "install an nvidia-resiliency-ext that has these flags (qualified: 0.7.0 and 0.6.0; "
                "see docs/compatibility.md)"
            )
        else:
            fix = (
                "fix the flag or value named; with --ft-nvrx-logfile this error would vanish into an exit 1 "
            )
            fix += "with empty logs"
        return CheckResult(
            "ft_launcher_flags",
            FAIL,
            f"{who} rejects scenario {a.scenario}'s command: {error}",
            fix,
        )
    scen = {s.name: s for s in ctx.cfg.scenarios}
    for a in args:
        parsed, s = a.result.parsed, scen.get(a.scenario)
        if s is None or not parsed:
            continue
        want = {"setup": s.timeouts.setup, "step": s.timeouts.step, "checkpointing": s.timeouts.checkpointing}
        got = {k: float(v) for k, v in (parsed.get("rank_section_timeouts") or {}).items() if v is not None}
        oos = parsed.get("rank_out_of_section_timeout")
        if got != want or oos != s.timeouts.out_of_section:
            return CheckResult(
                "ft_launcher_flags",
                FAIL,
                f"scenario {a.scenario}: NVRx reads timeouts {got} "
                f"out-of-section {oos}, the config says {want} out-of-section "
                f"{s.timeouts.out_of_section}",
                "report this: the launcher formats timeouts wrongly",
            )
    lacking = [a.scenario for a in args if not a.result.ok]
    if lacking:
        return CheckResult(
            "ft_launcher_flags",
            PASS,
            f"NVRx's own parser accepts {len(args) - len(lacking)} of {len(args)} scenario command line(s) "
            "and reads back the configured timeouts; not applicable on this stack: "
            + "; ".join(f"{name}: {gaps[name]}" for name in lacking),
        )
    return CheckResult(
        "ft_launcher_flags",
        PASS,
        f"NVRx's own parser accepts all {len(args)} scenario command "
        "line(s) and reads back the configured timeouts",
    )


def check_nvrx_env(ctx: Context) -> CheckResult:
    if ctx.facts.env.get("NVRX_NODE_LOCAL_TMPDIR"):
        return CheckResult(
            "nvrx_env",
            FAIL,
            "NVRX_NODE_LOCAL_TMPDIR is set; ft_launcher refuses it together "
            "with --ft-nvrx-logfile (an error that vanishes: exit 1, empty logs)",
            "unset NVRX_NODE_LOCAL_TMPDIR",
        )
    return CheckResult("nvrx_env", PASS, "no environment variable conflicts with --ft-nvrx-logfile")
