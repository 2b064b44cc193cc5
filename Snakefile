# ftqual: qualify checkpoint-based fault recovery of Megatron-LM training under NVRx ft_launcher.
#   snakemake -n                        what would run
#   snakemake --profile profiles/local  one machine
#   snakemake --profile profiles/slurm  a Slurm cluster
# Stages: preflight -> run_scenario (baseline first) -> verify -> summary -> gate. See config/README.md.

from snakemake.settings.types import RerunTrigger
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "config/schema.yaml")

# What reruns is decided by the attempt slots (rules/common.smk): changed settings are a new slot, a
# verdict other than pass moves to the next one. Snakemake's params/input/code triggers would rerun
# attempts that passed (after an update of ftqual, or when another scenario's change gives the preflight a
# new slot), so only file times count here, whatever the command line asks.
type(workflow).rerun_triggers = property(lambda self: frozenset({RerunTrigger.MTIME}))


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/preflight.smk"
include: "rules/scenarios.smk"
include: "rules/verify.smk"
include: "rules/report.smk"


# The stack identity's digest (rules/common.smk): every job, a Slurm job on its node included, keys its
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


onsuccess:
    workflow_lock.forget_self(WORKDIR)


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
        attempts=expected_attempts(),
        report_dir=lambda wildcards, input: Path(input[0]).parent,  # of summary.json
    script:
        "scripts/rule_gate.py"
