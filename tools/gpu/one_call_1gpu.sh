#!/usr/bin/env bash
# One workflow run on one H200 in one device call, its evidence brought back through $OUT:
#   tools/gpu/one_call_1gpu.sh NAME [CONFIG ...]
# runs `snakemake --profile profiles/local --configfile config/megatron-h200.yaml config/megatron-h200-1gpu.yaml
# CONFIG... --resources gpu=1` under `timeout -s INT $LIMIT` (default 540 s, so that what follows fits the
# call), then writes $OUT/NAME/ (workflow.log, summary.md/json, junit.xml, `ftqual status`, nvidia-smi before
# and after) and $OUT/NAME.tar.gz (results, logs, run directories without checkpoint payloads). The stack
# comes from tools/gpu/env.sh (.whl, .megatron carried).
set -u
name=${1:?usage: tools/gpu/one_call_1gpu.sh NAME [CONFIG ...]}
shift
out=${OUT:-$PWD/$name-out}
mkdir -p "$out/$name"
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "$name: the stack could not be set up" >&2; exit 1; }
nvidia-smi --query-gpu=index,memory.used --format=csv >"$out/$name/gpu.txt" 2>&1
start=$(date +%s)
timeout -s INT "${LIMIT:-540}" snakemake --profile profiles/local --configfile config/megatron-h200.yaml \
    config/megatron-h200-1gpu.yaml "$@" --resources gpu=1 >"$out/$name/workflow.log" 2>&1
echo "[$name] exit $? after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
grep -E '^ftqual: [a-z_]+: attempt ' "$out/$name/workflow.log" | sed "s/^/[$name]   /"
nvidia-smi --query-gpu=index,memory.used --format=csv >>"$out/$name/gpu.txt" 2>&1
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/$name/$f" 2>/dev/null; done
python3 -m ftqual status . >"$out/$name/status.txt" 2>&1
tar czf "$out/$name.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs \
    2>/dev/null
ls -la "$out" "$out/$name"
