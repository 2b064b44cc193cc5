# The plan of this invocation and every helper the rules use (the only place for helpers). The plan (the
# scenarios, the executor, the refusals, the directory lock, the stack under test, the attempt slots) is
# ftqual.workflow.plan's, made from what Snakemake gives while it parses; docs/architecture.md explains it.

import os
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

# Snakemake puts the Snakefile's folder on sys.path: the ftqual package beside it, installed or not.
from ftqual.workflow import plan as workflow_plan, lock as workflow_lock
from ftqual.launch import payloads as checkpoint_payloads
from ftqual.report import scope as timeouts_scope


def _say(line):
    print(line, file=sys.stderr)


def _plan():
    """The plan of this invocation (ftqual.workflow.plan.make); its refusals as WorkflowErrors."""
    try:
        return workflow_plan.make(
            config,
            basedir=workflow.basedir,
            invocation=workflow_plan.Invocation.of(workflow),
            cwd=Path.cwd(),
            python=sys.executable,
            env=os.environ,
            say=_say,
        )
    except workflow_plan.Refusal as exc:
        raise WorkflowError(str(exc)) from None


PLAN = _plan()
CFG, SCENARIOS, BASELINE = PLAN.cfg, PLAN.scenarios, PLAN.baseline


wildcard_constraints:
    scenario="|".join(SCENARIOS),
    slot=r"[0-9a-f]{12}-[0-9]+",


# ---------------------------------------------------------------------------------------------
# onstart, onerror (the Snakefile)


def refuse_before_jobs():
    """onstart: other rerun triggers than mtime, a Slurm account the plugin cannot check (one line each)."""
    refusal = workflow_plan.onstart_refusal(workflow_plan.Invocation.of(workflow))
    if refusal:
        raise WorkflowError(refusal)


def salvage_summary():
    """onerror: the summary rebuilt from what exists (ftqual.workflow.plan.salvage_summary)."""
    workflow_plan.salvage_summary(
        PLAN,
        project=workflow.basedir,
        python=sys.executable,
        env=os.environ,
        say=_say,
    )


# ---------------------------------------------------------------------------------------------
# paths of the current attempts, the rules' software


def preflight_report():
    return PLAN.preflight_report()


def _exists(path):
    return Path(path).exists()


def site_training_env(wildcards):
    """The conda environment of preflight and run_scenario: none. They run in the site's training
    environment (README, "Software environments"), which no conda file reproduces; declared, so that the
    choice is explicit for readers and for `snakemake --lint`."""
    return None


# ---------------------------------------------------------------------------------------------
# preflight


def preflight_on_node():
    return workflow_plan.preflight_on_node(CFG)


def preflight_gpus():
    return workflow_plan.preflight_gpus(CFG)


# ---------------------------------------------------------------------------------------------
# run_scenario


def run_scenario_input(wildcards):
    """The preflight first; every other scenario after the baseline's current attempt has a verdict.

    Ordering only, and only while the attempt is still to run: an attempt that exists never waits for (nor
    reruns after) a later preflight or baseline attempt.
    """
    if _exists(f"results/{wildcards.scenario}/{wildcards.slot}/attempt.json"):
        return {}
    inputs = {"preflight": ancient(preflight_report())}
    if wildcards.scenario != BASELINE:
        inputs["baseline"] = ancient(PLAN.current_verify_reports()[BASELINE])
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
        inputs["baseline"] = ancient(f"{PLAN.slot_dir(BASELINE)}/attempt.json")
    return inputs


def expectation_param(wildcards):
    """What the scenario expects of its verdict (ftqual.verification.expectation): pass, or fail with the checks."""
    s = SCENARIOS[wildcards.scenario]
    return {"expect": s.expect, "failing": list(s.expect_failing)}


def payloads_param(wildcards):
    """What verify does with the run's checkpoint payloads once verified (ftqual.launch.payloads)."""
    return checkpoint_payloads.rule_param(
        config, SCENARIOS, wildcards.scenario, BASELINE
    )


# ---------------------------------------------------------------------------------------------
# summary, gate


def summary_input(wildcards):
    return {"preflight": preflight_report(), **PLAN.current_verify_reports()}


def report_file(name):
    return f"{PLAN.report_dir}/{name}"


def summary_plots():
    """The plots `ftqual report` draws: a recovery timeline per fault scenario and the loss curves."""
    faulted = [s.name for s in CFG.fault_scenarios]
    return [f"timeline_{name}" for name in faulted] + ["loss_comparison"]


def summary_command(wildcards, input, output):
    """`ftqual report` of the current attempts (ftqual.workflow.plan.Plan.summary_argv), quoted."""
    verify_reports = {name: input[name] for name in SCENARIOS}
    out = Path(output.json).parent
    argv = PLAN.summary_argv(input.preflight, verify_reports, out)
    argv += timeouts_scope.report_argv(config)  # what the timeouts were recommended for
    return f"{workflow_plan.ftqual_cli(workflow.basedir, sys.executable)} {shlex.join(argv)}"
