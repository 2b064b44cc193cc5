"""`ftqual preflight`: every check that can be made before spending GPU time.

Layout (probes return facts, checks are pure functions of facts and config, see DESIGN notes in each module):
../scenarios.py (the workflow config, resolved) -> probes.py + ../stackinfo.py (probe this node)
-> checks.py (judge) -> command.py (JSON report `ftqual.preflight/v1`, one line per check, exit code).
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from ftqual.preflight.command import main as _main

    return _main(argv)
