"""`ftqual verify` gives a run the same verdict and check statuses after its checkpoint directory is deleted,
from the run directory's record of it; a record that lacks what the tracker names never passes the resume
checks; no record and no directory stays inconclusive."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ftqual.launch import checkpoint_record as cr

DATA = Path(__file__).resolve().parents[2] / "data"


def _one_run_per_kind() -> list[Path]:
    """One recorded run per (fault, checkpoint damage, fault timing): every path the checkpoint reader takes
    on real runs (moved-aside folders, a removed or non-numeric tracker, a shard damaged, a full disk)."""
    seen: dict[tuple, Path] = {}
    for path in sorted(DATA.rglob("run.json")):
        if not (path.parent / "checkpoints").is_dir():
            continue
        run = json.loads(path.read_text())
        key = (
            run.get("fault"),
            run.get("checkpoint_damage") or "none",
            run.get("fault_timing") or "checkpoint",
        )
        seen.setdefault(key, path.parent)
    return list(seen.values())


RUNS = _one_run_per_kind()


def outcome(report: dict) -> tuple:
    return report["verdict"], [(check["id"], check["status"]) for check in report["checks"]]


def copy_run(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / src.name
    shutil.copytree(src, dest, symlinks=True)
    for path in [dest, *dest.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | 0o200)
    return dest


@pytest.mark.parametrize("src", RUNS, ids=[f"{p.parent.parent.name}/{p.name}" for p in RUNS])
def test_same_verdict_after_the_checkpoint_directory_is_deleted(src, tmp_path, verify):
    run = copy_run(src, tmp_path)
    code, before = verify(run)
    cr.write(run, "checkpoints")
    assert outcome(verify(run)[1]) == outcome(before)  # the directory present: read as before
    shutil.rmtree(run / "checkpoints")
    code_after, after = verify(run)
    assert (code_after, *outcome(after)) == (code, *outcome(before))
    assert after["sources"]["checkpoints"]["paths"] == [cr.RECORD_DIR]


def test_a_scratch_checkpoint_directory_outside_the_run(kill_run, tmp_path, verify):
    """The case the record is for: checkpoints on a filesystem that is purged after the run."""
    scratch = tmp_path / "scratch" / "kill"
    scratch.parent.mkdir()
    shutil.move(kill_run.path("checkpoints"), scratch)
    kill_run.set_json("run.json", checkpoint_dir=str(scratch))
    code, before = verify(kill_run)
    assert (code, before["verdict"]) == (0, "pass")
    cr.write(kill_run.root, str(scratch))
    shutil.rmtree(scratch)
    code, after = verify(kill_run)
    assert (code, *outcome(after)) == (0, *outcome(before))
    cited = [e["path"] for c in after["checks"] for e in c["evidence"] if "iter_" in e["path"]]
    assert cited and all(path.startswith(f"{cr.RECORD_DIR}/") for path in cited)
    assert all((kill_run.root / path).exists() for path in cited)


def test_no_record_and_no_directory_stays_inconclusive(kill_run, verify):
    shutil.rmtree(kill_run.path("checkpoints"))
    code, report = verify(kill_run)
    assert (code, report["verdict"]) == (3, "inconclusive")
    assert report["sources"]["checkpoints"]["reason"] == "checkpoint directory checkpoints is absent"


def _drop_from_record(run: Path, folder: str) -> None:
    path = run / cr.RECORD_DIR / cr.MANIFEST
    doc = json.loads(path.read_text())
    doc["entries"] = [e for e in doc["entries"] if e["path"].split("/")[0] != folder]
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("folder", "check"),
    [
        ("iter_0000030", "progress_after_resume"),  # the tracker's (final) checkpoint
        ("iter_0000005", "resumed_from_checkpoint"),  # the checkpoint the restart loaded
    ],
)
def test_a_record_missing_what_the_tracker_or_the_restore_names_never_passes(kill_run, verify, folder, check):
    """The negative control: the record's tracker says 30 (or the restart loaded 5) and that iteration's
    record is gone (its copies stay: only the manifest's entries count)."""
    cr.write(kill_run.root, "checkpoints")
    shutil.rmtree(kill_run.path("checkpoints"))
    _drop_from_record(kill_run.root, folder)
    code, report = verify(kill_run)
    statuses = dict(outcome(report)[1])
    assert statuses[check] in ("fail", "inconclusive"), report["checks"]
    assert report["verdict"] != "pass" and code != 0
