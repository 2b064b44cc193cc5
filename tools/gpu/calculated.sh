#!/usr/bin/env bash
# NVRx's calculated timeouts on one H200 (tools/gpu/calculated-1gpu.yaml), in one device call: baseline
# and a two-hang run under calc_ft_timeouts; the report's "Calculated timeouts" part lists the values NVRx
# chose in each cycle. Writes $OUT/calculated/ (log, summaries, status, nvidia-smi) and $OUT/calculated.tar.gz
# (results, logs, run directories without checkpoint payloads).
set -u
out=${OUT:-$PWD/calculated-out}
mkdir -p "$out/calculated"
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "calculated: the stack could not be set up" >&2; exit 1; }
nvidia-smi --query-gpu=index,memory.used --format=csv >"$out/calculated/gpu.txt" 2>&1
start=$(date +%s)
timeout -s INT "${LIMIT:-330}" snakemake --profile profiles/local --configfile config/megatron-h200.yaml \
    config/megatron-h200-1gpu.yaml tools/gpu/calculated-1gpu.yaml --resources gpu=1 \
    >"$out/calculated/workflow.log" 2>&1
echo "[calculated] exit $? after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
grep -E '^ftqual: [a-z_]+: attempt ' "$out/calculated/workflow.log" | sed 's/^/[calculated]   /'
nvidia-smi --query-gpu=index,memory.used --format=csv >>"$out/calculated/gpu.txt" 2>&1
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/calculated/$f" 2>/dev/null; done
python3 -m ftqual status . >"$out/calculated/status.txt" 2>&1
tar czf "$out/calculated.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs \
    2>/dev/null
ls -la "$out" "$out/calculated"
