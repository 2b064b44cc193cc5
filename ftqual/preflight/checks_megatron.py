"""Checks Megatron needs: its tree and version, build tools, Transformer Engine/Apex, `auto` resolution."""

from __future__ import annotations

from ftqual.preflight import applicability
from ftqual.preflight.check_base import FAIL, PASS, SKIP, WARN, CheckResult, Context, skip_smoke
from ftqual.stack.facts import QUALIFIED_MEGATRON


def check_megatron_path(ctx: Context) -> CheckResult:
    if (skip := skip_smoke("megatron_path", ctx)) is not None:
        return skip
    m = ctx.facts.megatron
    if m is None or not m.path:
        return CheckResult(
            "megatron_path",
            FAIL,
            "no Megatron-LM path: megatron_path is unset in the config and MEGATRON_PATH is not exported",
            "set megatron_path in the config (or export "
            "MEGATRON_PATH) to a Megatron-LM checkout (tag core_v0.19.0) holding pretrain_gpt.py",
        )
    where = f"{m.path} (from {ctx.cfg.megatron_path_source})"
    if not m.exists:
        return CheckResult(
            "megatron_path",
            FAIL,
            f"{where} does not exist",
            "point megatron_path / MEGATRON_PATH at a Megatron-LM checkout",
        )
    if not m.pretrain_gpt:
        return CheckResult(
            "megatron_path",
            FAIL,
            f"{where} has no pretrain_gpt.py",
            "point megatron_path at the repository root (the folder holding pretrain_gpt.py)",
        )
    return CheckResult("megatron_path", PASS, f"{where} has pretrain_gpt.py")


def check_megatron_version(ctx: Context) -> CheckResult:
    if (skip := skip_smoke("megatron_version", ctx)) is not None:
        return skip
    m = ctx.facts.megatron
    if m is None or not m.exists:
        return CheckResult("megatron_version", SKIP, "no Megatron-LM tree to read")
    if m.version is None:
        return CheckResult(
            "megatron_version",
            WARN,
            "cannot read megatron/core/package_info.py",
            "use Megatron-LM tag core_v0.19.0 (reports 0.19.1)",
        )
    if not QUALIFIED_MEGATRON.match(m.version):
        return CheckResult(
            "megatron_version",
            WARN,
            f"Megatron-Core {m.version}; qualified with 0.19.x (tag core_v0.19.0)",
            "use core_v0.19.0, or treat the results as a new qualification",
        )
    return CheckResult("megatron_version", PASS, f"Megatron-Core {m.version}")


def check_megatron_imports(ctx: Context) -> CheckResult:
    if (skip := skip_smoke("megatron_imports", ctx)) is not None:
        return skip
    m = ctx.facts.megatron
    if m is None or not m.exists:
        return CheckResult("megatron_imports", SKIP, "no Megatron-LM tree")
    if m.missing_imports:
        return CheckResult(
            "megatron_imports",
            FAIL,
            f"modules pretrain_gpt.py imports at start are missing: {', '.join(m.missing_imports)}",
            f"pip install {' '.join(m.missing_imports)}",
        )
    return CheckResult(
        "megatron_imports", PASS, "torch, numpy, packaging, typing_extensions, triton importable"
    )


def check_megatron_args(ctx: Context) -> CheckResult:
    """The checkout's own parser, then its validate_args, on each scenario's arguments
    (ftqual.preflight.megatron_args)."""
    if (skip := skip_smoke("megatron_args", ctx)) is not None:
        return skip
    parsed = ctx.facts.megatron_args
    if not parsed:
        return CheckResult("megatron_args", SKIP, "no Megatron-LM tree or no scenario command to parse")
    who = applicability.megatron_who(ctx)
    broken = [p for p in parsed if p.ok is None]
    if broken:
        return CheckResult(
            "megatron_args",
            WARN,
            f"could not run {who}'s argument parser: {broken[0].error}",
            "install what the error names into the training environment, so the arguments can be checked",
        )
    # A flag only one scenario adds that this checkout lacks, or that its validate_args refuses, makes that
    # scenario not applicable here (ftqual.preflight.applicability); the others still run. The baseline's,
    # or the team's own, fail all.
    gaps = applicability.judge(ctx)
    rejected = [p for p in parsed if not p.ok and p.scenario not in gaps]
    if rejected:
        return _refused(ctx, who, parsed, rejected)
    adapted = sorted({f"{a.flag} {a.action}" for la in ctx.facts.launcher_args for a in la.adaptations})
    note = f"; adapted for this version: {', '.join(adapted)}" if adapted else ""
    lacking = [p.scenario for p in parsed if not p.ok]
    unvalidated = [p for p in parsed if p.ok and p.unvalidated]
    also = "" if unvalidated else ", its validate_args too"
    if lacking:
        detail = (
            f"{who}'s own parser accepts {len(parsed) - len(lacking)} of {len(parsed)} scenario(s)' arguments"
            f"{also}{note}; not applicable on this stack: "
            + "; ".join(f"{name}: {gaps[name]}" for name in lacking)
        )
    else:
        detail = f"{who}'s own parser accepts all {len(parsed)} scenario(s)' arguments{also}{note}"
    if unvalidated:
        # not judged is never passed: the refusal would come only at launch, in every cycle
        return CheckResult(
            "megatron_args",
            WARN,
            f"{detail}; validate_args could not judge {len(unvalidated)} of them here: "
            f"{unvalidated[0].unvalidated}",
            "run the preflight where the training runs (its image, a GPU node), so Megatron's own "
            "validate_args judges the arguments before any launch",
        )
    return CheckResult("megatron_args", PASS, detail)


