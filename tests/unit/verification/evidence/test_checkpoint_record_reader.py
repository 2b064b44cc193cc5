"""The checkpoint reader falls back to the run directory's record when the checkpoint directory is absent: the
same facts as from the directory, every evidence path inside the run, and a missing source whenever the
record cannot stand in (absent, unusable, incomplete, of another directory, altered)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from ftqual.launch import checkpoint_record as cr
from ftqual.launch.payloads import drop
from ftqual.verification.evidence.checkpoints import Checkpoints, read_checkpoints
from tests.support.checkpoints import TRACKER, make_checkpoints


def facts(ckpts: Checkpoints) -> dict:
    """What the checks read, without where it was read."""
    return {
        "tracker": (ckpts.tracker.state, ckpts.tracker.value, ckpts.tracker.raw),
        "dirs": [dataclasses.replace(d, ref=None) for d in ckpts.dirs],
        "moved": [dataclasses.replace(d, ref=None) for d in ckpts.moved],
        "ft_state": ckpts.ft_state is not None,
    }


def odd_checkpoints(root: Path) -> Path:
    """Every case the reader tells apart: complete, empty and absent `.metadata`, a moved-aside folder, a
    trimmed folder (no payload), a stray file, a folder named like an iteration but not one."""
    make_checkpoints(root, iterations=(2, 4, 6, 8))
    (root / "iter_0000004" / ".metadata").write_bytes(b"")
    (root / "iter_0000006" / ".metadata").unlink()
    for payload in [*(root / "iter_0000002").glob("*.distcp"), root / "iter_0000002" / "common.pt"]:
        payload.unlink()
    (root / "iter_0000008").rename(root / "iter_0000008.ftqual-moved")
    (root / "iter_0000010").write_text("a file, not a folder")
    (root / "notes.txt").write_text("x")
    return root


def test_the_record_reads_as_the_directory_did(tmp_path):
    run = tmp_path / "run"
    odd_checkpoints(run / "checkpoints")
    before, status = read_checkpoints(run, "checkpoints")
    assert status.ok and not status.reason
    cr.write(run, "checkpoints")
    assert facts(read_checkpoints(run, "checkpoints")[0]) == facts(before)  # present: the directory is read
    shutil.rmtree(run / "checkpoints")
    after, status = read_checkpoints(run, "checkpoints")
    assert status.ok and status.paths == (cr.RECORD_DIR,)
    assert "checkpoint directory checkpoints is absent: read from the run's record" in status.reason
    assert facts(after) == facts(before)
    assert after.root == cr.RECORD_DIR
    assert after.tracker.ref.path == f"{cr.RECORD_DIR}/{TRACKER}" and after.tracker.ref.text == "8"
    assert [d.ref.path for d in after.dirs] == [f"{cr.RECORD_DIR}/iter_{k:07d}" for k in (2, 4, 6)]
    assert [d.why_incomplete for d in after.dirs] == ["", ".metadata empty", ".metadata absent"]
    assert after.dirs[0].bytes is None  # trimmed, as on disk
    assert after.moved[0].ref.path == f"{cr.RECORD_DIR}/iter_0000008.ftqual-moved"
    for ref in (after.tracker.ref, *(d.ref for d in after.dirs), after.ft_state):
        assert (run / ref.path).exists(), ref.path  # every cited path lies inside the run


def test_a_scratch_directory_outside_the_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    scratch = make_checkpoints(tmp_path / "scratch" / "run")
    before, _ = read_checkpoints(run, str(scratch))
    cr.write(run, str(scratch))
    shutil.rmtree(scratch)
    after, status = read_checkpoints(run, str(scratch))
    assert status.ok and facts(after) == facts(before)
    assert after.dirs[-1].bytes == before.dirs[-1].bytes == 100 + 33 + 200 + 2 * 64


def test_payloads_dropped_after_the_record(tmp_path):
    """A verified run's payloads dropped (after the record), then its directory purged: the same facts as the
    directory gave before the drop, where the record has them."""
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints", shard_bytes=2 << 20)
    (run / "run.json").write_text(json.dumps({"run_id": "run", "checkpoint_dir": "checkpoints"}))
    before, _ = read_checkpoints(run, "checkpoints")
    cr.write(run, "checkpoints")
    assert drop(run, "drop").files
    dropped, _ = read_checkpoints(run, "checkpoints")
    assert [d.payload_files for d in dropped.dirs] == [d.payload_files for d in before.dirs]
    shutil.rmtree(run / "checkpoints")
    after, status = read_checkpoints(run, "checkpoints")
    assert status.ok and facts(after) == facts(before)


def test_a_metadata_above_the_copy_cap_is_judged_from_its_entry(tmp_path, monkeypatch):
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints")
    monkeypatch.setattr(cr, "COPY_BYTES", 10)
    cr.write(run, "checkpoints")
    shutil.rmtree(run / "checkpoints")
    after, status = read_checkpoints(run, "checkpoints")
    assert status.ok and all(d.complete for d in after.dirs)
    assert after.tracker.state == "value"  # 1 byte: copied


def test_no_record_and_no_directory_is_missing_as_before(tmp_path):
    ckpts, status = read_checkpoints(tmp_path, "checkpoints")
    assert ckpts is None and not status.ok and status.reason == "checkpoint directory checkpoints is absent"


def _recorded_then_purged(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints")
    cr.write(run, "checkpoints")
    shutil.rmtree(run / "checkpoints")
    return run


def _edit_manifest(run: Path, **updates) -> None:
    path = run / cr.RECORD_DIR / cr.MANIFEST
    doc = json.loads(path.read_text())
    doc.update(updates)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda run: _edit_manifest(run, problem="iter_0000004 unreadable"), "its record is incomplete"),
        (lambda run: _edit_manifest(run, checkpoint_dir="/other"), "records another one (/other)"),
        (lambda run: _edit_manifest(run, existed=False), "as it was when the run ended"),
        (lambda run: _edit_manifest(run, schema="x"), "its record is unusable"),
        (lambda run: (run / cr.RECORD_DIR / cr.MANIFEST).unlink(), "its record is unusable"),
    ],
)
def test_a_record_that_cannot_stand_in_leaves_the_source_missing(tmp_path, edit, fragment):
    run = _recorded_then_purged(tmp_path)
    edit(run)
    ckpts, status = read_checkpoints(run, "checkpoints")
    assert ckpts is None and not status.ok
    assert (
        status.reason.startswith("checkpoint directory checkpoints is absent") and fragment in status.reason
    )


def test_an_altered_copy_is_never_the_evidence(tmp_path):
    run = _recorded_then_purged(tmp_path)
    (run / cr.RECORD_DIR / TRACKER).write_text("4")  # same size, another iteration
    (run / cr.RECORD_DIR / "iter_0000004" / ".metadata").unlink()
    ckpts, status = read_checkpoints(run, "checkpoints")
    assert status.ok
    assert ckpts.tracker.state == "invalid" and "sha256" in ckpts.tracker.raw
    assert ckpts.dir_for(4).why_incomplete == ".metadata missing from the record"
    assert ckpts.dir_for(8).complete


def test_a_record_without_the_trackers_iteration_has_no_such_folder(tmp_path):
    """The negative control's reader half: the record's tracker names 8, iter_0000008's entries are gone."""
    run = _recorded_then_purged(tmp_path)
    doc = json.loads((run / cr.RECORD_DIR / cr.MANIFEST).read_text())
    entries = [e for e in doc["entries"] if not e["path"].startswith("iter_0000008")]
    _edit_manifest(run, entries=entries)
    ckpts, status = read_checkpoints(run, "checkpoints")
    assert status.ok and ckpts.tracker.value == 8 and ckpts.dir_for(8) is None
