"""Rule `summary`: `ftqual report` over every scenario's verify report (and the preflight) -> results/."""

import os
import subprocess
import sys
from pathlib import Path

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log

root = Path(sm.scriptdir).resolve().parent
env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
cmd = [
    sys.executable,
    "-m",
    "ftqual",
    "report",
    "--preflight",
    sm.input.preflight,
    "--baseline",
    sm.params.baseline,
]
for spec in sm.params.verify:
    cmd += ["--verify", spec]
cmd += ["--out", str(Path(sm.output.json).parent)]
print("$", " ".join(cmd), file=log)
rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
if rc != 0:
    sys.exit(f"ftqual report failed (exit {rc})")
