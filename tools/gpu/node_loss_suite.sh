#!/usr/bin/env bash
# node_loss over ft_launchers as "nodes" on one host (tools/gpu/two_launchers.sh): the second node's whole
# ft_launcher killed after a checkpoint, without a spare (NVRx must end the job once its rendezvous has
# waited JOIN_TIMEOUT) and with one (a third launcher, NVRx's standby, must be promoted); `ftqual verify` of
# each.
#
#   tools/gpu/node_loss_suite.sh WORK_DIR [DEADLINE_EPOCH_S]
#
# Run from the project root on the 2-GPU machine with tools/gpu/env.sh sourced (MEGATRON_PATH set); on CPU,
# NVRX_WORKLOAD=smoke and PYTHON=<a virtualenv python> try the mechanics out. Settings as
# two_launchers_suite.sh (DP=2, 30 iterations, save interval 5, step timeout STEP_TIMEOUT, default 30 s),
# join timeout JOIN_TIMEOUT (default 60 s); ONLY=node_loss|node_spare runs one of the two. Writes WORK_DIR/runs/<run id>/, WORK_DIR/<scenario>.verify.{txt,json}
# and WORK_DIR/suite.log.
set -u
work=${1:?usage: node_loss_suite.sh WORK_DIR [DEADLINE_EPOCH_S]}
deadline=${2:-$(($(date +%s) + 540))}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
work=$(cd "$work" && pwd)
export NVRX_WORK_DIR="$work" TP=1 PP=1 TRAIN_ITERS=30 SAVE_INTERVAL=5 \
    NVRX_SECTION_TIMEOUTS="setup:900,step:${STEP_TIMEOUT:-30},checkpointing:600" NVRX_OUT_OF_SECTION_TIMEOUT=180 \
    NVRX_MAX_RESTARTS=3 NVRX_TERM_TIMEOUT=15 NVRX_TRANSFORMER_IMPL=auto NVRX_DIST_OPTIMIZER=auto \
    NVRX_HANG_PLACEMENT=step NVRX_WORKLOAD="${NVRX_WORKLOAD:-megatron}" NVRX_RDZV_JOIN_TIMEOUT="${JOIN_TIMEOUT:-60}"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
log="$work/suite.log"
say() { echo "[node_loss suite $(date -u +%FT%T.%3NZ)] $*" | tee -a "$log"; }

run() {  # scenario spare_nodes min_seconds (ONLY=<scenario> runs that one alone)
    local left=$((deadline - $(date +%s))) run_id="mn-$1-$stamp"
    if [ -n "${ONLY:-}" ] && [ "$ONLY" != "$1" ]; then return; fi
    if [ "$left" -lt "$3" ]; then say "skip $1: $left s left before the deadline (needs $3)"; return; fi
    say "start $1 ($run_id, spare nodes $2), at most $left s"
    NVRX_SCENARIO=$1 NVRX_SPARE_NODES=$2 timeout -s TERM "$left" bash "$here/two_launchers.sh" "$run_id" node_loss \
        >>"$log" 2>&1
    say "end $1: exit $?"
    "${PYTHON:-python3}" -m ftqual verify "$work/runs/$run_id" --json "$work/$1.verify.json" >"$work/$1.verify.txt" 2>&1
    say "verify $1: exit $? ($(head -n 1 "$work/$1.verify.txt"))"
}

run node_loss 0 150
run node_spare 1 120
say "done"
