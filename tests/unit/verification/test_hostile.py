"""Hostile input, unit by unit: regular files inside the run, bounded lines, linear time, clear errors."""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from ftqual.verification.checks.result import CheckResult, verdict
from ftqual.verification.checks.world import expand_hostlist
from ftqual.verification.evidence import cycles, snapshot
from ftqual.verification.evidence.clock import Clock
from ftqual.verification.evidence.model import ref
from ftqual.verification.evidence.run_meta import RunMetaError, read_run_meta
from ftqual.verification.evidence.safeio import (
    MAX_LINE_BYTES,
    UnsafeFile,
    bounded_lines,
    load_json_object,
    open_regular,
)
from ftqual.verification.evidence.train_log import parse_train_log
from ftqual.verification.verify import build_report


def lines_of(data: bytes, max_line: int = MAX_LINE_BYTES) -> list[tuple[bytes, bool]]:
    return list(bounded_lines(io.BytesIO(data), max_line))


def test_bounded_lines_split_cut_and_mark_the_last_line():
    assert lines_of(b"a\nbb\n") == [(b"a", True), (b"bb", True)]
    assert lines_of(b"a\nbb") == [(b"a", True), (b"bb", False)]
    assert lines_of(b"") == []
    assert lines_of(b"x" * 10 + b"\nyz\n", max_line=4) == [(b"xxxx", True), (b"yz", True)]
    assert lines_of(b"\n\n") == [(b"", True), (b"", True)]


@pytest.mark.timeout(10)
def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "log")
    with pytest.raises(UnsafeFile, match="not a regular file"):
        open_regular(tmp_path / "log", tmp_path)


@pytest.mark.timeout(10)
def test_dev_zero_and_links_out_of_the_run_are_refused(tmp_path):
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(UnsafeFile):
        open_regular(tmp_path / "zero")  # even without a root: not a regular file
    (tmp_path / "passwd").symlink_to("/etc/passwd")
    with pytest.raises(UnsafeFile, match="outside the run directory"):
        open_regular(tmp_path / "passwd", tmp_path)
    inner = tmp_path / "sub"
    inner.mkdir()
    (inner / "real").write_text("ok\n")
    (tmp_path / "inside").symlink_to(inner / "real")
    with open_regular(tmp_path / "inside", tmp_path) as handle:  # a link that stays inside is fine
        assert handle.read() == b"ok\n"


def test_deep_json_is_a_value_error_not_a_recursion(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ValueError, match="nested"):
        load_json_object(path, tmp_path)


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "line",
    [
        "0:  " + "loading distributed checkpoint from " * 30000,
        "0:  " + "successfully loaded checkpoint from x" * 30000,
        "0: FT: initialized. Timeouts=SectionTimeouts(out_of_section=1, sections=["
        + "], calculated_sections=" * 40000,
        "0: " + "x" * 5_000_000,
    ],
)
def test_megabyte_lines_parse_in_linear_time(tmp_path, line):
    path = tmp_path / "train_cycle0.log"
    path.write_text("0: ------ arguments ------\n0:   zzz " + " " * 300000 + "x\n" + line + "\n")
    start = time.monotonic()
    log = parse_train_log(path, "logs/train_cycle0.log", 0, Clock(), tmp_path)
    assert time.monotonic() - start < 3.0
    assert log.lines == 3 and not log.loads and not log.ft_inits


@pytest.mark.timeout(10)
def test_hostlists_are_bounded():
    assert expand_hostlist("n[1-3]") == ["n1", "n2", "n3"]
    for text in ("n[0-99999999]", "a[0-999]b[0-999]", "x" + "[1-2]" * 40):
        with pytest.raises(ValueError):
            expand_hostlist(text)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("tz_offset_s", 1e300, "tz_offset_s"),
        ("fault_rank", "²", "fault_rank"),
        ("fault_rank", [1], "fault_rank"),
        ("fault", "KILL", "'fault'"),
        ("schema", "ftqual.run/v9", "'schema' must be 'ftqual.run/v1'"),
        ("save_interval", -5, "'save_interval' must be an integer of at least 1"),
        ("train_iters", 0, "'train_iters' must be an integer of at least 1"),
        ("world_size", "two", "'world_size'"),
        ("max_restarts", -1, "'max_restarts' must be an integer of at least 0"),
    ],
)
def test_malformed_run_json_values_are_one_clear_error(tmp_path, key, value, message):
    run = {"fault": "kill", "fault_rank": 1, "run_id": "r", key: value}
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(RunMetaError, match=message):
        read_run_meta(tmp_path)


def test_control_characters_never_reach_a_report():
    item = ref("logs/x.log", 3, "\x1b[31mred\x1b[0m and \x07bell\x00\n")
    assert item.text == "red and ?bell?"


def test_only_gating_checks_decide_the_verdict():
    info = CheckResult("informative", "fail", "x", gates=False)
    assert verdict([CheckResult("a", "pass", ""), info]) == "pass"
    assert info.as_dict()["gates"] is False


def test_unlistable_folders_are_missing_sources_not_tracebacks(monkeypatch):
    """chmod 000 does not stop root (CI runs as root): the listing itself is made to fail."""
    real_listdir = os.listdir

    def listdir(path):
        if Path(path).name in ("logs", "cycle_infos"):
            raise PermissionError(13, "Permission denied")
        return real_listdir(path)

    monkeypatch.setattr(snapshot.os, "listdir", listdir)
    monkeypatch.setattr(cycles.os, "listdir", listdir)
    run = Path(__file__).resolve().parents[2] / "data" / "megatron-h200x2-pp2" / "kill"
    report = build_report(run)
    assert report["verdict"] == "inconclusive"
    assert "cannot be listed" in report["sources"]["train_logs"]["reason"]
    assert "cannot be listed" in report["sources"]["cycle_infos"]["reason"]
