#!/usr/bin/env bash
# Why an injected exception does not end a Megatron rank: launch the exception fault directly (one GPU, rank
# 0, a 60 s step timeout), and 6 s after the marker, while the rank should long be gone, record what it is
# doing (/proc: threads, their kernel wait channels, child processes), then send it SIGABRT under
# PYTHONFAULTHANDLER=1, so that its stderr (the training log) gets every thread's Python stack. The launcher is
# stopped afterwards; this run is a diagnosis, not a qualification. Writes $OUT/linger/.
set -u
out=${OUT:-$PWD/linger-out}/linger
mkdir -p "$out"
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "linger: the stack could not be set up" >&2; exit 1; }
run=runs/exception_linger
env NVRX_WORKLOAD=megatron NVRX_WORK_DIR="$PWD" NVRX_RUN_ID=exception_linger NVRX_SCENARIO=exception \
    NVRX_DEMO_FAULT=exception NVRX_FAULT_RANK=0 GPUS_PER_NODE=1 TRAIN_ITERS=30 SAVE_INTERVAL=5 \
    NVRX_MAX_RESTARTS=1 NVRX_SECTION_TIMEOUTS=setup:900,step:60,checkpointing:600 PYTHONFAULTHANDLER=1 \
    python3 -m ftqual.launch >"$out/launch.log" 2>&1 &
launcher=$!
for _ in $(seq 1 120); do [[ -s $run/fault_injected.json ]] && break; sleep 1; done
sleep 6
pid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pid'])" "$run/fault_injected.json")
{
    echo "rank pid $pid, 6 s after the injection: $([[ -d /proc/$pid ]] && echo alive || echo gone)"
    ps -o pid,ppid,stat,wchan:32,etimes,cmd --ppid "$pid" | cut -c1-200
    for t in /proc/"$pid"/task/*; do echo "thread ${t##*/} $(cat "$t/comm") wchan=$(cat "$t/wchan")"; done
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv
} >"$out/proc.txt" 2>&1
kill -ABRT "$pid" 2>/dev/null
sleep 4
kill -TERM "$launcher" 2>/dev/null
wait "$launcher"
cp "$run"/logs/train_cycle0.log "$out/" 2>/dev/null
echo "[linger] $(head -n1 "$out/proc.txt"); threads: $(grep -c '^thread' "$out/proc.txt")"
