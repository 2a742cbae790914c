#!/usr/bin/env bash
# Start a Docker engine on a machine that has only the docker client (idempotent).
#
# usage: start-docker-engine.sh [--name NAME] [--host URL] [--storage-driver DRIVER] [--timeout SECONDS]
#
# Without --name it makes sure the machine's main engine answers: if `docker info` already works
# (with DOCKER_HOST as set in the environment) it exits 0 at once; otherwise it installs docker.io
# through apt when dockerd is missing, starts
#   dockerd --iptables=false --ip6tables=false --bridge=none --storage-driver=overlay2
# in the background (log /var/log/ninfer-kits-dockerd.log, pidfile /run/ninfer-kits-dockerd.pid,
# Docker's default socket, data root and exec root) and waits until `docker info` answers.
#
# With --name NAME it starts a SECOND, independent engine (the tests use one to check that
# DOCKER_HOST is honoured): socket unix:///run/ninfer-kits-NAME.sock unless --host says otherwise
# (unix:///PATH or tcp://127.0.0.1:PORT), data root /var/lib/ninfer-kits-NAME, exec root
# /run/ninfer-kits-NAME, pidfile /run/ninfer-kits-NAME.pid, log /var/log/ninfer-kits-NAME.log.
# Stop it with scripts/stop-docker-engine.sh NAME.
#
# On success the last line on stdout is the engine's address (the DOCKER_HOST value to use);
# everything else goes to stderr. Environment equivalents of the options:
#   NINFER_KITS_ENGINE_NAME, NINFER_KITS_ENGINE_HOST, NINFER_KITS_STORAGE_DRIVER, NINFER_KITS_ENGINE_TIMEOUT
# The storage driver defaults to overlay2; when the engine cannot start with it, the script says
# so and retries once with vfs (slow and big, but it works on any file system). Needs root.
set -euo pipefail

usage() {
    echo "usage: $0 [--name NAME] [--host unix:///PATH|tcp://127.0.0.1:PORT] [--storage-driver overlay2|vfs] [--timeout SECONDS]" >&2
    exit 2
}

log() { echo "start-docker-engine: $*" >&2; }

name="${NINFER_KITS_ENGINE_NAME:-}"
host="${NINFER_KITS_ENGINE_HOST:-}"
driver="${NINFER_KITS_STORAGE_DRIVER:-overlay2}"
timeout="${NINFER_KITS_ENGINE_TIMEOUT:-60}"
driver_given=0
[[ -n "${NINFER_KITS_STORAGE_DRIVER:-}" ]] && driver_given=1

