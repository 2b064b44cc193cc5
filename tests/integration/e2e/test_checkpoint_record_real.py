"""End to end on CPU: a killed smoke run whose checkpoints live outside its run directory (a config
`checkpoint_dir`, NVRX_CHECKPOINT_ROOT, as on a scratch filesystem) verifies PASS; the launcher recorded the
checkpoint metadata into the run directory when the run ended, so once the checkpoint directory is deleted
the run verifies PASS again, every check alike, its checkpoint evidence cited inside the run; and a record
whose tracker names an iteration it holds no record of does not pass."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ftqual.launch import checkpoint_record as cr
from tests.support.launch import FAST_STEPS, SHORT_FAULT_RUN, launch_smoke, verify_run

RUN_ID = "record-kill"


def outcome(report: dict) -> tuple:
    return report["verdict"], [(check["id"], check["status"]) for check in report["checks"]]


def test_a_run_verifies_alike_once_its_scratch_checkpoints_are_deleted(repo_root: Path, tmp_path: Path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()  # the team's root: ftqual makes only the run's folder below it
    run_dir = launch_smoke(
        repo_root,
        tmp_path / "work",
        RUN_ID,
        "kill",
        [*FAST_STEPS],
        {**SHORT_FAULT_RUN, "NVRX_CHECKPOINT_ROOT": str(scratch)},
    )
    checkpoints = scratch / RUN_ID
    run = json.loads((run_dir / "run.json").read_text())
    assert run["checkpoint_dir"] == str(checkpoints) and run["exit_code"] == 0, run
    assert not (run_dir / "checkpoints").exists()

    # the record: the tracker and every small file copied, every shard sized and hashed, none copied
    doc = json.loads((run_dir / cr.RECORD_DIR / cr.MANIFEST).read_text())
    assert doc["schema"] == cr.SCHEMA and doc["existed"] and doc["problem"] is None
    entries = {entry["path"]: entry for entry in doc["entries"]}
    tracker = (checkpoints / "latest_checkpointed_iteration.txt").read_text()
    assert (run_dir / cr.RECORD_DIR / "latest_checkpointed_iteration.txt").read_text() == tracker
    shards = [entry for path, entry in entries.items() if path.endswith(".distcp")]
    assert shards and all(e["sha256"] and not e["copied"] for e in shards)
    for path, entry in entries.items():
        if path.endswith(".metadata"):
            copy = run_dir / cr.RECORD_DIR / path
            assert entry["copied"] and copy.read_bytes() == (checkpoints / path).read_bytes(), path

    rc, before = verify_run(repo_root, run_dir)
    assert (rc, before["verdict"]) == (0, "pass"), before.get("cause")

    shutil.rmtree(checkpoints)
    rc_after, after = verify_run(repo_root, run_dir)
    assert (rc_after, *outcome(after)) == (rc, *outcome(before))
    cited = {e["path"] for c in after["checks"] for e in c["evidence"] if "iter_" in e["path"]}
    assert cited and all(path.startswith(f"{cr.RECORD_DIR}/") for path in cited), cited

    # the negative control: the tracker's iteration taken out of the record
    final = f"iter_{int(tracker):07d}"
    doc["entries"] = [entry for entry in doc["entries"] if entry["path"].split("/")[0] != final]
    (run_dir / cr.RECORD_DIR / cr.MANIFEST).write_text(json.dumps(doc))
    rc_broken, broken = verify_run(repo_root, run_dir)
    statuses = dict(outcome(broken)[1])
    assert statuses["progress_after_resume"] == "fail", broken["checks"]
    assert (rc_broken, broken["verdict"]) == (1, "fail")
