# The plan of this invocation and every helper the rules use (the only place for helpers). The plan (the
# scenarios, the executor, the refusals, the directory lock, the stack under test, the attempt slots) is
# ftqual.workflow.plan's, made from what Snakemake gives while it parses; docs/architecture.md explains it.

import os
import sys
from pathlib import Path

# Snakemake puts the Snakefile's folder on sys.path: the ftqual package beside it, installed or not.
from ftqual.workflow import plan as workflow_plan, lock as workflow_lock, rule_inputs
from ftqual.workflow import interrupts, progress
from ftqual.scenario import config_problems


def _say(line):
    print(line, file=sys.stderr)


def command_line_config():
    """The values given with --config, mappings and lists read as YAML reads a config file (Snakemake
    reads them as text: ftqual.scenario.config_problems.typed_given)."""
    settings = workflow.config_settings
    entries = settings.config_args if isinstance(settings.config_args, list) else []
    return config_problems.typed_given(settings.config, entries)


COMMAND_LINE_CONFIG = command_line_config()
config_problems.overlay(config, COMMAND_LINE_CONFIG)


def refuse(refusal):
    """A line per problem (a config mistake with where its value came from: a config file, --config or a
    launch script's line), then exit 2."""
    for line in workflow_plan.refusal_lines(
        refusal,
        workflow.configfiles,
        workflow.overwrite_configfiles,
        COMMAND_LINE_CONFIG,
    ):
        _say(line)
    sys.exit(2)


def _plan():
    """The plan of this invocation (ftqual.workflow.plan.make). A refusal prints a line per problem and
    exits 2: no Snakemake traceback, no schema dump, nothing launched."""
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
        refuse(exc)


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
        refuse(refusal)


def forward_interrupts():
    """onstart: a SIGINT, SIGTERM or SIGHUP to this process alone reaches the scenario runs too
    (ftqual.workflow.interrupts), then stops the workflow as Ctrl-C does."""
    interrupts.forward_to_jobs(PLAN.workdir, _say)
    # `ftqual status` shows these attempts, not those of earlier settings (ftqual.workflow.progress)
    progress.record_plan(PLAN.workdir, PLAN.expected_attempts())


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
# run_scenario, verify, summary: ftqual.workflow.rule_inputs, by the wildcards


def run_scenario_input(wildcards):
    """The preflight first; every other scenario after the baseline's current attempt has a verdict."""
    return rule_inputs.run_scenario(PLAN, wildcards.scenario, wildcards.slot, ancient)


def run_resource(name):
    """One of the Snakemake resources of a scenario's run (GPUs, gres, nodes, mpi, tasks per node)."""
    return lambda wildcards: rule_inputs.run_resources(SCENARIOS[wildcards.scenario])[
        name
    ]


def verify_input(wildcards):
    """The attempt's record; while the verdict is still to come, also the baseline's (for --baseline)."""
    return rule_inputs.verify(PLAN, wildcards.scenario, wildcards.slot, ancient)


def expectation_param(wildcards):
    """What the scenario expects of its verdict: pass, or fail with the checks."""
    return rule_inputs.expectation(PLAN, wildcards.scenario)


def payloads_param(wildcards):
    """What verify does with the run's checkpoint payloads once verified."""
    return rule_inputs.payloads(PLAN, config, wildcards.scenario)


def summary_input(wildcards):
    return {"preflight": preflight_report(), **PLAN.current_verify_reports()}


def report_file(name):
    return f"{PLAN.report_dir}/{name}"


def summary_command(wildcards, input, output):
    """`ftqual report` of the current attempts, quoted (the same command line as onerror's rebuild)."""
    return rule_inputs.summary_command(
        PLAN, input, output.json, workflow.basedir, sys.executable
    )
