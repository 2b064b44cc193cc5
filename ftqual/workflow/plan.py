"""The plan of one workflow invocation, made while Snakemake parses the Snakefile (rules/common.smk).

From what Snakemake gives at parse time (the config, the Snakefile's folder, whether this process is the
main one or a job, the default resources, the executor plugin and output settings, the environment) it
decides, in this order:

1. the scenarios (ftqual.scenario.model), or the config's refusal;
2. the executor this command runs jobs with (`Invocation.executor`) and whether it is a dry run: while the
   Snakefile is parsed Snakemake has not chosen its executor yet, and under -n it stands a dry-run executor
   in for the real one, so the profiles tell them apart by a documented setting instead: a Slurm profile
   names the partition (or the account) its jobs go to in `default-resources`, which the plugin needs and
   nothing local sets;
3. the refusal of multi-node scenarios on the local executor (checked while parsing, so that -n and a real
   run refuse alike; inside a Slurm job the job itself runs under the local executor: only the main process
   decides);
4. the directory (ftqual.workflow.lock), before Snakemake locks it: a closed terminal stops this run as
   Ctrl-C does, a lock left by a workflow that is provably gone is released, and this run is recorded as the
   lock's holder until it ends; under Slurm, the jobs a workflow killed outright left here are cancelled
   (ftqual.workflow.slurm_orphans) before the stack probe, which would wait behind them for a GPU, and before
   planning, which would take their results for this run's;
5. the legacy records of an earlier version's workspace adopted (ftqual.workflow.attempts);
6. the stack under test (ftqual.stack.current): probed by the main process, inherited by its jobs;
7. the attempt slots, keyed by the settings and the stack (ftqual.workflow.attempts), the preflight's, and
   the report folder of exactly these attempts.

Two refusals come later, from `onstart` (`onstart_refusal`), where the main process knows its settings and
no job has started yet: rerun triggers other than mtime, and a Slurm account the plugin cannot check.
`summary_argv` is the one `ftqual report` command line, for the summary rule and for `salvage_summary`
(onerror). Every refusal is a line per problem, raised as `Refusal`; rules/common.smk prints its lines
(`refusal_lines`) and exits 2, without a traceback.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ftqual.report import at_scale_cli
from ftqual.report import scope as timeouts_scope
from ftqual.scenario import config_problems
from ftqual.scenario import model as scenarios
from ftqual.scenario.checkpoint_dir import checkpoint_dir_problems
from ftqual.stack import current as stack_current
from ftqual.stack.identity import StackIdentity
from ftqual.workflow import attempts, interrupts, slurm_orphans, slurm_submit
from ftqual.workflow import lock as workflow_lock

SLURM_DEFAULT_RESOURCES = ("slurm_partition", "slurm_account")
STAND_IN_EXECUTORS = ("dryrun", "touch")
SALVAGE_LOG = Path("logs") / "summary-after-error.log"


class Refusal(Exception):
    """The workflow will not run this: a line per problem saying what is wrong and what to do."""


def _below_cwd(path: str) -> str:
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def refusal_lines(
    refusal: Refusal | str,
    configfiles: Sequence[str] = (),
    overriding: Sequence[str] = (),
    command_line: Mapping | None = None,
) -> list[str]:
    """What a refusal prints: a line per problem, a config mistake prefixed with where its value came from:
    `--config` (`command_line`: its values), else the last of `overriding` (the --configfile files, in
    order) that sets the key, else of `configfiles` (Snakemake's list of every config file, the Snakefile's
    `configfile:` among them, which they override)."""
    lines = [line for line in str(refusal).splitlines() if line.strip()]
    given = [str(name) for name in overriding]
    ordered = [str(name) for name in configfiles if str(name) not in given] + given
    shown = [_below_cwd(name) for name in ordered]
    located = config_problems.located(lines, shown, scenarios.read_config_file, command_line)
    return [line if line.startswith("ftqual") else f"ftqual: {line}" for line in located]


def _quiet(line: str) -> None:
    return None


@dataclass(frozen=True)
class Invocation:
    """What Snakemake says about this command (its `workflow` object), read into plain values."""

    is_main_process: bool = True
    executor_plugin: str | None = None  # the plugin's name; None before Snakemake chose one
    default_resources: Mapping[str, object] = field(default_factory=dict)
    dry_run_setting: bool = False  # output_settings.dryrun
    rerun_triggers: tuple[str, ...] = ()  # dag_settings.rerun_triggers, lower case

    @classmethod
    def of(cls, workflow) -> Invocation:
        plugin = getattr(workflow, "executor_plugin", None)
        resources = getattr(getattr(workflow, "resource_settings", None), "default_resources", None)
        triggers = getattr(getattr(workflow, "dag_settings", None), "rerun_triggers", None) or ()
        return cls(
            is_main_process=bool(workflow.is_main_process),
            executor_plugin=None if plugin is None else str(plugin.name),
            default_resources=resources or {},
            dry_run_setting=bool(getattr(getattr(workflow, "output_settings", None), "dryrun", False)),
            rerun_triggers=tuple(str(getattr(t, "name", t)).lower() for t in triggers),
        )

    def default_resource(self, name: str) -> str | None:
        """A default resource's value as the profile or --default-resources wrote it (text), or None."""
        found = self.default_resources.get(name)
        raw = getattr(found, "raw", found)
        if raw is None:
            return None
        text = str(raw).strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            text = text[1:-1]
        return text or None

    @property
    def executor(self) -> str:
        """slurm where the default resources name a Slurm partition or account (profiles/slurm), else local;
        inside a job, the executor Snakemake runs it with."""
        if self.executor_plugin is not None and self.executor_plugin not in STAND_IN_EXECUTORS:
            return self.executor_plugin
        if any(self.default_resource(name) for name in SLURM_DEFAULT_RESOURCES):
            return "slurm"
        return "local"

    @property
    def dry_run(self) -> bool:
        return self.executor_plugin in STAND_IN_EXECUTORS or self.dry_run_setting


