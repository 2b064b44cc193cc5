"""`ftqual preflight --config CONFIG --out results/preflight.json [--scenario-table TABLE]`.

Gathers the facts (probes), runs the checks (pure), writes `ftqual.preflight/v1` JSON and prints one line
per check. Exit 0 pass/warn, 1 fail (after writing the JSON), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from ftqual.preflight import applicability, probes
from ftqual.preflight.checks import FAIL, PASS, WARN, CheckResult, Context, run_checks, verdict
from ftqual.preflight.dump_probe import probe_stack_dumps
from ftqual.preflight.flags import build_argv, has_entrypoint
from ftqual.preflight.megatron_args import parse_with_megatron, workload_args
from ftqual.preflight.mounts import Mount, mount_for, read_mount_table
from ftqual.preflight.nvrx_args import parse_with_nvrx
from ftqual.preflight.storage import StorageFloor, checkpoint_root, measure, probe_megabytes
from ftqual.scenario import job as jobshape
from ftqual.scenario.checkpoint_dir import checkpoint_dir_problems
from ftqual.scenario.model import ConfigError, WorkflowConfig, load
from ftqual.stack import resolve as launch_stack
from ftqual.stack.facts import ft_launcher_executable, probe_stack, resolve_for_stack

SCHEMA = "ftqual.preflight/v1"
PLACEHOLDER_LOG_PORT = 29999  # ft_launcher's parser needs a port; each run gets its own free one


def work_dir_of(cfg: WorkflowConfig) -> str:
    """work_dir as the workflow resolves it: empty means its working directory."""
    return os.path.abspath(os.path.expanduser(cfg.work_dir)) if cfg.work_dir else os.getcwd()


def measure_storage(
    cfg: WorkflowConfig, mounts: list[Mount], problems: tuple[str, ...] | None = None
) -> StorageFloor:
    """The floor of the directory the runs checkpoint to (config `checkpoint_dir`, else work_dir/runs), as
    config `storage_probe_mb` sizes it, with the filesystem it measured; a preflight leaves nothing there.

    A configured `checkpoint_dir` is measured only where it is usable (`problems`, its
    checkpoint_dir_problems, computed here when not given): a mistyped root is never measured on the disk
    above it, and the check `checkpoint_dir` fails. The default root (work_dir/runs), which ftqual creates,
    is measured in its nearest existing ancestor when not made yet: the filesystem it will be made on."""
    configured = cfg.defaults.checkpoint_root or ""
    root = checkpoint_root(configured, work_dir_of(cfg))
    if configured:
        problems = tuple(checkpoint_dir_problems(configured)) if problems is None else problems
        if problems:
            why = "checkpoint_dir is not usable (the check checkpoint_dir says why)"
            return StorageFloor(root, None, 0, None, None, None, None, "skipped", why)
        where = Path(root)
    else:
        where = probes.nearest_existing(Path(root))
    payload = max((s.checkpoint_payload_mb for s in (cfg.defaults, *cfg.scenarios)), default=0)
    size = probe_megabytes(cfg.storage_probe_mb, cfg.workload, payload)
    mount = mount_for(os.path.realpath(where), mounts)
    if mount is None:
        return measure(where, size)
    return measure(where, size, mount.fs_type, mount.point, mount.device)


def gather(
    cfg: WorkflowConfig, env: dict[str, str] | None = None, python: str = sys.executable
) -> probes.Facts:
    env = dict(os.environ if env is None else env)
    megatron = cfg.workload == "megatron"
    port_facts = probes.probe_ports()
    # ft_launcher's NVRX_NODE_LOCAL_TMPDIR refusal has its own check (nvrx_env): keep it out of the parse.
    parse_env = {k: v for k, v in env.items() if k != "NVRX_NODE_LOCAL_TMPDIR"}
    # The Megatron flags in the argv do not matter to ft_launcher's parser, so the launcher's cheap
    # find_spec probe is enough here and the parse can run while torch is being probed.
    found = launch_stack.probe()
    built = [build_argv(cfg, s, found, work_dir_of(cfg), PLACEHOLDER_LOG_PORT) for s in cfg.scenarios]
    to_parse = [b for b in built if b.error is None]
    # Megatron's own parser judges the arguments the worker hands to pretrain_gpt.py (after the `--`).
    mlm_argvs = (
        {b.scenario: workload_args(b.argv) for b in to_parse}
        if megatron and has_entrypoint(cfg.megatron_path)
        else {}
    )
    # validate_args judges the parallel sizes by the world each scenario runs in
    worlds = {n: cfg.by_name[n].world_size for n in mlm_argvs if n in cfg.by_name}
    with ThreadPoolExecutor(max_workers=4) as pool:  # the slow probes are child interpreters
        mlm_f = (
            pool.submit(parse_with_megatron, cfg.megatron_path, mlm_argvs, python, 180.0, env, worlds)
            if mlm_argvs
            else None
        )
        stack_f = pool.submit(probe_stack, cfg.megatron_path if megatron else None, python)
        parse_f = pool.submit(parse_with_nvrx, [b.argv for b in to_parse], python, 120.0, parse_env)
        tools_f = pool.submit(probes.probe_tools, env.get("PATH")) if megatron else None
        dumps_f = pool.submit(probe_stack_dumps, env, python)
        stack = stack_f.result()
        parsed = dict(zip((b.scenario for b in to_parse), parse_f.result(), strict=True))
        tools = tools_f.result() if tools_f else None
        mlm_parsed = tuple(mlm_f.result()) if mlm_f else ()
        dumps = dumps_f.result()
    mounts = read_mount_table()
    root = cfg.defaults.checkpoint_root
    root_problems = tuple(checkpoint_dir_problems(root)) if root else ()
    storage = measure_storage(cfg, mounts, root_problems)  # alone, after the probes: the disk's figures
    return probes.Facts(
        stack=stack,
        python_executable=python,
        tmpdir=probes.gettempdir(),
        pid_max=probes.pid_max(),
        env=probes.env_subset(env),
        work_dir=probes.probe_dir(work_dir_of(cfg), mounts=mounts),
        tools=tools,
        megatron=probes.probe_megatron(cfg.megatron_path, stack.megatron) if megatron else None,
        ports=port_facts,
        launcher_args=tuple(
            probes.LauncherArgs(
                b.scenario, tuple(b.argv), b.source, parsed.get(b.scenario), b.error, b.adaptations
            )
            for b in built
        ),
        megatron_args=mlm_parsed,
        ft_launcher_exe=ft_launcher_executable(python),
        stack_dumps=dumps,
        checkpoint_dir=probes.probe_dir(root, mounts=mounts) if root else None,
        checkpoint_dir_problems=root_problems,
        storage=storage,
        capped_fs=(
            probes.capped_fs_problem(env.get("PATH"))
            if any(s.fault in applicability.NEEDS_CAPPED_FS for s in cfg.scenarios)
            else None
        ),
    )


def build_report(ctx: Context, results: list[CheckResult]) -> dict:
    return {
        "schema": SCHEMA,
        "verdict": verdict(results),
        "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "checks": [r.to_json() for r in results],
        "stack": ctx.facts.stack.fingerprint(),
        "resolved": resolved_json(ctx),
        "job": job_json(ctx.cfg),
        # the scenarios this stack cannot run, each with why (ftqual.preflight.applicability): not a failure
        "not_applicable": applicability.judge(ctx),
    } | ({"storage": ctx.facts.storage.to_json()} if ctx.facts.storage is not None else {})


def job_json(cfg: WorkflowConfig) -> dict:
    """preflight.json's `job`: the shape the runs will train (the top-level settings'), so that timeouts
    recommended for another shape are refused before the baseline launches (ftqual.report.scope)."""
    job = jobshape.resolve_job(cfg.defaults.model, cfg.defaults.megatron_args)
    return {
        "model": job.model,
        "describe": jobshape.describe(job, cfg.defaults.tp),
        "digest": jobshape.shape_digest(job.shape, job.null_tokenizer, job.bytes_per_weight),
    }


def resolved_json(ctx: Context) -> dict:
    """preflight.json's `resolved`: the stack choice, plus the version adaptations the launcher will make
    (the same for every scenario: they depend on the Megatron tree only)."""
    out = ctx.resolved.to_json()
    seen: dict[str, dict] = {}
    for a in ctx.facts.launcher_args:
        for adaptation in a.adaptations:
            seen.setdefault(adaptation.flag, adaptation.to_json())
    if seen:
        out["adaptations"] = list(seen.values())
    return out


def summary_lines(report: dict) -> list[str]:
    width = max((len(c["id"]) for c in report["checks"]), default=10)
    lines = []
    for c in report["checks"]:
        line = f"{c['status'].upper():<4} {c['id']:<{width}}  {c['detail']}"
        if c["status"] in (FAIL, WARN) and c["fix"]:
            line += f"  -> fix: {c['fix']}"
        lines.append(line)
    counts = {s: sum(c["status"] == s for c in report["checks"]) for s in (FAIL, WARN, PASS)}
    skipped = report.get("not_applicable") or {}
    lines.append(
        f"preflight: {report['verdict'].upper()} ({counts[FAIL]} fail, {counts[WARN]} warn, "
        f"{counts[PASS]} pass)"
        + (f"; not applicable on this stack: {', '.join(skipped)} (the others run)" if skipped else "")
    )
    return lines


def parse_argv(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ftqual preflight", description=__doc__.splitlines()[0])
    p.add_argument(
        "--config",
        default="config/config.yaml",
        help="a workflow config (YAML or JSON, checked against config/schema.yaml) or the workflow's "
        "resolved config; default: config/config.yaml",
    )
    p.add_argument("--out", default="results/preflight.json", help="where to write the JSON report")
    p.add_argument("--quiet", action="store_true", help="print only the verdict line")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_argv(sys.argv[1:] if argv is None else argv)
    try:
        cfg = load(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"ftqual preflight: {problem}", file=sys.stderr)
        return 2
    facts = gather(cfg)
    resolved = resolve_for_stack(
        facts.stack, cfg.workload, cfg.defaults.transformer_impl, cfg.defaults.dist_optimizer
    )
    ctx = Context(facts=facts, cfg=cfg, resolved=resolved)
    report = build_report(ctx, run_checks(ctx))
    out = Path(args.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        tmp.replace(out)
    except OSError as exc:
        print(f"ftqual preflight: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    lines = summary_lines(report)
    print("\n".join(lines[-1:] if args.quiet else lines))
    return 1 if report["verdict"] == FAIL else 0
