"""A CPU run's report says what ran (ftqual.report.ran): no GPU memory, no GPU count and no Megatron rows for
the smoke workload on CPU ranks; the recorded H100 report still shows them (the negative control). And the
Faults table's times each have one name: its "detected → new cycle" is ft_launcher's restart, never the bare
"restart" that the Goodput table's longer span (t_recover) once also went by."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ftqual.report.markdown import render_markdown
from ftqual.report.ran import Ran, what_ran

TESTS = Path(__file__).resolve().parents[2]
SMOKE = TESTS / "unit/verification/parity/tests__smoke-recurring-faults__flaky-exception.json"
GPU_SUMMARY = TESTS / "data/megatron-h100-team-job-1gpu/results/summary.json"

CPU_PREFLIGHT = {
    "schema": "ftqual.preflight/v1",
    "verdict": "pass",
    "created_at": "2026-12-06T16:50:00Z",
    "checks": [{"id": "python", "status": "pass", "detail": "3.11.9", "fix": ""}],
    "stack": {
        "python": "3.11.9",
        "torch": "2.5.1",
        "cuda": None,
        "nccl": None,
        "gpu_model": None,
        "gpu_count": 0,
        "driver": None,
        "nvrx": "0.7.0",
        "megatron": None,
        "transformer_engine": None,
        "apex": None,
        "host": "ci",
    },
    "resolved": {
        "workload": "smoke",
        "transformer_impl": "local",
        "dist_optimizer": False,
        "megatron_flags": [],
        "reasons": {"workload": "smoke workload: no Megatron"},
    },
}


def _report(tmp_path: Path, report_main, preflight: dict | None) -> tuple[dict, str]:
    results = tmp_path / "results"
    (results / "flaky").mkdir(parents=True)
    (results / "flaky" / "verify.json").write_text(SMOKE.read_text())
    if preflight is not None:
        (results / "preflight.json").write_text(json.dumps(preflight))
    assert report_main("--results", str(results)) == 0
    return json.loads((results / "summary.json").read_text()), (results / "summary.md").read_text()


@pytest.fixture
def cpu_report(tmp_path, report_main):
    """The smoke workload's recorded run on two CPU ranks (its real verify report), with a CPU preflight."""
    return _report(tmp_path, report_main, CPU_PREFLIGHT)


def _section(text: str, title: str) -> str:
    return text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_a_cpu_report_speaks_of_no_gpu_and_no_megatron(cpu_report):
    summary, text = cpu_report
    assert what_ran(summary) == Ran(gpu=False, megatron=False)
    job = _section(text, "Job")
    assert "GPU memory" not in job and "GPU(s)" not in job
    assert "on 2 CPU rank(s)" in job
    restarts = _section(text, "Checkpoints and restarts")
    assert "Megatron init" not in restarts and "GPU memory reclaim" not in restarts
    assert "| initialisation | 0.700 s |" in restarts and "| process start | 2.156 s |" in restarts
    assert "Megatron's `save-checkpoint` timer" not in restarts and "GB/s" not in restarts


def test_without_a_preflight_the_job_record_says_no_model_ran(tmp_path, report_main):
    """No preflight: the verify report's job (no Megatron arguments) tells the smoke workload, whose ranks
    train on CPU with gloo wherever they run."""
    summary, text = _report(tmp_path, report_main, None)
    assert what_ran(summary) == Ran(gpu=None, megatron=False)
    assert "GPU memory" not in _section(text, "Job") and "on 2 CPU rank(s)" in text
    assert "Megatron init" not in text and "GPU memory reclaim" not in text


def test_the_recorded_gpu_report_still_shows_gpu_memory_and_megatron():
    """Negative control: a Megatron run on an H100 keeps every GPU and Megatron word."""
    summary = json.loads(GPU_SUMMARY.read_text())
    assert what_ran(summary) == Ran(gpu=True, megatron=True)
    text = render_markdown(summary)
    assert "GPU memory per GPU 6.9 GiB" in _section(text, "Job") and "on 1 GPU(s)" in text
    restarts = _section(text, "Checkpoints and restarts")
    assert "| Megatron init | 2.020 s |" in restarts and "| GPU memory reclaim | 0.000 s |" in restarts


def test_a_gpu_machine_with_the_smoke_workload_has_cpu_ranks():
    summary = copy.deepcopy(json.loads(GPU_SUMMARY.read_text()))
    summary["resolved"]["workload"] = "smoke"
    ran = what_ran(summary)
    assert ran.gpu is True and ran.no_gpu and ran.no_model
    assert "Megatron init" not in render_markdown(summary)


def test_unknown_keeps_the_usual_words():
    """A summary that says nothing of GPUs or workload keeps the report's usual (GPU, Megatron) words."""
    assert what_ran({}) == Ran(gpu=None, megatron=None)
    assert not what_ran({}).no_gpu and not what_ran({}).no_model
    assert what_ran({"stack_identity": {"parts": {"gpus": "none (no nvidia-smi)"}}}).gpu is False
    assert what_ran({"stack": {"gpu_count": "unknown"}}).gpu is None


def test_the_faults_table_names_each_time_once(cpu_report):
    _, text = cpu_report
    faults = _section(text, "Faults")
    header = next(line for line in faults.splitlines() if line.startswith("| scenario |"))
    cells = [c.strip() for c in header.strip("|").split("|")]
    assert "restart" not in cells and "detected → new cycle" in cells
    assert "| 0.84 s | 2.35 s | 6.19 s |" in faults  # the verifier's restart_s, under its span's name
    assert "detected → new cycle: detection to the start of the replacement cycle" in faults


def test_world_time_is_gpu_seconds_on_gpus_and_rank_seconds_on_cpu():
    """The cost of a loop and of the restart agent's wrong verdicts: GPU-s where the ranks held GPUs,
    rank-s where they did not (the smoke workload)."""
    summary = json.loads((TESTS / "data/megatron-h100-recurring-1gpu/results/summary.json").read_text())
    gpu = render_markdown(summary)
    assert "| GPU-s burned |" in _section(gpu, "Faults that come back")
    assert "(GPU-s) |" in _section(gpu, "The restart agent's verdicts")
    summary["resolved"]["workload"] = "smoke"
    cpu = render_markdown(summary)
    loops, agent = _section(cpu, "Faults that come back"), _section(cpu, "The restart agent's verdicts")
    assert "| rank-s burned |" in loops and "(rank-s) |" in agent and "GPU-s" not in loops + agent
