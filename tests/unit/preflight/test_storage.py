"""The storage floor (ftqual/preflight/storage.py): real bytes written and read on a tmp dir, the record in
preflight.json, the check. Figures are never asserted by time: only that they exist and are consistent."""

from __future__ import annotations

import dataclasses
import os

import pytest

from ftqual.preflight import storage
from ftqual.preflight.checks import FAIL, PASS, SKIP, WARN, run_checks
from ftqual.preflight.checks_host import check_storage_floor
from ftqual.preflight.command import build_report, measure_storage
from ftqual.preflight.mounts import Mount
from ftqual.preflight.report_schema import problems
from ftqual.scenario.model import resolve


def test_measure_writes_reads_and_deletes_real_bytes(tmp_path):
    (tmp_path / "ckpt").mkdir()
    floor = storage.measure(tmp_path / "ckpt", 24)
    assert floor.method in ("o_direct", "fadvise_dontneed")
    assert floor.bytes == 24 * storage.MIB
    assert floor.write_s > 0 and floor.read_s > 0
    # the rates come from the unrounded times; the recorded times are rounded to the millisecond
    for gbps, seconds in ((floor.write_gbps, floor.write_s), (floor.read_gbps, floor.read_s)):
        low, high = floor.bytes / (seconds + 0.0005) / 1e9, floor.bytes / max(seconds - 0.0005, 1e-9) / 1e9
        assert low - 0.0005 <= gbps <= high + 0.0005
    assert os.listdir(tmp_path / "ckpt") == []  # the probe files are gone
    assert set(floor.to_json()) == {
        "path",
        "filesystem",
        "bytes",
        "write_gbps",
        "read_gbps",
        "write_s",
        "read_s",
        "method",
        "mount_point",
        "device",
        "free_bytes",
    }
    assert floor.free_bytes > 0 and floor.mount_point is None  # not named by the caller


def test_probe_larger_than_a_file_is_split(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "FILE_MAX", 8 * storage.MIB)
    seen = []
    real = storage._write
    monkeypatch.setattr(
        storage, "_write", lambda path, size, block: (seen.append(size), real(path, size, block))
    )
    floor = storage.measure(tmp_path, 20)
    assert seen == [8 * storage.MIB, 8 * storage.MIB, 4 * storage.MIB]
    assert floor.bytes == 20 * storage.MIB


def test_read_falls_back_to_fadvise_where_o_direct_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(storage, "_open_direct", lambda path: None)
    floor = storage.measure(tmp_path, 8)
    assert floor.method == "fadvise_dontneed"
    assert floor.read_gbps is not None


def test_capped_by_free_space(tmp_path, monkeypatch):
    usage = dataclasses.make_dataclass("U", ["total", "used", "free"])
    monkeypatch.setattr(storage.shutil, "disk_usage", lambda p: usage(0, 0, 40 * storage.MIB))
    assert storage.measure(tmp_path, 1024).bytes == 8 * storage.MIB  # a quarter, whole blocks
    monkeypatch.setattr(storage.shutil, "disk_usage", lambda p: usage(0, 0, 4 * storage.MIB))
    floor = storage.measure(tmp_path, 1024)
    assert floor.method == "skipped" and "free" in floor.error and floor.write_gbps is None


def test_zero_skips_and_an_unwritable_directory_fails_without_raising(tmp_path):
    assert storage.measure(tmp_path, 0).method == "skipped"
    blocker = tmp_path / "file"
    blocker.write_text("x")
    floor = storage.measure(blocker / "below", 8)  # a file where a directory must be
    assert floor.method == "failed" and floor.error and floor.read_gbps is None


def test_probe_size_auto():
    assert storage.probe_megabytes("auto", "megatron", 0) == 1024
    assert storage.probe_megabytes("auto", "smoke", 0) == storage.SMOKE_MIN_MB
    assert storage.probe_megabytes("auto", "smoke", 300) == 600
    assert storage.probe_megabytes(5, "megatron", 0) == 5


def test_checkpoint_root():
    assert storage.checkpoint_root("", "/w") == "/w/runs"
    assert storage.checkpoint_root("/lus/team/ckpt", "/w") == "/lus/team/ckpt"


def test_measure_storage_uses_the_config_and_the_report_records_it(tmp_path, make_ctx):
    cfg = resolve({"work_dir": str(tmp_path), "storage_probe_mb": 8}, env={})
    floor = measure_storage(cfg, [Mount("/", "ext4", "/dev/sda1", "8:1")])
    # runs/ is not made yet: measured where it will be made, and nothing left behind
    assert floor.path == str(tmp_path) and floor.bytes == 8 * storage.MIB
    assert os.listdir(tmp_path) == []
    (tmp_path / "runs").mkdir()
    assert measure_storage(cfg, []).path == str(tmp_path / "runs")
    assert (floor.filesystem, floor.mount_point, floor.device) == ("ext4", "/", "/dev/sda1")
    assert floor.free_bytes > 0
    ctx = make_ctx()
    ctx = dataclasses.replace(ctx, facts=dataclasses.replace(ctx.facts, storage=floor))
    report = build_report(ctx, run_checks(ctx))
    assert report["storage"]["write_gbps"] == floor.write_gbps
    assert report["storage"]["mount_point"] == "/" and report["storage"]["device"] == "/dev/sda1"
    assert report["storage"]["free_bytes"] == floor.free_bytes
    assert problems(report) == []
    line = next(c for c in report["checks"] if c["id"] == "storage_floor")
    assert line["status"] == PASS
    assert (
        f"{floor.path} (ext4 at / (device /dev/sda1), " in line["detail"]
        and " free): write " in line["detail"]
    )


