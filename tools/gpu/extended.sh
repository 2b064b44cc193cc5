#!/usr/bin/env bash
# config/extended.yaml on one H200 (rank 0 for every fault), in three device calls: one 600 s call holds four
# or five of its eight scenarios, and resume_existing needs the baseline's checkpoint payload on the machine
# (too large to carry from one call to the next).
#   tools/gpu/extended.sh first    # baseline, kill, hang, kill_in_save, resume_existing (tools/gpu/extended-first.yaml
#                                  # disables the others); on one H200 resume_existing does not fit beside them
#   tools/gpu/extended.sh second   # a fresh workspace: a negative control launched directly (a kill that can never
#                                  # come: the only checkpoint is the last iteration's), then baseline,
#                                  # resume_existing, restarts_exhausted and no_resume (tools/gpu/extended-second.yaml)
#   tools/gpu/extended.sh third    # carry the second call's results, runs and logs back: the same plus double_fault
#   tools/gpu/extended.sh negative # the negative control alone
# Source of the stack: tools/gpu/env.sh (.whl, .megatron). Writes $OUT/<step>.log, the summaries and
# $OUT/extended.tar.gz (results, logs, run directories without checkpoint payloads).
set -u
part=${1:?usage: tools/gpu/extended.sh first|second|third|negative}
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
never_injected() {  # the launcher as a user starts it; the verifier must name the fault that never came:
    # with 6 iterations the save of 5 is finalized only at the end of training on one H200 (Megatron finalizes
    # an async save when the next one begins), so the tracker never passes 5 while a step could follow
    local start=$(date +%s)
    env NVRX_WORKLOAD=megatron NVRX_WORK_DIR="$PWD" NVRX_RUN_ID=never_injected NVRX_SCENARIO=kill \
        NVRX_DEMO_FAULT=kill NVRX_FAULT_RANK=0 GPUS_PER_NODE=1 TRAIN_ITERS=6 SAVE_INTERVAL=5 \
        NVRX_MAX_RESTARTS=1 NVRX_SECTION_TIMEOUTS=setup:900,step:10,checkpointing:600 \
        timeout -s INT "${LIMIT_NEG:-150}" python3 -m ftqual.launch >"$out/never_injected.log" 2>&1
    echo "[extended] never_injected: launch exit $? after $(($(date +%s) - start)) s"
    python3 -m ftqual verify runs/never_injected >"$out/never_injected.verify.txt" 2>&1
    echo "[extended] never_injected: verify exit $?: $(grep -m1 '^cause:' "$out/never_injected.verify.txt")"
}
case $part in
first) workflow first "${LIMIT:-540}" "${configs[@]}" tools/gpu/extended-first.yaml ;;
second)
    never_injected
    workflow second "${LIMIT:-440}" "${configs[@]}" tools/gpu/extended-second.yaml
    ;;
third)
    workflow third "${LIMIT:-400}" "${configs[@]}" tools/gpu/extended-third.yaml
    python3 -m ftqual status . >"$out/status.txt" 2>&1
    ;;
negative) never_injected ;;  # the negative control alone
*) echo "usage: tools/gpu/extended.sh first|second|third|negative" >&2; exit 2 ;;
esac
tar czf "$out/extended.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ \
    results logs runs 2>/dev/null
ls -la "$out"
