"""The two recorded H200 runs verify as their README says, through the API and the CLI."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from ftqual.verification.verify import SCHEMA, build_report, exit_code_for

FAULT_IDS = [
    "checkpoint_before_failure",
    "failure_detected_and_restarted",
    "resumed_from_checkpoint",
    "progress_after_resume",
    "clean_finish",
]


def statuses(report: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["checks"]}


def test_kill_fixture_passes_via_api(shared_fixtures):
    report = build_report(shared_fixtures / "kill-2gpu")
    assert report["schema"] == SCHEMA
    assert report["verdict"] == "pass", statuses(report)
    assert exit_code_for(report) == 0
    got = statuses(report)
    assert all(got[i] == "pass" for i in FAULT_IDS)
    assert got["uninterrupted_completion"] == "skip"
    assert got["fixed_timeouts_in_force"] == "pass"
    assert got["replay_consistency"] == "pass"
    assert all(isinstance(c["gates"], bool) for c in report["checks"])


def test_kill_fixture_metrics(shared_fixtures):
    m = build_report(shared_fixtures / "kill-2gpu")["metrics"]
    assert m["checkpoint_iteration"] == 5
    assert m["restored_iteration"] == 5
    assert m["fault_iteration"] == 15
    assert m["lost_iterations"] == 10
    assert m["detected_by"] == "exit"
    assert m["detection_s"] == pytest.approx(0.1, abs=0.02)
    assert m["restart_s"] == pytest.approx(4.5, abs=0.05)
    assert m["failure_to_first_step_s"] == pytest.approx(31.6, abs=0.05)
    assert m["teardown_s"] == pytest.approx(3.44, abs=0.01)
    assert m["checkpoint_load_s"] == pytest.approx(0.28, abs=0.001)
    assert m["injected_at"] == "2026-11-29T14:19:09.744182Z"
    saves = {(s["cycle"], s["iteration"]): s["save_s"] for s in m["checkpoint_saves"]}
    assert saves[(0, 5)] == pytest.approx(0.737, abs=0.001)
    assert set(saves) == {(0, 5), (1, 10), (1, 15), (1, 20), (1, 25), (1, 30)}


def test_kill_fixture_evidence_points_at_the_lines(shared_fixtures):
    report = build_report(shared_fixtures / "kill-2gpu")
    checks = {c["id"]: c for c in report["checks"]}
    cited = {(e["path"], e["line"]) for e in checks["checkpoint_before_failure"]["evidence"]}
    assert ("logs/train_cycle0.log", 1060) in cited
    cited = {(e["path"], e["line"]) for e in checks["failure_detected_and_restarted"]["evidence"]}
    assert ("logs/launcher.log", 43) in cited
    cited = {(e["path"], e["line"]) for e in checks["resumed_from_checkpoint"]["evidence"]}
    assert {
        ("logs/train_cycle1.log", 956),
        ("logs/train_cycle1.log", 975),
        ("logs/train_cycle1.log", 1023),
    } <= cited
    for check in report["checks"]:
        for item in check["evidence"]:
            assert not item["path"].startswith("/"), item


def test_kill_fixture_replay_reports_the_transient_difference(shared_fixtures):
    check = next(
        c for c in build_report(shared_fixtures / "kill-2gpu")["checks"] if c["id"] == "replay_consistency"
    )
    assert check["status"] == "pass"
    assert check["values"]["classification"] == "transient"
    assert check["values"]["transient_iterations"] == [7]
    assert check["values"]["max_dev_iteration"] == 7
    assert check["values"]["replayed_iterations"] == list(range(6, 16))
    assert any("iteration(s) 7" in note for note in check["notes"])


def test_kill_fixture_timeline(shared_fixtures):
    report = build_report(shared_fixtures / "kill-2gpu")
    timeline = report["timeline"]
    kinds = [e["kind"] for e in timeline["events"]]
    for kind in (
        "cycle_start",
        "cycle_end",
        "injection",
        "detection",
        "checkpoint_saved",
        "checkpoint_loaded",
        "first_step",
        "exit",
    ):
        assert kind in kinds
    assert len(timeline["iterations"]) == 15 + 25
    first = timeline["iterations"][0]
    assert first == {
        "cycle": 0,
        "iteration": 1,
        "t": "2026-11-29T14:19:08.586265Z",
        "loss": 7.03882,
        "consumed_samples": 2,
        "line": 1021,
        "path": "logs/train_cycle0.log",
    }
    times = [e["t"] for e in timeline["events"] if e["t"]]
    assert times == sorted(times)


def test_report_extensions(shared_fixtures):
    report = build_report(shared_fixtures / "kill-2gpu")
    expected = report["expected"]
    assert expected["train_iters"] == 30 and expected["save_interval"] == 5
    assert expected["fault"] == "kill" and expected["fault_rank"] == 1
    assert expected["timeouts"] == {"setup": 900, "step": 120, "checkpointing": 600, "out_of_section": 180}
    assert report["clock"]["assumed_utc"] is True
    assert any("tz_offset_s" in note for note in report["notes"])
    assert all(s["ok"] for s in report["sources"].values())


def test_baseline_fixture_passes_via_api(shared_fixtures):
    report = build_report(shared_fixtures / "baseline-2gpu")
    assert report["verdict"] == "pass", statuses(report)
    got = statuses(report)
    assert got["uninterrupted_completion"] == "pass"
    assert all(got[i] == "skip" for i in FAULT_IDS)
    m = report["metrics"]
    assert m["wall_time_s"] == pytest.approx(43.684, abs=0.001)
    assert m["iterations"] == 20
    assert m["iterations_per_s"] > 10
    assert [s["iteration"] for s in m["checkpoint_saves"]] == [5, 10, 15, 20]


def test_kill_against_baseline_is_informative(shared_fixtures):
    report = build_report(shared_fixtures / "kill-2gpu", shared_fixtures / "baseline-2gpu")
    assert report["verdict"] == "pass"
    values = next(c for c in report["checks"] if c["id"] == "replay_consistency")["values"]
    assert values["baseline_compared"] == 20
    assert values["baseline_max_rel_dev"] > 0
    assert values["baseline_used"] is False  # 20 vs 30 iterations: other settings, for information only
    assert report["baseline"]["run_id"] == "base"


@pytest.mark.parametrize(("name", "verdict"), [("kill-2gpu", "pass"), ("baseline-2gpu", "pass")])
def test_cli(name, verdict, shared_fixtures, repo_root, python_exe, tmp_path):
    out = tmp_path / "report" / "verify.json"
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    proc = subprocess.run(
        [python_exe, "-m", "ftqual", "verify", str(shared_fixtures / name), "--json", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f": {verdict.upper()}" in proc.stdout.splitlines()[0]
    assert len([line for line in proc.stdout.splitlines() if line.startswith("  ") and "_" in line]) >= 8
    report = json.loads(out.read_text())
    assert report["verdict"] == verdict


def test_cli_json_to_stdout(shared_fixtures, repo_root, python_exe, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    proc = subprocess.run(
        [python_exe, "-m", "ftqual", "verify", str(shared_fixtures / "baseline-2gpu"), "--json", "-"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["verdict"] == "pass"
    assert "PASS" in proc.stderr


def test_verify_writes_nothing_into_the_run_dir(kill_run, verify):
    before = sorted(str(p.relative_to(kill_run.root)) for p in kill_run.root.rglob("*"))
    for path in [kill_run.root, *kill_run.root.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        code, report = verify(kill_run)
    finally:
        for path in [kill_run.root, *kill_run.root.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    assert code == 0 and report["verdict"] == "pass"
    assert sorted(str(p.relative_to(kill_run.root)) for p in kill_run.root.rglob("*")) == before


def test_moved_run_dir_still_verifies(kill_run, verify, tmp_path):
    moved = tmp_path / "elsewhere" / "renamed-run"
    moved.parent.mkdir()
    kill_run.root.rename(moved)
    code, report = verify(moved)
    assert code == 0, report["checks"]
