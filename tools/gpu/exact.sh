#!/usr/bin/env bash
# Exact recovery on real Megatron-LM on one GPU, in one device call, through the README's command with
# `replay: exact` (deterministic training; exact_replay and checkpoint_equal judge it):
#   OUT=... bash tools/gpu/exact.sh
# the preflight (Megatron's own validate_args with --deterministic-mode), the baseline, kill and hang on rank 0
# (config/megatron-h200.yaml, config/megatron-h200-1gpu.yaml and tools/gpu/exact-1gpu.yaml), then the same
# baseline with `replay: tolerance` for the deterministic mode's cost. Writes $OUT/exact/ and $OUT/exact.tar.gz.
set -u
out=${OUT:-$PWD/exact-out}
LIMIT=${LIMIT:-420} OUT=$out bash tools/gpu/one_call_1gpu.sh exact tools/gpu/exact-1gpu.yaml
source tools/gpu/env.sh >/dev/null 2>&1
# The deterministic mode's cost: the baseline again, not deterministic (the same settings but replay).
mkdir -p "$out/tolerance"
timeout -s INT "${LIMIT2:-120}" snakemake --profile profiles/local --configfile config/megatron-h200.yaml \
    config/megatron-h200-1gpu.yaml tools/gpu/exact-1gpu.yaml --config replay=tolerance \
    'scenarios={kill: {enabled: false}, hang: {enabled: false}}' --resources gpu=1 >"$out/tolerance/workflow.log" 2>&1
echo "[tolerance] exit $?: $(head -n1 results/summary.md 2>/dev/null)"
cp results/summary.md "$out/tolerance/summary.md" 2>/dev/null
for d in runs/baseline-*; do
    printf '%s %s\n' "$d" "$(grep -o '"replay": *"[a-z]*"' "$d/run.json")"
    grep -o 'elapsed time per iteration (ms): [0-9.]*' "$d/logs/train_cycle0.log" | awk '{print $NF}' | sort -n |
        awk '{a[NR]=$1} END {print "  median ms/iteration:", a[int((NR+1)/2)], "over", NR}'
done | tee "$out/tolerance/baselines.txt"
tar czf "$out/exact.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs 2>/dev/null
ls -la "$out"
