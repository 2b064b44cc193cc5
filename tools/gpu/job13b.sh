#!/usr/bin/env bash
# The 1.3b preset (18.4 GB checkpoints with their optimizer state) on one H200, in one device call, through
# the README's command with config/megatron-h200-1.3b.yaml, payloads dropped once each run is verified; then the
# timeouts its own sections recommend (`ftqual recommend-timeouts`).
# A call of at most 10 minutes holds two of these runs: the first call runs the baseline and the kill
# (tools/gpu/job13b-a.yaml), `tools/gpu/job13b.sh proof` the baseline and the hang under the timeouts the first
# recommended (tools/gpu/job13b-recommended.yaml, committed from it; tools/gpu/job13b-b.yaml).
# Writes $OUT/<name>/ (workflow.log, summary, df before and after, the recommendation) and $OUT/<name>.tar.gz.
set -u
out=${OUT:-$PWD/job13b-out}
name=job13b
extra=(tools/gpu/job13b-a.yaml)
if [[ "${1:-}" == proof ]]; then
    name=job13b-proof
    extra=(tools/gpu/job13b-recommended.yaml tools/gpu/job13b-b.yaml)
fi
mkdir -p "$out/$name"
df -B1 . /tmp >"$out/$name/df.txt" 2>&1
LIMIT=${LIMIT:-545} OUT=$out bash tools/gpu/one_call_1gpu.sh "$name" config/megatron-h200-1.3b.yaml "${extra[@]}"
df -B1 . /tmp >>"$out/$name/df.txt" 2>&1
source tools/gpu/env.sh >/dev/null 2>&1
python3 -m ftqual recommend-timeouts results >"$out/$name/recommend.txt" 2>&1
cp results/timeouts-recommended.yaml "$out/$name/" 2>/dev/null
du -sh runs/*/checkpoints 2>/dev/null >>"$out/$name/df.txt"
