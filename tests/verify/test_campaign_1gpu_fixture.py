"""The fault campaign on one H200 (tests/data/megatron-h200-campaign-1gpu, tools/gpu/campaign.sh): 10
seeded faults over 420 iterations of Megatron-LM core_v0.19.0, every one recovered, and a FAIL the campaign
exists to find: each rank that died left its /dev/shm entries behind. An edited copy whose /dev/shm does not
grow passes, so the FAIL is that growth and nothing else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verify import build_report, check_by_id

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "megatron-h200-campaign-1gpu"
RUN = next((FIXTURE / "runs").glob("campaign-*"))
KINDS = [
    "kill",
    "abort",
    "abort",
    "sigterm",
    "kill",
    "segfault",
    "gpu_hang",
    "gpu_error",
    "segfault",
    "gpu_error",
]


@pytest.fixture(scope="module")
def report() -> dict:
    return build_report(str(RUN))


def test_every_planned_fault_was_injected_detected_and_recovered(report):
    cycles = report["campaign"]["cycles"]
    assert [c["fault"] for c in cycles] == KINDS
    assert check_by_id(report, "campaign_plan_followed")["status"] == "pass"
    for row in cycles:
        assert row["detected_by"] == ("section:step" if row["fault"] == "gpu_hang" else "exit"), row
        assert row["restored_iteration"] == row["checkpoint_iteration"], row
        assert row["alive_at_start"] == 0, row
    last = max(c["fault_iteration"] for c in cycles)
    assert last > 300  # a campaign of at least 300 iterations
    failing = [c["id"] for c in report["checks"] if c["status"] not in ("pass", "skip")]
    assert failing == ["cycles_do_not_accumulate"]


def test_restart_times_do_not_grow_but_dev_shm_does(report):
    check = check_by_id(report, "cycles_do_not_accumulate")
    trends = check["values"]["trends"]
    for key in ("restart_s", "checkpoint_load_s", "recovery_s", "agent_open_fds"):
        assert not trends[key]["grows"], key
    assert trends["shm_segments"]["grows"]
    assert report["verdict"] == "fail"
    detail = check["detail"]
    assert "113 entries at the start of cycle 10 that cycle 1's start did not have" in detail
    assert "sem.loky-* 95" in detail and "torch_* 9" in detail and "cuda.shm.* 9" in detail
    assert "104 name the pid of a rank process of an earlier cycle" in detail
    assert check["evidence"][0]["path"] == "leftovers/vm.cycle10.json"


def test_goodput_is_measured_with_its_parts(report):
    good = report["campaign"]["goodput"]
    parts = good["gap_parts_s"]
    assert 0 < good["goodput_measured"] < good["projected"]["goodput"] < 1
    # the first save of every cycle (the persistent checkpoint worker's start) blocks training for seconds
    assert parts["saves_s"] > 50 and parts["restart_and_startup_s"] > 150
    assert sum(parts.values()) + good["productive_s"] == pytest.approx(good["wall_s"], abs=0.01)


def test_without_the_dev_shm_growth_the_campaign_passes(tmp_path):
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run, symlinks=True)
    first = json.loads((run / "leftovers" / "vm.cycle1.json").read_text(encoding="utf-8"))["shm_segments"]
    for path in (run / "leftovers").glob("vm.cycle*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        data["shm_segments"] = first
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    report = build_report(str(run))
    assert check_by_id(report, "cycles_do_not_accumulate")["status"] == "pass"
    assert report["verdict"] == "pass"
