"""Rule `run_scenario`: one attempt of one scenario under ft_launcher (ftqual.workflow.run_scenario)."""

import sys

from ftqual.workflow import rule_log

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = rule_log(sm)

from ftqual.workflow import run_scenario  # noqa: E402 - installed (tools/bootstrap.sh); errors go to the log

sys.exit(
    run_scenario.run(
        scenario=sm.wildcards.scenario,
        slot=sm.wildcards.slot,
        config=sm.config,
        stack=sm.params.stack,
        slot_reason=sm.params.slot_reason,
        preflight=getattr(sm.input, "preflight", None) or sm.params.preflight,
        baseline=getattr(sm.input, "baseline", None) or sm.params.baseline,
        output=sm.output.run,
        resources=sm.resources,
        log=log,
    )
)
