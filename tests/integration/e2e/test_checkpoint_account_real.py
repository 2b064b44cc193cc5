"""End to end on CPU: a smoke run whose checkpoints carry a payload of a few hundred MB (every rank its share,
in its own `__<rank>_0.distcp`), killed once, and its checkpoint and restart account in verify.json: bytes
about the payload, the save's blocked and durable times, the restart's load of those bytes."""

from __future__ import annotations

from pathlib import Path

from tests.support.launch import FAST_STEPS, SHORT_FAULT_RUN, launch_smoke, verify_run

PAYLOAD_MB = 200
MIB = 2**20


def test_account_of_a_killed_run_with_a_payload(repo_root: Path, tmp_path: Path):
    run_dir = launch_smoke(
        repo_root,
        tmp_path,
        "account-kill",
        "kill",
        [*FAST_STEPS],
        {**SHORT_FAULT_RUN, "NVRX_SMOKE_CHECKPOINT_MB": str(PAYLOAD_MB)},
        timeout=300,
    )
    shards = sorted(p.name for p in (run_dir / "checkpoints" / "iter_0000004").glob("*.distcp"))
    assert shards == ["__0_0.distcp", "__1_0.distcp"]  # every rank wrote its share
    rc, report = verify_run(repo_root, run_dir)
    assert rc == 0, report.get("cause")
    account = report["checkpoint_account"]
    assert account["saves"], account
    for save in account["saves"]:
        # the payload plus the tiny model's state and torch's metadata
        assert PAYLOAD_MB * MIB <= save["bytes"] < (PAYLOAD_MB + 8) * MIB, save
        assert save["blocked_s"] is not None and save["durable_s"] is not None and save["gbps"] > 0
    [restart] = account["restarts"]
    assert restart["detection_s"] is not None and restart["load_s"] is not None
    assert PAYLOAD_MB * MIB <= restart["load_bytes"] < (PAYLOAD_MB + 8) * MIB
    assert restart["load_gbps"] > 0 and restart["init_s"] is not None and restart["first_step_s"] is not None
    assert restart["gpu_reclaim_s"] is None  # a CPU run: NVRx printed no GPU reclaim, so none is made up
