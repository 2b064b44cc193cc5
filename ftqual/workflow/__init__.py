"""The workflow rules' logic, as plain functions: one module per rule script.

Each `scripts/rule_*.py` only redirects its errors to the rule's log (`rule_log`), takes its values from
Snakemake's `snakemake` object and calls one function here, so that tests import and exercise the logic
without running Snakemake.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


def rule_log(sm: Any) -> TextIO:
    """Open the rule's log (`sm.log[0]`, line-buffered) and send this process's stderr to it.

    A rule script calls this before it imports its rule's module, so that an error of that import, or any
    later traceback, lands in the rule's log; the open log is what the rule's function writes to.
    """
    log = open(sm.log[0], "w", buffering=1)
    sys.stderr = log
    return log
