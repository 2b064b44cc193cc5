"""Which scenarios this stack cannot run, and why: the preflight's judgement of each scenario.

A problem of one scenario alone that the stack decides, not the config, makes that scenario *not applicable
on this stack*: a flag its Megatron-LM checkout or its ft_launcher lacks that only this scenario's settings
add (`verify_integrity` on a Megatron without `--verify-integrity`), or a fault this machine cannot make
(disk_full without root, CAP_SYS_ADMIN, mkfs.ext4 or a loop device), or arguments only this scenario's
settings make that Megatron's own validate_args refuses while it accepts the baseline's. preflight.json's
`not_applicable` names each with its reason; the preflight does not fail for it and the other scenarios run
(ftqual.workflow.run_scenario launches nothing for it; verify gives it the verdict `not_applicable`, never a
pass). A problem every scenario shares (no GPU, no Megatron, a disk too small, the baseline's own arguments
rejected) stays a failed check that stops them all: the baseline is the reference every fault scenario is
judged against, so it is never not applicable, and a flag its own arguments carry is every scenario's.
A flag the team wrote into a scenario's own `megatron_args` stays a failure too: it is the config's (a typo
must not pass as a gap of the stack).

Pure: a function of the preflight's Context (facts probed elsewhere), like the checks.
"""

from __future__ import annotations

from ftqual.preflight.check_base import Context
from ftqual.preflight.megatron_args import MegatronParse, named_flags, origins, workload_args

UNRECOGNIZED = "unrecognized arguments:"
# Faults whose making needs something of the node beyond running the job: the fact that says whether it can.
NEEDS_CAPPED_FS = ("disk_full",)


def unknown_flags(error: str | None) -> list[str]:
    """The flags an argparse `unrecognized arguments: ...` error names (their values left out), else none:
    any other rejection (a bad value, a missing argument) is a mistake of the settings, not a gap."""
    if not error or UNRECOGNIZED not in error:
        return []
    words = error.split(UNRECOGNIZED, 1)[1].split()
    return [w.split("=", 1)[0] for w in words if w.startswith("--")]


def _team_flags(ctx: Context, scenario: str) -> set[str]:
    s = ctx.cfg.by_name.get(scenario)
    return {a.split("=", 1)[0] for a in (s.megatron_args if s is not None else ()) if a.startswith("--")}


def megatron_who(ctx: Context) -> str:
    m = ctx.facts.megatron
    return f"Megatron-Core {m.version}" if m is not None and m.version else "this Megatron-LM tree"


def written_at(ctx: Context, p: MegatronParse) -> str:
    """'; written at <file:line> <flag>, ...' for the flags of the scenario's arguments a refusal names (the
    launch script's lines, or the config's megatron_args[i]; a flag ftqual added says so), or ''."""
    argv = next((workload_args(a.argv) for a in ctx.facts.launcher_args if a.scenario == p.scenario), [])
    flags = named_flags(p.error or "", argv)
    s = ctx.cfg.by_name.get(p.scenario)
    if not flags or s is None:
        return ""
    return "; written at " + ", ".join(origins(flags, s.megatron_args, s.megatron_args_where))


def _megatron_gaps(ctx: Context) -> dict[str, str]:
    parsed = {p.scenario: p for p in ctx.facts.megatron_args}
    base = parsed.get(ctx.cfg.baseline_scenario)
    if not ctx.megatron or base is None or base.ok is not True:
        return {}  # no parse, or the baseline's own arguments failed: check_megatron_args fails them all
    who = megatron_who(ctx)
    out = {}
    for p in ctx.facts.megatron_args:
        if p.ok is False and p.stage == "validate_args":
            # the baseline's arguments pass it: what this scenario's settings add is what it refuses
            out[p.scenario] = (
                f"{who}'s validate_args refuses this scenario's arguments: {p.error}{written_at(ctx, p)}"
            )
            continue
        flags = unknown_flags(p.error) if p.ok is False else []
        if flags and not set(flags) & _team_flags(ctx, p.scenario):
            out[p.scenario] = (
                f"{who} has no {', '.join(flags)} (its own parser rejects this scenario's arguments)"
            )
    return out


def _launcher_gaps(ctx: Context) -> dict[str, str]:
    results = {a.scenario: a.result for a in ctx.facts.launcher_args}
    base = results.get(ctx.cfg.baseline_scenario)
    if base is None or base.ok is not True:
        return {}
    who = f"ft_launcher of nvidia-resiliency-ext {ctx.facts.stack.nvrx or '(version unknown)'}"
    out = {}
    for a in ctx.facts.launcher_args:
        flags = unknown_flags(a.result.error) if a.result is not None and a.result.ok is False else []
        if flags:
            out[a.scenario] = (
                f"{who} has no {', '.join(flags)} (its own parser rejects this scenario's command)"
            )
    return out


def _fault_gaps(ctx: Context) -> dict[str, str]:
    out = {}
    for s in ctx.cfg.scenarios:
        if s.fault in NEEDS_CAPPED_FS and ctx.facts.capped_fs:
            out[s.name] = ctx.facts.capped_fs
    return out


def judge(ctx: Context) -> dict[str, str]:
    """{scenario: why this stack cannot run it}, in the config's order, one reason each (the first found:
    the fault's own need, then Megatron's parser, then ft_launcher's). Never the baseline."""
    found: dict[str, str] = {}
    for gaps in (_fault_gaps(ctx), _megatron_gaps(ctx), _launcher_gaps(ctx)):
        for name, why in gaps.items():
            found.setdefault(name, why)
    baseline = ctx.cfg.baseline_scenario
    return {s.name: found[s.name] for s in ctx.cfg.scenarios if s.name in found and s.name != baseline}