# ---------------------------------------------------------------------------------------------
# the scenarios and the refusals


def resolve_config(
    config: Mapping,
    basedir: str | os.PathLike,
    env: Mapping[str, str] | None = None,
    invocation: Invocation | None = None,
):
    """The scenarios of the config Snakemake holds, in config/config.yaml's order; Refusal with every
    mistake if not valid. With the main process's `invocation`, the configured checkpoint_dir must also
    exist and be writable here, unless a Slurm preflight judges it on a training node (a cluster's
    filesystem may be mounted only there)."""
    problems: list[str] = []
    try:
        cfg = scenarios.in_config_order(
            scenarios.resolve(config, env),
            list(scenarios.read_config_file(Path(basedir) / "config" / "config.yaml")["scenarios"]),
        )
    except scenarios.ConfigError as exc:
        problems, cfg = list(exc.problems), None
    root = config.get("checkpoint_dir")
    here = invocation is not None and invocation.is_main_process
    if here and invocation.executor == "slurm" and cfg is not None and preflight_on_node(cfg):
        here = False
    if here and isinstance(root, str) and root:
        problems += [f"invalid config: {p}" for p in checkpoint_dir_problems(root)]
    if problems:
        raise Refusal("\n".join(problems))
    return cfg


def multinode_refusal(cfg, invocation: Invocation) -> str | None:
    multinode = [s for s in cfg.scenarios if s.multinode]
    if not multinode or not invocation.is_main_process or invocation.executor != "local":
        return None
    names = ", ".join(f"{s.name} (nnodes={s.nnodes})" for s in multinode)
    return (
        f"the local executor cannot run multi-node scenarios: {names}; use --profile profiles/slurm "
        "(one ft_launcher per node through srun; a profile of your own must name slurm_partition or "
        "slurm_account in default-resources, which is how ftqual knows it plans for Slurm), or set "
        "nnodes: 1 or enabled: false for them"
    )


def rerun_triggers_refusal(invocation: Invocation) -> str | None:
    """The attempt slots decide what reruns; only file times may add to that (profiles/default says why)."""
    others = [name for name in sorted(invocation.rerun_triggers) if name != "mtime"]
    if not others:
        return None
    return (
        f"ftqual: --rerun-triggers {' '.join(others)} would rerun attempts that passed, but ftqual's "
        "attempts decide what reruns: leave --rerun-triggers to profiles/default (mtime) and keep that "
        "workflow profile (no --workflow-profile none)"
    )


def slurm_account_refusal(
    invocation: Invocation, which: Callable[[str], str | None] = shutil.which
) -> str | None:
    """Only a real Slurm run submits (ftqual.workflow.slurm_submit)."""
    if invocation.executor_plugin != "slurm":
        return None
    return slurm_submit.account_refusal(account=invocation.default_resource("slurm_account"), which=which)


def onstart_refusal(invocation: Invocation, which: Callable[[str], str | None] = shutil.which) -> str | None:
    """What `onstart` refuses, before any job starts (the invocation as Snakemake then holds it)."""
    return rerun_triggers_refusal(invocation) or slurm_account_refusal(invocation, which)


# ---------------------------------------------------------------------------------------------
# the directory, the stack, the slots


