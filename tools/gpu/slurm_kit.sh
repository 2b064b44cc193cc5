#!/usr/bin/env bash
# A real one-node Slurm for the offline GPU machine (Ubuntu 24.04, no Slurm, no network), from Debian 12's
# packages carried in .slurm/, so that `snakemake --profile profiles/slurm` can run there in one call.
#
#   here:  tools/gpu/slurm_kit.sh prepare   # apt-get download of the .deb files into .slurm/debs (~4 MB)
#   there: tools/gpu/slurm_kit.sh start     # as root, carry .slurm: unpacks into $PREFIX, starts munged,
#                                           # slurmctld and slurmd for one node (`hostname -s`, partition
#                                           # gpu, its GPUs as gres), waits until the node is idle
#          source "$STATE/env.sh"           # PATH to the kit's command wrappers (start prints the line)
#          tools/gpu/slurm_kit.sh stop      # stops what start started (pid files in $STATE)
#          tools/gpu/slurm_kit.sh conf      # prints the slurm.conf start would write (gres-conf: gres.conf)
#
# Nothing goes into / or /etc: the packages unpack into $PREFIX (dpkg -x), config, logs, spool, pid files
# and munge's socket and key live in $STATE, and every command runs through a wrapper in $PREFIX/bin that
# sets SLURM_CONF and LD_LIBRARY_PATH. Why wrappers: the Slurm jobstep executor drops SLURM_CONF inside a
# job, and the in-job `srun` must still find the config (PATH survives). Ports 6917/6918, not Slurm's
# 6817/6818, so that a system Slurm on the same machine (CI) is left alone.
# No accounting database (AccountingStorageType none), but slurm-client's sacct, sacctmgr and sshare are
# wrapped like every client: the executor plugin runs sacct before each submission and fails without it
# (ftqual refuses that up front, ftqual/workflow/slurm_submit.py). Job status comes from squeue (MinJobAge=600).
#
# Environment: FTQUAL_SLURM_KIT_PREFIX (default /opt/ftqual-slurm), FTQUAL_SLURM_KIT_STATE (default
# /tmp/ftqual-slurm-kit), FTQUAL_SLURM_KIT_FAKE_GPUS=N (N fake GPUs from mknod, for a machine without
# any; else nvidia-smi counts them), FTQUAL_SLURM_KIT_CGROUP=1 (try proctrack/cgroup + task/cgroup, fall
# back to linuxproc/none if slurmd does not come up with them), FTQUAL_SLURM_KIT_PORTS (default
# "6917 6918"). `conf` also takes FTQUAL_SLURM_KIT_HOST, _CPUS, _MEM_MB, _GPUS (fixed values for tests).
# Add `/.slurm/` to .git/info/exclude: nothing of .slurm is committed.
set -uo pipefail

kit=.slurm
PREFIX=${FTQUAL_SLURM_KIT_PREFIX:-/opt/ftqual-slurm}
STATE=${FTQUAL_SLURM_KIT_STATE:-/tmp/ftqual-slurm-kit}
read -r CTLD_PORT SLURMD_PORT <<<"${FTQUAL_SLURM_KIT_PORTS:-6917 6918}"
ARCH_LIB=usr/lib/x86_64-linux-gnu
PLUGIN_DIR="$PREFIX/$ARCH_LIB/slurm-wlm"
MUNGE_SOCKET="$STATE/munge/munge.socket.2"
# What travels. Slurm's own: daemons, clients, plugins (libslurmfull is among them), munge. Libraries
# that Ubuntu 24.04 already has (libmunge2, libhwloc15, liblz4-1, libpam0g, libgcrypt20, libbz2, zlib,
# libc) are used from the system when present: start links only the missing ones (ldconfig -p). The
# small ones that may be missing there travel too: libnuma1 (slurmd), libreadline8 (scontrol),
# libdbus-1-3, libjson-c5, liblua5.1-0, libyaml-0-2 (plugins). Not libslurm38: no binary needs it.
PACKAGES=(slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge libmunge2 libhwloc15 liblz4-1
    libnuma1 libreadline8 libdbus-1-3 libjson-c5 liblua5.1-0 libyaml-0-2)
CLIENTS=(sbatch squeue sinfo scontrol srun scancel salloc sattach sbcast sstat sprio sdiag strigger sacct sacctmgr sshare)

