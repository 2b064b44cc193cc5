"""A workflow killed outright under Slurm on one H200, then the same command again
(tests/data/megatron-h200-slurm-1gpu-killed, tools/gpu/slurm_interrupt.sh). Snakemake was SIGKILLed while
the kill scenario's job trained; the job trained on. The rerun cancelled it before its stack probe and its
plan, redid the scenario in a new Slurm job and passed. The cancelled run keeps its evidence and is
INCONCLUSIVE with the stop as its cause; the same run without the recorded stop FAILs."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-slurm-1gpu-killed"
CANCELLED = FIXTURE / "runs" / "kill-20261203T063615Z-4-a1"
REDONE = FIXTURE / "runs" / "kill-20261203T063643Z-6-a1"


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def slurm_jobs() -> dict[str, dict[str, str]]:
    text = (FIXTURE / "slurm" / "jobs.txt").read_text(encoding="utf-8")
    blocks = re.split(r"\n(?=JobId=)", text[text.index("JobId=") :])
    return {b.split()[0].removeprefix("JobId="): dict(re.findall(r"(\w+)=(\S+)", b)) for b in blocks}


def test_the_rerun_cancelled_the_orphan_before_probing_and_planning():
    log = (FIXTURE / "slurm" / "again.log").read_text(encoding="utf-8")
    [line] = [x for x in log.splitlines() if x.startswith("ftqual: cancelled Slurm job(s)")]
    assert line.startswith("ftqual: cancelled Slurm job(s) 4 (run_scenario kill_b53ad476926a-1, running)")
    assert log.index(line) < log.index("ftqual: stack: probing a training node")
    assert log.index(line) < log.index("ftqual: kill: attempt")
    jobs = slurm_jobs()
    assert jobs["4"]["JobState"] == "CANCELLED" and jobs["5"]["JobName"] == "ftqual-stack-probe"
    # the probe's srun started once the cancelled job had given the GPU back, not behind a finished scenario
    waited = datetime.fromisoformat(jobs["5"]["StartTime"]) - datetime.fromisoformat(jobs["4"]["EndTime"])
    assert 0 <= waited.total_seconds() < 60


def test_the_rerun_redid_the_scenario_and_passed():
    summary = read_json(FIXTURE / "results" / "summary.json")
    assert summary["verdict"] == "pass"
    slot = summary["attempts"]["kill"]
    record = read_json(FIXTURE / "results" / "kill" / slot / "attempt.json")
    assert record["slurm_job_id"] == "6" and record["run_id"] == REDONE.name
    assert build_report(str(REDONE))["verdict"] == "pass"
    # the cancelled attempt's evidence stays beside the one that counts
    consoles = sorted(p.name for p in (FIXTURE / "results" / "kill" / "attempts").glob("*.console.log"))
    assert consoles == [f"{CANCELLED.name}.console.log", f"{REDONE.name}.console.log"]


def test_the_cancelled_run_is_inconclusive_with_the_stop_as_its_cause():
    meta = read_json(CANCELLED / "run.json")
    assert meta["interrupted_by"] == "SIGTERM" and not (CANCELLED / "fault_injected.json").exists()
    report = build_report(str(CANCELLED))
    assert report["verdict"] == "inconclusive", [(c["id"], c["status"]) for c in report["checks"]]
    assert report["cause"].startswith("the launcher was stopped by SIGTERM from outside")


def test_the_same_run_without_the_recorded_stop_fails(tmp_path):
    run = tmp_path / CANCELLED.name
    shutil.copytree(CANCELLED, run)
    meta = read_json(run / "run.json")
    del meta["interrupted_by"]
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    report = build_report(str(run))
    assert report["verdict"] == "fail"
    failed = {c["id"] for c in report["checks"] if c["status"] == "fail"}
    assert {"failure_detected_and_restarted", "clean_finish"} <= failed


@pytest.mark.parametrize("name", ["queue-before.txt", "between.txt"])
def test_the_job_outlived_its_killed_workflow(name):
    """What the kill left: Slurm still ran the scenario's job, before and 5 s after Snakemake died."""
    text = (FIXTURE / "slurm" / name).read_text(encoding="utf-8")
    assert "4 RUNNING rule_run_scenario_wildcards_kill_b53ad476926a-1" in text
