# The scenario table, the attempt each scenario works on, wildcard constraints and every helper the rules
# use (the only place for helpers). Settings come from ftqual.scenario.model (the one scenario model), the
# attempt slots from ftqual.workflow.attempts (the workflow's state rules); docs/architecture.md explains both.

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

# Snakemake puts the Snakefile's folder on sys.path: the ftqual package beside it, installed or not.
from ftqual.workflow import attempts, slurm_orphans, slurm_submit, lock as workflow_lock
from ftqual.scenario import model as scenarios
from ftqual.stack import current as stack_current

try:
    CFG = scenarios.in_config_order(
        scenarios.resolve(config),
        list(
            scenarios.read_config_file(
                Path(workflow.basedir) / "config" / "config.yaml"
            )["scenarios"]
        ),
    )
except scenarios.ConfigError as exc:
    raise WorkflowError(str(exc)) from None

SCENARIOS = CFG.by_name
BASELINE = CFG.baseline_scenario
WORKDIR = Path.cwd()


def _stack_identity():
    """The stack under test (ftqual.stack.current): probed by the main process, inherited by its jobs."""
    try:
        if not workflow.is_main_process:
            found = stack_current.inherited(WORKDIR)
            if found is not None:
                return found
        executor, dry_run = intended_executor(), invocation_is_dry_run()
        slurm = None
        if executor == "slurm":
            slurm = stack_current.SlurmTarget(
                partition=default_resource("slurm_partition"),
                account=default_resource("slurm_account"),
                gpus=preflight_gpus(on_node=True),
                probe_node=bool(config.get("node_stack_probe", True)),
            )
        say = lambda line: print(f"ftqual: {line}", file=sys.stderr)
        return stack_current.current(
            WORKDIR,
            workload=CFG.workload,
            megatron_path=CFG.megatron_path,
            executor=executor,
            python=sys.executable,
            dry_run=dry_run,
            slurm=slurm,
            say=say if workflow.is_main_process else (lambda line: None),
        )
    except stack_current.StackProbeError as exc:
        raise WorkflowError(f"ftqual: {exc}") from None


def default_resource(name):
    """A default resource's value as the profile or --default-resources wrote it (text), or None."""
    found = (workflow.resource_settings.default_resources or {}).get(name)
    raw = getattr(found, "raw", found)
    if raw is None:
        return None
    text = str(raw).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text or None


def _slots(stack):
    """Each scenario's slot, keyed by its settings and the stack (ftqual.workflow.attempts)."""
    slots = {}
    for name, scenario in SCENARIOS.items():
        settings = CFG.fingerprint(scenario)
        slots[name] = attempts.scenario_slot(
            WORKDIR,
            name,
            attempts.attempt_key(settings, stack.digest),
            CFG.rerun_failed_verification,
            settings_fingerprint=settings,
            stack=stack,
        )
    return slots


def _say_plan():
    if not workflow.is_main_process:
        return
    for name, slot in SLOTS.items():
        print(f"ftqual: {name}: attempt {slot.name} ({slot.reason})", file=sys.stderr)


wildcard_constraints:
    scenario="|".join(SCENARIOS),
    slot=r"[0-9a-f]{12}-[0-9]+",


# ---------------------------------------------------------------------------------------------
# paths of the current attempts


def slot_dir(scenario):
    return attempts.scenario_dir(scenario, SLOTS[scenario].name)


def preflight_report():
    return attempts.preflight_path(PREFLIGHT.name)


def current_verify_reports():
    return {name: f"{slot_dir(name)}/verify.json" for name in SCENARIOS}


def summary_input(wildcards):
    return {"preflight": preflight_report(), **current_verify_reports()}


def report_file(name):
    return f"{REPORT_DIR}/{name}"


def ftqual_cli():
    """Our CLI for the shell rules: `ftqual` where it is installed (bootstrap, the conda env), else the
    interpreter running Snakemake with this checkout on its path (a node where the project is used from
    PYTHONPATH, as on the GPU machine, where `ftqual` is not a command)."""
    if shutil.which("ftqual"):
        return "ftqual"
    project = shlex.quote(str(Path(workflow.basedir).resolve()))
    return f"PYTHONPATH={project}${{PYTHONPATH:+:$PYTHONPATH}} {shlex.quote(sys.executable)} -m ftqual"


def site_training_env(wildcards):
    """The conda environment of preflight and run_scenario: none. They run in the site's training
    environment (README, "Software environments"), which no conda file reproduces; declared, so that the
    choice is explicit for readers and for `snakemake --lint`."""
    return None


def report_argv(verify_reports):
    """`ftqual report`'s arguments after --preflight: the baseline, then every scenario's verdict and
    attempt (scenario -> verify.json in `verify_reports`)."""
    argv = ["--baseline", BASELINE]
    for name in SCENARIOS:
        argv += ["--verify", f"{name}={verify_reports[name]}"]
        argv += ["--attempt", f"{name}={SLOTS[name].name}"]
    return argv