log() { printf '[slurm-kit] %s\n' "$*" >&2; }
die() { printf '[slurm-kit] FAILED: %s\n' "$*" >&2; exit 1; }

prepare() {
    mkdir -p "$kit/debs" || die "cannot create $kit/debs"
    rm -f "$kit"/debs/*.deb
    log "downloading ${#PACKAGES[@]} Debian packages into $kit/debs"
    # apt-get download writes into the current directory (as root it warns that _apt cannot: harmless);
    # stale package lists make it fail, so update them once and retry
    (cd "$kit/debs" && apt-get download -q "${PACKAGES[@]}" >/dev/null 2>&1) \
        || (apt-get update -qq && cd "$kit/debs" && apt-get download -q "${PACKAGES[@]}" >/dev/null) \
        || die "apt-get download failed"
    local n
    n=$(find "$kit/debs" -name '*.deb' | wc -l)
    [ "$n" -eq "${#PACKAGES[@]}" ] || die "expected ${#PACKAGES[@]} .deb files, got $n"
    (cd "$kit/debs" && sha256sum ./*.deb) >"$kit/SHA256SUMS"
    if ! dpkg-deb -c "$kit"/debs/slurm-wlm-basic-plugins_*.deb | grep -q gpu_nvml.so; then
        log "note: this build has no gpu_nvml.so (no AutoDetect=nvml): start writes a static gres.conf"
    fi
    log "ready: $n packages, $(du -sh "$kit" | cut -f1) in $kit"
}

# --- configuration text (pure: depends only on the variables below) ---
node_host() { echo "${FTQUAL_SLURM_KIT_HOST:-$(hostname -s)}"; }
node_cpus() { echo "${FTQUAL_SLURM_KIT_CPUS:-$(nproc)}"; }
node_mem_mb() {
    # leave 4 GiB to the system; SlurmdParameters=config_overrides keeps slurmd from draining the node
    # when the machine reports a little less
    if [ -n "${FTQUAL_SLURM_KIT_MEM_MB:-}" ]; then echo "$FTQUAL_SLURM_KIT_MEM_MB"; return; fi
    local kb
    kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    echo $((kb / 1024 > 8192 ? kb / 1024 - 4096 : kb / 1024 / 2))
}
# The GPU device files, one a line: fake ones under $STATE, or /dev/nvidiaK for each GPU nvidia-smi lists.
gpu_files() {
    if [ -n "${FTQUAL_SLURM_KIT_GPUS:-}" ]; then
        seq 0 $((FTQUAL_SLURM_KIT_GPUS - 1)) | sed 's|^|/dev/nvidia|'
    elif [ -n "${FTQUAL_SLURM_KIT_FAKE_GPUS:-}" ]; then
        seq 0 $((FTQUAL_SLURM_KIT_FAKE_GPUS - 1)) | sed "s|^|$STATE/fakegpu/nvidia|"
    else
        # /dev/nvidiaK by the minor number nvidia-smi reports is exact, but a container shows the GPUs it
        # got as /dev/nvidia0..N-1 in the usual case; take those and check the count
        local n
        n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') || true
        [ "${n:-0}" -gt 0 ] && seq 0 $((n - 1)) | sed 's|^|/dev/nvidia|'
    fi
}
proctrack() { if [ "${KIT_CGROUP:-0}" = 1 ]; then echo proctrack/cgroup; else echo proctrack/linuxproc; fi; }
taskplugin() { if [ "${KIT_CGROUP:-0}" = 1 ]; then echo task/cgroup; else echo task/none; fi; }

slurm_conf() {
    local host ngpus
    host=$(node_host)
    ngpus=$(gpu_files | grep -c .)
    cat <<CONF
# Written by tools/gpu/slurm_kit.sh: one node, no accounting database (the executor polls squeue).
ClusterName=ftqual
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
PluginDir=$PLUGIN_DIR
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=$(proctrack)
TaskPlugin=$(taskplugin)
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
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(node_cpus) RealMemory=$(node_mem_mb) Gres=gpu:$ngpus State=UNKNOWN
PartitionName=gpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
}

gres_conf() {
    # Static: Debian's build has no gpu_nvml.so, so AutoDetect=nvml is not available.
    echo "AutoDetect=off"
    gpu_files | sed "s|^|NodeName=$(node_host) Name=gpu File=|"
}

# --- start/stop ---
wrap() { # wrap NAME REAL: a command in $PREFIX/bin that runs REAL with the kit's config and libraries
    cat >"$PREFIX/bin/$1" <<WRAP
#!/bin/sh
# slurm_kit wrapper: the jobstep executor drops SLURM_CONF inside jobs, so set it here every time
export SLURM_CONF="$STATE/etc/slurm.conf"
case ":\${LD_LIBRARY_PATH:-}:" in *":$PLUGIN_DIR:"*) ;; *)
    LD_LIBRARY_PATH="$PLUGIN_DIR:$PREFIX/lib-extra\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"; export LD_LIBRARY_PATH ;; esac
exec "$2" "\$@"
WRAP
    chmod 755 "$PREFIX/bin/$1"
}

unpack() {
    local stamp="$PREFIX/.kit-stamp" sums
    [ -f "$kit/SHA256SUMS" ] || die "no $kit/SHA256SUMS: run 'tools/gpu/slurm_kit.sh prepare' first and carry $kit"
    (cd "$kit/debs" && sha256sum -c --quiet ../SHA256SUMS) || die "the .deb files in $kit/debs do not match $kit/SHA256SUMS"
    sums=$(sha256sum <"$kit/SHA256SUMS" | cut -d' ' -f1)
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$sums" ]; then
        log "packages already unpacked in $PREFIX"
    else
        log "unpacking $(find "$kit/debs" -name '*.deb' | wc -l) packages into $PREFIX (dpkg -x)"
        rm -rf "$PREFIX" && mkdir -p "$PREFIX" || die "cannot create $PREFIX"
        local d
        for d in "$kit"/debs/*.deb; do dpkg -x "$d" "$PREFIX" || die "dpkg -x $d failed"; done
        echo "$sums" >"$stamp"
    fi
    # Only the libraries the system lacks: a carried copy would otherwise shadow the system's in every
    # job (the wrappers' LD_LIBRARY_PATH travels with sbatch/srun into the job environment).
    rm -rf "$PREFIX/lib-extra" "$PREFIX/bin" && mkdir -p "$PREFIX/lib-extra" "$PREFIX/bin"
    local cache lib soname used=() system=()
    cache=$(ldconfig -p 2>/dev/null)
    for lib in "$PREFIX/$ARCH_LIB"/lib*.so.* "$PREFIX"/lib/x86_64-linux-gnu/lib*.so.*; do
        [ -e "$lib" ] || continue
        soname=$(basename "$lib")
        [[ $soname =~ \.so\.[0-9]+$ ]] || continue  # the soname link, not libfoo.so.1.2.3
        if grep -q "^[[:space:]]*$soname " <<<"$cache"; then
            system+=("$soname")
        else
            ln -s "$lib" "$PREFIX/lib-extra/$soname" && used+=("$soname")
        fi
    done
    log "libraries from the system: ${system[*]:-none}; carried ones used: ${used[*]:-none}"
    local c
    for c in "${CLIENTS[@]}"; do wrap "$c" "$PREFIX/usr/bin/$c"; done
    for c in munge unmunge; do wrap "$c" "$PREFIX/usr/bin/$c"; done
    # Debian ships the daemons as slurmd-wlm etc. and links slurmd to them in postinst (alternatives), which
    # dpkg -x skips. The name matters: Slurm reads a node's Gres= only in a process named slurmctld or
    # slurmd (run_in_daemon), so under the -wlm names every node has no GPUs (seen here).
    for c in slurmctld slurmd slurmstepd; do
        ln -sfn "$c-wlm" "$PREFIX/usr/sbin/$c" && wrap "$c" "$PREFIX/usr/sbin/$c"
    done
    for c in munged mungekey; do wrap "$c" "$PREFIX/usr/sbin/$c"; done
    local missing
    for c in "$PREFIX"/usr/sbin/* "$PREFIX"/usr/bin/srun "$PREFIX"/usr/bin/sbatch "$PREFIX"/usr/bin/scontrol \
        "$PLUGIN_DIR"/{select_cons_tres,gres_gpu,auth_munge,cred_munge,proctrack_linuxproc,proctrack_cgroup,task_cgroup,cgroup_v2}.so; do
        missing=$(LD_LIBRARY_PATH="$PLUGIN_DIR:$PREFIX/lib-extra" ldd "$c" 2>&1 | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
        [ -z "$missing" ] || die "$(basename "$c") needs libraries that neither the system nor $kit has: $missing"
    done
    log "wrappers in $PREFIX/bin; every library resolves"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }
B() { echo "$PREFIX/bin/$1"; }

node_state() { timeout 5 "$(B sinfo)" -h -N -o '%t' 2>/dev/null | head -1; }

start_munge() {
    install -d -m 0755 "$STATE/munge" || die "cannot create $STATE/munge"
    # munged as root wants a root-owned key of mode 0600 and a socket directory no one else can write
    if [ ! -f "$STATE/munge/munge.key" ]; then
        log "creating a munge key"
        "$(B mungekey)" --create --keyfile="$STATE/munge/munge.key" 2>/dev/null \
            || dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none \
            || die "cannot create the munge key"
        chmod 0600 "$STATE/munge/munge.key"
    fi
    if alive "$STATE/run/munged.pid"; then
        log "munged already runs (pid $(cat "$STATE/run/munged.pid"))"
    else
        log "starting munged (socket $MUNGE_SOCKET)"
        "$(B munged)" --force --socket="$MUNGE_SOCKET" --key-file="$STATE/munge/munge.key" \
            --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" \
            --seed-file="$STATE/munge/munged.seed" || die "munged did not start: $(tail -n 3 "$STATE/log/munged.log" 2>/dev/null)"
    fi
    for _ in $(seq 50); do [ -S "$MUNGE_SOCKET" ] && break; sleep 0.1; done
    "$(B munge)" -n -S "$MUNGE_SOCKET" | "$(B unmunge)" -S "$MUNGE_SOCKET" >/dev/null 2>&1 \
        || die "munge does not answer on $MUNGE_SOCKET (see $STATE/log/munged.log)"
    log "munge answers"
}

setup_gpus() {
    if [ -n "${FTQUAL_SLURM_KIT_FAKE_GPUS:-}" ]; then
        # slurmd accepts only character or block devices in gres.conf; these are /dev/null's numbers
        install -d "$STATE/fakegpu"
        local i
        for ((i = 0; i < FTQUAL_SLURM_KIT_FAKE_GPUS; i++)); do
            [ -c "$STATE/fakegpu/nvidia$i" ] || mknod -m 666 "$STATE/fakegpu/nvidia$i" c 1 3 \
                || die "mknod $STATE/fakegpu/nvidia$i failed"
        done
        log "$FTQUAL_SLURM_KIT_FAKE_GPUS fake GPUs (mknod) in $STATE/fakegpu"
    else
        command -v nvidia-smi >/dev/null || die "no nvidia-smi to count the GPUs (FTQUAL_SLURM_KIT_FAKE_GPUS=N for fake ones)"
    fi
    local files f
    files=$(gpu_files)
    [ -n "$files" ] || die "no GPUs found (nvidia-smi -L lists none)"
    for f in $files; do [ -c "$f" ] || die "$f is not a character device: gres.conf would be refused"; done
    log "GPUs as gres: $(echo "$files" | tr '\n' ' ')"
}

write_conf() {
    slurm_conf >"$STATE/etc/slurm.conf" && gres_conf >"$STATE/etc/gres.conf" || die "cannot write $STATE/etc"
    # slurmd loads a cgroup plugin even under proctrack/linuxproc and task/none. On a cgroup v2 host it picks
    # cgroup/v2, whose init asks systemd (over dbus) for a scope for slurmstepd: without systemd, as on the
    # GPU machine, slurmd dies ("cannot initialize cgroup directory for stepds"). So without cgroup mode the
    # kit names cgroup/v1, which nothing here uses and whose load sets nothing up; start falls back to
    # cgroup/v2 with IgnoreSystemd=yes (slurmd makes that directory itself) if slurmd refuses it.
    if [ "${KIT_CGROUP:-0}" = 1 ]; then
        printf 'CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\nConstrainDevices=yes\nConstrainCores=no\nConstrainRAMSpace=no\n' \
            >"$STATE/etc/cgroup.conf"
    elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        printf 'CgroupPlugin=%s\nIgnoreSystemd=yes\n' "${KIT_CGROUP_PLUGIN:-cgroup/v1}" >"$STATE/etc/cgroup.conf"
    else
        rm -f "$STATE/etc/cgroup.conf"
    fi
    log "wrote $STATE/etc/slurm.conf ($(proctrack), $(taskplugin), ports $CTLD_PORT/$SLURMD_PORT) and gres.conf"
}

start_daemons() { # returns 1 when the node does not become idle within 30 s
    if alive "$STATE/run/slurmctld.pid"; then
        log "slurmctld already runs"
    else
        log "starting slurmctld"
        "$(B slurmctld)" || { tail -n 5 "$STATE/log/slurmctld.log" >&2; return 1; }
    fi
    if alive "$STATE/run/slurmd.pid"; then
        log "slurmd already runs"
    else
        log "starting slurmd -N $(node_host)"
        # -d: slurmd would look for slurmstepd at the compiled path /usr/sbin/slurmstepd
        "$(B slurmd)" -N "$(node_host)" -d "$PREFIX/usr/sbin/slurmstepd" \
            || { tail -n 5 "$STATE/log/slurmd.log" >&2; return 1; }
    fi
    local st
    for _ in $(seq 150); do
        st=$(node_state)
        [[ $st == idle || $st == mix || $st == alloc ]] && { log "node $(node_host) is $st"; return 0; }
        sleep 0.2
    done
    log "node $(node_host) is '${st:-unknown}' after 30 s"
    tail -n 8 "$STATE/log/slurmctld.log" "$STATE/log/slurmd.log" >&2
    return 1
}

stop_one() {
    local pidfile="$STATE/run/$1.pid" pid
    [ -f "$pidfile" ] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        log "stopped $1 (pid $pid)"
    fi
    rm -f "$pidfile"
}

start() {
    [ "$(id -u)" -eq 0 ] || die "start must run as root"
    [ -d "$kit/debs" ] || die "no $kit/debs here: run prepare where apt works and carry $kit"
    command -v dpkg >/dev/null || die "no dpkg to unpack the packages"
    unpack
    install -d -m 0755 "$STATE" "$STATE/etc" "$STATE/log" "$STATE/run" "$STATE/ctld" "$STATE/slurmd" \
        || die "cannot create $STATE"
    getent hosts "$(node_host)" >/dev/null || log "warning: $(node_host) does not resolve (slurm uses 127.0.0.1 for it)"
    start_munge
    setup_gpus
    KIT_CGROUP=0
    if [ "${FTQUAL_SLURM_KIT_CGROUP:-0}" = 1 ]; then
        if [ -f /sys/fs/cgroup/cgroup.controllers ]; then KIT_CGROUP=1; else
            log "no cgroup v2 at /sys/fs/cgroup: proctrack/linuxproc, task/none"
        fi
    fi
    write_conf
    if ! start_daemons; then
        stop_one slurmd; stop_one slurmctld
        if [ "$KIT_CGROUP" = 1 ]; then
            log "proctrack/cgroup did not work here: falling back to proctrack/linuxproc, task/none"
            KIT_CGROUP=0
        elif [ -f /sys/fs/cgroup/cgroup.controllers ] && [ "${KIT_CGROUP_PLUGIN:-cgroup/v1}" = cgroup/v1 ]; then
            log "slurmd refused cgroup/v1 here: cgroup/v2 with IgnoreSystemd=yes"
            KIT_CGROUP_PLUGIN=cgroup/v2
        else
            die "Slurm did not come up (logs in $STATE/log)"
        fi
        write_conf
        start_daemons || die "Slurm did not come up (logs in $STATE/log)"
    fi
    printf 'export PATH="%s:$PATH" SLURM_CONF="%s"\n' "$PREFIX/bin" "$STATE/etc/slurm.conf" >"$STATE/env.sh"
    log "Slurm is up: $(timeout 5 "$(B sinfo)" -h -N -o '%N %P %t %G' | tr '\n' ' ')"
    log "now: source $STATE/env.sh"
}

stop() {
    stop_one slurmd
    stop_one slurmctld
    stop_one munged
    log "stopped (state kept in $STATE; remove it for a fresh start)"
}

case "${1:-}" in
prepare) prepare ;;
start) start ;;
stop) stop ;;
conf) KIT_CGROUP=${FTQUAL_SLURM_KIT_CGROUP:-0} slurm_conf ;;
gres-conf) gres_conf ;;
env) cat "$STATE/env.sh" ;;
*)
    echo "usage: tools/gpu/slurm_kit.sh prepare|start|stop|conf|gres-conf|env" >&2
    exit 2
    ;;
esac
