"""Rule `gate`: publish the current attempts' report, and make its verdict the workflow's exit code.

Copies results/reports/<attempts>/ to results/summary.json, summary.md, junit.xml and plots/ (replacing
what an earlier run left there), then exits 0 only when that summary covers exactly the current attempts
(the same slot for every scenario) and its verdict is pass; otherwise it prints the headline and every
scenario's cause, and exits 1.
"""

import json
import shutil
import sys
from pathlib import Path

sm = snakemake  # noqa: F821 - injected by Snakemake's script directive
log = open(sm.log[0], "w", buffering=1)
sys.stderr = log
RESULTS = Path("results")


def say(line):
    print(line, file=log)
    print(line, file=sys.__stderr__, flush=True)


def publish(report_dir):
    for name in ("summary.json", "summary.md", "junit.xml"):
        tmp = RESULTS / f".{name}.tmp"
        shutil.copyfile(report_dir / name, tmp)
        tmp.replace(RESULTS / name)
    plots = RESULTS / "plots"
    if plots.is_dir():
        shutil.rmtree(plots)  # copies of an earlier report's plots, never evidence
    shutil.copytree(report_dir / "plots", plots)


report_dir = Path(sm.params.report_dir)
summary = json.loads((report_dir / "summary.json").read_text())
expected = dict(sm.params.attempts)
if summary.get("attempts") != expected:
    say(
        f"ftqual: FAIL — {report_dir}/summary.json describes other attempts ({summary.get('attempts')}) "
        f"than the current ones ({expected}); rerun the workflow"
    )
    sys.exit(1)
publish(report_dir)
say(summary.get("headline", "ftqual: no headline"))
for sc in summary.get("scenarios", []):
    line = f"  {sc['name']}: {sc['verdict'].upper()}"
    if sc["verdict"] != "pass":
        line += f" — {sc.get('cause') or sc.get('reason') or 'see results/summary.md'}"
    say(line)
say("report: results/summary.md, results/junit.xml")
sys.exit(0 if summary.get("verdict") == "pass" else 1)
