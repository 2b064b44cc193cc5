#!/usr/bin/env bash
# The 1-GPU qualification under recommended timeouts next to the walkthrough's, in one device call
# (tools/gpu/recommended-1gpu.yaml): the baseline must finish with no timeout firing, the hang under the
# recommendation must be caught within its step timeout plus the rank monitor's interval, and the same hang
# under the walkthrough's values shows what those cost. Writes $OUT/recommended/ (log, summaries, status,
# nvidia-smi) and $OUT/recommended.tar.gz (results, logs, run directories without checkpoint payloads).
set -u
out=${OUT:-$PWD/recommended-out}
mkdir -p "$out/recommended"
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "recommended: the stack could not be set up" >&2; exit 1; }
nvidia-smi --query-gpu=index,memory.used --format=csv >"$out/recommended/gpu.txt" 2>&1
start=$(date +%s)
timeout -s INT "${LIMIT:-540}" snakemake --profile profiles/local --configfile config/megatron-h200.yaml \
    config/megatron-h200-1gpu.yaml tools/gpu/recommended-1gpu.yaml --resources gpu=1 \
    >"$out/recommended/workflow.log" 2>&1
echo "[recommended] exit $? after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
grep -E '^ftqual: [a-z_]+: attempt ' "$out/recommended/workflow.log" | sed 's/^/[recommended]   /'
nvidia-smi --query-gpu=index,memory.used --format=csv >>"$out/recommended/gpu.txt" 2>&1
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/recommended/$f" 2>/dev/null; done
python3 -m ftqual status . >"$out/recommended/status.txt" 2>&1
tar czf "$out/recommended.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs \
    2>/dev/null
ls -la "$out" "$out/recommended"
