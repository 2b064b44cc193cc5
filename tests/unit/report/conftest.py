"""Verify reports for the report tests: real verifier output for the recorded H200 runs, plus hand-made ones.

`hang.verify.json` in data/ is synthetic (there is no recorded hang run): the kill report reshaped with the
timings a SIGSTOP inside `step` gives (121 s detection, 16 s restart). Failing variants are made in the tests
by editing copies of these documents.
"""

from __future__ import annotations

import copy
import json
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def _junit_counts(path: Path) -> dict[str, dict[str, int]]:
    """Per testsuite: tests, failures, errors, skipped, counted from the elements and checked against the
    attributes the file declares."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    out = {}
    for suite in root.findall("testsuite"):
        cases = suite.findall("testcase")
        counted = {
            "tests": len(cases),
            "failures": sum(c.find("failure") is not None for c in cases),
            "errors": sum(c.find("error") is not None for c in cases),
            "skipped": sum(c.find("skipped") is not None for c in cases),
        }
        declared = {k: int(suite.get(k)) for k in counted}
        assert counted == declared, (suite.get("name"), counted, declared)
        out[suite.get("name")] = counted
    totals = {k: sum(s[k] for s in out.values()) for k in ("tests", "failures", "errors", "skipped")}
    assert totals == {k: int(root.get(k)) for k in totals}
    return out


@pytest.fixture(scope="session")
def png_size():
    return _png_size


@pytest.fixture(scope="session")
def junit_counts():
    return _junit_counts


@pytest.fixture(scope="session")
def report_main():
    """`ftqual report ARGS` in this process (faster than a subprocess); returns the exit code."""
    from ftqual.report import main

    return lambda *args: main(list(args))


@pytest.fixture(scope="session")
def cli(repo_root):
    """Run `python -m ftqual ARGS` from the project root."""
    return lambda *args: run_cli(*args, cwd=repo_root)


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ftqual", *args], capture_output=True, text=True, timeout=300, cwd=cwd
    )


@pytest.fixture(scope="session")
def real_reports(shared_fixtures, tmp_path_factory, repo_root) -> dict[str, Path]:
    """verify.json of baseline-2gpu and kill-2gpu, written by `ftqual verify` (the CLI) from copies."""
    root = tmp_path_factory.mktemp("verified")
    runs = {}
    for name in ("baseline-2gpu", "kill-2gpu"):
        runs[name] = root / "runs" / name
        shutil.copytree(shared_fixtures / name, runs[name])
    out = {}
    for scenario, run, extra in (
        ("baseline", "baseline-2gpu", []),
        ("kill", "kill-2gpu", ["--baseline", str(runs["baseline-2gpu"])]),
    ):
        target = root / "results" / scenario / "verify.json"
        target.parent.mkdir(parents=True)
        proc = run_cli("verify", str(runs[run]), *extra, "--json", str(target), cwd=repo_root)
        assert target.is_file(), f"ftqual verify wrote no report: {proc.stdout}\n{proc.stderr}"
        out[scenario] = target
    return out


@pytest.fixture(scope="session")
def real_docs(real_reports) -> dict[str, dict]:
    return {name: json.loads(path.read_text()) for name, path in real_reports.items()}


@pytest.fixture
def docs(real_docs) -> dict[str, dict]:
    """Writable copies: baseline and kill (real), hang (hand-made)."""
    out = copy.deepcopy(real_docs)
    out["hang"] = json.loads((DATA / "hang.verify.json").read_text())
    return out


@pytest.fixture
def write_docs(tmp_path):
    """Write {scenario: doc} as results/<scenario>/verify.json; returns the results directory."""

    def _write(docs: dict[str, dict | str], results: Path | None = None) -> Path:
        results = results or tmp_path / "results"
        for name, doc in docs.items():
            target = results / name / "verify.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return results

    return _write


PREFLIGHT: dict = {
    "schema": "ftqual.preflight/v1",
    "verdict": "warn",
    "created_at": "2026-11-29T14:10:00Z",
    "checks": [{"id": "python", "status": "pass", "detail": "3.12.3", "fix": ""}],
    "stack": {
        "python": "3.12.3",
        "torch": "2.11.0",
        "cuda": "13.0",
        "nccl": "2.27.7",
        "gpu_model": "NVIDIA H200",
        "gpu_count": 2,
        "driver": "580.95.05",
        "nvrx": "0.7.0",
        "megatron": "0.19.1",
        "transformer_engine": None,
        "apex": None,
        "host": "gpu-node-1",
    },
    "resolved": {
        "workload": "megatron",
        "transformer_impl": "local",
        "dist_optimizer": False,
        "megatron_flags": ["--transformer-impl", "local", "--no-gradient-accumulation-fusion"],
        "reasons": {
            "dist_optimizer": "no TE and no Apex: a distributed-optimizer checkpoint does not resume"
        },
    },
}


@pytest.fixture(scope="session")
def preflight_doc() -> dict:
    return copy.deepcopy(PREFLIGHT)
