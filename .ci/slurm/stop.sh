#!/usr/bin/env bash
# Stop the daemons .ci/slurm/start.sh started, by their pid files: slurmd first, munged last.
set -uo pipefail
STATE_DIR=/run/ftqual-slurm

stop() {
    local pidfile="$STATE_DIR/$1.pid" pid
    [[ -f "$pidfile" ]] || return 0
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
        printf '[slurm-stop] stopped %s (pid %s)\n' "$1" "$pid" >&2
    fi
    rm -f "$pidfile"
}

for pidfile in "$STATE_DIR"/slurmd-*.pid; do
    [[ -e "$pidfile" ]] && stop "$(basename "$pidfile" .pid)"
done
stop slurmctld
stop munged
exit 0
