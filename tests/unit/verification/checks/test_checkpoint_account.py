"""The checkpoint and restart account (ftqual/verification/checkpoint_account.py, verify.json's
`checkpoint_account`): on the recorded H200 runs, every figure matches its log lines worked out by hand; on
made-up changes of them, bytes come from the folders or the dropped-payload manifest, and missing evidence
leaves a null, never a number."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.verification.checkpoint_account import RESTART_KEYS, SAVE_KEYS, account
from ftqual.verification.evidence.snapshot import build_snapshot
from ftqual.verification.schema import account_problems, problems
from ftqual.verification.verify import build_report

DATA = Path(__file__).resolve().parents[3] / "data"
KILL = DATA / "megatron-h200-1gpu" / "kill"
HANG = DATA / "megatron-h200-1gpu" / "hang"
BASELINE = DATA / "megatron-h200-1gpu" / "baseline"


@pytest.fixture
def kill_copy(tmp_path) -> Path:
    dest = tmp_path / "kill"
    shutil.copytree(KILL, dest)
    return dest


def _edit(path: Path, keep) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(line for line in lines if keep(line)), encoding="utf-8")


def test_kill_on_one_h200_by_hand():
    got = account(build_snapshot(KILL))
    assert [tuple(s) for s in got["saves"]] == [SAVE_KEYS] * 6
    first = got["saves"][0]
    # train_cycle0.log: saving at 15:35:53.329314, `save-checkpoint ...: (12550.74, 12550.74)`,
    # successfully saved at 15:36:06.580644
    assert first == {
        "iteration": 5,
        "cycle": 0,
        "bytes": None,  # the fixture's payloads were trimmed and no manifest says their size
        "blocked_s": 12.551,
        "durable_s": 13.251,
        "gbps": None,
    }
    # train_cycle1.log: saving 10 at 15:36:36.463314, timer 9249.20 ms
    assert got["saves"][1]["iteration"] == 10 and got["saves"][1]["cycle"] == 1
    assert got["saves"][1]["blocked_s"] == 9.249
    [restart] = got["restarts"]
    assert set(RESTART_KEYS) <= set(restart)
    assert restart["cycle"] == 1
    assert restart["detection_s"] == 0.114  # as the metrics say (detection_s)
    assert restart["gpu_reclaim_s"] == 2.0  # launcher.log: `GPU 0 memory reclaimed in 2s`
    assert restart["load_s"] == 0.308  # `load-checkpoint ...: (308.48, 308.48)`
    # [after in-process setup ...] 15:36:30.573036 -> [after model, optimizer ... built] 15:36:34.413053,
    # 3.840 s less the 0.308 s load
    assert restart["init_s"] == 3.532
    assert restart["load_bytes"] is None and restart["load_gbps"] is None  # trimmed payload
    assert restart["worker_stop_s"] is not None and restart["process_start_s"] > 0
    assert restart["first_step_s"] > 0


def test_baseline_has_saves_and_no_restart():
    got = account(build_snapshot(BASELINE))
    assert got["restarts"] == []
    assert [s["iteration"] for s in got["saves"]] == [5, 10, 15, 20, 25, 30]
    assert all(s["blocked_s"] < s["durable_s"] for s in got["saves"])


def test_hang_detection_is_the_timeout():
    [restart] = account(build_snapshot(HANG))["restarts"]
    assert restart["detection_s"] == 121.531  # the step section's 120 s timeout and its poll


def test_bytes_from_the_folders_and_their_rate(kill_copy):
    (kill_copy / "checkpoints/iter_0000005/__0_0.distcp").write_bytes(b"\0" * 3_000_000)
    meta = sum(p.stat().st_size for p in (kill_copy / "checkpoints/iter_0000005").iterdir())
    got = account(build_snapshot(kill_copy))
    first = got["saves"][0]
    assert first["bytes"] == meta
    assert first["gbps"] == round(meta / 13.251 / 1e9, 3)
    # the restart loaded iteration 5: its bytes and load rate follow
    [restart] = got["restarts"]
    assert restart["load_bytes"] == meta
    assert restart["load_gbps"] == round(meta / 0.308 / 1e9, 3)


def test_bytes_from_the_dropped_payload_manifest(kill_copy):
    manifest = {  # as ftqual.launch.payloads writes it: paths relative to the checkpoint directory
        "schema": "ftqual.payloads/v1",
        "files": [
            {"path": "iter_0000005/__0_0.distcp", "bytes": 10**10},
            {"path": "iter_0000010/__0_0.distcp", "bytes": 2 * 10**9},
            {"path": "checkpoints/iter_0000012/__0_0.distcp", "bytes": 7},  # not relative to it: ignored
            {"path": "iter_0000015/bad.distcp", "bytes": -1},  # ignored
            {"path": "elsewhere.bin", "bytes": 5},  # names no iteration folder: ignored
        ],
    }
    (kill_copy / "checkpoints/payloads_dropped.json").write_text(json.dumps(manifest))
    snap = build_snapshot(kill_copy)
    sizes = {d.iteration: (d.bytes, d.bytes_from) for d in snap.checkpoints.dirs}
    meta5 = sum(p.stat().st_size for p in (kill_copy / "checkpoints/iter_0000005").iterdir())
    assert sizes[5] == (10**10 + meta5, "manifest")
    assert sizes[10][1] == "manifest" and sizes[10][0] > 2 * 10**9
    assert sizes[15] == (None, "")  # trimmed, the manifest's entry unusable: unknown
    got = account(snap)
    assert got["saves"][0]["gbps"] == round((10**10 + meta5) / 13.251 / 1e9, 3)


def test_a_broken_manifest_leaves_the_bytes_unknown(kill_copy):
    (kill_copy / "checkpoints/payloads_dropped.json").write_text("{not json")
    assert all(s["bytes"] is None for s in account(build_snapshot(kill_copy))["saves"])


def test_without_timers_blocked_comes_from_the_scheduled_line(kill_copy):
    _edit(kill_copy / "logs/train_cycle0.log", lambda line: "save-checkpoint ." not in line)
    first = account(build_snapshot(kill_copy))["saves"][0]
    # saving 15:35:53.329314 -> scheduled 15:36:05.877743
    assert first["blocked_s"] == 12.548


def test_missing_evidence_is_null_never_a_number(kill_copy):
    log = kill_copy / "logs/train_cycle1.log"
    _edit(
        log,
        lambda line: (
            "load-checkpoint ." not in line
            and "after model, optimizer" not in line
            and "after in-process setup" not in line
        ),
    )
    _edit(kill_copy / "logs/train_cycle0.log", lambda line: "saving checkpoint at iteration" not in line)
    (kill_copy / "logs/launcher.log").write_text("")
    got = account(build_snapshot(kill_copy))
    first = got["saves"][0]
    assert first["iteration"] == 5 and first["durable_s"] is None and first["blocked_s"] is None
    [restart] = got["restarts"]
    for key in ("load_s", "init_s", "process_start_s", "first_step_s", "gpu_reclaim_s", "worker_stop_s"):
        assert restart[key] is None, key


def test_verify_report_carries_it_and_the_schema_holds_it():
    report = build_report(str(KILL))
    assert report["checkpoint_account"] == account(build_snapshot(KILL))
    assert problems(report) == []
    broken = {**report, "checkpoint_account": {"saves": [{"bytes": "big"}], "restarts": "none"}}
    found = problems(broken)
    assert "checkpoint_account.saves[0].bytes is not an integer" in found
    assert "checkpoint_account.restarts is not a list" in found
    assert account_problems({"saves": [], "restarts": [{"load_gbps": float("nan")}]}) == [
        "checkpoint_account.restarts[0].load_gbps is not a number"
    ]
