"""Rule `gate`: publish the current attempts' report; its verdict is the exit code (ftqual.workflow.gate)."""

import sys

from ftqual.workflow import rule_log

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = rule_log(sm)

from ftqual.workflow import gate  # noqa: E402 - errors go to the log

sys.exit(gate.run(report_dir=sm.params.report_dir, attempts=sm.params.attempts, log=log))
