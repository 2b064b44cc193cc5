#!/usr/bin/env bash
# Start a real, single-machine Slurm for CI: munged, slurmctld and three slurmd (nodes n1, n2, n3 on
# localhost) with fake GPUs (mknod character devices; the smoke workload never opens them).
# Each slurmd runs in its own UTS namespace with the node's name as host name, so the processes of a
# job see distinct hosts (n1, n2, n3) as on a real cluster (our launcher records pids per host), and
# /etc/hosts gives each its own loopback address (127.0.2.1, 127.0.2.2): a rendezvous endpoint on the
# first node resolves, and NVRx, which tells nodes apart by FQDN, sees distinct nodes, not one "localhost".
# Run as root on Debian 12. Idempotent: when the nodes already answer, it does nothing.
# No accounting database: use `slurm-status-command: squeue` (MinJobAge=600 keeps finished jobs
# visible to squeue longer than the executor's longest poll interval).
# Environment: FTQUAL_SLURM_GPUS (fake GPUs per node, default 4), FTQUAL_SLURM_CPUS (default 8).
set -euo pipefail

GPUS="${FTQUAL_SLURM_GPUS:-4}"
# n1 and n2 take the two-node scenarios (Slurm fills the lowest nodes first); n3 is the spare node that a
# node_loss scenario with `spare_nodes: 1` needs.
NODES=(n1 n2 n3)
CPUS="${FTQUAL_SLURM_CPUS:-8}"
CONF_DIR=/etc/slurm
STATE_DIR=/run/ftqual-slurm        # pid files and the munge key copy
LOG_DIR=/var/log/slurm

log() { printf '[slurm-start] %s\n' "$*" >&2; }

nodes_idle() {
    local states
    states=$(timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
    [[ -n "$states" ]] && ! grep -qvE ' (idle|mix|alloc)$' <<<"$states"
}

if command -v sinfo >/dev/null 2>&1 && [[ -f "$CONF_DIR/slurm.conf" ]] && nodes_idle; then
    if [[ "$(sinfo -h -N -o '%N' | sort -u | tr '\n' ' ')" == "${NODES[*]} " ]]; then
        log "Slurm is already running: $(sinfo -h -N -o '%N=%t' | tr '\n' ' ')"
        exit 0
    fi
    log "Slurm runs with other nodes ($(sinfo -h -N -o '%N' | sort -u | tr '\n' ' ')): restarting it"
    bash "$(dirname "$0")/stop.sh"
fi

[[ $EUID -eq 0 ]] || { log "must run as root"; exit 1; }

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
    log "installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends slurm-wlm slurm-client munge >/dev/null
fi

host=$(hostname -s)
hosts_mark="# ftqual CI Slurm node"
if ! grep -q "^127.0.2.${#NODES[@]} n${#NODES[@]} $hosts_mark" /etc/hosts; then
    # rewrite in place (the file may be a bind mount): drop our old lines, add the current ones
    kept=$(grep -v "$hosts_mark" /etc/hosts || true)
    {
        printf '%s\n' "$kept"
        for i in "${!NODES[@]}"; do printf '127.0.2.%d %s %s\n' $((i + 1)) "${NODES[$i]}" "$hosts_mark"; done
    } >/etc/hosts
fi
install -d -m 0755 "$CONF_DIR" "$STATE_DIR" "$LOG_DIR" /run/munge /var/lib/fakegpu /var/spool/slurmctld

# Fake GPUs: slurmd accepts only character or block devices in gres.conf (these are /dev/null's numbers).
for n in "${NODES[@]}"; do
    for ((i = 0; i < GPUS; i++)); do
        [[ -c /var/lib/fakegpu/${n}gpu$i ]] || mknod -m 666 "/var/lib/fakegpu/${n}gpu$i" c 1 3
    done
done

cat >"$CONF_DIR/slurm.conf" <<CONF
# Written by .ci/slurm/start.sh: CI-only three-node cluster on one host, no accounting database.
ClusterName=ci
SlurmctldHost=${host}(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd-%n
SlurmctldPidFile=${STATE_DIR}/slurmctld.pid
SlurmdPidFile=${STATE_DIR}/slurmd-%n.pid
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd-%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService=2
MinJobAge=600
KillWait=10
MailProg=/bin/true
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
$(for i in "${!NODES[@]}"; do
    printf 'NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=%s RealMemory=16000 Gres=gpu:%s State=UNKNOWN\n' \
        "${NODES[$i]}" "$host" $((17001 + i)) "$CPUS" "$GPUS"
done)
PartitionName=gpu Nodes=$(IFS=,; echo "${NODES[*]}") Default=YES MaxTime=INFINITE State=UP
CONF

last=$((GPUS - 1))
cat >"$CONF_DIR/gres.conf" <<CONF
AutoDetect=off
$(for n in "${NODES[@]}"; do printf 'NodeName=%s Name=gpu File=/var/lib/fakegpu/%sgpu[0-%s]\n' "$n" "$n" "$last"; done)
CONF
[[ $GPUS -gt 1 ]] || sed -i 's/\[0-0\]/0/' "$CONF_DIR/gres.conf"

alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# munged as root needs a root-owned key; the packaged key belongs to the munge user.
if [[ ! -f /etc/munge/munge.key ]]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
        || dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
if ! alive "$STATE_DIR/munged.pid"; then
    install -m 0600 /etc/munge/munge.key "$STATE_DIR/munge.key"
    munged --force --socket=/run/munge/munge.socket.2 --key-file="$STATE_DIR/munge.key" \
        --pid-file="$STATE_DIR/munged.pid"
fi
for _ in $(seq 50); do [[ -S /run/munge/munge.socket.2 ]] && break; sleep 0.1; done

alive "$STATE_DIR/slurmctld.pid" || slurmctld
own_uts=1
unshare --uts true 2>/dev/null || {
    own_uts=0
    log "warning: no UTS namespaces here (unshare --uts failed): both nodes share the host name $host"
}
for n in "${NODES[@]}"; do
    alive "$STATE_DIR/slurmd-$n.pid" && continue
    if ((own_uts)); then
        # shellcheck disable=SC2016 # $1 expands in the inner shell
        unshare --uts sh -c 'hostname "$1" && exec slurmd -N "$1"' sh "$n"
    else
        slurmd -N "$n"
    fi
done

for _ in $(seq 300); do
    if nodes_idle; then
        log "Slurm is up: $(sinfo -h -N -o '%N=%t' | tr '\n' ' ')"
        exit 0
    fi
    sleep 0.2
done
log "nodes did not become idle within 60 s:"
sinfo -N -l >&2 || true
tail -n 20 "$LOG_DIR"/slurmctld.log "$LOG_DIR"/slurmd-n1.log >&2 || true
exit 1
