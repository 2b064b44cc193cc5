"""Rule `preflight`: the resolved config, `ftqual preflight` on it (ftqual.workflow.preflight_rule)."""

import sys

from ftqual.workflow import rule_log

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = rule_log(sm)

from ftqual.workflow import preflight_rule  # noqa: E402 - errors go to the log

sys.exit(preflight_rule.run(config=sm.params.config, output=sm.output[0], log_path=sm.log[0], log=log))
