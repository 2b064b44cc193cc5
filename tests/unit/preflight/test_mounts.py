"""The mount table (ftqual/preflight/mounts.py): mountinfo and /proc/mounts parsed from sample text (the
kernel's octal escapes decoded), and a path's mount picked by the longest mount point above it."""

from __future__ import annotations

import os

from ftqual.preflight import mounts as M

MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 0:26 / / rw,relatime master:1 - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
31 27 259:1 / /scratch rw,noatime shared:5 - xfs /dev/nvme0n1p1 rw,attr2
32 27 0:45 / /lus rw,relatime shared:7 master:3 - lustre 10.0.0.1@tcp:/fs rw,flock
33 32 0:46 /team /lus/team\\040ckpt rw,relatime - nfs4 nas:/export/a\\040b rw,vers=4.2
34 27 0:47 / /scratch\\134x rw - tmpfs tmpfs rw
35 27 0:48 / /caf\\303\\251 rw - ext4 /dev/sdb1 rw
garbage line without a separator
"""

PROC_MOUNTS = """\
overlay / overlay rw,lowerdir=/l 0 0
/dev/nvme0n1p1 /scratch xfs rw,attr2 0 0
nas:/export/a\\040b /lus/team\\040ckpt nfs4 rw 0 0
"""


def test_mountinfo_fields_and_escapes():
    table = M.parse_mountinfo(MOUNTINFO)
    assert len(table) == 7  # the garbage line is skipped
    by_point = {m.point: m for m in table}
    assert by_point["/"] == M.Mount("/", "overlay", "overlay", "0:26")
    assert by_point["/scratch"] == M.Mount("/scratch", "xfs", "/dev/nvme0n1p1", "259:1")
    # optional fields (shared:7 master:3) before the separator
    assert by_point["/lus"] == M.Mount("/lus", "lustre", "10.0.0.1@tcp:/fs", "0:45")
    # \040 is a space, in the mount point and in the source
    assert by_point["/lus/team ckpt"] == M.Mount("/lus/team ckpt", "nfs4", "nas:/export/a b", "0:46")
    assert "/scratch\\x" in by_point  # \134 is a backslash
    assert "/café" in by_point  # UTF-8 escaped byte by byte


def test_proc_mounts_fallback():
    table = M.parse_proc_mounts(PROC_MOUNTS)
    assert table[2] == M.Mount("/lus/team ckpt", "nfs4", "nas:/export/a b")
    assert table[0].device_number is None


def test_read_prefers_mountinfo_and_falls_back(tmp_path):
    info, mounts = tmp_path / "mountinfo", tmp_path / "mounts"
    info.write_text(MOUNTINFO)
    mounts.write_text(PROC_MOUNTS)
    assert M.read_mount_table(str(info), str(mounts))[0].device_number == "0:21"
    assert M.read_mount_table(str(tmp_path / "none"), str(mounts)) == M.parse_proc_mounts(PROC_MOUNTS)
    assert M.read_mount_table(str(tmp_path / "none"), str(tmp_path / "none")) == []


def test_the_longest_prefix_is_picked():
    table = M.parse_mountinfo(MOUNTINFO)
    assert M.mount_for("/lus/team ckpt/run-1", table).fs_type == "nfs4"
    assert M.mount_for("/lus/team ckpt", table).fs_type == "nfs4"
    assert M.mount_for("/lus/team", table).fs_type == "lustre"  # not /lus/team ckpt's
    assert M.mount_for("/lus/other/x", table).fs_type == "lustre"
    assert M.mount_for("/scratchy", table).point == "/"  # a prefix by characters only is not a mount's
    assert M.mount_for("/nonexistent/ckpt", table).point == "/"
    assert M.mount_for("/x", []) is None


def test_the_later_of_two_mounts_on_one_point_wins():
    table = M.parse_mountinfo(MOUNTINFO + "40 31 0:50 / /scratch rw - tmpfs tmpfs rw\n")
    assert M.mount_for("/scratch/a", table).fs_type == "tmpfs"


def test_this_machines_table_holds_the_root():
    table = M.read_mount_table()
    if table:  # /proc may be missing in a sandbox
        assert M.mount_for(os.path.realpath("/"), table).point == "/"
