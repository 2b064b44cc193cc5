#!/usr/bin/env bash
# The Slurm profile on a GPU in one device call: a real one-node Slurm with the H200 as gres (tools/gpu/slurm_kit.sh, .slurm
# carried), then the README's `snakemake --profile profiles/slurm` with the GPU configs; the preflight and
# every scenario are sbatch jobs. The kit has no slurmdbd, so the plugin is told to poll squeue (the flag
# the profile's last line offers). Writes $OUT/slurm/ (kit log, Slurm's view of the node and the jobs,
# workflow log, report) and $OUT/slurm.tar.gz (results, logs, run directories without checkpoint
# payloads, the plugin's job logs, the kit's daemon logs and configuration).
set -u
out=${OUT:-$PWD/slurm-out}
mkdir -p "$out/slurm"
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "slurm: the stack could not be set up" >&2; exit 1; }
tools/gpu/slurm_kit.sh start >"$out/slurm/kit.log" 2>&1 || { tail -n 20 "$out/slurm/kit.log"; exit 1; }
source /tmp/ftqual-slurm-kit/env.sh
{ sinfo; scontrol show node; } >>"$out/slurm/kit.log" 2>&1
start=$(date +%s)
timeout -s INT "${LIMIT:-540}" snakemake --profile profiles/slurm --configfile config/megatron-h200.yaml \
    config/megatron-h200-1gpu.yaml tools/gpu/slurm-1gpu.yaml --slurm-status-command squeue \
    >"$out/slurm/workflow.log" 2>&1
echo "[slurm] exit $? after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
grep -E '^ftqual: [a-z_]+: attempt |Submitted job|sbatch' "$out/slurm/workflow.log" | head -n 20 | sed 's/^/[slurm]   /'
{ squeue --states=all -o '%i %j %T %M %N %b %C %r'; scontrol show job; } >"$out/slurm/jobs.txt" 2>&1
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/slurm/$f" 2>/dev/null; done
python3 -m ftqual status . >>"$out/slurm/jobs.txt" 2>&1
mkdir -p kit-state && cp -r /tmp/ftqual-slurm-kit/etc /tmp/ftqual-slurm-kit/log kit-state/ 2>/dev/null
tar czf "$out/slurm.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs \
    .snakemake/slurm_logs kit-state 2>/dev/null
tools/gpu/slurm_kit.sh stop >/dev/null 2>&1
ls -la "$out" "$out/slurm"