def report_arguments(wildcards, input):
    """report_argv for the summary rule's shell command, quoted."""
    return shlex.join(report_argv({name: input[name] for name in SCENARIOS}))


def summary_plots():
    """The plots `ftqual report` draws: a recovery timeline per fault scenario and the loss curves."""
    faulted = [s.name for s in CFG.fault_scenarios]
    return [f"timeline_{name}" for name in faulted] + ["loss_comparison"]


def expected_attempts():
    """What the gate checks the summary against: scenario -> the slot of its current attempt."""
    return {name: slot.name for name, slot in SLOTS.items()}


# ---------------------------------------------------------------------------------------------
# preflight


def preflight_on_node():
    """True when preflight must run where training runs (see preflight_on_node in the schema)."""
    setting = CFG.preflight_on_node
    return CFG.workload == "megatron" if setting == "auto" else bool(setting)


def preflight_gpus(on_node=None):
    """GPUs a node-side preflight (or stack probe) asks for: those of the largest enabled scenario's node."""
    if (
        not (preflight_on_node() if on_node is None else on_node)
        or CFG.workload != "megatron"
    ):
        return None
    return max((s.gpus_per_node for s in CFG.scenarios), default=None)


# ---------------------------------------------------------------------------------------------
# run_scenario


# While the Snakefile is parsed Snakemake has not chosen its executor yet (and under -n it stands a dry-run
# executor in for the real one): the profiles tell them apart by a documented setting instead. A Slurm profile
# names the partition (or the account) its jobs go to in `default-resources`, which the plugin needs and
# nothing local sets.
SLURM_DEFAULT_RESOURCES = ("slurm_partition", "slurm_account")
STAND_IN_EXECUTORS = ("dryrun", "touch")


def intended_executor():
    """The executor this command runs jobs with: slurm where the default resources name a Slurm partition or
    account (profiles/slurm), else local; inside a job, the executor Snakemake runs it with.
    """
    plugin = workflow.executor_plugin
    if plugin is not None and plugin.name not in STAND_IN_EXECUTORS:
        return plugin.name
    if any(default_resource(name) for name in SLURM_DEFAULT_RESOURCES):
        return "slurm"
    return "local"


def invocation_is_dry_run():
    plugin = workflow.executor_plugin
    if plugin is not None and plugin.name in STAND_IN_EXECUTORS:
        return True
    return bool(getattr(workflow.output_settings, "dryrun", False))


def refuse_other_rerun_triggers():
    """The attempt slots decide what reruns; only file times may add to that (profiles/default says why).
    Called from onstart, where the main process knows its settings and no job has started yet.
    """
    triggers = (
        getattr(getattr(workflow, "dag_settings", None), "rerun_triggers", None) or ()
    )
    others = sorted(str(getattr(t, "name", t)).lower() for t in triggers)
    others = [name for name in others if name != "mtime"]
    if others:
        raise WorkflowError(
            f"ftqual: --rerun-triggers {' '.join(others)} would rerun attempts that passed, but ftqual's "
            "attempts decide what reruns: leave --rerun-triggers to profiles/default (mtime) and keep that "
            "workflow profile (no --workflow-profile none)"
        )


def refuse_unusable_slurm_account():
    """Called from onstart: only a real run submits, and it has submitted nothing yet."""
    plugin = workflow.executor_plugin
    if plugin is None or plugin.name != "slurm":
        return
    refusal = slurm_submit.account_refusal(account=default_resource("slurm_account"))
    if refusal:
        raise WorkflowError(refusal)


def refuse_multinode_on_local():
    """Checked while parsing, so that -n and a real run refuse alike. Inside a Slurm job the job itself runs
    under the local executor: only the main process decides."""
    multinode = [s for s in CFG.scenarios if s.multinode]
    if multinode and workflow.is_main_process and intended_executor() == "local":
        names = ", ".join(f"{s.name} (nnodes={s.nnodes})" for s in multinode)
        raise WorkflowError(
            f"the local executor cannot run multi-node scenarios: {names}; use --profile profiles/slurm "
            "(one ft_launcher per node through srun; a profile of your own must name slurm_partition or "
            "slurm_account in default-resources, which is how ftqual knows it plans for Slurm), or set "
            "nnodes: 1 or enabled: false for them"
        )


refuse_multinode_on_local()


def take_directory():
    """Before Snakemake locks the directory (ftqual.workflow.lock): a closed terminal stops this run as
    Ctrl-C does, a lock left by a workflow that is provably gone is released, and this run is recorded as
    the lock's holder until it ends (onsuccess/onerror forget it). Under Slurm, the jobs a workflow killed
    outright left here are cancelled (ftqual.workflow.slurm_orphans) before the stack probe, which would wait behind
    them for a GPU, and before planning, which would take their results for this run's.
    """
    if not workflow.is_main_process or invocation_is_dry_run():
        return
    workflow_lock.hangup_as_interrupt()
    say = lambda line: print(line, file=sys.stderr)
    decided = workflow_lock.release_stale(WORKDIR, say)
    workflow_lock.record_self(WORKDIR)
    if decided in ("unlocked", "released") and intended_executor() == "slurm":
        slurm_orphans.cancel_orphans(WORKDIR, lambda line: say(f"ftqual: {line}"))


