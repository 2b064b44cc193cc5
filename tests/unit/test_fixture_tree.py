"""The recorded runs under tests/data are what a clean clone holds: git keeps no empty folder, so an empty
folder here would let the tests see a run (an empty `leftovers/`, an empty checkpoint folder) that CI never
sees, and pass here while failing there."""

from __future__ import annotations

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


def test_trim_copies_the_checkpoint_record_byte_for_byte(tmp_path):
    """record.json holds the sha256 of each copy: a rewritten copy would read as never finalized."""
    src = tmp_path / "run"
    (src / "checkpoint_record" / "iter_0000005").mkdir(parents=True)
    (src / "checkpoints" / "iter_0000005").mkdir(parents=True)
    pickle = b"\x80\x04/machine/path/runs/x/checkpoints\x94"
    (src / "checkpoint_record" / "iter_0000005" / ".metadata").write_bytes(pickle)
    (src / "checkpoints" / "iter_0000005" / ".metadata").write_bytes(pickle)
    trim(src, tmp_path / "out", [("/machine/path", "/lus/nvrx")])
    out = tmp_path / "out"
    assert (out / "checkpoint_record" / "iter_0000005" / ".metadata").read_bytes() == pickle
    assert b"/lus/nvrx" in (out / "checkpoints" / "iter_0000005" / ".metadata").read_bytes()
