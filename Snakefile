# ftqual: qualify checkpoint-based fault recovery of Megatron-LM training under NVRx ft_launcher.
#   snakemake -n                        what would run
#   snakemake --profile profiles/local  one machine
#   snakemake --profile profiles/slurm  a Slurm cluster
# Stages: preflight -> run_scenario (baseline first) -> verify -> summary -> gate. See config/README.md.

import sys

from snakemake.utils import min_version, validate

min_version("9.0")


# Snakemake says of a config file that does not parse only "not valid JSON or YAML", without file or line:
# ours is read first, and a syntax error is one line with file:line:column, exit 2. (A --configfile is read
# by Snakemake's command line before this file runs: config/README.md, "Mistakes".)
from ftqual.scenario.config_problems import yaml_problem

YAML_PROBLEM = yaml_problem("config/config.yaml")
if YAML_PROBLEM:
    print(f"ftqual: {YAML_PROBLEM}", file=sys.stderr)
    sys.exit(2)


configfile: "config/config.yaml"


# rules/common.smk checks the config first (a line per mistake, exit 2: ftqual.scenario.config_problems);
# Snakemake's validate then only fills in the schema's defaults.
include: "rules/common.smk"


validate(config, "config/schema.yaml")


report: "report/workflow.rst"


include: "rules/preflight.smk"
include: "rules/run_scenario.smk"
include: "rules/verify.smk"
include: "rules/summary.smk"


# The stack identity's digest (ftqual.workflow.plan): every job, a Slurm job on its node included, keys its
# attempts by the stack the main process probed instead of probing again.
envvars:
    "FTQUAL_STACK",


# preflight is local too unless it must probe a training node (rules/preflight.smk: localrule).
localrules:
    gate,
    verify,
    summary,


# A job that failed outright (a crash, a Slurm time limit) leaves no verdict behind it: the summary is
# then rebuilt from what exists, the missing verdict as inconclusive with its cause.
onerror:
    salvage_summary()


# profiles/default sets rerun-triggers: mtime (why: there); a command line that overrides it is refused
# before any job starts.
onstart:
    refuse_before_jobs()
    forward_interrupts()


onsuccess:
    workflow_lock.forget_self(PLAN.workdir)


# The default target is defined here: Snakemake's `include:` resets the default target an included file
# sets (workflow.include keeps the one before it), so a `default_target: True` in rules/gate.smk is lost.
rule gate:
    """Publishes the current attempts' report as results/summary.{json,md}, junit.xml and plots/, and makes
    the verdict the workflow's exit code. No output, so it runs after every workflow run.
    """
    default_target: True
    input:
        rules.summary.output,
    log:
        "logs/gate.log",
    conda:
        "envs/ftqual.yaml"
    params:
        attempts=PLAN.expected_attempts(),
        report_dir=lambda wildcards, input: Path(input[0]).parent,  # of summary.json
    script:
        "scripts/rule_gate.py"