def _refused(ctx: Context, who: str, parsed, rejected) -> CheckResult:
    """One line for what Megatron refuses: the first refusal, with every scenario it concerns (said once
    where it is all of them) and, for validate_args', the lines the refused flags were written on."""
    p = rejected[0]
    same = [r for r in rejected if (r.stage, r.error) == (p.stage, p.error)]
    if p.stage != "validate_args":
        also = f" (and {len(rejected) - 1} more scenario(s))" if len(rejected) > 1 else ""
        return CheckResult(
            "megatron_args",
            FAIL,
            f"{who} rejects scenario {p.scenario}'s arguments{also}: {p.error}",
            "use a Megatron-LM whose arguments include it (qualified: core_v0.19.0; docs/compatibility.md "
            "lists the versions measured), or report the version so the launcher can adapt to it",
        )
    whose = (
        f"every scenario's arguments ({len(parsed)})"
        if len(same) == len(parsed)
        else f"the arguments of {', '.join(r.scenario for r in same)}"
    )
    others = len(rejected) - len(same)
    also = f" (and {others} other refusal(s))" if others else ""
    return CheckResult(
        "megatron_args",
        FAIL,
        f"{who}'s validate_args refuses {whose}{also}: {p.error}{applicability.written_at(ctx, p)}",
        "change the arguments on the lines named so that Megatron-LM accepts them (e.g. keep one of two "
        "flags it says exclude each other), then rerun the preflight; nothing was launched",
    )


def check_build_tools(ctx: Context) -> CheckResult:
    """Megatron runs `make -C megatron/core/datasets` on rank 0 at every start."""
    if (skip := skip_smoke("build_tools", ctx)) is not None:
        return skip
    t, m = ctx.facts.tools, ctx.facts.megatron
    if t is None:
        return CheckResult("build_tools", SKIP, "tools were not probed")
    missing = [
        name
        for name, found in (
            ("make", t.make),
            ("g++", t.cxx),
            ("python3", t.python3),
            ("python3-config", t.python3_config),
        )
        if not found
    ]
    if missing:
        return CheckResult(
            "build_tools",
            FAIL,
            f"missing on PATH: {', '.join(missing)} (Megatron builds its "
            "dataset helper at start; a missing make is an uncaught FileNotFoundError)",
            f"install {', '.join(missing)} (e.g. apt-get install build-essential python3-dev)",
        )
    if t.python3_config_suffix and t.training_suffix and t.python3_config_suffix != t.training_suffix:
        return CheckResult(
            "build_tools",
            FAIL,
            f"python3-config gives {t.python3_config_suffix} but the training "
            f"Python builds {t.training_suffix}: the helper would not import",
            "put the training interpreter's bin directory (and its python3-config) first on PATH",
        )
    helper = m is not None and m.helper_built
    if m is not None and m.exists and not m.datasets_writable and not helper:
        return CheckResult(
            "build_tools",
            FAIL,
            "megatron/core/datasets is not writable and helpers_cpp is not built",
            "use a writable Megatron tree or prebuild: make -C megatron/core/datasets",
        )
    if not t.pybind11:
        status = WARN if helper else FAIL
        return CheckResult(
            "build_tools",
            status,
            f"`python3 -m pybind11` fails ({t.pybind11_error}); "
            + (
                "helper already built, so only a rebuild needs it"
                if helper
                else "the dataset helper cannot compile"
            ),
            "pip install pybind11",
        )
    return CheckResult(
        "build_tools",
        PASS,
        f"make, g++, python3 {t.python3_version}, python3-config "
        f"({t.python3_config_suffix}), pybind11" + (", helper prebuilt" if helper else ""),
    )


