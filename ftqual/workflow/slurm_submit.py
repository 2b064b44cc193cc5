"""What the Slurm executor plugin runs on the submitting side before every submission.

snakemake-executor-plugin-slurm 2.8.0 settles a job's account first (accounts.py): with no `slurm_account`
it guesses one with `sacct`, with one it validates it with `sacctmgr`, and it catches only those commands
failing, not their absence. On a host without Slurm's accounting commands every submission then fails with
"[Errno 2] No such file or directory: 'sacct'", the preflight first (seen on the H200 Slurm kit, whose
client had no sacct). `--slurm-no-account` does not help: 2.8.0 declares it and never reads it. The
workflow refuses that before its first job, in one line.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable


def account_refusal(*, account: str | None, which: Callable[[str], str | None] = shutil.which) -> str | None:
    """The one-line refusal where the plugin would run an accounting command that is not there."""
    if account:
        command, purpose = "sacctmgr", "to validate slurm_account"
    else:
        command, purpose = "sacct", "to guess an account"
    if which(command):
        return None
    return (
        f"ftqual: `{command}` is not on PATH, and the Slurm executor plugin (2.8.0) runs it before every "
        f"submission {purpose}, so each would fail; install Slurm's client commands on this host (Debian and "
        "Ubuntu: slurm-client; they work without slurmdbd) or put their directory on PATH"
    )
