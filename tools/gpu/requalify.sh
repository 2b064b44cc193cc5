#!/usr/bin/env bash
# Requalify after an upgrade of the Megatron-LM tree at the same MEGATRON_PATH, on the GPU machine:
#   tools/gpu/requalify.sh FIRST_TARBALL SECOND_TARBALL      (names in .megatron/, e.g. mlm.tar.gz mlm-v0.16.tar.gz)
#   tools/gpu/requalify.sh - SECOND_TARBALL                    (go on where a call ran out of time: carry
#                                                               results, runs and logs back)
# 1. qualifies on FIRST (the walkthrough's GPU config on one GPU, shortened by tools/gpu/requalify.yaml);
# 2. replaces the tree at the same path by SECOND and runs the same command: every scenario must be
#    requalified (the plan and the report naming the Megatron tree's change);
# 3. runs the same command once more: on an unchanged stack only the gate runs.
# Source of the stack: tools/gpu/env.sh (.whl, .megatron). Writes $OUT/run<N>.log and $OUT/requalify.tar.gz
# (results, logs, run directories without checkpoint payloads).
set -u
first=$1 second=$2
out=${OUT:-$PWD/requalify-out}
mkdir -p "$out"
source tools/gpu/env.sh || { echo "requalify: the stack could not be set up" >&2; exit 1; }
export TZ=UTC
cmd=(snakemake --profile profiles/local --configfile config/megatron-h200.yaml config/megatron-h200-1gpu.yaml
     tools/gpu/requalify.yaml --resources gpu=1)
tree() {  # unpack a release over the one path the config names
    rm -rf /tmp/mlm && mkdir -p /tmp/mlm && tar xzf ".megatron/$1" -C /tmp/mlm &&
        make -s -C /tmp/mlm/megatron/core/datasets >/dev/null
}
step() {  # n timeout
    local n=$1 limit=$2 start rc
    start=$(date +%s)
    timeout -s INT "$limit" "${cmd[@]}" >"$out/run$n.log" 2>&1
    rc=$?
    echo "[requalify] run $n: exit $rc after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
    grep -E '^ftqual: [a-z_]+: attempt ' "$out/run$n.log" | sed 's/^/[requalify]   /'
    cp results/summary.md "$out/summary$n.md" 2>/dev/null
    cp results/junit.xml "$out/junit$n.xml" 2>/dev/null
}
if [ "$first" != - ]; then  # FIRST = -: go on in a workspace carried back (results, runs, logs) on SECOND
    [ "$first" = mlm.tar.gz ] || tree "$first" || exit 1
    python3 -m ftqual stack --workload megatron >"$out/stack1.json"
    step 1 "${LIMIT1:-250}"
fi
tree "$second" || exit 1
python3 -m ftqual status . >"$out/status2.txt" 2>&1
python3 -m ftqual stack --workload megatron >"$out/stack2.json"
step 2 "${LIMIT2:-250}"
step 3 "${LIMIT3:-40}"
python3 -m ftqual status . >"$out/status3.txt" 2>&1
tar czf "$out/requalify.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ \
    results logs runs 2>/dev/null
