"""`ftqual report` on the recorded H200 runs (real verifier output) and the hand-made hang report."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.schemas import validate_summary

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def report(tmp_path_factory, real_docs, preflight_doc, cli):
    """One report through the CLI's --results form: real baseline + kill, hand-made hang, a preflight.json."""
    results = tmp_path_factory.mktemp("report") / "results"
    docs = {**real_docs, "hang": json.loads((DATA / "hang.verify.json").read_text())}
    for name, doc in docs.items():
        (results / name).mkdir(parents=True)
        (results / name / "verify.json").write_text(json.dumps(doc))
    (results / "preflight.json").write_text(json.dumps(preflight_doc))
    proc = cli("report", "--results", str(results))
    assert proc.returncode == 0, proc.stderr
    return results


def test_real_verifier_passes_both_fixtures(real_docs):
    assert real_docs["baseline"]["verdict"] == "pass"
    assert real_docs["kill"]["verdict"] == "pass"
    assert real_docs["kill"]["timeline"]["iterations"], "the report needs the verifier's timeline"


def test_writes_every_output(report):
    for name in (
        "summary.json",
        "summary.md",
        "junit.xml",
        "plots/timeline_kill.png",
        "plots/timeline_hang.png",
        "plots/loss_comparison.png",
    ):
        assert (report / name).is_file(), name
    assert not (report / "plots/timeline_baseline.png").exists()


def test_summary_json_validates(report):
    summary = json.loads((report / "summary.json").read_text())
    validate_summary(summary)
    assert summary["verdict"] == "pass"
    assert [s["name"] for s in summary["scenarios"]] == ["baseline", "kill", "hang"]
    assert summary["stack"]["gpu_model"] == "NVIDIA H200" and summary["stack"]["gpu_count"] == 2
    assert summary["resolved"]["transformer_impl"] == "local"
    kill = summary["scenarios"][1]
    assert kill["run_id"] == "kill" and kill["metrics"]["lost_iterations"] == 10
    assert {b["measure"]: b["within"] for b in kill["budgets"]} == {
        "detection_s": True,
        "restart_s": True,
        "checkpoint_load_s": True,
        "failure_to_first_step_s": True,
        "lost_iterations": True,
    }
    assert kill["replay"]["classification"] == "transient" and kill["replay"]["transient_iterations"] == [7]
    assert {d["iteration"] for d in kill["replay"]["differences"]} == {7}
    assert kill["derived"]["marks"]["injection_s"] == pytest.approx(32.664, abs=0.01)
    assert kill["goodput"]["computed"] and len(kill["goodput"]["points"]) == 2


def test_markdown_verdict_first_and_tables(report):
    text = (report / "summary.md").read_text()
    lines = text.splitlines()
    assert lines[0] == "# ftqual: PASS — recovery qualified (3/3 scenarios)"
    assert "| check | baseline | kill | hang |" in text
    assert "| GPU model | NVIDIA H200 |" in text
    assert "| Transformer Engine | — |" in text
    assert "### kill: ✅ pass — fault `kill`, run `kill`" in text
    assert "### hang: ✅ pass — fault `hang`, run `hang`" in text
    assert "| detection (fault → detected) | 0.10 s | ≤ 1.00 s | ✅ within |" in text
    assert "'step' section timeout 120 s + rank monitor check interval 5 s" in text
    assert "a difference confined to the first iterations after the restore" in text
    assert "iteration 7: 6.357241 vs 6.529403" in text
    assert "goodput ≈ 1 − (t_detect + t_recover + t_lost + t_ckpt) / MTBF" in text
    # the failure prior of the whole product (Llama 3's by default), named where it is used
    assert "49.5 h @ 1,024 GPUs" in text and "3.09 h @ 16,384 GPUs" in text
    assert "failure prior **llama3**: Llama 3 405B pre-training" in text and "Kokolis et al." not in text
    assert (
        "- `resumed_from_checkpoint`: the replacement loaded a completed checkpoint at iteration K ≥ 1"
        in text
    )
    assert "![timeline_kill](plots/timeline_kill.png)" in text
    assert "Every check of every scenario passed" in "\n".join(lines[:25])


def test_junit_parses_and_counts(report, junit_counts):
    counts = junit_counts(report / "junit.xml")
    # baseline: 9 checks (7 skip) + verdict; kill: 9 checks (1 skip) + verdict
    assert counts["baseline"] == {"tests": 14, "failures": 0, "errors": 0, "skipped": 10}
    assert counts["kill"] == {"tests": 14, "failures": 0, "errors": 0, "skipped": 4}
    root = ET.parse(report / "junit.xml").getroot()
    names = [c.get("name") for c in root.iter("testcase") if c.get("classname") == "ftqual.kill"]
    assert "resumed_from_checkpoint" in names and names[-1] == "verdict"


def test_pngs_are_real_images(report, png_size):
    for name in ("timeline_kill.png", "timeline_hang.png", "loss_comparison.png"):
        path = report / "plots" / name
        assert path.stat().st_size > 10_000, name
        assert png_size(path) == (1200, 600), name


def test_verify_paths_form_and_out(tmp_path, real_reports, cli):
    out = tmp_path / "out"
    proc = cli(
        "report",
        "--verify",
        f"baseline={real_reports['baseline']}",
        "--verify",
        f"kill={real_reports['kill']}",
        "--out",
        str(out),
        "--mtbf-hours",
        "4",
        "--gpus-for-mtbf",
        "4096",
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    validate_summary(summary)
    assert summary["verdict"] == "pass"
    assert summary["stack"]["torch"] == "unknown"  # no preflight: unknown, not a crash
    assert [(p["mtbf_hours"], p["gpus"]) for p in summary["goodput"]["by_scenario"]["kill"]["points"]] == [
        (4.0, 4096)
    ]
    assert "Stack fields are unknown" in (out / "summary.md").read_text()
