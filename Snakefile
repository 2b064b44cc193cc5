# ftqual: qualify checkpoint-based fault recovery of Megatron-LM training under NVRx ft_launcher.
#   snakemake -n                        what would run
#   snakemake --profile profiles/local  one machine
#   snakemake --profile profiles/slurm  a Slurm cluster
# Stages: scenario_settings -> preflight -> run_scenario (baseline first) -> verify -> summary. See config/README.md.

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "config/schema.yaml")


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/preflight.smk"
include: "rules/scenarios.smk"
include: "rules/verify.smk"
include: "rules/report.smk"


# preflight is local too unless it must probe a training node (rules/preflight.smk: localrule).
localrules:
    all,
    scenario_settings,
    verify,
    summary,


# The verify reports are targets too, not only the summary's inputs: Snakemake does not regenerate a
# missing intermediate file while the files after it exist, so a verification that failed after the
# summary was built (e.g. a forced re-verification) would otherwise leave the old summary standing.
rule all:
    default_target: True
    input:
        "results/summary.json",
        all_verify_reports(),
