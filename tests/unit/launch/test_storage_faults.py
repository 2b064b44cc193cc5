"""Storage faults (disk_full, writer_stall) on the launcher's side: what reaches the wrapper and the smoke
workload, what is refused in one line before anything is made, the capped filesystem (mounted for real where
this runs as root), and the wrapper's filler and writers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

from ftqual.launch import capped_storage, command
from ftqual.rank.damage import DamageError
from ftqual.rank.injector import Injector
from ftqual.rank.storage import FILLER_NAME, fill_filesystem, writers_of
from ftqual.rank.worker import parse_args

TRACKER = "latest_checkpointed_iteration.txt"


def wrapper(argv: list[str]) -> list[str]:
    return argv[argv.index(str(command.WORKER)) + 1 : argv.index("--")]


def body(argv: list[str]) -> list[str]:
    return argv[argv.index("--") + 1 :]


# --- the launch --------------------------------------------------------------------------------------------


def test_writer_stall_reaches_the_wrapper_and_gives_the_smoke_workload_a_writer_process(base_env, run_launch):
    env = {**base_env, "NVRX_DEMO_FAULT": "writer_stall", "NVRX_FAULT_TIMING": "save_shards_partial"}
    result = run_launch(env)
    assert result.rc == 0, result.err
    args = wrapper(result.argv)
    assert args[args.index("--fault") + 1] == "writer_stall"
    assert args[args.index("--fault-timing") + 1] == "save_shards_partial"
    assert "--smoke-writer-process" in body(result.argv)
    plain = run_launch({**base_env, "NVRX_DEMO_FAULT": "kill", "NVRX_FAULT_TIMING": "save_shards_partial"})
    assert "--smoke-writer-process" not in body(plain.argv)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"NVRX_DEMO_FAULT": "writer_stall"}, "NVRX_DEMO_FAULT=writer_stall needs NVRX_FAULT_TIMING="),
        (
            {
                "NVRX_DEMO_FAULT": "writer_stall",
                "NVRX_FAULT_TIMING": "save_shards_partial",
                "NVRX_ASYNC_SAVE": "0",
            },
            "a synchronous save writes from the training thread",
        ),
        (
            {"NVRX_DEMO_FAULT": "disk_full", "NVRX_FAULT_TIMING": "save_staged"},
            "NVRX_DEMO_FAULT=disk_full needs NVRX_FAULT_TIMING=checkpoint",
        ),
        ({"NVRX_DEMO_FAULT": "disk_full", "NVRX_INJECTIONS": "2"}, "the filesystem it breaks is one node's"),
    ],
)
def test_a_storage_fault_out_of_its_rules_is_refused_in_one_line(base_env, run_launch, extra, said):
    result = run_launch({**base_env, **extra})
    assert result.rc == 2 and said in result.err, result.err
    assert len(result.err.strip().splitlines()) == 1


def test_disk_full_without_root_is_refused_before_anything_is_made(base_env, run_launch, monkeypatch, work):
    monkeypatch.setattr(capped_storage.os, "geteuid", lambda: 1000)
    env = {**base_env, "NVRX_DEMO_FAULT": "disk_full", "NVRX_DRY_RUN": "0"}
    result = run_launch(env)
    assert result.rc == 2
    assert result.err.strip() == (
        "ftqual launch: fault disk_full mounts a size-capped filesystem at the run's checkpoint directory "
        "and needs root (CAP_SYS_ADMIN); run this scenario as root, or leave it out"
    )
    assert list(work.iterdir()) == []


def test_the_cap_is_a_setting_with_bounds(base_env, run_launch):
    env = {**base_env, "NVRX_DEMO_FAULT": "disk_full"}
    assert run_launch({**env, "NVRX_STORAGE_CAP_MB": "512"}).rc == 0
    refused = run_launch({**env, "NVRX_STORAGE_CAP_MB": "8"})
    assert refused.rc == 2 and "NVRX_STORAGE_CAP_MB" in refused.err


# --- the capped filesystem ---------------------------------------------------------------------------------


def test_mounting_needs_root_and_the_tools():
    assert "needs root" in capped_storage.cannot_mount(geteuid=lambda: 1000)
    missing = capped_storage.cannot_mount(geteuid=lambda: 0, which=lambda name: None)
    assert "needs mkfs.ext4" in missing
    assert capped_storage.cannot_mount(geteuid=lambda: 0, which=lambda name: f"/sbin/{name}") is None


def _mount_at(tmp_path: Path) -> capped_storage.CappedMount:
    point = tmp_path / "checkpoints"
    point.mkdir()
    return capped_storage.CappedMount(point, tmp_path / capped_storage.IMAGE_NAME, 64 << 20)


def _fill(point: Path) -> None:
    (point / "iter_0000004").mkdir()
    (point / "iter_0000004" / "__0_0.distcp").write_bytes(b"x" * 1000)
    (point / TRACKER).write_text("4")
    (point / FILLER_NAME).write_bytes(b"\0" * 4096)


def test_the_unmount_keeps_every_file_and_the_filler_as_an_empty_file(tmp_path, monkeypatch):
    calls = []

    def umount(argv):  # what an unmount shows: the empty directory below the filesystem
        calls.append(argv)
        for entry in Path(argv[1]).iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()

    monkeypatch.setattr(capped_storage, "_run", umount)
    mount = _mount_at(tmp_path)
    mount.image.write_bytes(b"image")
    _fill(mount.mount_point)
    staging = tmp_path / "checkpoints.ftqual-copy"
    record = capped_storage.unmount_keeping(mount, staging)
    assert calls == [["umount", str(mount.mount_point)]]
    assert record["copied_files"] == 3 and record["copied_bytes"] == 1001 and record["image_removed"] is True
    assert (mount.mount_point / "iter_0000004" / "__0_0.distcp").read_bytes() == b"x" * 1000
    assert (mount.mount_point / FILLER_NAME).stat().st_size == 0
    assert not staging.exists() and not mount.image.exists() and "problem" not in record


def test_a_failed_unmount_keeps_the_copy_and_the_image_and_says_where(tmp_path, monkeypatch):
    monkeypatch.setattr(capped_storage, "_run", lambda argv: "umount exited 32: target is busy")
    mount = _mount_at(tmp_path)
    mount.image.write_bytes(b"image")
    _fill(mount.mount_point)
    staging = tmp_path / "checkpoints.ftqual-copy"
    record = capped_storage.unmount_keeping(mount, staging)
    assert record["problem"] == f"unmount failed (umount exited 32: target is busy); the copy is in {staging}"
    assert (staging / TRACKER).read_text() == "4" and mount.image.exists()


def test_a_mount_needs_an_empty_directory_and_no_earlier_image(tmp_path, monkeypatch):
    monkeypatch.setattr(capped_storage, "cannot_mount", lambda: None)
    point = tmp_path / "checkpoints"
    point.mkdir()
    (point / "x").write_text("x")
    with pytest.raises(capped_storage.StorageError, match="needs an empty checkpoint directory"):
        capped_storage.mount_capped(point, tmp_path, 64)
    (point / "x").unlink()
    (tmp_path / capped_storage.IMAGE_NAME).write_bytes(b"earlier")
    with pytest.raises(capped_storage.StorageError, match="already exists: an earlier mount's image"):
        capped_storage.mount_capped(point, tmp_path, 64)
    assert (tmp_path / capped_storage.IMAGE_NAME).read_bytes() == b"earlier"


@pytest.mark.skipif(capped_storage.cannot_mount() is not None, reason="mounting needs root and mkfs.ext4")
def test_a_real_capped_mount_fills_up_and_its_files_survive_the_unmount(tmp_path):
    point = tmp_path / "checkpoints"
    point.mkdir()
    mount = capped_storage.mount_capped(point, tmp_path, 64)
    try:
        assert os.path.ismount(point) and sorted(os.listdir(point)) == []
        st = os.statvfs(point)
        assert st.f_blocks * st.f_frsize <= 64 << 20
        (point / "kept.bin").write_bytes(b"k" * 4096)
        with pytest.raises(OSError), open(point / "too_big.bin", "wb") as fh:
            fh.write(b"\0" * (65 << 20))
            fh.flush()
            os.fsync(fh.fileno())
        (point / "too_big.bin").unlink()
    finally:
        record = capped_storage.unmount_keeping(mount, tmp_path / "staging")
    assert "problem" not in record, record
    assert not os.path.ismount(point) and (point / "kept.bin").read_bytes() == b"k" * 4096
    assert not (tmp_path / capped_storage.IMAGE_NAME).exists()


# --- the wrapper: the filler and the writers ---------------------------------------------------------------


@pytest.fixture
def ckpt(tmp_path):
    root = tmp_path / "ckpt"
    (root / "iter_0000040").mkdir(parents=True)
    (root / "iter_0000040" / "__0_0.distcp").write_bytes(b"a" * 1000)
    (root / "iter_0000040" / ".metadata").write_bytes(b"m" * 200)
    (root / TRACKER).write_text("40")
    return root


def _free(free: int):
    return lambda path: {"size_bytes": 1 << 30, "free_bytes": free}


def test_the_filler_leaves_half_a_checkpoint_free(ckpt, monkeypatch):
    monkeypatch.setattr("ftqual.rank.storage.filesystem_record", _free(10_000))
    record = fill_filesystem(ckpt, 40, is_mount=lambda path: True)
    assert (record["checkpoint_bytes"], record["headroom_bytes"], record["filler_bytes"]) == (1200, 600, 9400)
    assert (ckpt / FILLER_NAME).stat().st_size == 9400
    assert record["kind"] == "disk_full" and record["iteration"] == 40 and record["at"].endswith("Z")


def test_the_filler_is_never_made_outside_a_mount_point_or_without_room(ckpt, monkeypatch):
    with pytest.raises(DamageError, match="is not a mount point"):
        fill_filesystem(ckpt, 40)  # a test's tmp directory is no mount point: nothing is filled
    monkeypatch.setattr("ftqual.rank.storage.filesystem_record", _free(500))
    with pytest.raises(DamageError, match="already under the 600 bytes of headroom"):
        fill_filesystem(ckpt, 40, is_mount=lambda path: True)
    assert not (ckpt / FILLER_NAME).exists()


def _injector(ckpt, fault, kills):
    return Injector(
        fault=fault,
        placement="immediate",
        tracker=ckpt / TRACKER,
        marker=ckpt.parent / "fault_injected.json",
        baseline=20,
        identity={"run_id": "r1", "rank": 1, "local_rank": 1, "host": "h", "cycle": 0},
        watch=None,
        kill=lambda pid, sig: kills.append((pid, sig)),
    )


def test_disk_full_fills_then_claims_and_never_signals(ckpt, monkeypatch):
    monkeypatch.setattr("ftqual.rank.storage.filesystem_record", _free(10_000))
    monkeypatch.setattr(
        "ftqual.rank.faults.fill_filesystem", partial(fill_filesystem, is_mount=lambda path: True)
    )
    kills = []
    injector = _injector(ckpt, "disk_full", kills)
    assert injector.on_tracker(40) is True
    marker = json.loads((ckpt.parent / "fault_injected.json").read_text())
    assert marker["fault"] == "disk_full" and marker["storage"]["filler_bytes"] == 9400
    assert kills == [] and injector.claimed


def test_disk_full_that_cannot_be_made_is_not_claimed(ckpt, capsys):
    kills = []
    injector = _injector(ckpt, "disk_full", kills)
    injector.on_tracker(40)
    assert not injector.claimed and not (ckpt.parent / "fault_injected.json").exists()
    assert "disk_full after iteration 40 cannot be made" in capsys.readouterr().err


def test_writer_stall_stops_the_writers_it_found(ckpt):
    kills = []
    injector = _injector(ckpt, "writer_stall", kills)
    injector.armed_at, injector.save_iteration = 40, 44
    injector.writers = [{"pid": 4242, "command": "writer", "files": ["__1_0.distcp"]}]
    assert injector.inject(None) is True
    assert kills == [(4242, signal.SIGSTOP)]
    marker = json.loads((ckpt.parent / "fault_injected.json").read_text())
    assert marker["storage"] == {"kind": "writer_stall", "iteration": 44, "writers": injector.writers}


def test_the_writers_are_the_rank_s_descendants_holding_the_save_s_files(tmp_path):
    iter_dir = tmp_path / "iter_0000044"
    iter_dir.mkdir()
    own = open(iter_dir / "own.distcp", "wb")  # the rank's own file: never a writer
    shard = str(iter_dir / "__1_0.distcp")
    # the command line is kept short in the record: the word the test looks for comes first
    code = f"import time; f = open({shard!r}, 'wb'); print('open', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "open"
        found = writers_of(iter_dir)
        assert [(x["pid"], x["files"]) for x in found] == [(child.pid, ["__1_0.distcp"])]
        assert "import time" in found[0]["command"]
        assert writers_of(tmp_path / "elsewhere") == []
    finally:
        child.kill()
        child.wait()
        own.close()
    deadline = time.monotonic() + 5
    while writers_of(iter_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert writers_of(iter_dir) == []


BASE = ["--entrypoint", "e.py", "--checkpoint-dir", "/c", "--fault-marker", "/f", "--fault-rank", "0"]


def test_the_wrapper_takes_writer_stall_only_at_a_save_phase(capsys):
    args, _ = parse_args([*BASE, "--fault", "writer_stall", "--fault-timing", "save_shards_partial"])
    assert args.fault == "writer_stall"
    with pytest.raises(SystemExit):
        parse_args([*BASE, "--fault", "writer_stall"])
    wanted = "--fault writer_stall needs --fault-timing save_shards_partial or save_shards_complete"
    assert wanted in capsys.readouterr().err
    with pytest.raises(SystemExit):  # no writer holds the shards open yet: the entry's timings say so
        parse_args([*BASE, "--fault", "writer_stall", "--fault-timing", "save_staged"])
