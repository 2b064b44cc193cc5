"""The preflight rule's logic (ftqual.workflow.preflight_rule), with `ftqual preflight` replaced by a fake
that writes the report it is told to (or none)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from ftqual.workflow import preflight_rule


@pytest.fixture
def fake_preflight(monkeypatch):
    """Replace the child `ftqual preflight`: writes `report` (None: nothing) to --out, exits `rc`."""
    seen = {}

    def install(report, rc):
        def fake_run(cmd, **kwargs):
            seen["cmd"] = cmd
            if report is not None:
                out = cmd[cmd.index("--out") + 1]
                with open(out, "w") as fh:
                    json.dump(report, fh)
            return subprocess.CompletedProcess(cmd, rc)

        monkeypatch.setattr(preflight_rule.subprocess, "run", fake_run)
        return seen

    return install


def run_rule(tmp_path):
    out = tmp_path / "results" / "preflight" / "p-1" / "preflight.json"
    log, console = io.StringIO(), io.StringIO()
    config = {"b": 1, "a": {"z": 2, "y": 3}}
    rc = preflight_rule.run(config=config, output=out, log_path="logs/p.log", log=log, console=console)
    return rc, out, log.getvalue(), console.getvalue()


def test_the_resolved_config_is_written_beside_the_report_and_given_to_the_preflight(
    tmp_path, fake_preflight
):
    seen = fake_preflight({"verdict": "pass", "checks": []}, 0)
    rc, out, log, console = run_rule(tmp_path)
    assert rc == 0 and console == ""
    config_path = out.with_name("config.json")
    assert config_path.read_text() == '{\n  "a": {\n    "y": 3,\n    "z": 2\n  },\n  "b": 1\n}\n'
    assert seen["cmd"] == [
        sys.executable, "-m", "ftqual", "preflight", "--config", str(config_path), "--out", str(out)
    ]  # fmt: skip
    assert log.splitlines() == ["$ " + " ".join(seen["cmd"]), "preflight verdict: pass (exit 0)"]


def test_a_failed_preflight_is_a_finding_its_failed_checks_on_the_console(tmp_path, fake_preflight):
    checks = [
        {"id": "torch", "status": "pass", "detail": "ok"},
        {"id": "disk", "status": "fail", "detail": "2 GiB free"},
        {"id": "ports", "status": "fail", "detail": "29500 in use"},
    ]
    fake_preflight({"verdict": "fail", "checks": checks}, 1)
    rc, _, log, console = run_rule(tmp_path)
    assert rc == 0
    assert "preflight verdict: fail (exit 1)" in log
    assert console.splitlines() == [
        "ftqual: preflight FAIL disk: 2 GiB free",
        "ftqual: preflight FAIL ports: 29500 in use",
    ]


def test_no_report_at_all_fails_the_job(tmp_path, fake_preflight):
    fake_preflight(None, 2)
    rc, _, log, console = run_rule(tmp_path)
    assert rc == 1
    assert log.splitlines()[-1] == "preflight wrote no report (exit 2); see logs/p.log"
    assert console == ""
