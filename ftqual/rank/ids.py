"""The ids a writer in the rank and a reader elsewhere share: schemas, line prefixes, exit statuses.

The ids a writer in the rank and a reader elsewhere share, in one place: the schemas of the records the
rank writes (markers, leftovers) and reads (the campaign plan), the prefixes of the lines the verifier finds
in a rank's log (ftqual/verification/evidence/patterns), and the rank's exit statuses."""

from __future__ import annotations

MARKER_SCHEMA = "ftqual.fault/v1"
INJECT_PREFIX = "[ftqual-inject]"
LOG_PREFIX = "[ftqual-worker]"
EXIT_BAD_TRACKER = 2
EXIT_FAULT_NEVER_INJECTED = 3
EXIT_BAD_PLAN = 4
CAMPAIGN_PLAN_SCHEMA = "ftqual.campaign_plan/v1"
LEFTOVERS_SCHEMA = "ftqual.leftovers/v1"
STACKDUMP_SCHEMA = "ftqual.stackdump/v1"  # the rank sentinel's dumps (ftqual.rank.sentinel)
# What the fault rank does to the checkpoint it just completed, right before it kills itself, so that the
# replacement meets a broken checkpoint (config/checkpoint_faults.yaml): the tracker overwritten with NUL
# bytes (a write cut short: not a number), the directory the tracker names moved aside (renamed, never
# deleted), the tracker moved aside, the largest shard file of that checkpoint cut to half its size, or
# bytes inside its largest tensor inverted.
CHECKPOINT_DAMAGES = (
    "tracker_not_a_number",
    "tracker_missing_iteration",
    "tracker_removed",
    "shard_truncated",
    "shard_corrupted",
)
# Kills at a phase of a save, seen on disk by the fault rank's poller while a save S newer than the tracker is
# under way (kill only): the save begun and no shard file yet (the state being staged to host memory), some
# shard files (`*.distcp`) without the global `.metadata`, shard files whose sizes stopped changing still
# without `.metadata` (every shard written), `.metadata` written while the tracker still names an older
# iteration (finalised, not yet tracked). `in_save` is the older timing: at the end of a checkpointing
# section with a save in flight.
SAVE_PHASES = ("save_staged", "save_shards_partial", "save_shards_complete", "save_finalized")
IN_SAVE_TIMINGS = ("in_save", *SAVE_PHASES)
# The wrapper's --fault-timing and --hang-placement, which the launcher and the scenario model pass it.
TIMINGS = ("checkpoint", *IN_SAVE_TIMINGS)
# Where a rank fault lands once armed: inside the next training step (default), inside the next checkpointing
# section (a hang there is caught by the 'checkpointing' timeout), right after a step's section closed, out of
# every section (the out-of-section timeout), or at once wherever the rank is (the walkthrough's behaviour).
PLACEMENTS = ("step", "immediate", "checkpointing", "out_of_section", "setup")