def take_directory(
    workdir: Path,
    invocation: Invocation,
    say: Callable[[str], None],
    cancel_orphans: Callable[[Path, Callable[[str], None]], object] = slurm_orphans.cancel_orphans,
) -> str | None:
    """Before Snakemake locks the directory (module docstring, 4); what ftqual.workflow.lock decided, or
    None where this process leaves the directory alone (a job, a dry run)."""
    if not invocation.is_main_process or invocation.dry_run:
        return None
    workflow_lock.hangup_as_interrupt()
    decided = workflow_lock.release_stale(workdir, say)
    workflow_lock.record_self(workdir)
    if decided in ("unlocked", "released") and invocation.executor == "slurm":
        cancel_orphans(workdir, lambda line: say(f"ftqual: {line}"))
    return decided


def preflight_on_node(cfg) -> bool:
    """True when preflight must run where training runs (see preflight_on_node in the schema)."""
    setting = cfg.preflight_on_node
    return cfg.workload == "megatron" if setting == "auto" else bool(setting)


def preflight_gpus(cfg, on_node: bool | None = None) -> int | None:
    """GPUs a node-side preflight (or stack probe) asks for: those of the largest enabled scenario's node."""
    if not (preflight_on_node(cfg) if on_node is None else on_node) or cfg.workload != "megatron":
        return None
    return max((s.gpus_per_node for s in cfg.scenarios), default=None)


def stack_identity(
    cfg,
    invocation: Invocation,
    workdir: Path,
    *,
    python: str,
    node_stack_probe: bool = True,
    env: Mapping[str, str] | None = None,
    say: Callable[[str], None] = _quiet,
    probe: Callable[..., StackIdentity] = stack_current.current,
) -> StackIdentity:
    """The stack under test (ftqual.stack.current): probed by the main process, inherited by its jobs."""
    try:
        if not invocation.is_main_process:
            found = stack_current.inherited(workdir, env)
            if found is not None:
                return found
        slurm = None
        if invocation.executor == "slurm":
            slurm = stack_current.SlurmTarget(
                partition=invocation.default_resource("slurm_partition"),
                account=invocation.default_resource("slurm_account"),
                gpus=preflight_gpus(cfg, on_node=True),
                probe_node=node_stack_probe,
            )
        return probe(
            workdir,
            workload=cfg.workload,
            megatron_path=cfg.megatron_path,
            executor=invocation.executor,
            python=python,
            dry_run=invocation.dry_run,
            slurm=slurm,
            say=(lambda line: say(f"ftqual: {line}")) if invocation.is_main_process else _quiet,
        )
    except stack_current.StackProbeError as exc:
        raise Refusal(f"ftqual: {exc}") from None


def scenario_slots(cfg, workdir: Path, stack: StackIdentity) -> dict[str, attempts.Slot]:
    """Each scenario's slot, keyed by its settings and the stack (ftqual.workflow.attempts)."""
    slots = {}
    for name, scenario in cfg.by_name.items():
        settings = cfg.fingerprint(scenario)
        slots[name] = attempts.scenario_slot(
            workdir,
            name,
            attempts.attempt_key(settings, stack.digest),
            cfg.rerun_failed_verification,
            settings_fingerprint=settings,
            stack=stack,
        )
    return slots


# ---------------------------------------------------------------------------------------------
# the plan


@dataclass(frozen=True)
class Plan:
    cfg: scenarios.WorkflowConfig
    workdir: Path
    invocation: Invocation
    stack: StackIdentity
    slots: dict[str, attempts.Slot]
    preflight: attempts.Slot
    # The report of exactly these attempts has its own folder: when any attempt changes, the summary is a
    # new file, which Snakemake builds (it never rebuilds an existing output whose inputs merely went
    # missing).
    report_dir: str
    # `ftqual report`'s --timeouts-for (the config's timeouts_for): what the timeouts were recommended for;
    # --scale (the config's scale): the "At your scale" section
    timeouts_for_argv: tuple[str, ...] = ()

    @property
    def scenarios(self) -> dict:
        return self.cfg.by_name

    @property
    def baseline(self) -> str:
        return self.cfg.baseline_scenario

    def slot_dir(self, scenario: str) -> str:
        return attempts.scenario_dir(scenario, self.slots[scenario].name)

    def preflight_report(self) -> str:
        return attempts.preflight_path(self.preflight.name)

    def current_verify_reports(self) -> dict[str, str]:
        return {name: f"{self.slot_dir(name)}/verify.json" for name in self.scenarios}

    def expected_attempts(self) -> dict[str, str]:
        """What the gate checks the summary against: scenario -> the slot of its current attempt."""
        return {name: slot.name for name, slot in self.slots.items()}

    def lines(self) -> list[str]:
        """The plan as the main process says it: each scenario's attempt and why."""
        return [f"ftqual: {name}: attempt {slot.name} ({slot.reason})" for name, slot in self.slots.items()]

    def summary_argv(
        self, preflight: str, verify_reports: Mapping[str, str], out: str | os.PathLike
    ) -> list[str]:
        """`ftqual report`'s command line after `ftqual`: the preflight, the baseline, every scenario's
        verdict (scenario -> verify.json in `verify_reports`) and attempt, the output folder."""
        argv = ["report", "--preflight", str(preflight), "--baseline", self.baseline]
        for name in self.scenarios:
            argv += ["--verify", f"{name}={verify_reports[name]}"]
            argv += ["--attempt", f"{name}={self.slots[name].name}"]
        return [*argv, *self.timeouts_for_argv, "--out", str(out)]