def check_transformer_engine(ctx: Context) -> CheckResult:
    if (skip := skip_smoke("transformer_engine", ctx)) is not None:
        return skip
    te = ctx.facts.stack.transformer_engine
    if ctx.cfg.defaults.transformer_impl == "transformer_engine" and te is None:
        return CheckResult(
            "transformer_engine",
            FAIL,
            "transformer_impl is transformer_engine but Transformer Engine is not installed",
            "install Transformer Engine or set transformer_impl: auto",
        )
    return CheckResult(
        "transformer_engine",
        PASS,
        f"Transformer Engine {te}"
        if te
        else "Transformer Engine not installed (auto uses the local implementation)",
    )


def check_apex(ctx: Context) -> CheckResult:
    if (skip := skip_smoke("apex", ctx)) is not None:
        return skip
    s = ctx.facts.stack
    ext = "with" if s.apex_wgrad_ext else "without"
    return CheckResult(
        "apex",
        PASS,
        f"Apex {s.apex}, {ext} fused_weight_gradient_mlp_cuda"
        if s.apex
        else f"Apex not installed ({ext} fused_weight_gradient_mlp_cuda)",
    )


def _settings(ctx: Context) -> list[tuple[str, str, list[str]]]:
    """Distinct (transformer_impl, dist_optimizer) pairs across the runs, with the scenarios using each."""
    seen: dict[tuple[str, str], list[str]] = {}
    for sc in ctx.runs:
        seen.setdefault((sc.transformer_impl, sc.dist_optimizer), []).append(sc.name)
    return [(impl, dist, names) for (impl, dist), names in seen.items()]


def check_transformer_impl(ctx: Context) -> CheckResult:
    if (skip := skip_smoke("transformer_impl", ctx)) is not None:
        return skip
    te = ctx.facts.stack.transformer_engine is not None
    bad = [names for impl, _, names in _settings(ctx) if impl == "transformer_engine" and not te]
    r = ctx.resolved
    detail = (
        f"{ctx.cfg.defaults.transformer_impl} -> {r.transformer_impl}; flags: {' '.join(r.megatron_flags)}"
    )
    if bad:
        return CheckResult(
            "transformer_impl",
            FAIL,
            f"transformer_engine asked for by {', '.join(sum(bad, []))} but Transformer Engine is absent",
            "set transformer_impl: auto or local",
        )
    return CheckResult("transformer_impl", PASS, detail)


def check_dist_optimizer(ctx: Context) -> CheckResult:
    if (skip := skip_smoke("dist_optimizer", ctx)) is not None:
        return skip
    s, r = ctx.facts.stack, ctx.resolved
    fused = s.transformer_engine is not None or s.apex is not None
    forced = [n for _, dist, names in _settings(ctx) if dist == "on" for n in names]
    if forced and not fused:
        return CheckResult(
            "dist_optimizer",
            FAIL,
            f"dist_optimizer on ({', '.join(forced)}), but without "
            "Transformer Engine and Apex a --use-distributed-optimizer checkpoint does not resume "
            "(Megatron asserts in DistributedOptimizer.state_dict); the job restarts until NVRx "
            "exits 93",
            "set dist_optimizer: auto (or off), or install Transformer Engine or Apex",
        )
    state = "on" if r.dist_optimizer else "off"
    if ctx.cfg.defaults.dist_optimizer == "auto" and not fused:
        why = (
            "without Transformer Engine and Apex a --use-distributed-optimizer checkpoint does not resume "
            "(Megatron asserts in DistributedOptimizer.state_dict; the job would restart until NVRx exits 93)"
        )
    else:  # the launcher's own reason, minus its "on: "/"off: " lead
        why = r.reasons.get("dist_optimizer", "").removeprefix(f"{state}: ")
    return CheckResult("dist_optimizer", PASS, f"{ctx.cfg.defaults.dist_optimizer} -> {state}: {why}")


def check_parallelism(ctx: Context) -> CheckResult:
    if not ctx.megatron:
        if any(sc.tp != 1 or sc.pp != 1 for sc in ctx.runs):
            return CheckResult("parallelism", WARN, "tp/pp other than 1 are ignored by the smoke workload")
        return CheckResult("parallelism", SKIP, "the smoke workload is data-parallel only")
    # Divisibility is a config rule (ftqual.scenario.model refuses such a config); this reports the layouts.
    shapes = [
        f"world {sc.world_size} = tp {sc.tp} x pp {sc.pp} x dp {sc.world_size // (sc.tp * sc.pp)}"
        for sc in ctx.runs
    ]
    return CheckResult("parallelism", PASS, "; ".join(sorted(set(shapes))))
