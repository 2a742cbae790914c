#!/usr/bin/env bash
# Stop an engine that scripts/start-docker-engine.sh started (idempotent).
#
# usage: stop-docker-engine.sh NAME [--purge] [--timeout SECONDS]
#
# NAME is the --name given to start-docker-engine.sh, or "default" for the main engine
# (pidfile /run/ninfer-kits-dockerd.pid). It sends SIGTERM to the dockerd in the pidfile, waits up
# to --timeout seconds (default 30) for it to exit and then sends SIGKILL. --purge also deletes a
# named engine's data root /var/lib/ninfer-kits-NAME and exec root /run/ninfer-kits-NAME (its
# images, containers and volumes). Exits 0 when no such engine runs.
set -euo pipefail

usage() {
    echo "usage: $0 NAME|default [--purge] [--timeout SECONDS]" >&2
    exit 2
}

log() { echo "stop-docker-engine: $*" >&2; }

name=""
purge=0
timeout=30
while (($#)); do
    case "$1" in
        --purge) purge=1; shift ;;
        --timeout) [[ $# -ge 2 ]] || usage; timeout="$2"; shift 2 ;;
        -h|--help) usage ;;
        -*) log "unknown option: $1"; usage ;;
        *) [[ -z "$name" ]] || usage; name="$1"; shift ;;
    esac
done
[[ -n "$name" ]] || usage
[[ "$name" =~ ^[a-z0-9][a-z0-9_-]*$ ]] || { log "bad engine name '$name'"; exit 2; }
[[ "$timeout" =~ ^[0-9]+$ ]] || { log "--timeout must be a number of seconds"; exit 2; }

if [[ "$name" == default ]]; then
    pidfile=/run/ninfer-kits-dockerd.pid
    ((purge == 0)) || { log "--purge is only for named engines (it would delete /var/lib/docker)"; exit 2; }
else
    pidfile="/run/ninfer-kits-$name.pid"
fi

pid=""
if [[ -s "$pidfile" ]]; then
    pid="$(cat "$pidfile")"
fi
if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    log "stopping dockerd $name (pid $pid)"
    kill -TERM "$pid"
    deadline=$((SECONDS + timeout))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
        sleep 0.5
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "dockerd $name did not exit within $timeout s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 1
    fi
else
    log "no dockerd $name is running"
fi
rm -f "$pidfile" "${pidfile%.pid}.lock"

if ((purge)); then
    for dir in "/var/lib/ninfer-kits-$name" "/run/ninfer-kits-$name"; do
        [[ -e "$dir" ]] || continue
        # A killed engine can leave overlay mounts behind; unmount them before deleting.
        awk -v dir="$dir" '$2 == dir || index($2, dir "/") == 1 {print $2}' /proc/mounts | sort -r | while read -r mountpoint; do
            umount -l "$mountpoint" 2>/dev/null || true
        done
        rm -rf --one-file-system "$dir"
        log "deleted $dir"
    done
    rm -f "/run/ninfer-kits-$name.sock"
fi
