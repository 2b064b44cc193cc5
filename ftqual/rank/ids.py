"""The ids a writer in the rank and a reader elsewhere share: schemas, line prefixes, exit statuses.

The ids a writer in the rank and a reader elsewhere share, in one place: the schemas of the records the
rank writes (markers, leftovers) and reads (the campaign plan), the prefixes of the lines the verifier finds
in a rank's log (ftqual/verification/evidence/patterns), and the rank's exit statuses."""

from __future__ import annotations

from ftqual.contract import IN_SAVE_TIMINGS

MARKER_SCHEMA = "ftqual.fault/v1"
INJECT_PREFIX = "[ftqual-inject]"
LOG_PREFIX = "[ftqual-worker]"
EXIT_BAD_TRACKER = 2
EXIT_FAULT_NEVER_INJECTED = 3
EXIT_BAD_PLAN = 4
CAMPAIGN_PLAN_SCHEMA = "ftqual.campaign_plan/v1"
LEFTOVERS_SCHEMA = "ftqual.leftovers/v1"
STACKDUMP_SCHEMA = "ftqual.stackdump/v1"  # the rank sentinel's dumps (ftqual.rank.sentinel)
# The wrapper's --fault-timing and --hang-placement, which the launcher and the scenario model pass it.
TIMINGS = ("checkpoint", *IN_SAVE_TIMINGS)
# Where a rank fault lands once armed: inside the next training step (default), inside the next checkpointing
# section (a hang there is caught by the 'checkpointing' timeout), right after a step's section closed, out of
# every section (the out-of-section timeout), or at once wherever the rank is (the walkthrough's behaviour).
PLACEMENTS = ("step", "immediate", "checkpointing", "out_of_section", "setup")
