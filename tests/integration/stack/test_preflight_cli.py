"""`python -m ftqual preflight` for real on this machine: exit codes, the JSON shape, the summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
STACK_KEYS = {
    "python",
    "torch",
    "cuda",
    "nccl",
    "gpu_model",
    "gpu_count",
    "driver",
    "nvrx",
    "megatron",
    "transformer_engine",
    "apex",
    "host",
}


def preflight(
    tmp_path: Path, config: str | Path, *extra: str, env: dict | None = None, suffix: str = ".yaml"
) -> tuple[subprocess.CompletedProcess, dict | None]:
    if isinstance(config, str):
        path = tmp_path / f"config{suffix}"
        path.write_text(config)
    else:
        path = config
    out = tmp_path / "results" / "preflight.json"
    run_env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": "/tmp", **(env or {})}
    run_env.pop("NVRX_NODE_LOCAL_TMPDIR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ftqual", "preflight", "--config", str(path), "--out", str(out), *extra],
        capture_output=True,
        text=True,
        env=run_env,
        cwd=tmp_path,
        timeout=300,
    )
    report = json.loads(out.read_text()) if out.exists() else None
    return proc, report


def checks(report: dict) -> dict[str, dict]:
    return {c["id"]: c for c in report["checks"]}


def test_default_smoke_config_passes(tmp_path):
    proc, report = preflight(tmp_path, f"work_dir: {tmp_path / 'work'}\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["schema"] == "ftqual.preflight/v1" and report["verdict"] in ("pass", "warn")
    assert report["created_at"].endswith("Z")
    assert STACK_KEYS <= set(report["stack"])
    assert report["resolved"]["workload"] == "smoke" and report["resolved"]["megatron_flags"] == []
    for c in report["checks"]:
        assert set(c) == {"id", "status", "detail", "fix"} and c["status"] in ("pass", "warn", "fail", "skip")
    by = checks(report)
    assert by["ft_launcher_flags"]["status"] == "pass"
    assert by["gpus"]["status"] == "skip"
    # one summary line per check, then the verdict
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(report["checks"]) + 1 and lines[-1].startswith("preflight: ")
    assert not (tmp_path / "work").exists()  # preflight creates nothing in the work dir


def test_the_workflows_own_config_passes(tmp_path):
    proc, report = preflight(tmp_path, REPO / "config" / "config.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_megatron_without_a_megatron_path_fails_with_a_fix(tmp_path):
    proc, report = preflight(tmp_path, "workload: megatron\nmegatron_path: ''\n", env={"MEGATRON_PATH": ""})
    assert proc.returncode == 1
    assert report["verdict"] == "fail"
    mp = checks(report)["megatron_path"]
    assert mp["status"] == "fail" and "MEGATRON_PATH" in mp["fix"]
    assert "FAIL megatron_path" in proc.stdout and "fix:" in proc.stdout
    # flags are still checked without a Megatron tree
    assert checks(report)["ft_launcher_flags"]["status"] == "pass"


def test_megatron_with_a_fake_tree_reads_its_version_without_importing_it(tmp_path):
    mlm = tmp_path / "mlm"
    (mlm / "megatron" / "core" / "datasets").mkdir(parents=True)
    (mlm / "pretrain_gpt.py").write_text("raise SystemExit('must never run')\n")
    (mlm / "megatron" / "core" / "package_info.py").write_text(
        "raise SystemExit('never imported')\nMAJOR = 0\nMINOR = 19\nPATCH = 1\nPRE_RELEASE = ''\n"
    )
    proc, report = preflight(tmp_path, f"workload: megatron\nmegatron_path: {mlm}\ndist_optimizer: 'on'\n")
    by = checks(report)
    assert report["stack"]["megatron"] == "0.19.1"
    assert by["megatron_path"]["status"] == "pass" and by["megatron_version"]["status"] == "pass"
    if report["stack"]["transformer_engine"] is None and report["stack"]["apex"] is None:
        assert by["dist_optimizer"]["status"] == "fail"
    assert proc.returncode == 1  # no GPUs here (or no TE/Apex with dist_optimizer on)


def test_long_tmpdir_fails(tmp_path):
    long_tmp = tmp_path / ("t" * 90)
    long_tmp.mkdir()
    proc, report = preflight(tmp_path, "workload: smoke\n", env={"TMPDIR": str(long_tmp)})
    assert proc.returncode == 1
    assert checks(report)["tmpdir"]["fix"] == "export TMPDIR=/tmp"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (None, "cannot read config"),
        ("workload: [smoke\n", "not valid YAML"),
        ("nnodes: two\n", "invalid config at nnodes"),
        ("checkpoint_dirs: /x\n", "unknown setting"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, text, words):
    config = tmp_path / "missing.yaml" if text is None else text
    proc, report = preflight(tmp_path, config)
    assert proc.returncode == 2 and report is None
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_json_config(tmp_path):
    proc, report = preflight(
        tmp_path, json.dumps({"workload": "smoke", "work_dir": str(tmp_path)}), suffix=".json"
    )
    assert proc.returncode == 0 and report["resolved"]["workload"] == "smoke"
