"""Rule `verify`: `ftqual verify <run_dir> [--baseline <baseline run_dir>]` for one scenario's latest run.

The report goes to results/<scenario>/attempts/<run-id>.verify.json (undeclared: it outlives every
failure) and into the rule's log; only a `pass` is copied to the declared output. Any other verdict
fails the job and, with `rerun_failed_verification`, discards results/<scenario>/run.json (Snakemake's
pointer to the run, never evidence), so the next plain run redoes the scenario itself with a fresh run ID.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log

VERDICTS = {0: "pass", 1: "fail", 2: "unreadable input", 3: "inconclusive"}

root = Path(sm.scriptdir).resolve().parent
env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
scenario = sm.wildcards.scenario
run_json = Path(sm.input.run)
run = json.loads(run_json.read_text())
attempt_report = run_json.parent / "attempts" / f"{run['run_id']}.verify.json"
attempt_report.parent.mkdir(parents=True, exist_ok=True)

cmd = [sys.executable, "-m", "ftqual", "verify", run["run_dir"]]
if hasattr(sm.input, "baseline"):
    cmd += ["--baseline", json.loads(Path(sm.input.baseline).read_text())["run_dir"]]
cmd += ["--json", str(attempt_report)]
print("$", " ".join(cmd), file=log)
rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
if attempt_report.exists():
    print(f"--- {attempt_report}", file=log)
    print(attempt_report.read_text(), file=log)

if rc == 0 and attempt_report.exists():
    shutil.copyfile(attempt_report, sm.output[0])
    sys.exit(0)

verdict = VERDICTS.get(rc, f"exit {rc}")
message = f"verification of {scenario} run {run['run_id']}: {verdict}; report kept in {attempt_report}"
if sm.params.discard_failed_run:
    for stale in (run_json, run_json.with_name("fault_injected.json")):
        stale.unlink(missing_ok=True)
    message += f"; discarded {run_json} so the next run redoes the scenario (run dir {run['run_dir']} kept)"
sys.exit(message)
