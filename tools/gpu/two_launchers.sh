#!/usr/bin/env bash
# Two ft_launchers on one 2-GPU host as two "nodes", started the way the Slurm multi-node path starts them
# (scripts/rule_run_scenario.py): the same per-node command `python -m ftqual.launch`, NNODES=2,
# GPUS_PER_NODE=1, a common NVRX_RUN_ID and NVRX_LOG_SERVER_PORT, RDZV_ENDPOINT=<first node>:<port>, and each
# node's rank in NVRX_NODE_RANK (what SLURM_NODEID gives under srun; node 0 writes run.json).
#
#   tools/gpu/two_launchers.sh RUN_ID FAULT          (FAULT: none | kill | hang | node_loss; fault rank 1)
#
# With NVRX_SPARE_NODES=1 a third launcher (n3, node rank 2) joins as NVRx's standby (--nnodes=2:3); it shares
# GPU 1 with n2, which it can only use once n2 is gone (what a node_loss of rank 1 does).
#
# Reads from the environment (as the workflow's launcher_env sets them): NVRX_WORK_DIR (absolute),
# MEGATRON_PATH, TP, PP, TRAIN_ITERS, SAVE_INTERVAL, NVRX_SECTION_TIMEOUTS, NVRX_OUT_OF_SECTION_TIMEOUT,
# NVRX_MAX_RESTARTS, NVRX_TERM_TIMEOUT, NVRX_TRANSFORMER_IMPL, NVRX_DIST_OPTIMIZER, NVRX_HANG_PLACEMENT,
# NVRX_SCENARIO (default: FAULT), PYTHON (default python3). Run from the project root with tools/gpu/env.sh
# sourced (or, on CPU, NVRX_WORKLOAD=smoke and the virtualenv's python).
#
# Each launcher runs in its own UTS and mount namespace (`unshare`, as root or in a user namespace): host
# names n1 and n2, resolving through a private /etc/hosts to 127.0.2.1 and 127.0.2.2. Distinct host names are
# what two real nodes have, and what the launcher needs: its records are pids/<host>.*.json and its clean-up
# kills only the process groups recorded for its own host. NCCL derives its host hash from the host name,
# so it should treat the ranks as two hosts (network transport, not P2P/SHM; not checked with NCCL_DEBUG).
# Not like real nodes: both launchers' NVRx GPU-memory reclaim check reads NVML device 0 (NVML ignores
# CUDA_VISIBLE_DEVICES), i.e. node 1 watches node 0's GPU. Node 0 gets GPU 0, node 1 GPU 1. Consoles go to
# $NVRX_WORK_DIR/runs/<RUN_ID>.<host>.console.log. Exit: node 0's launcher exit code (node 1's if node 0 ran
# clean and node 1 did not).
set -u
run_id=${1:?usage: two_launchers.sh RUN_ID none|kill|hang}
fault=${2:?usage: two_launchers.sh RUN_ID none|kill|hang}
: "${NVRX_WORK_DIR:?set NVRX_WORK_DIR to an absolute directory}"

free_port() { "${PYTHON:-python3}" -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
rdzv_port=$(free_port)
log_port=$(free_port)
while [ "$log_port" = "$rdzv_port" ]; do log_port=$(free_port); done

unshare_cmd=(unshare --uts --mount --propagation private)
if ! "${unshare_cmd[@]}" true 2>/dev/null; then
    unshare_cmd=(unshare --user --map-root-user --uts --mount --propagation private)
    if ! "${unshare_cmd[@]}" true 2>/dev/null; then
        echo "two_launchers: cannot create UTS+mount namespaces here (unshare failed as root and as a user namespace)" >&2
        exit 2
    fi
fi
hosts=$(mktemp /tmp/two_launchers_hosts.XXXXXX)
{ cat /etc/hosts; printf '127.0.2.1 n1\n127.0.2.2 n2\n127.0.2.3 n3\n'; } >"$hosts"
chmod 644 "$hosts"

mkdir -p "$NVRX_WORK_DIR/runs"
export NVRX_RUN_ID="$run_id" NNODES=2 GPUS_PER_NODE=1 NVRX_DEMO_FAULT="$fault" \
    NVRX_LOG_SERVER_PORT="$log_port" RDZV_ENDPOINT="n1:$rdzv_port" NVRX_SCENARIO="${NVRX_SCENARIO:-$fault}"
if [ "$fault" != none ]; then export NVRX_FAULT_RANK="${NVRX_FAULT_RANK:-1}"; fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 TZ=UTC

start_node() {  # node_rank host gpu; sets $started
    local console="$NVRX_WORK_DIR/runs/$run_id.$2.console.log"
    NVRX_NODE_RANK=$1 CUDA_VISIBLE_DEVICES=$3 TL_HOST=$2 TL_HOSTS=$hosts \
        "${unshare_cmd[@]}" bash -c 'hostname "$TL_HOST" && mount --bind "$TL_HOSTS" /etc/hosts &&
            exec "${PYTHON:-python3}" -m ftqual.launch' >"$console" 2>&1 &
    started=$!
}
echo "two_launchers: run $run_id fault $fault endpoint n1:$rdzv_port log port $log_port ($(date -u +%FT%TZ))"
start_node 0 n1 0; pid0=$started
start_node 1 n2 1; pid1=$started
pid2=
if [ "${NVRX_SPARE_NODES:-0}" -gt 0 ]; then start_node 2 n3 1; pid2=$started; fi
# Forward an interruption to every launcher (each forwards it to its ft_launcher and cleans up).
trap 'kill -TERM "$pid0" "$pid1" $pid2 2>/dev/null' INT TERM
wait "$pid0"; rc0=$?
wait "$pid1"; rc1=$?
if [ -n "$pid2" ]; then wait "$pid2"; echo "two_launchers: run $run_id node2 (spare) exit $?"; fi
rm -f "$hosts"
echo "two_launchers: run $run_id node0 exit $rc0 node1 exit $rc1 ($(date -u +%FT%TZ))"
[ "$rc0" -ne 0 ] && exit "$rc0"
exit "$rc1"
