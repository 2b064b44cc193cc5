"""The run directory's record of its checkpoint directory (ftqual.launch.checkpoint_record): what is written,
what is copied and hashed, that a record is never replaced, and the format's one reader."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from ftqual.launch import checkpoint_record as cr
from tests.support.checkpoints import TRACKER, make_checkpoints


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / cr.RECORD_DIR / cr.MANIFEST).read_text())


def by_path(run_dir: Path) -> dict[str, dict]:
    return {entry["path"]: entry for entry in manifest(run_dir)["entries"]}


def test_records_listing_copies_small_files_hashes_and_never_copies_shards(tmp_path):
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints")
    assert cr.write(run, "checkpoints", now="2026-01-01T00:00:00Z") == run / cr.RECORD_DIR
    doc = manifest(run)
    assert doc["schema"] == cr.SCHEMA and doc["checkpoint_dir"] == "checkpoints"
    assert doc["existed"] is True and doc["problem"] is None and doc["recorded_at"] == "2026-01-01T00:00:00Z"
    entries = by_path(run)
    assert entries["iter_0000004"] == {"path": "iter_0000004", "type": "dir"}
    shard = entries["iter_0000008/__1_0.distcp"]
    assert shard["bytes"] == 64 and shard["copied"] is False
    assert shard["sha256"] == hashlib.sha256(b"\x01" * 64).hexdigest()
    assert shard["mtime_ns"] == os.stat(run / "checkpoints/iter_0000008/__1_0.distcp").st_mtime_ns
    for rel in (TRACKER, "ft_state.json", "iter_0000004/.metadata", "iter_0000004/metadata.json",
                "iter_0000008/common.pt"):  # fmt: skip
        assert entries[rel]["copied"] is True, rel
        assert (run / cr.RECORD_DIR / rel).read_bytes() == (run / "checkpoints" / rel).read_bytes()
    assert not (run / cr.RECORD_DIR / "iter_0000008" / "__1_0.distcp").exists()
    assert not list(run.glob(f".{cr.RECORD_DIR}*"))  # the staging folder was renamed


def test_large_files_are_sized_not_hashed_nor_copied(tmp_path, monkeypatch):
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints", shard_bytes=4096)
    monkeypatch.setattr(cr, "COPY_BYTES", 150)  # .metadata (100 B) copied, common.pt (200 B) not
    cr.write(run, "checkpoints", hash_bytes=1000)
    entries = by_path(run)
    shard = entries["iter_0000004/__0_0.distcp"]
    assert shard["bytes"] == 4096 and shard["sha256"] is None and isinstance(shard["mtime_ns"], int)
    common = entries["iter_0000004/common.pt"]
    assert common["copied"] is False and common["sha256"] is not None  # hashed: under the hash cap
    assert entries["iter_0000004/.metadata"]["copied"] is True


def test_a_stopped_run_hashes_nothing(tmp_path):
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints")
    cr.record_at_end(run, "checkpoints", stopped=True)
    entries = by_path(run)
    assert all(entry.get("sha256") is None for entry in entries.values())
    assert entries[TRACKER]["copied"] is True  # the copies are the evidence: still made


def test_a_record_that_cannot_be_written_is_one_line_never_an_exception(tmp_path, capsys):
    assert cr.record_at_end(tmp_path / "gone", "checkpoints") is None
    assert "no checkpoint record in" in capsys.readouterr().err


def test_an_existing_record_is_never_replaced(tmp_path):
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints")
    cr.write(run, "checkpoints", now="first")
    (run / "checkpoints" / TRACKER).write_text("12")
    assert cr.write(run, "checkpoints", now="second") is None
    assert manifest(run)["recorded_at"] == "first"
    assert (run / cr.RECORD_DIR / TRACKER).read_text() == "8"


def test_an_absent_checkpoint_directory_is_recorded_as_absent(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    cr.write(run, str(tmp_path / "scratch" / "run"))
    doc = manifest(run)
    assert doc["existed"] is False and doc["entries"] == []
    assert cr.read(run).existed is False


def test_an_absolute_checkpoint_directory_outside_the_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    scratch = make_checkpoints(tmp_path / "scratch" / "run")
    cr.write(run, str(scratch))
    record = cr.read(run)
    assert record.checkpoint_dir == str(scratch) and record.existed and record.problem is None
    assert {entry.path for entry in record.children()} == {TRACKER, "ft_state.json", "iter_0000004",
                                                           "iter_0000008"}  # fmt: skip
    assert [e.path for e in record.children("iter_0000004")] == [
        "iter_0000004/.metadata",
        "iter_0000004/__0_0.distcp",
        "iter_0000004/__1_0.distcp",
        "iter_0000004/common.pt",
        "iter_0000004/metadata.json",
    ]


def test_links_are_recorded_with_the_verifiers_roots_and_never_followed_out(tmp_path):
    run = tmp_path / "run"
    root = make_checkpoints(run / "checkpoints", iterations=(4,))
    secret = tmp_path / "secret.txt"
    secret.write_text("not evidence")
    (root / "iter_0000004" / ".metadata").unlink()
    (root / "iter_0000004" / ".metadata").symlink_to(secret)
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    (root / "inner").symlink_to(root / "ft_state.json")
    cr.write(run, "checkpoints")
    entries = {entry.path: entry for entry in cr.read(run).entries.values()}
    out = entries["iter_0000004/.metadata"]
    assert out.type == "link" and out.resolves == "file" and out.inside is False
    assert out.copied is False and out.sha256 is None and not out.regular
    assert not (run / cr.RECORD_DIR / "iter_0000004" / ".metadata").exists()
    assert entries["dangling"].resolves == "missing"
    inner = entries["inner"]
    assert inner.inside and inner.regular and inner.copied
    assert not (run / cr.RECORD_DIR / "inner").is_symlink()  # the bytes, not the link


def test_a_listing_too_large_is_an_incomplete_record(tmp_path, monkeypatch):
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints")
    monkeypatch.setattr(cr, "MAX_ENTRIES", 3)
    cr.write(run, "checkpoints")
    assert "more than 3 entries" in cr.read(run).problem


def test_write_for_run_reads_run_json_and_keeps_a_record(tmp_path):
    run = tmp_path / "run"
    scratch = make_checkpoints(tmp_path / "scratch")
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"schema": "ftqual.run/v1", "checkpoint_dir": str(scratch)}))
    assert cr.write_for_run(run) == run / cr.RECORD_DIR
    assert cr.read(run).checkpoint_dir == str(scratch)
    assert cr.write_for_run(run) is None  # a record exists: kept
    (tmp_path / "bare").mkdir()
    assert cr.write_for_run(tmp_path / "bare") is None  # no run.json: nothing, no exception


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda doc: doc.update(schema="other/v1"), "is not a checkpoint record"),
        (lambda doc: doc["entries"].append({"path": "../x", "type": "file", "bytes": 1}), "is not relative"),
        (lambda doc: doc["entries"].append({"path": "/etc", "type": "dir"}), "is not relative"),
        (lambda doc: doc["entries"].append({"path": "x", "type": "fifo"}), "type 'fifo'"),
        (lambda doc: doc["entries"].append({"path": "x", "type": "file", "bytes": -1}), "is not a size"),
        (lambda doc: doc.update(entries={}), "entries unusable"),
    ],
)
def test_an_unusable_record_is_refused(tmp_path, edit, fragment):
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints")
    cr.write(run, "checkpoints")
    path = run / cr.RECORD_DIR / cr.MANIFEST
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(cr.RecordError, match=re.escape(fragment)):
        cr.read(run)


def test_no_record_reads_as_none_and_a_cut_one_as_an_error(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert cr.read(run) is None
    (run / cr.RECORD_DIR).mkdir()
    (run / cr.RECORD_DIR / cr.MANIFEST).write_text('{"schema": ')
    with pytest.raises(cr.RecordError, match="unreadable"):
        cr.read(run)


def test_copy_problem_sees_an_altered_copy(tmp_path):
    run = tmp_path / "run"
    make_checkpoints(run / "checkpoints")
    cr.write(run, "checkpoints")
    entry = cr.read(run).entries[TRACKER]
    assert cr.copy_problem(run, entry) is None
    (run / cr.RECORD_DIR / TRACKER).write_text("9")  # same size, other bytes
    assert "sha256" in cr.copy_problem(run, entry)
    (run / cr.RECORD_DIR / TRACKER).unlink()
    assert "missing" in cr.copy_problem(run, entry)
