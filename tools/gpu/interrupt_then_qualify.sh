#!/usr/bin/env bash
# One GPU, one device call: the workflow stopped by a SIGTERM to Snakemake's pid alone while the baseline
# trains (what a CI cancel or `kill <pid>` sends), then the same command run to its verdict:
#   tools/gpu/interrupt_then_qualify.sh [CONFIG ...]
# Writes $OUT/interrupt/ (both workflow logs, how long the stop took, summary.md/json, junit.xml) and
# $OUT/interrupt.tar.gz (results, logs, run directories without checkpoint payloads). The stack comes from
# tools/gpu/env.sh (.whl, .megatron carried).
set -u
out=${OUT:-$PWD/interrupt-out}
mkdir -p "$out/interrupt"
source tools/gpu/env.sh >/dev/null 2>&1 || { echo "the stack could not be set up" >&2; exit 1; }
args=(--profile profiles/local --configfile config/megatron-h200.yaml config/megatron-h200-1gpu.yaml "$@"
    --resources gpu=1)

snakemake "${args[@]}" >"$out/interrupt/first.log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do  # up to 10 min for the baseline's first logged iteration
    grep -Eqs 'iteration +[0-9]+/' runs/baseline-*/logs/train_cycle0.log && break
    sleep 0.5
done
run_id=$(basename "$(ls -d runs/baseline-* | head -n1)")
start=$(date +%s.%N)
kill -TERM "$pid"
wait "$pid"
first=$?
while pgrep -f "$run_id" >/dev/null; do sleep 0.2; done
stopped=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
echo "[interrupt] SIGTERM to snakemake (pid $pid) during $run_id: exit $first, every process of the run gone" \
    "after $stopped s" | tee "$out/interrupt/stop.txt"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print({k: r.get(k) for k in
    ('interrupted_by', 'exit_code', 'finished_at')})" "runs/$run_id/run.json" | tee -a "$out/interrupt/stop.txt"

begin=$(date +%s)
timeout -s INT "${LIMIT:-480}" snakemake "${args[@]}" >"$out/interrupt/second.log" 2>&1
echo "[interrupt] the same command: exit $? after $(($(date +%s) - begin)) s: $(head -n1 results/summary.md)" |
    tee -a "$out/interrupt/stop.txt"
grep -c Traceback "$out/interrupt/first.log" "$out/interrupt/second.log" | tee -a "$out/interrupt/stop.txt"
for f in summary.md summary.json junit.xml; do cp "results/$f" "$out/interrupt/$f" 2>/dev/null; done
tar czf "$out/interrupt.tar.gz" --exclude='*.distcp' --exclude='*.pt' --exclude=__pycache__ results logs runs \
    2>/dev/null
ls -la "$out" "$out/interrupt"
