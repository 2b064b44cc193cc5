"""The report's "Checkpoints and restarts" (ftqual/report/checkpoints.py, plots.render_checkpoints): the
accounts of the verify reports against preflight.json's storage floor, in summary.json, summary.md and a
plot; a missing floor or account is said, never filled in."""

from __future__ import annotations

import json
from pathlib import Path

from ftqual.report import write_report
from ftqual.report.checkpoints import build_checkpoints, markdown_lines, storage_floor
from ftqual.report.inputs import ScenarioInput
from ftqual.report.plots import render_checkpoints
from ftqual.report.summary import ReportOptions
from ftqual.verification.verify import build_report

KILL = Path(__file__).resolve().parents[2] / "data" / "megatron-h200-1gpu" / "kill"
FLOOR = {
    "path": "/lus/team/ckpt",
    "filesystem": "lustre",
    "bytes": 2**30,
    "write_gbps": 2.0,
    "read_gbps": 4.0,
    "write_s": 0.537,
    "read_s": 0.268,
    "method": "o_direct",
}
ACCOUNT = {
    "saves": [{"iteration": 5, "cycle": 0, "bytes": 10**9, "blocked_s": 0.2, "durable_s": 1.0, "gbps": 1.0}],
    "restarts": [
        {
            "cycle": 1,
            "detection_s": 0.1,
            "worker_stop_s": 3.3,
            "gpu_reclaim_s": None,
            "process_start_s": 19.5,
            "init_s": 3.5,
            "load_s": 0.5,
            "load_bytes": 10**9,
            "load_gbps": 2.0,
            "first_step_s": 1.8,
        }
    ],
}


def _input(name: str, account: dict | None) -> ScenarioInput:
    doc = {"schema": "ftqual.verify/v1"} | ({"checkpoint_account": account} if account is not None else {})
    return ScenarioInput(name, f"{name}.json", doc)


def test_against_the_floor():
    section = build_checkpoints([_input("kill", ACCOUNT), _input("old", None)], {"storage": FLOOR})
    assert section["floor"]["write_gbps"] == 2.0
    assert list(section["by_scenario"]) == ["kill"]  # a report from before the account is left out
    assert section["by_scenario"]["kill"]["saves"][0]["of_write_floor"] == 0.5
    assert section["by_scenario"]["kill"]["restarts"][0]["load_of_read_floor"] == 0.5
    text = "\n".join(markdown_lines(section, "plots/checkpoints.png"))
    assert "write 2.000 GB/s, read 4.000 GB/s" in text
    assert "| 5, cycle 0 | 1.000 GB | 0.200 s | 1.000 s | 1.000 GB/s (50% of floor) |" in text
    assert "| checkpoint load | 0.500 s | 1.000 GB at 2.000 GB/s (50% of floor) |" in text
    assert "| GPU memory reclaim | — |  |" in text  # no evidence: a dash, not a number
    assert "![checkpoints and restarts](plots/checkpoints.png)" in text


def test_the_floor_names_the_filesystem_where_the_preflight_did():
    old = "\n".join(markdown_lines(build_checkpoints([], {"storage": FLOOR})))
    assert "(preflight, /lus/team/ckpt, lustre, 1.074 GB probed" in old  # a report before mount points
    named = {**FLOOR, "mount_point": "/lus", "device": "10.0.0.1@tcp:/fs", "free_bytes": 2**40}
    section = build_checkpoints([], {"storage": named})
    assert section["floor"]["mount_point"] == "/lus" and section["floor"]["free_bytes"] == 2**40
    text = "\n".join(markdown_lines(section))
    assert "(preflight, /lus/team/ckpt, lustre at /lus (device 10.0.0.1@tcp:/fs), 1.074 GB probed" in text


def test_without_a_floor_rates_stand_alone():
    assert storage_floor({"storage": {**FLOOR, "write_gbps": None, "method": "skipped"}}) is None
    section = build_checkpoints([_input("kill", ACCOUNT)], None)
    assert section["floor"] is None
    assert section["by_scenario"]["kill"]["saves"][0]["of_write_floor"] is None
    text = "\n".join(markdown_lines(section))
    assert "Storage floor: not measured" in text and "1.000 GB/s |" in text
    assert "No verify report carries" in "\n".join(markdown_lines(build_checkpoints([], None)))


def test_plot_is_drawn(tmp_path, png_size):
    section = build_checkpoints([_input("kill", ACCOUNT)], {"storage": FLOOR})
    render_checkpoints(section, tmp_path / "c.png")
    width, height = png_size(tmp_path / "c.png")
    assert width >= 1000 and height >= 500
    render_checkpoints(
        build_checkpoints([_input("kill", {"saves": [], "restarts": []})], None), tmp_path / "e.png"
    )
    assert (tmp_path / "e.png").is_file()


def test_written_report_on_a_recorded_run(tmp_path):
    verify_json = tmp_path / "kill.verify.json"
    verify_json.write_text(json.dumps(build_report(str(KILL))))
    preflight = tmp_path / "preflight.json"
    preflight.write_text(
        json.dumps(
            {
                "schema": "ftqual.preflight/v1",
                "verdict": "pass",
                "checks": [{"id": "x", "status": "pass", "detail": "", "fix": ""}],
                "storage": FLOOR,
            }
        )
    )
    out = tmp_path / "report"
    summary = write_report(
        [ScenarioInput("kill", str(verify_json), json.loads(verify_json.read_text()))],
        preflight,
        out,
        ReportOptions(),
    )
    assert summary["checkpoints"]["floor"]["read_gbps"] == 4.0
    assert summary["checkpoints"]["by_scenario"]["kill"]["restarts"][0]["load_s"] == 0.308
    assert (out / "plots" / "checkpoints.png").is_file()
    md = (out / "summary.md").read_text()
    assert "## Checkpoints and restarts" in md and "| checkpoint load | 0.308 s |" in md
    assert json.loads((out / "summary.json").read_text())["plots"]["checkpoints"] == "plots/checkpoints.png"
