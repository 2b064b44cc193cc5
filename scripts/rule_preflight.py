"""Rule `preflight`: write the resolved config beside the report, run `ftqual preflight` on it.

The report holds the verdict, pass or fail: a failed preflight is a finding, reported by the summary, and
each scenario's attempt then records that nothing was launched. The job fails only when no report came
out at all (the command could not run), and then the summary is rebuilt from what exists.
"""

import json
import subprocess
import sys
from pathlib import Path

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log

out = Path(sm.output[0])
config_path = out.with_name("config.json")
config_path.parent.mkdir(parents=True, exist_ok=True)
config_path.write_text(json.dumps(sm.params.config, indent=2, sort_keys=True) + "\n")

cmd = [sys.executable, "-m", "ftqual", "preflight", "--config", str(config_path), "--out", str(out)]
print("$", " ".join(cmd), file=log)
rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
if not out.exists():
    sys.exit(f"preflight wrote no report (exit {rc}); see {sm.log[0]}")
verdict = json.loads(out.read_text()).get("verdict")
print(f"preflight verdict: {verdict} (exit {rc})", file=log)
if verdict == "fail":
    failed = [c for c in json.loads(out.read_text())["checks"] if c["status"] == "fail"]
    for check in failed:
        print(f"ftqual: preflight FAIL {check['id']}: {check['detail']}", file=sys.__stderr__)
