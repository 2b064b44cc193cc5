"""The wrapper's /dev/shm sample in the leftovers record: each entry's size and allocated bytes and the
filesystem's room, read from real files in a temporary directory standing in for /dev/shm."""

from __future__ import annotations

import json
import os

from ftqual.rank.leftovers import resources_now, write_leftovers


def test_resources_now_keeps_each_dev_shm_entry_s_size_and_allocated_bytes_and_the_room(tmp_path):
    shm = tmp_path / "shm"  # stands in for /dev/shm
    shm.mkdir()
    (shm / "torch_1040_2992804948_0").write_bytes(b"x" * 10_000)
    (shm / "sem.loky-1040-13h3").write_bytes(b"s" * 32)
    with open(shm / "sparse", "wb") as fh:  # 1 MiB long, nothing written: allocates (almost) nothing
        fh.truncate(1 << 20)
    got = resources_now(shm, parent=os.getpid())
    assert got["shm_segments"] == ["sem.loky-1040-13h3", "sparse", "torch_1040_2992804948_0"]
    usage = got["shm"]
    by_name = {e["name"]: e for e in usage["entries"]}
    for name in got["shm_segments"]:
        st = (shm / name).stat()
        assert by_name[name] == {"name": name, "size": st.st_size, "allocated": st.st_blocks * 512}
    assert by_name["sparse"]["size"] == 1 << 20 and by_name["sparse"]["allocated"] < 1 << 20
    assert usage["count"] == 3 and usage["error"] is None and usage["fs_error"] is None
    assert usage["size_bytes"] == 10_032 + (1 << 20)
    assert usage["allocated_bytes"] == sum(e["allocated"] for e in usage["entries"])
    vfs = os.statvfs(shm)
    assert usage["fs"]["size_bytes"] == vfs.f_blocks * vfs.f_frsize
    assert 0 < usage["fs"]["free_bytes"] <= usage["fs"]["size_bytes"]
    assert usage["fs"]["inodes"] == vfs.f_files and usage["fs"]["free_inodes"] <= max(
        vfs.f_files, vfs.f_favail
    )
    assert got["agent_open_fds"] > 0


def test_resources_now_says_why_dev_shm_could_not_be_read(tmp_path):
    got = resources_now(tmp_path / "absent", parent=os.getpid())
    assert got["shm_segments"] is None and got["shm"]["entries"] is None and got["shm"]["count"] is None
    assert "cannot be listed" in got["shm"]["error"] and "statvfs" in got["shm"]["fs_error"]
    assert got["shm"]["fs"] is None


def test_the_leftovers_record_carries_the_dev_shm_sample(tmp_path, monkeypatch):
    shm = tmp_path / "shm"
    shm.mkdir()
    (shm / "cuda.shm.0.410.1").write_bytes(b"c" * 4096)
    monkeypatch.setattr("ftqual.rank.leftovers.SHM_DIR", shm)
    monkeypatch.setattr(resources_now, "__defaults__", (shm, None))
    path = write_leftovers(tmp_path / "left", tmp_path, "h", 1, {"sampled": False, "error": "x", "apps": []})
    record = json.loads(path.read_text())
    assert record["shm_segments"] == ["cuda.shm.0.410.1"]
    assert record["shm"]["entries"][0]["size"] == 4096 and record["shm"]["count"] == 1
    assert set(record["shm"]["fs"]) == {"size_bytes", "free_bytes", "inodes", "free_inodes"}
