"""Rule `preflight`: write the resolved config, run `ftqual preflight`, stop the workflow on a failed verdict.

Everything (the command's output and the JSON report) goes to the rule's log, which survives a failure;
Snakemake removes results/preflight.json when this exits non-zero, so no run starts.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log

root = Path(sm.scriptdir).resolve().parent
env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
out = Path(sm.output[0])
config_path = out.with_name("preflight.config.json")
config_path.parent.mkdir(parents=True, exist_ok=True)
config_path.write_text(json.dumps(sm.params.config, indent=2, sort_keys=True) + "\n")

cmd = [sys.executable, "-m", "ftqual", "preflight", "--config", str(config_path), "--out", str(out)]
print("$", " ".join(cmd), file=log)
rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
if out.exists():
    print(f"--- {out}", file=log)
    print(out.read_text(), file=log)
if rc != 0:
    sys.exit(f"preflight failed (exit {rc}): no run will start; see the checks above and their fixes")
