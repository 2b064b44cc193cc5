"""The recorded runs under tests/data are what a clean clone holds: git keeps no empty folder, so an empty
folder here would let the tests see a run (an empty `leftovers/`, an empty checkpoint folder) that CI never
sees, and pass here while failing there."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tools.gpu.trim_fixture import trim

DATA = Path(__file__).resolve().parents[1] / "data"


def test_no_empty_folder_under_tests_data():
    empty = [str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.is_dir() and not any(p.iterdir())]
    assert not empty, f"empty folders (remove them; a clone would not have them): {empty}"


def test_trim_leaves_out_empty_folders(tmp_path):
    src = tmp_path / "run"
    (src / "leftovers").mkdir(parents=True)
    (src / "checkpoints" / "iter_0000002").mkdir(parents=True)
    (src / "checkpoints" / "iter_0000002" / "common.pt").write_bytes(b"payload")
    (src / "logs").mkdir()
    (src / "logs" / "launcher.log").write_text("/machine/path/x\n")
    trim(src, tmp_path / "out", [("/machine/path", "/lus/nvrx")])
    out = tmp_path / "out"
    assert (out / "logs" / "launcher.log").read_text() == "/lus/nvrx/x\n"
    assert not (out / "leftovers").exists()
    assert not (out / "checkpoints").exists()  # its only file was a payload


def test_trim_rewrites_the_checkpoint_record_in_place_and_rehashes_it(tmp_path):
    """record.json holds the sha256 and size of each copy: a copy rewritten to another length or left with its
    old hash would read as never finalized; one left as it was would keep the machine's path."""
    src = tmp_path / "run"
    (src / "checkpoint_record" / "iter_0000005").mkdir(parents=True)
    (src / "checkpoints" / "iter_0000005").mkdir(parents=True)
    pickle = b"\x80\x04/machine/path/runs/x/checkpoints\x94"
    (src / "checkpoint_record" / "iter_0000005" / ".metadata").write_bytes(pickle)
    (src / "checkpoints" / "iter_0000005" / ".metadata").write_bytes(pickle)
    entry = {"path": "iter_0000005/.metadata", "type": "file", "bytes": len(pickle), "copied": True}
    entry["sha256"] = hashlib.sha256(pickle).hexdigest()
    record = {
        "schema": "ftqual.checkpoint_record/v1",
        "entries": [{"path": "iter_0000005", "type": "dir"}, entry],
    }
    (src / "checkpoint_record" / "record.json").write_text(json.dumps(record))
    trim(src, tmp_path / "out", [("/machine/path", "/lus/nvrx")])
    out = tmp_path / "out"
    copy = (out / "checkpoint_record" / "iter_0000005" / ".metadata").read_bytes()
    assert b"/machine/path" not in copy and b"/lus/nvrx" in copy and len(copy) == len(pickle)
    rewritten = json.loads((out / "checkpoint_record" / "record.json").read_text())["entries"][1]
    assert rewritten["sha256"] == hashlib.sha256(copy).hexdigest() != entry["sha256"]
    assert rewritten["bytes"] == len(copy)
    assert b"/lus/nvrx" in (out / "checkpoints" / "iter_0000005" / ".metadata").read_bytes()
