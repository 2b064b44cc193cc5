"""Rule `summary`: `ftqual report` over the current attempt of every scenario and the preflight -> results/.

The report is written whatever the verdicts are; the `gate` rule after it turns the verdict into the
workflow's exit code.
"""

import subprocess
import sys
from pathlib import Path

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log

cmd = [sys.executable, "-m", "ftqual", "report", "--preflight", sm.input.preflight]
cmd += ["--baseline", sm.params.baseline]
for name in sm.params.scenarios:
    cmd += ["--verify", f"{name}={sm.input[name]}", "--attempt", f"{name}={sm.params.attempts[name]}"]
cmd += ["--out", str(Path(sm.output.json).parent)]
print("$", " ".join(cmd), file=log)
rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
if rc != 0:
    sys.exit(f"ftqual report failed (exit {rc})")
