#!/usr/bin/env bash
# The ranks' stack dumps on one H200 in one device call: config/faults.yaml's exception (its linger measured
# whole under a 60 s step timeout, and cut by a 10 s one) and gil_lock, with py-spy from .whl:
#   tools/gpu/dumps.sh
# Writes what tools/gpu/one_call_1gpu.sh writes (as $OUT/dumps/, $OUT/dumps.tar.gz) plus the preflight's
# stack_dumps line.
set -u
export LIMIT=${LIMIT:-560}
bash tools/gpu/one_call_1gpu.sh dumps config/faults.yaml tools/gpu/dumps-1gpu.yaml
out=${OUT:-$PWD/dumps-out}
grep -h '"stack_dumps"' -A 3 results/preflight/*/preflight.json >"$out/dumps/preflight-stack-dumps.txt" 2>&1
ls runs/*/dumps >"$out/dumps/dumps.txt" 2>&1
