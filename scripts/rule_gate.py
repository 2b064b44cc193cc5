"""Rule `gate`: publish the current attempts' report; its verdict is the exit code (ftqual.workflow.gate)."""

import sys

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log

from ftqual.workflow import gate  # noqa: E402 - errors go to the log

sys.exit(gate.run(report_dir=sm.params.report_dir, attempts=sm.params.attempts, log=log))