def make(
    config: Mapping,
    *,
    basedir: str | os.PathLike,
    invocation: Invocation,
    cwd: Path,
    python: str,
    env: Mapping[str, str] | None = None,
    say: Callable[[str], None] = _quiet,
    probe: Callable[..., StackIdentity] = stack_current.current,
    cancel_orphans: Callable[[Path, Callable[[str], None]], object] = slurm_orphans.cancel_orphans,
) -> Plan:
    """The plan of this invocation (module docstring, 1-7); Refusal where the workflow will not run.
    `cwd` is the working directory (results/, .snakemake/); `say` is where the main process's lines go
    (stderr); a job says nothing."""
    workdir = Path(cwd)
    say = say if invocation.is_main_process else _quiet
    cfg = resolve_config(config, basedir, env, invocation)
    refusal = multinode_refusal(cfg, invocation)
    if refusal:
        raise Refusal(refusal)
    take_directory(workdir, invocation, say, cancel_orphans)
    # A workspace of an earlier version keeps its attempts: their records, once named run.json, become
    # attempt.json before the slots are read.
    if invocation.is_main_process:
        attempts.adopt_legacy_records(workdir, cfg.by_name)
    stack = stack_identity(
        cfg,
        invocation,
        workdir,
        python=python,
        node_stack_probe=bool(config.get("node_stack_probe", True)),
        env=env,
        say=say,
        probe=probe,
    )
    slots = scenario_slots(cfg, workdir, stack)
    preflight_key = attempts.attempt_key(cfg.preflight_fingerprint(), stack.digest)
    preflight = attempts.preflight_slot(workdir, preflight_key)
    folder = attempts.report_dir(preflight.name, {n: s.name for n, s in slots.items()}, cfg.baseline_scenario)
    found = Plan(
        cfg,
        workdir,
        invocation,
        stack,
        slots,
        preflight,
        folder,
        (*timeouts_scope.report_argv(config), *at_scale_cli.report_argv(config)),
    )
    for line in found.lines():
        say(line)
    return found


# ---------------------------------------------------------------------------------------------
# the summary: the rule's command, and its rebuild after a failed job


def ftqual_cli(
    project: str | os.PathLike, python: str, which: Callable[[str], str | None] = shutil.which
) -> str:
    """Our CLI for the shell rules: `ftqual` where it is installed (bootstrap, the conda env), else the
    interpreter running Snakemake with this checkout (`project`) on its path (a node where the project is used
    from PYTHONPATH, as on the GPU machine, where `ftqual` is not a command)."""
    if which("ftqual"):
        return "ftqual"
    where = shlex.quote(str(Path(project).resolve()))
    return f"PYTHONPATH={where}${{PYTHONPATH:+:$PYTHONPATH}} {shlex.quote(python)} -m ftqual"


def summary_is_current(plan: Plan) -> bool:
    try:
        summary = json.loads((plan.workdir / "results" / "summary.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and summary.get("attempts") == plan.expected_attempts()


def salvage_summary(
    plan: Plan,
    *,
    project: str | os.PathLike,
    python: str,
    env: Mapping[str, str],
    say: Callable[[str], None],
    run: Callable = subprocess.run,
) -> bool:
    """onerror: unless results/ already shows the current attempts (the gate failed on a verdict), rebuild
    the summary there from what exists; a missing verdict is inconclusive with its cause. Returns whether it
    did."""
    workflow_lock.forget_self(plan.workdir)
    if not plan.invocation.is_main_process or summary_is_current(plan):
        return False
    (plan.workdir / SALVAGE_LOG).parent.mkdir(exist_ok=True)
    argv = plan.summary_argv(plan.preflight_report(), plan.current_verify_reports(), "results")
    # interrupted (ftqual.workflow.interrupts' marker of this process): said so, with what to run
    if interrupted := interrupts.stop_asked(plan.workdir, env):
        argv += ["--interrupted", interrupted]
    project = str(Path(project).resolve())
    child_env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [project, env.get("PYTHONPATH")]))}
    with open(plan.workdir / SALVAGE_LOG, "w") as log:
        run(
            [python, "-m", "ftqual", *argv],
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
            env=child_env,
            cwd=plan.workdir,
        )
    say(
        "ftqual: a job failed; results/summary.md and junit.xml were rebuilt from what exists "
        f"({SALVAGE_LOG.as_posix()})"
    )
    return True
