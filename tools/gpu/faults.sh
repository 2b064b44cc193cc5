#!/usr/bin/env bash
# config/faults.yaml (NVRx's fault catalog) on one H200, every fault on rank 0, in two device calls (one 600 s
# call holds the baseline and three or four faults, about 110 s each):
#   tools/gpu/faults.sh first    # baseline, gpu_error, gpu_hang, gil_lock, segfault (tools/gpu/faults-first.yaml)
#   tools/gpu/faults.sh second   # the first call's results/, runs/ and logs/ carried back (carry them): abort,
#                                # exception, sigterm and whatever the first call did not finish
#                                # (tools/gpu/faults-second.yaml); the earlier attempts are reused
#   tools/gpu/faults.sh third    # the same, carried again: the whole catalog (sigint is what is left)
# Source of the stack: tools/gpu/env.sh (.whl, .megatron). Writes $OUT/<part>.log, the summaries,
# $OUT/gpu-<part>.txt (nvidia-smi around the workflow) and $OUT/faults.tar.gz (results, logs, run
# directories without checkpoint payloads).
set -u
part=${1:?usage: tools/gpu/faults.sh first|second|third}
out=${OUT:-$PWD/faults-out}
mkdir -p "$out"
source tools/gpu/env.sh || { echo "faults: the stack could not be set up" >&2; exit 1; }
configs=(config/megatron-h200.yaml config/megatron-h200-1gpu.yaml config/faults.yaml tools/gpu/faults-1gpu.yaml)
case $part in
first) configs+=(tools/gpu/faults-first.yaml) ;;
second) configs+=(tools/gpu/faults-second.yaml) ;;
third) ;;
*) echo "usage: tools/gpu/faults.sh first|second|third" >&2; exit 2 ;;
esac
# The GPU before and after: a fault that left a process or memory behind shows here too.
nvidia-smi --query-gpu=index,memory.used --format=csv >"$out/gpu-$part.txt" 2>&1
start=$(date +%s)
timeout -s INT "${LIMIT:-520}" snakemake --profile profiles/local --configfile "${configs[@]}" --resources gpu=1 \
    >"$out/$part.log" 2>&1
rc=$?
echo "[faults] $part: exit $rc after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
grep -E '^ftqual: [a-z_]+: attempt ' "$out/$part.log" | sed 's/^/[faults]   /'
{ nvidia-smi --query-gpu=index,memory.used --format=csv; nvidia-smi --query-compute-apps=pid,used_memory \
    --format=csv; } >>"$out/gpu-$part.txt" 2>&1
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/$part-$f" 2>/dev/null; done
python3 -m ftqual status . >"$out/status-$part.txt" 2>&1
tar czf "$out/faults.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs \
    2>/dev/null
ls -la "$out"
