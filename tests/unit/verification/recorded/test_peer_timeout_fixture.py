"""A lingering exception whose peer's step timeout fired first (tests/data/smoke-exception-peer-timeout): the
timeout of the section both ranks held open is its detection, whichever rank's monitor looked first; without
the traceback that shows the fault unwound, the same evidence fails."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ftqual.verification.verify import build_report

RUN = Path(__file__).resolve().parents[3] / "data" / "smoke-exception-peer-timeout" / "exception-pyspy"
DETECTED = "failure_detected_and_restarted"


def check(doc: dict) -> dict:
    return next(c for c in doc["checks"] if c["id"] == DETECTED)


def test_the_peer_s_timeout_is_the_lingering_exception_s_detection():
    doc = build_report(RUN)
    assert doc["verdict"] == "pass"
    c = check(doc)
    assert c["status"] == "pass"
    assert any(
        n.startswith("a peer's timeout came first: the section 'step' timeout of local rank 0")
        for n in c["notes"]
    )
    m = doc["metrics"]
    assert (m["detected_by"], m["linger_ended_by"], m["linger_cut_by_timeout"]) == (
        "section:step",
        "timeout",
        True,
    )
    assert m["held_by"].startswith(
        "main thread in multiprocessing/util.py `_exit_function` -> `BaseProcess.join`"
    )


def test_without_the_traceback_a_peer_s_timeout_is_another_path(tmp_path):
    """Negative control: the faulted rank's traceback removed, nothing shows the exception unwound."""
    copy = tmp_path / "no-traceback"
    shutil.copytree(RUN, copy, symlinks=True)
    log = copy / "logs" / "train_cycle0.log"
    log.write_text(re.sub(r"(?m)^1: \[rank1\]: .*\n", "", log.read_text()))
    doc = build_report(copy)
    assert doc["verdict"] == "fail" and check(doc)["status"] == "fail"
    assert "not of the faulted local rank 1" in check(doc)["detail"]
