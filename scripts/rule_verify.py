"""Rule `verify`: the verdict of one attempt, always written, pass or not (ftqual.workflow.verify_rule)."""

import sys

from ftqual.workflow import rule_log

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = rule_log(sm)

from ftqual.launch import payloads  # noqa: E402
from ftqual.workflow import verify_rule  # noqa: E402 - errors go to the log

code = verify_rule.run(
    scenario=sm.wildcards.scenario,
    slot=sm.wildcards.slot,
    run_json=sm.input.run,
    output=sm.output[0],
    expectation=sm.params.expectation,
    baseline_run=getattr(sm.input, "baseline", None),
    log=log,
)
payloads.after_verify(sm.input.run, sm.output[0], sm.params.payloads, log)  # once verify.json is written
sys.exit(code)
