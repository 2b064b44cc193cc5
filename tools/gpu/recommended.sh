#!/usr/bin/env bash
# The baseline and the hang on one H200 under recommended timeouts (tools/gpu/recommended-1gpu.yaml): the
# baseline must finish with no timeout firing, the hang must be caught within the recommended step timeout
# plus the rank monitor's interval. Writes $OUT/recommended/.
set -u
out=${OUT:-$PWD/recommended-out}/recommended
mkdir -p "$out"
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "recommended: the stack could not be set up" >&2; exit 1; }
start=$(date +%s)
timeout -s INT "${LIMIT:-300}" snakemake --profile profiles/local --configfile config/megatron-h200.yaml \
    config/megatron-h200-1gpu.yaml tools/gpu/recommended-1gpu.yaml --resources gpu=1 >"$out/workflow.log" 2>&1
echo "[recommended] exit $? after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/$f" 2>/dev/null; done