take_directory()

# A workspace of an earlier version keeps its attempts: their records, once named run.json, become
# attempt.json (ftqual.workflow.attempts.adopt_legacy_records) before the slots are read.
if workflow.is_main_process:
    attempts.adopt_legacy_records(WORKDIR, SCENARIOS)
# The attempts of this invocation: keyed by the settings and the stack under test (ftqual.workflow.attempts).
STACK = _stack_identity()
SLOTS = _slots(STACK)
PREFLIGHT = attempts.preflight_slot(
    WORKDIR, attempts.attempt_key(CFG.preflight_fingerprint(), STACK.digest)
)
# The report of exactly these attempts has its own folder: when any attempt changes, the summary is a new
# file, which Snakemake builds (it never rebuilds an existing output whose inputs merely went missing).
REPORT_DIR = attempts.report_dir(
    PREFLIGHT.name, {n: s.name for n, s in SLOTS.items()}, BASELINE
)
_say_plan()


def _exists(path):
    return Path(path).exists()


def run_scenario_input(wildcards):
    """The preflight first; every other scenario after the baseline's current attempt has a verdict.

    Ordering only, and only while the attempt is still to run: an attempt that exists never waits for (nor
    reruns after) a later preflight or baseline attempt.
    """
    if _exists(f"results/{wildcards.scenario}/{wildcards.slot}/attempt.json"):
        return {}
    inputs = {"preflight": ancient(preflight_report())}
    if wildcards.scenario != BASELINE:
        inputs["baseline"] = ancient(current_verify_reports()[BASELINE])
    return inputs


def _multinode(wildcards):
    return SCENARIOS[wildcards.scenario].multinode


def gpu_resource(wildcards):
    """GPUs of a single-node run (the local scheduler's `gpu` budget, sbatch --gpus). Multi-node runs
    ask per node with `gres` instead: `gpu` would be a job total that Slurm may pack onto one node.
    """
    return (
        None if _multinode(wildcards) else SCENARIOS[wildcards.scenario].gpus_per_node
    )


def gres_resource(wildcards):
    s = SCENARIOS[wildcards.scenario]
    return f"gpu:{s.gpus_per_node}" if s.multinode else None


def nodes_resource(wildcards):
    return SCENARIOS[wildcards.scenario].allocated_nodes


def mpi_resource(wildcards):
    """`mpi` makes the Slurm jobstep leave the srun to the rule (one launcher per node)."""
    return "srun" if _multinode(wildcards) else None


def tasks_per_node_resource(wildcards):
    # Allocation geometry only (the plugin requires > 1 with `mpi`); the step itself runs one task per node.
    s = SCENARIOS[wildcards.scenario]
    return max(2, s.gpus_per_node) if s.multinode else None


# ---------------------------------------------------------------------------------------------
# verify


def verify_input(wildcards):
    """The attempt's record; while the verdict is still to come, also the baseline's (for --baseline)."""
    own = f"results/{wildcards.scenario}/{wildcards.slot}"
    inputs = {"run": f"{own}/attempt.json"}
    if wildcards.scenario != BASELINE and not _exists(f"{own}/verify.json"):
        inputs["baseline"] = ancient(baseline_run_json())
    return inputs


def expectation_param(wildcards):
    """What the scenario expects of its verdict (ftqual.verification.expectation): pass, or fail with the checks."""
    s = SCENARIOS[wildcards.scenario]
    return {"expect": s.expect, "failing": list(s.expect_failing)}


def baseline_run_json():
    return f"{slot_dir(BASELINE)}/attempt.json"


# ---------------------------------------------------------------------------------------------
# summary after a failed job


def summary_is_current():
    try:
        summary = json.loads(Path("results/summary.json").read_text())
    except (OSError, ValueError):
        return False
    return summary.get("attempts") == expected_attempts()


def salvage_summary():
    """onerror: unless results/ already shows the current attempts (the gate failed on a verdict), rebuild
    the summary there from what exists; a missing verdict is inconclusive with its cause.
    """
    import subprocess

    workflow_lock.forget_self(WORKDIR)
    if not workflow.is_main_process or summary_is_current():
        return
    Path("logs").mkdir(exist_ok=True)
    cmd = [sys.executable, "-m", "ftqual", "report", "--out", "results"]
    cmd += ["--preflight", preflight_report(), *report_argv(current_verify_reports())]
    project = str(Path(workflow.basedir).resolve())
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [project, os.environ.get("PYTHONPATH")])
        ),
    }
    with open("logs/summary-after-error.log", "w") as log:
        subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, check=False, env=env)
    print(
        "ftqual: a job failed; results/summary.md and junit.xml were rebuilt from what exists "
        "(logs/summary-after-error.log)",
        file=sys.stderr,
    )
