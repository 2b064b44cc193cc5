#!/usr/bin/env bash
# Baseline, kill and hang (fault rank 1, the rank of the second node) of one layout over two ft_launchers
# (tools/gpu/two_launchers.sh), then `python -m ftqual verify RUN --baseline BASELINE` of each.
#
#   tools/gpu/two_launchers_suite.sh tp2|pp2|dp2 WORK_DIR [DEADLINE_EPOCH_S]
#
# Run from the project root on the 2-GPU machine with tools/gpu/env.sh sourced (MEGATRON_PATH set); on CPU,
# NVRX_WORKLOAD=smoke and PYTHON=<a virtualenv python> try the mechanics out.
# Settings are the GPU config's (config/megatron-h200.yaml) except 30 iterations and a step timeout of
# STEP_TIMEOUT seconds (default 30, not 120, so the hang is detected sooner). Every run gets what is left
# before DEADLINE_EPOCH_S (default: now + 540 s) under `timeout`; the hang is skipped when less than
# 150 s are left, and kill and hang are skipped when the baseline fails. Writes
# WORK_DIR/runs/<run id>/, WORK_DIR/<scenario>.verify.{txt,json}, WORK_DIR/suite.log.
set -u
layout=${1:?usage: two_launchers_suite.sh tp2|pp2|dp2 WORK_DIR [DEADLINE_EPOCH_S]}
work=${2:?usage: two_launchers_suite.sh tp2|pp2|dp2 WORK_DIR [DEADLINE_EPOCH_S]}
deadline=${3:-$(($(date +%s) + 540))}
here=$(cd "$(dirname "$0")" && pwd)
case $layout in
    tp2) export TP=2 PP=1 ;;
    pp2) export TP=1 PP=2 ;;
    dp2) export TP=1 PP=1 ;;  # one GPU per launcher: data parallel across the two "nodes"
    *) echo "layout must be tp2, pp2 or dp2" >&2; exit 2 ;;
esac
mkdir -p "$work"
work=$(cd "$work" && pwd)
export NVRX_WORK_DIR="$work" TRAIN_ITERS=30 SAVE_INTERVAL=5 \
    NVRX_SECTION_TIMEOUTS="setup:900,step:${STEP_TIMEOUT:-30},checkpointing:600" NVRX_OUT_OF_SECTION_TIMEOUT=180 \
    NVRX_MAX_RESTARTS=3 NVRX_TERM_TIMEOUT=15 NVRX_TRANSFORMER_IMPL=auto NVRX_DIST_OPTIMIZER=auto \
    NVRX_HANG_PLACEMENT=step NVRX_WORKLOAD="${NVRX_WORKLOAD:-megatron}"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log="$work/suite.log"
say() { echo "[suite $layout $(date -u +%FT%T.%3NZ)] $*" | tee -a "$log"; }

run() {  # scenario fault min_seconds -> sets $last_rc, $last_run
    local left=$((deadline - $(date +%s)))
    last_run="mn-$layout-$1-$stamp"
    if [ "$left" -lt "$3" ]; then
        say "skip $1: $left s left before the deadline (needs $3)"; last_rc=skipped; return
    fi
    say "start $1 ($last_run), at most $left s"
    NVRX_SCENARIO=$1 timeout -s TERM "$left" bash "$here/two_launchers.sh" "$last_run" "$2" >>"$log" 2>&1
    last_rc=$?
    say "end $1: exit $last_rc"
}

verify() {  # scenario run [baseline run]
    local args=("$work/runs/$2")
    [ -n "${3:-}" ] && args+=(--baseline "$work/runs/$3")
    "${PYTHON:-python3}" -m ftqual verify "${args[@]}" --json "$work/$1.verify.json" >"$work/$1.verify.txt" 2>&1
    say "verify $1: exit $? ($(head -n 1 "$work/$1.verify.txt"))"
}

run baseline none 60; base_rc=$last_rc; base_run=$last_run
if [ "$base_rc" = 0 ]; then
    verify baseline "$base_run"
    run kill kill 90; [ "$last_rc" != skipped ] && verify kill "$last_run" "$base_run"
    run hang hang 150; [ "$last_rc" != skipped ] && verify hang "$last_run" "$base_run"
else
    say "baseline failed (exit $base_rc): kill and hang skipped"
    [ -d "$work/runs/$base_run" ] && verify baseline "$base_run"
fi
say "done"
