#!/usr/bin/env bash
# config/extended.yaml on one H200 (rank 0 for every fault), in two device calls: one 600 s call holds five
# of its eight scenarios.
#   tools/gpu/extended.sh first   # baseline, kill, hang, kill_in_save, resume_existing (tools/gpu/extended-first.yaml
#                                 # disables the others); resume_existing needs the baseline's checkpoint payload,
#                                 # which is too large to carry to the next call
#   tools/gpu/extended.sh rest    # carry results, runs and logs back: a negative control launched directly (a kill
#                                 # that can never come: the only checkpoint is the last iteration's), then the full
#                                 # config, which reuses the first call's attempts and runs the other three
# Source of the stack: tools/gpu/env.sh (.whl, .megatron). Writes $OUT/<step>.log, the summaries and
# $OUT/extended.tar.gz (results, logs, run directories without checkpoint payloads).
set -u
part=${1:?usage: tools/gpu/extended.sh first|rest}
out=${OUT:-$PWD/extended-out}
mkdir -p "$out"
source tools/gpu/env.sh || { echo "extended: the stack could not be set up" >&2; exit 1; }
configs=(config/megatron-h200.yaml config/megatron-h200-1gpu.yaml config/extended.yaml tools/gpu/extended-1gpu.yaml)
workflow() {  # name limit configs...
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    timeout -s INT "$limit" snakemake --profile profiles/local --configfile "$@" --resources gpu=1 \
        >"$out/$name.log" 2>&1
    rc=$?
    echo "[extended] $name: exit $rc after $(($(date +%s) - start)) s: $(head -n1 results/summary.md 2>/dev/null)"
    grep -E '^ftqual: [a-z_]+: attempt ' "$out/$name.log" | sed 's/^/[extended]   /'
    cp results/summary.md "$out/summary-$name.md" 2>/dev/null
    cp results/summary.json "$out/summary-$name.json" 2>/dev/null
    cp results/junit.xml "$out/junit-$name.xml" 2>/dev/null
}
never_injected() {  # the launcher as a user starts it; the verifier must name the fault that never came
    local start=$(date +%s)
    env NVRX_WORKLOAD=megatron NVRX_WORK_DIR="$PWD" NVRX_RUN_ID=never_injected NVRX_SCENARIO=kill \
        NVRX_DEMO_FAULT=kill NVRX_FAULT_RANK=0 GPUS_PER_NODE=1 TRAIN_ITERS=5 SAVE_INTERVAL=5 \
        NVRX_MAX_RESTARTS=1 NVRX_SECTION_TIMEOUTS=setup:900,step:10,checkpointing:600 \
        timeout -s INT "${LIMIT_NEG:-150}" python3 -m ftqual.launch >"$out/never_injected.log" 2>&1
    echo "[extended] never_injected: launch exit $? after $(($(date +%s) - start)) s"
    python3 -m ftqual verify runs/never_injected >"$out/never_injected.verify.txt" 2>&1
    echo "[extended] never_injected: verify exit $?: $(grep -m1 '^cause:' "$out/never_injected.verify.txt")"
}
case $part in
first) workflow first "${LIMIT:-540}" "${configs[@]}" tools/gpu/extended-first.yaml ;;
rest)
    never_injected
    workflow rest "${LIMIT:-420}" "${configs[@]}"
    python3 -m ftqual status . >"$out/status.txt" 2>&1
    ;;
*) echo "usage: tools/gpu/extended.sh first|rest" >&2; exit 2 ;;
esac
tar czf "$out/extended.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ \
    results logs runs 2>/dev/null
ls -la "$out"
