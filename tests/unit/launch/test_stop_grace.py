"""ftqual.launch.stop_grace: Slurm's KillWait read from scontrol, and the wait it leaves after a stop."""

from __future__ import annotations

import subprocess

from ftqual.launch import stop_grace

CONFIG = """Configuration data as of 2026-12-05T23:48:16
JobAcctGatherType       = jobacct_gather/none
KillOnBadExit           = 0
KillWait                = 10 sec
UnkillableStepTimeout   = 60 sec
"""


def answering(stdout: str, returncode: int = 0):
    asked = []

    def run(argv, **kwargs):
        asked.append(argv)
        return subprocess.CompletedProcess(argv, returncode, stdout=stdout, stderr="")

    return run, asked


def test_kill_wait_is_read_from_scontrols_config():
    assert stop_grace.parse_kill_wait(CONFIG) == 10
    assert stop_grace.parse_kill_wait("KillOnBadExit = 0\n") is None
    assert stop_grace.parse_kill_wait("MyKillWait = 4 sec\n") is None


def test_only_a_slurm_job_asks_scontrol():
    run, asked = answering(CONFIG)
    assert stop_grace.slurm_kill_wait_s({}, run) is None and asked == []
    assert stop_grace.slurm_kill_wait_s({"SLURM_JOB_ID": "12"}, run) == 10
    assert asked == [["scontrol", "show", "config"]]


def test_scontrol_that_cannot_say_leaves_the_wait_unbounded_by_slurm():
    failed, _ = answering(CONFIG, returncode=1)
    assert stop_grace.slurm_kill_wait_s({"SLURM_JOB_ID": "12"}, failed) is None

    def missing(argv, **kwargs):
        raise FileNotFoundError(argv[0])

    def hung(argv, **kwargs):
        raise subprocess.TimeoutExpired(argv, kwargs["timeout"])

    assert stop_grace.slurm_kill_wait_s({"SLURM_JOB_ID": "12"}, missing) is None
    assert stop_grace.slurm_kill_wait_s({"SLURM_JOB_ID": "12"}, hung) is None


def test_the_wait_ends_a_reserve_before_kill_wait():
    assert stop_grace.wait_budget_s(5, 60, None) == 65
    assert stop_grace.wait_budget_s(5, 60, 30) == 30 - stop_grace.RESERVE_S
    assert stop_grace.wait_budget_s(5, 60, 10) == 10 - stop_grace.RESERVE_S
    assert stop_grace.wait_budget_s(5, 60, 2) == 0  # no time to wait at all: kill at once
    assert stop_grace.wait_budget_s(5, 60, 600) == 65  # a generous KillWait does not lengthen it
