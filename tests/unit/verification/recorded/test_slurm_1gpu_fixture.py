"""The walkthrough's qualification through `--profile profiles/slurm` on one H200 (tools/gpu/slurm.sh,
tests/data/megatron-h200-slurm-1gpu): a real one-node Slurm with the GPU as gres, the preflight and each
scenario an sbatch job. Every run verifies, each attempt record names its Slurm job and the GPU Slurm bound
it to, the GPU gres let one scenario at a time train, and NVRx's GPU-memory check ran under Slurm's device
assignment. An edited copy under a tighter step timeout FAILs, so the hang's verdict is judged, not given."""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from ftqual.verification.verify import build_report, check_by_id

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-slurm-1gpu"
RUNS = {path.name.split("-")[0]: path for path in (FIXTURE / "runs").iterdir()}


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def summary() -> dict:
    return read_json(FIXTURE / "results" / "summary.json")


def test_every_scenario_passed_under_slurm(summary):
    assert summary["verdict"] == "pass"
    assert {sc["name"]: sc["verdict"] for sc in summary["scenarios"]} == dict.fromkeys(
        ("baseline", "kill", "hang"), "pass"
    )
    parts = summary["stack_identity"]["parts"]
    assert parts["executor"] == "slurm" and parts["slurm_nodes"] == "vm gpu:1"
    assert parts["gpus"] == "1 x NVIDIA H200"


@pytest.mark.parametrize("scenario", ["baseline", "kill", "hang"])
def test_every_run_verifies_again(scenario):
    report = build_report(str(RUNS[scenario]))
    assert report["verdict"] == "pass", [c for c in report["checks"] if c["status"] == "fail"]


def test_each_attempt_names_its_slurm_job_and_gpu(summary):
    job_ids = set()
    for scenario, slot in summary["attempts"].items():
        record = read_json(FIXTURE / "results" / scenario / slot / "attempt.json")
        machine = record["machine"]
        assert record["slurm_job_id"] == machine["slurm_job_id"] and machine["slurm_job_id"].isdigit()
        assert machine["cuda_visible_devices"] == "0" and machine["node"] == "vm"
        job_ids.add(machine["slurm_job_id"])
        log = FIXTURE / "slurm" / "slurm_logs" / "rule_run_scenario" / f"{scenario}_{slot}"
        assert (log / f"{machine['slurm_job_id']}.log").is_file()  # the plugin's log of that very job
    assert len(job_ids) == 3


def test_the_gpu_gres_let_one_scenario_train_at_a_time():
    """kill and hang were submitted together; Slurm started the second when the first gave the GPU back."""
    text = (FIXTURE / "slurm" / "jobs.txt").read_text(encoding="utf-8")
    jobs = re.findall(r"JobId=(\d+).*?StartTime=(\S+) EndTime=(\S+).*?TresPerJob=(\S+)", text, re.S)
    spans = sorted((datetime.fromisoformat(s), datetime.fromisoformat(e)) for _, s, e, tres in jobs)
    assert all(tres == "gres:gpu:1" for *_, tres in jobs) and len(spans) == 5  # probe, preflight, 3 scenarios
    assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


def test_nvrx_gpu_memory_check_ran_under_slurm():
    for scenario in ("kill", "hang"):
        detail = check_by_id(build_report(str(RUNS[scenario])), "no_leftovers")["detail"]
        assert "NVRx's GPU-memory check before 1 replacement(s): reclaimed" in detail


def test_a_tighter_step_timeout_fails_the_same_hang(tmp_path):
    run = tmp_path / RUNS["hang"].name
    shutil.copytree(RUNS["hang"], run)
    meta = read_json(run / "run.json")
    meta["timeouts"]["step"] = 10  # NVRx fired at 24.8 s: beyond 10 s + the 5 s monitor interval
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    report = build_report(str(run))
    assert report["verdict"] == "fail"
    assert check_by_id(report, "detected_within_timeout")["status"] == "fail"