def test_config_zero_skips_and_checkpoint_dir_is_where_it_measures(tmp_path):
    cfg = resolve({"work_dir": str(tmp_path), "storage_probe_mb": 0}, env={})
    assert measure_storage(cfg, []).method == "skipped"
    (tmp_path / "team").mkdir()
    cfg = resolve({"storage_probe_mb": 8, "checkpoint_dir": str(tmp_path / "team")}, env={})
    assert measure_storage(cfg, []).path == str(tmp_path / "team")


def test_a_missing_checkpoint_dir_is_never_measured_on_the_disk_above_it(tmp_path):
    """The issue's case: `checkpoint_dir: /nonexistent/ckpt` must not qualify `/`."""
    missing = str(tmp_path / "nonexistent" / "ckpt")
    # set past the config's validation, which may refuse the path itself
    cfg = resolve({"storage_probe_mb": 8}, env={})
    cfg = dataclasses.replace(cfg, defaults=dataclasses.replace(cfg.defaults, checkpoint_root=missing))
    floor = measure_storage(cfg, [Mount("/", "ext4", "/dev/sda1")])
    assert floor.method == "skipped" and floor.bytes == 0 and floor.write_gbps is None
    assert floor.path == missing and floor.mount_point is None
    assert "checkpoint_dir" in floor.error
    assert os.listdir(tmp_path) == []  # nothing was created, nothing probed above it
    # problems already gathered are taken as given (the preflight computes them once)
    (tmp_path / "team").mkdir()
    cfg = resolve({"storage_probe_mb": 8, "checkpoint_dir": str(tmp_path / "team")}, env={})
    assert measure_storage(cfg, [], ("checkpoint_dir x is bad",)).method == "skipped"


def test_the_default_root_is_still_measured_where_it_will_be_made(tmp_path):
    cfg = resolve({"work_dir": str(tmp_path / "w"), "storage_probe_mb": 8}, env={})
    (tmp_path / "w").mkdir()
    floor = measure_storage(cfg, [Mount(str(tmp_path), "xfs", "/dev/md0")])
    assert floor.path == str(tmp_path / "w") and floor.mount_point == str(tmp_path)


def test_bad_config_value_is_refused():
    from ftqual.scenario.model import ConfigError

    with pytest.raises(ConfigError, match="storage_probe_mb"):
        resolve({"storage_probe_mb": -1}, env={})


def test_schema_refuses_a_malformed_storage(make_ctx):
    ctx = make_ctx()
    report = build_report(ctx, run_checks(ctx))
    assert "storage" not in report  # none measured: the key stays out
    report["storage"] = {"path": "/x", "method": "o_direct", "bytes": "many", "write_gbps": "fast"}
    assert any("storage.bytes" in p for p in problems(report))
    assert any("storage.write_gbps" in p for p in problems(report))
    good = {
        "path": "/x",
        "method": "o_direct",
        "bytes": 8,
        "mount_point": "/",
        "device": None,
        "free_bytes": 9,
    }
    assert problems({**report, "storage": good}) == []
    bad = {**good, "mount_point": 3, "device": ["sda"], "free_bytes": 1.5}
    said = problems({**report, "storage": bad})
    assert {"storage.mount_point", "storage.device", "storage.free_bytes"} <= {p.split()[0] for p in said}


@pytest.mark.parametrize(("method", "status"), [("o_direct", PASS), ("skipped", SKIP), ("failed", WARN)])
def test_check(make_ctx, method, status):
    floor = storage.StorageFloor(
        "/c", "xfs", 8, 1.0, 2.0, 0.1, 0.05, method, "" if method == "o_direct" else "why"
    )
    ctx = make_ctx()
    ctx = dataclasses.replace(ctx, facts=dataclasses.replace(ctx.facts, storage=floor))
    result = check_storage_floor(ctx)
    assert result.status == status and result.status != FAIL
    if status == WARN:
        assert "storage_probe_mb" in result.fix


def test_the_report_names_the_job_shape_the_runs_will_train(make_ctx):
    """preflight.json's `job`: the digest run.json's `job` will carry, so that timeouts recommended for
    another shape are refused before the baseline launches."""
    from ftqual.report import scope
    from ftqual.scenario import job as jobshape

    tiny = build_report(make_ctx(), [])
    big = build_report(make_ctx({"model": "1.3b"}), [])
    assert big["job"]["model"] == "1.3b" and big["job"]["digest"] != tiny["job"]["digest"]
    job = jobshape.resolve_job("1.3b", ())
    assert big["job"]["digest"] == jobshape.record(job, 1, 1, 1, False)["digest"]
    refused = scope.scope_problem({"job": tiny["job"]["digest"]}, scope.job_digest(big), allow=False)
    assert refused is not None and "\n" not in refused
    assert scope.scope_problem({"job": big["job"]["digest"]}, scope.job_digest(big), allow=False) is None
