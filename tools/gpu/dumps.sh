#!/usr/bin/env bash
# The ranks' stack dumps on one H200 in one device call, with py-spy from .whl:
#   tools/gpu/dumps.sh         config/faults.yaml's exception (its linger measured whole under a 60 s step
#                              timeout, and cut by a 10 s one) and gil_lock (tools/gpu/dumps-1gpu.yaml)
#   tools/gpu/dumps.sh live    hang, gpu_hang and sigint (tools/gpu/dumps-live-1gpu.yaml)
# Writes what tools/gpu/one_call_1gpu.sh writes (as $OUT/dumps[-live]/, $OUT/dumps[-live].tar.gz) plus the
# preflight's stack_dumps line and the list of dumps.
set -u
part=${1:-}
name=dumps${part:+-$part}
export LIMIT=${LIMIT:-560}
bash tools/gpu/one_call_1gpu.sh "$name" config/faults.yaml "tools/gpu/$name-1gpu.yaml"
out=${OUT:-$PWD/$name-out}
grep -h '"stack_dumps"' -A 3 results/preflight/*/preflight.json >"$out/$name/preflight-stack-dumps.txt" 2>&1
ls runs/*/dumps >"$out/$name/dumps.txt" 2>&1
