#!/usr/bin/env bash
# The compatibility matrix on the GPU machine: Megatron-LM trees x NVRx versions, one workflow per cell
# (`snakemake --profile profiles/local` with config/megatron-h200.yaml, config/megatron-h200-1gpu.yaml and
# tools/gpu/matrix.yaml, `--resources gpu=1` so that a cell's scenarios take turns on the GPU), all cells at
# once on GPU 0, each in its own copy of the project.
#
#   tools/gpu/matrix.sh CELL=MEGATRON_TARBALL:NVRX_VERSION [...]
#
# Run from the project root (PROJECT=DIR: copy the project from DIR instead, e.g. a `git archive`
# snapshot); .whl/ holds wheels of NVRx 0.7.0, Snakemake and their needs for an offline machine
# (`pip download` them where there is a network), .nvrx-alt/ other NVRx
# wheels (nvidia_resiliency_ext-<version>-*.whl, installed over it, with what they need beyond the 0.7.0 set
# in .nvrx-alt/deps/: nv-one-logger for 0.5.0), .megatron/ the `git archive` tarballs.
# Writes $OUT/<cell>.tar.gz (workflow log, results, run directories without checkpoint payloads) and
# $OUT/matrix.log. Cells run concurrently: NVRx's GPU-memory wait after a fault sees the other cells'
# memory on the shared GPU, so restart times here are not benchmarks (docs/benchmarks.md has those).
set -u
root=$(pwd)
project=$(cd "${PROJECT:-$root}" && pwd)  # the project tree each cell copies (a snapshot, or this checkout)
out=${OUT:-$root/matrix-out}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 TZ=UTC
pipi() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$@" >/dev/null 2>&1; }
pipi /tmp/site .whl/*.whl || { echo "cannot install .whl" >&2; exit 1; }
say() { echo "[matrix $(date -u +%FT%T)] $*" | tee -a "$out/matrix.log"; }

cell() {  # name tarball nvrx
    local name=$1 tarball=$2 nvrx=$3 d=/tmp/cells/$1
    mkdir -p "$d/mlm" "$d/proj"
    tar xzf ".megatron/$tarball" -C "$d/mlm" && make -s -C "$d/mlm/megatron/core/datasets" >/dev/null 2>&1
    cp -r "$project/." "$d/proj"
    local pypath=/tmp/site path=/tmp/site/bin:$PATH
    if [ "$nvrx" != 0.7.0 ]; then
        [ -d "/tmp/nvrx-$nvrx" ] || { say "$name: no NVRx $nvrx wheel in .nvrx-alt"; return; }
        pypath=/tmp/nvrx-$nvrx:/tmp/site path=/tmp/nvrx-$nvrx/bin:$path
    fi
    say "$name: start (Megatron $tarball, NVRx $nvrx)"
    local start
    start=$(date +%s)
    (cd "$d/proj" && PYTHONPATH="$pypath:$d/proj" PATH="$path" timeout -s INT "${CELL_TIMEOUT:-540}" \
        snakemake --profile profiles/local --configfile config/megatron-h200.yaml \
        config/megatron-h200-1gpu.yaml tools/gpu/matrix.yaml --resources gpu=1 \
        --config "work_dir=$d/work" "megatron_path=$d/mlm" >"$d/workflow.log" 2>&1)
    local rc=$?
    say "$name: workflow exit $rc after $(($(date +%s) - start)) s: $(grep -m1 '^# ftqual' "$d/proj/results/summary.md" 2>/dev/null)"
    tar czf "$out/$name.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ -C "$d" \
        workflow.log proj/results proj/junit.xml proj/logs work 2>/dev/null
}

for spec in "$@"; do  # other NVRx versions go into their own folders, put before /tmp/site
    nvrx=${spec##*:}
    [ "$nvrx" = 0.7.0 ] || [ -d "/tmp/nvrx-$nvrx" ] ||
        pipi "/tmp/nvrx-$nvrx" .nvrx-alt/nvidia_resiliency_ext-"$nvrx"-*.whl .nvrx-alt/deps/*.whl ||
        rm -rf "/tmp/nvrx-$nvrx"
done
for spec in "$@"; do
    name=${spec%%=*} rest=${spec#*=}
    cell "$name" "${rest%%:*}" "${rest#*:}" &
done
wait
say "done"
