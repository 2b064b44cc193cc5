"""detected_within_timeout on recorded H200 runs: the hang placed in a step, caught after 121.5 s under a
120 s step timeout, passes; edited copies fail where the timeouts promise less than the run took (a step
timeout shortened to 100 s in run.json: the bound of a recommendation the run disproves; the injection
moved 30 s earlier); the immediate placement is bounded by the section that fired; a kill has none."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ftqual.verification.verify import build_report, exit_code_for

DATA = Path(__file__).resolve().parents[3] / "data" / "megatron-h200-1gpu"
CHECK = "detected_within_timeout"


def check_of(report: dict) -> dict:
    return next(c for c in report["checks"] if c["id"] == CHECK)


def edited(tmp_path: Path, name: str, file: str, edit) -> Path:
    dest = tmp_path / name
    shutil.copytree(DATA / name, dest)
    path = dest / file
    path.chmod(0o644)
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return dest


def test_a_hang_in_a_step_is_caught_within_the_step_timeout_and_the_monitor_interval():
    check = check_of(build_report(DATA / "hang"))
    assert check["status"] == "pass", check["detail"]
    values = check["values"]
    assert (values["section"], values["fired"], values["bound_s"]) == ("step", "step", 125.0)
    assert 120.0 <= values["detection_s"] <= 125.0


def test_a_timeout_the_run_took_longer_than_fails(tmp_path):
    """The negative control: the same run, as if it had run under a 100 s step timeout whose bound is 105 s.
    (fixed_timeouts_in_force fails too: the rank monitor used 120 s.)"""
    run = edited(tmp_path, "hang", "run.json", lambda d: d["timeouts"].update(step=100))
    report = build_report(run)
    check = check_of(report)
    assert check["status"] == "fail"
    assert "beyond the step timeout 100 s + rank monitor interval 5 s = 105 s" in check["detail"]
    assert report["verdict"] == "fail" and exit_code_for(report) == 1


def test_an_injection_long_before_its_detection_fails(tmp_path):
    def earlier(marker: dict) -> None:
        t = datetime.fromisoformat(marker["injected_at"].replace("Z", "+00:00")).astimezone(UTC)
        marker["injected_at"] = (t - timedelta(seconds=30)).isoformat().replace("+00:00", "Z")

    check = check_of(build_report(edited(tmp_path, "hang", "fault_injected.json", earlier)))
    assert check["status"] == "fail", check["detail"]
    assert check["values"]["detection_s"] > 150


def test_an_immediate_placement_is_bounded_by_the_section_that_fired():
    check = check_of(build_report(DATA / "hang-seed-placement"))
    assert check["status"] == "pass", check["detail"]
    assert (check["values"]["section"], check["values"]["bound_s"]) == ("checkpointing", 305.0)


def test_only_a_live_faults_report_carries_it():
    assert CHECK not in {c["id"] for c in build_report(DATA / "kill")["checks"]}
