#!/usr/bin/env bash
# A hang in every FT section on one H200 (tools/gpu/sections-1gpu.yaml), in one device call: setup (in the
# replacement's setup, after its checkpoint load), checkpointing (inside an asynchronous save) and out of
# section (right after a step's section closed), each caught by its own section's timeout, and a baseline
# under the same tight timeouts. Writes $OUT/sections/ (log, summaries, status, nvidia-smi) and
# $OUT/sections.tar.gz (results, logs, run directories without checkpoint payloads).
set -u
out=${OUT:-$PWD/sections-out}
mkdir -p "$out/sections"
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "sections: the stack could not be set up" >&2; exit 1; }
nvidia-smi --query-gpu=index,memory.used --format=csv >"$out/sections/gpu.txt" 2>&1
start=$(date +%s)
timeout -s INT "${LIMIT:-540}" snakemake --profile profiles/local --configfile config/megatron-h200.yaml \
    config/megatron-h200-1gpu.yaml config/timeouts.yaml tools/gpu/sections-1gpu.yaml --resources gpu=1 \
    >"$out/sections/workflow.log" 2>&1
echo "[sections] exit $? after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
grep -E '^ftqual: [a-z_]+: attempt ' "$out/sections/workflow.log" | sed 's/^/[sections]   /'
nvidia-smi --query-gpu=index,memory.used --format=csv >>"$out/sections/gpu.txt" 2>&1
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/sections/$f" 2>/dev/null; done
python3 -m ftqual status . >"$out/sections/status.txt" 2>&1
tar czf "$out/sections.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs \
    2>/dev/null
ls -la "$out" "$out/sections"
