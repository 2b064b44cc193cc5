"""Rule `preflight`: write the resolved config beside the report, run `ftqual preflight` on it.

The report holds the verdict, pass or fail: a failed preflight is a finding, reported by the summary, and
each scenario's attempt then records that nothing was launched. The job fails only when no report came
out at all (the command could not run), and then the summary is rebuilt from what exists.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO


def run(
    *,
    config: Mapping[str, Any],
    output: str | Path,
    log_path: str | Path,
    log: TextIO,
    console: TextIO | None = None,
) -> int:
    """The rule's job: `ftqual preflight` on `config` (written as config.json beside `output`). Returns 0
    whenever a report came out, whatever its verdict; 1 when none did. A failed check's line also goes to
    `console` (the original stderr when None)."""
    out = Path(output)
    config_path = out.with_name("config.json")
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    cmd = [sys.executable, "-m", "ftqual", "preflight", "--config", str(config_path), "--out", str(out)]
    print("$", " ".join(cmd), file=log)
    rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
    if not out.exists():
        # What sys.exit(message) printed: the message on the rule's stderr (its log), exit 1.
        print(f"preflight wrote no report (exit {rc}); see {log_path}", file=log)
        return 1
    report = json.loads(out.read_text())
    verdict = report.get("verdict")
    print(f"preflight verdict: {verdict} (exit {rc})", file=log)
    if verdict == "fail":
        failed = [c for c in report["checks"] if c["status"] == "fail"]
        for check in failed:
            print(f"ftqual: preflight FAIL {check['id']}: {check['detail']}", file=console or sys.__stderr__)
    return 0