while (($#)); do
    case "$1" in
        --name) [[ $# -ge 2 ]] || usage; name="$2"; shift 2 ;;
        --host) [[ $# -ge 2 ]] || usage; host="$2"; shift 2 ;;
        --storage-driver) [[ $# -ge 2 ]] || usage; driver="$2"; driver_given=1; shift 2 ;;
        --timeout) [[ $# -ge 2 ]] || usage; timeout="$2"; shift 2 ;;
        -h|--help) usage ;;
        *) log "unknown argument: $1"; usage ;;
    esac
done

[[ "$timeout" =~ ^[0-9]+$ ]] || { log "--timeout must be a number of seconds, not '$timeout'"; exit 2; }
if [[ -n "$name" && ! "$name" =~ ^[a-z0-9][a-z0-9_-]*$ ]]; then
    log "--name must be lower-case letters, digits, '-' or '_', not '$name'"
    exit 2
fi
if [[ -n "$host" && ! "$host" =~ ^(unix:///|tcp://) ]]; then
    log "--host must look like unix:///PATH or tcp://127.0.0.1:PORT, not '$host'"
    exit 2
fi

daemon_args=(--iptables=false --ip6tables=false --bridge=none)
if [[ -z "$name" ]]; then
    # The main engine: Docker's own default socket, data root and exec root.
    pidfile=/run/ninfer-kits-dockerd.pid
    logfile=/var/log/ninfer-kits-dockerd.log
    if [[ -n "$host" ]]; then
        daemon_args+=(--host "$host")
    fi
    client_host="${host:-unix:///var/run/docker.sock}"
else
    host="${host:-unix:///run/ninfer-kits-$name.sock}"
    pidfile="/run/ninfer-kits-$name.pid"
    logfile="/var/log/ninfer-kits-$name.log"
    daemon_args+=(--host "$host" --data-root "/var/lib/ninfer-kits-$name" --exec-root "/run/ninfer-kits-$name")
    client_host="$host"
fi
daemon_args+=(--pidfile "$pidfile")

answers() { docker -H "$client_host" info >/dev/null 2>&1; }

# The main engine as the environment names it (DOCKER_HOST or Docker's default socket).
answers_as_configured() {
    if [[ -z "$name" && -z "$host" ]]; then
        docker info >/dev/null 2>&1
    else
        answers
    fi
}

daemon_pid() {
    local pid
    [[ -s "$pidfile" ]] || return 1
    pid="$(cat "$pidfile")"
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

if ! command -v docker >/dev/null 2>&1; then
    need_client=1
else
    need_client=0
    if answers_as_configured; then
        if [[ -z "$name" && -z "$host" && -n "${DOCKER_HOST:-}" ]]; then
            client_host="$DOCKER_HOST"
        fi
        log "the engine at $client_host already answers"
        echo "$client_host"
        exit 0
    fi
fi

if [[ "$(id -u)" != 0 ]]; then
    log "no engine answers at $client_host and starting one needs root"
    exit 1
fi

# One starter at a time per engine (parallel test workers may all call this script).
exec 9>"${pidfile%.pid}.lock"
flock 9
if ((need_client == 0)) && answers; then
    log "the engine at $client_host answers (started meanwhile by another caller)"
    echo "$client_host"
    exit 0
fi

if ! command -v dockerd >/dev/null 2>&1 || ((need_client)); then
    log "installing docker.io with apt (dockerd is missing)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends docker.io >&2
    # Where systemd runs, installing the package may have started the engine already.
    if [[ -z "$name" && -z "$host" ]] && answers; then
        log "the engine at $client_host answers (started by the docker.io package)"
        echo "$client_host"
        exit 0
    fi
fi

start_daemon() {
    local storage="$1"
    mkdir -p "$(dirname "$logfile")"
    log "starting dockerd (storage driver $storage, log $logfile)"
    echo "=== $(date -u +%Y-%m-%dT%H:%M:%SZ) start-docker-engine: dockerd ${daemon_args[*]} --storage-driver=$storage" >>"$logfile"
    # setsid: the engine outlives this script, its caller and the caller's process group.
    setsid dockerd "${daemon_args[@]}" --storage-driver="$storage" </dev/null >>"$logfile" 2>&1 9>&- &
    engine_pid=$!
}

# Waits for the engine to answer. 0: it answers; 1: the daemon died; 2: timed out.
wait_for_engine() {
    local deadline=$((SECONDS + timeout))
    while ((SECONDS < deadline)); do
        if answers; then
            return 0
        fi
        if ! kill -0 "$engine_pid" 2>/dev/null; then
            return 1
        fi
        sleep 1
    done
    return 2
}

fail() {
    local attempt
    # Only this attempt's part of the log (each start appends a "=== ..." line first).
    attempt="$(awk '/^=== /{buf=""} {buf = buf $0 "\n"} END{printf "%s", buf}' "$logfile" 2>/dev/null || true)"
    log "$1; its errors and the last lines of $logfile:"
    { grep -E 'level=(error|fatal)|^failed' <<<"$attempt" || true; } | tail -n 8 >&2
    echo "..." >&2
    tail -n 12 <<<"$attempt" >&2
    exit 1
}

engine_pid=""
if engine_pid="$(daemon_pid)"; then
    log "dockerd is already running (pid $engine_pid) but does not answer yet; waiting"
else
    start_daemon "$driver"
fi

status=0
wait_for_engine || status=$?
if ((status == 1)) && ((driver_given == 0)) && [[ "$driver" == overlay2 ]]; then
    log "dockerd exited with the overlay2 storage driver; retrying with --storage-driver=vfs (slower, uses more disk)"
    start_daemon vfs
    status=0
    wait_for_engine || status=$?
fi
case "$status" in
    0) ;;
    1) fail "dockerd exited before it answered" ;;
    *) fail "no answer from the engine at $client_host within $timeout s" ;;
esac

used_driver="$(docker -H "$client_host" info --format '{{.Driver}}' 2>/dev/null || echo unknown)"
log "the engine at $client_host answers (storage driver $used_driver, pid $engine_pid)"
echo "$client_host"
