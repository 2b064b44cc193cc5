#!/usr/bin/env bash
# A workflow killed outright while its scenario trains on the GPU under Slurm, then the same command again,
# in one device call. The first `snakemake --profile profiles/slurm` (tools/gpu/slurm.sh's command) is
# SIGKILLed, Snakemake alone, once the kill scenario's rank is training; its Slurm jobs train on. The rerun
# must cancel them before it submits anything (ftqual/workflow/slurm_orphans.py), redo the scenarios that did not
# finish, and PASS. Writes $OUT/interrupt/ (kit log, both workflow logs, Slurm's and the GPU's view between
# the two, the report) and $OUT/interrupt.tar.gz (results, logs, run directories without checkpoint
# payloads, the plugin's job logs).
set -u
out=${OUT:-$PWD/slurm-out}/interrupt
mkdir -p "$out"
say() { echo "[interrupt] $*" | tee -a "$out/steps.log"; }
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "interrupt: the stack could not be set up" >&2; exit 1; }
tools/gpu/slurm_kit.sh start >"$out/kit.log" 2>&1 || { tail -n 20 "$out/kit.log"; exit 1; }
source /tmp/ftqual-slurm-kit/env.sh
cmd=(snakemake --profile profiles/slurm --configfile config/megatron-h200.yaml config/megatron-h200-1gpu.yaml
    tools/gpu/slurm-1gpu.yaml tools/gpu/slurm-interrupt-1gpu.yaml --slurm-status-command squeue)
start=$(date +%s)
setsid "${cmd[@]}" >"$out/first.log" 2>&1 &
first=$!
for _ in $(seq 1 400); do
    ls runs/kill-*/pids/*.rank0.json >/dev/null 2>&1 && break
    kill -0 "$first" 2>/dev/null || break
    sleep 1
done
sleep 5
squeue -h -o '%i %T %k' >"$out/queue-before.txt"
kill -9 "$first"
say "SIGKILL to Snakemake (pid $first) after $(($(date +%s) - start)) s; its jobs: $(tr '\n' ';' <"$out/queue-before.txt")"
sleep 5
{ squeue -h -o '%i %T %k'; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; } \
    >"$out/between.txt" 2>&1
say "5 s later, queue and GPU processes: $(tr '\n' ';' <"$out/between.txt")"
again=$(date +%s)
timeout -s INT "${LIMIT:-420}" "${cmd[@]}" >"$out/again.log" 2>&1
say "rerun exit $? after $(($(date +%s) - again)) s: $(head -n1 results/summary.md 2>/dev/null)"
grep -E '^ftqual: (cancelled|released|[a-z_]+: attempt)' "$out/again.log" | sed 's/^/[interrupt]   /'
{ squeue --states=all -o '%i %j %T %M %N %b %k'; scontrol show job; } >"$out/jobs.txt" 2>&1
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/$f" 2>/dev/null; done
tar czf "$out/../interrupt.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs \
    .snakemake/slurm_logs 2>/dev/null
tools/gpu/slurm_kit.sh stop >/dev/null 2>&1
ls -la "$out"
