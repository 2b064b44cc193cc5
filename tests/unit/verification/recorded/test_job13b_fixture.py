"""The 1.3b preset on one H200 (tests/data/megatron-h200-1.3b-1gpu, tools/gpu/job13b.sh): 18.4 GB checkpoints
whose payloads were dropped once each run was verified. What the machine decided and what ftqual decides now
from the same evidence, the checkpoint and restart account read from the dropped-payload manifests, the job's
estimate against the bytes on disk, the recommendation's scope, and negative controls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.report import scope
from ftqual.verification.schema import judged
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-1.3b-1gpu"
RUNS = {  # run -> its baseline (the first call ran baseline and kill, the second baseline and hang)
    "baseline-20261204T162042Z-632-a1": None,
    "kill-20261204T162349Z-1036-a1": "baseline-20261204T162042Z-632-a1",
    "baseline-20261204T162923Z-1959-a1": None,
    "hang-20261204T163215Z-2339-a1": "baseline-20261204T162923Z-1959-a1",
}
CHECKPOINT_BYTES = 18_423_668_779  # iter_0000200 of the kill run: its payload (manifest) plus its metadata


def verify(run_id: str, run_dir: Path | None = None) -> dict:
    baseline = RUNS[run_id]
    return build_report(run_dir or DATA / "runs" / run_id, DATA / "runs" / baseline if baseline else None)


@pytest.mark.parametrize("run_id", sorted(RUNS))
def test_every_run_passes_now_as_it_did_on_the_machine(run_id):
    report = verify(run_id)
    assert judged(report).raw == "pass", [c for c in report["checks"] if c["status"] == "fail"]
    scenario = run_id.split("-")[0]
    recorded = [
        json.loads(p.read_text())
        for p in (DATA / "results" / scenario).glob("*/verify.json")
        if json.loads(p.read_text())["run_id"] == run_id
    ]
    assert [judged(r).raw for r in recorded] == ["pass"]


def test_the_payloads_were_dropped_and_the_account_still_has_every_byte():
    report = verify("kill-20261204T162349Z-1036-a1")
    account = report["checkpoint_account"]
    saves = {s["iteration"]: s for s in account["saves"]}
    assert saves[200]["bytes"] == CHECKPOINT_BYTES
    assert all(s["blocked_s"] > 5 and s["durable_s"] > s["blocked_s"] for s in saves.values())
    [restart] = account["restarts"]
    assert restart["load_bytes"] == CHECKPOINT_BYTES and restart["load_s"] == pytest.approx(19.068)
    assert restart["detection_s"] == pytest.approx(0.15)
    assert not list((DATA / "runs" / "kill-20261204T162349Z-1036-a1").rglob("*.distcp"))


def test_the_jobs_estimate_is_the_checkpoint_on_disk():
    run = json.loads((DATA / "runs" / "kill-20261204T162349Z-1036-a1" / "run.json").read_text())
    estimate = run["job"]["checkpoint_bytes_estimate"]
    assert run["job"]["model"] == "1.3b" and run["job"]["params"] == 1_315_819_520
    assert abs(estimate - CHECKPOINT_BYTES) / CHECKPOINT_BYTES < 0.001


def test_the_recommendation_holds_for_this_job_and_refuses_another():
    snippet = (DATA / "results" / "timeouts-recommended.yaml").read_text()
    import yaml

    timeouts_for = yaml.safe_load(snippet)["timeouts_for"]
    run = json.loads((DATA / "runs" / "hang-20261204T163215Z-2339-a1" / "run.json").read_text())
    assert timeouts_for["job"] == run["job"]["digest"]
    assert run["timeouts"]["step"] == 60  # the proof ran under the recommendation
    assert scope.scope_problem(timeouts_for, run["job"]["digest"], allow=False) is None
    refused = scope.scope_problem(timeouts_for, "0123456789ab", allow=False)
    assert refused is not None and "\n" not in refused


def test_without_its_manifest_a_dropped_checkpoints_bytes_are_unknown_never_its_metadata(tmp_path):
    """Negative control: the manifest is the only record of the dropped bytes; without it the account says
    null, never the few KiB of metadata left (the checks judge completeness by `.metadata`, as on every
    trimmed fixture, so the verdict stands)."""
    run = tmp_path / "kill-20261204T162349Z-1036-a1"
    shutil.copytree(DATA / "runs" / run.name, run)
    (run / "checkpoints" / "payloads_dropped.json").unlink()
    report = verify(run.name, run)
    assert all(s["bytes"] is None for s in report["checkpoint_account"]["saves"])
    assert report["checkpoint_account"]["restarts"][0]["load_bytes"] is None
    assert report["checkpoint_account"]["restarts"][0]["load_gbps"] is None
