"""The refusal before the Slurm executor plugin runs an accounting command that is not there."""

from ftqual.workflow.slurm_submit import account_refusal


def without(*missing):
    return lambda name: None if name in missing else f"/usr/bin/{name}"


def test_no_account_needs_sacct():
    line = account_refusal(account=None, which=without("sacct"))
    assert line is not None and "\n" not in line
    assert "`sacct` is not on PATH" in line and "slurm-client" in line
    assert account_refusal(account=None, which=without("sacctmgr")) is None


def test_an_account_needs_sacctmgr():
    line = account_refusal(account="proj", which=without("sacctmgr"))
    assert line is not None and "`sacctmgr` is not on PATH" in line
    assert account_refusal(account="proj", which=without("sacct")) is None
