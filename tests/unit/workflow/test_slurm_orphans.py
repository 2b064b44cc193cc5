"""Which queued Slurm jobs are an earlier workflow's in this directory, and how they are cancelled. The
real cancellation on a real Slurm: tests/integration/slurm/test_slurm_interrupt.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ftqual.workflow.slurm_orphans import cancel_orphans, orphans, parse_squeue


def squeue_text(here: Path) -> str:
    return "\n".join(
        [
            f"41|{here}|rule_run_scenario_wildcards_baseline_cdf4c0b52716-1|RUNNING",
            f"42|{here}|rule_preflight |PENDING",
            f"43|{here}|(null)|RUNNING",  # a job of the user's own in this directory, not the plugin's
            # another workspace's
            f"44|{here.parent / 'elsewhere'}|rule_run_scenario_wildcards_kill_x-1|RUNNING",
        ]
    )


def test_only_this_directorys_plugin_jobs_are_orphans(tmp_path):
    found = orphans(parse_squeue(squeue_text(tmp_path)), tmp_path)
    assert [j.job_id for j in found] == ["41", "42"]
    assert found[0].describe() == "41 (run_scenario baseline_cdf4c0b52716-1, running)"
    assert found[1].describe() == "42 (preflight, pending)"


class FakeSlurm:
    """squeue lists the jobs until scancel names them; then, after `lingering` more listings, not."""

    def __init__(self, text: str, lingering: int = 0, scancel_rc: int = 0):
        self.text, self.lingering, self.scancel_rc = text, lingering, scancel_rc
        self.calls: list[list[str]] = []
        self.cancelled = False

    def __call__(self, cmd, **kwargs):
        self.calls.append(cmd)
        if cmd[0] == "scancel":
            self.cancelled = self.scancel_rc == 0
            return subprocess.CompletedProcess(cmd, self.scancel_rc, "", "scancel: error: denied")
        if self.cancelled and self.lingering <= 0:
            return subprocess.CompletedProcess(cmd, 0, "", "")
        if self.cancelled:
            self.lingering -= 1
        return subprocess.CompletedProcess(cmd, 0, self.text, "")


def test_cancels_and_waits_until_they_left_the_queue(tmp_path):
    slurm, lines, slept = FakeSlurm(squeue_text(tmp_path), lingering=2), [], []
    assert cancel_orphans(tmp_path, lines.append, run=slurm, sleep=slept.append) == ["41", "42"]
    assert ["scancel", "41", "42"] in slurm.calls and len(slept) == 2
    assert len(lines) == 1 and lines[0].startswith("cancelled Slurm job(s) 41 (run_scenario baseline")


def test_nothing_of_this_directory_nothing_cancelled(tmp_path):
    slurm, lines = FakeSlurm(squeue_text(tmp_path / "other")), []
    assert cancel_orphans(tmp_path, lines.append, run=slurm) == []
    assert not any(cmd[0] == "scancel" for cmd in slurm.calls) and lines == []


def test_a_refused_scancel_is_said(tmp_path):
    slurm, lines = FakeSlurm(squeue_text(tmp_path), scancel_rc=1), []
    assert cancel_orphans(tmp_path, lines.append, run=slurm) == []
    assert lines == [
        "could not cancel Slurm job(s) 41, 42 of an earlier workflow here: scancel: error: denied"
    ]


def test_jobs_that_stay_queued_are_said(tmp_path):
    slurm, lines = FakeSlurm(squeue_text(tmp_path), lingering=99), []
    cancel_orphans(tmp_path, lines.append, run=slurm, wait_s=3, sleep=lambda s: None)
    assert lines[-1] == "Slurm job(s) 41, 42 still queued 3 s after scancel; going on"
