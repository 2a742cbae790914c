#!/usr/bin/env bash
# Build a Debian base image without a container registry: debootstrap a root, import it.
#
# usage: make-base-image.sh IMAGE:TAG [SUITE] [--include PKGS] [--mirror URL] [--force]
#
#   IMAGE:TAG       the image to make, e.g. ninfer-kits/debian-trixie-base:local
#   SUITE           the Debian suite (default trixie)
#   --include PKGS  extra packages, comma- or space-separated; this REPLACES the default list.
#                   --include '' gives a plain minbase root (what the test runtime image starts from).
#                   Default: the toolchain's needs (see DEFAULT_INCLUDE below).
#   --mirror URL    the Debian mirror; default: the machine's own apt sources
#                   (/etc/apt/sources.list.d/*.sources, *.list, /etc/apt/sources.list), never a
#                   hard-coded host. Also NINFER_KITS_DEBIAN_MIRROR.
#   --force         rebuild even when IMAGE:TAG already exists (otherwise the script exits 0 at once)
#
# It runs `debootstrap --variant=minbase --include=... SUITE DIR MIRROR` (installing debootstrap
# with apt when it is missing), empties apt's caches and lists and the logs in DIR, and imports it
# with `tar -C DIR -c . | docker import - IMAGE:TAG`. The image gets a PATH, LANG=C.UTF-8, CMD bash
# and labels naming the suite, the mirror and the package list. Needs root and a Docker engine
# (scripts/start-docker-engine.sh); DOCKER_HOST is honoured. The image's own apt sources point at
# the same mirror, so `apt-get install` works inside it over the machine's network.
set -euo pipefail

DEFAULT_INCLUDE="build-essential cmake ninja-build pkg-config ccache git python3 ca-certificates
libcurl4-openssl-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev"

usage() {
    echo "usage: $0 IMAGE:TAG [SUITE] [--include PKGS] [--mirror URL] [--force]" >&2
    exit 2
}

log() { echo "make-base-image: $*" >&2; }

image=""
suite=""
include="$DEFAULT_INCLUDE"
mirror="${NINFER_KITS_DEBIAN_MIRROR:-}"
force=0
while (($#)); do
    case "$1" in
        --include) [[ $# -ge 2 ]] || usage; include="$2"; shift 2 ;;
        --include=*) include="${1#--include=}"; shift ;;
        --mirror) [[ $# -ge 2 ]] || usage; mirror="$2"; shift 2 ;;
        --force) force=1; shift ;;
        -h|--help) usage ;;
        -*) log "unknown option: $1"; usage ;;
        *)
            if [[ -z "$image" ]]; then image="$1"
            elif [[ -z "$suite" ]]; then suite="$1"
            else usage
            fi
            shift ;;
    esac
done
[[ -n "$image" ]] || usage
[[ "$image" == *:* ]] || { log "give the image as IMAGE:TAG, not '$image'"; exit 2; }
suite="${suite:-trixie}"
[[ "$suite" =~ ^[a-z][a-z0-9-]*$ ]] || { log "bad suite name '$suite'"; exit 2; }
# Normalise the package list: commas or blanks between names, none at the ends.
packages="$(sed -E 's/[,[:space:]]+/\n/g' <<<"$include" | sed '/^$/d' | paste -sd, -)"

command -v docker >/dev/null 2>&1 || { log "the docker client is missing"; exit 1; }
docker info >/dev/null 2>&1 || {
    log "no Docker engine answers (start one with scripts/start-docker-engine.sh)"
    exit 1
}
if ((force == 0)) && docker image inspect "$image" >/dev/null 2>&1; then
    log "$image already exists (give --force to rebuild it)"
    exit 0
fi
[[ "$(id -u)" == 0 ]] || { log "debootstrap needs root"; exit 1; }

# The machine's own Debian mirror: the first enabled "deb" source whose suites include this
# machine's release by its plain name (so not -security, -updates or a third-party repository).
find_mirror() {
    local codename file files=()
    codename="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release 2>/dev/null | tr -d '"')"
    for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f "$file" ]] && files+=("$file")
    done
    ((${#files[@]})) || return 1
    awk -v codename="$codename" '
        function consider(types, uri, suites,    n, i, list) {
            if (types !~ /(^| )deb( |$)/ || uri == "") return
            n = split(suites, list, " ")
            for (i = 1; i <= n; i++) {
                if (codename == "" || list[i] == codename) {
                    if (best == "") best = uri
                    return
                }
            }
        }
        FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
        function flush() { if (types != "") consider(types, uri, suites); types = uri = suites = ""; enabled = 1 }
        deb822 && /^[ \t]*$/ { flush(); next }
        deb822 && /^[ \t]*#/ { next }
        deb822 && tolower($1) == "types:"   { $1 = ""; types = $0 }
        deb822 && tolower($1) == "uris:"    { uri = $2 }
        deb822 && tolower($1) == "suites:"  { $1 = ""; suites = $0 }
        deb822 && tolower($1) == "enabled:" && tolower($2) == "no" { types = "disabled" }
        !deb822 && $1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
            consider("deb", $i, $(i + 1))
        }
        END { flush(); if (best != "") print best }
    ' "${files[@]}"
}

if [[ -z "$mirror" ]]; then
    mirror="$(find_mirror || true)"
    [[ -n "$mirror" ]] || {
        log "found no Debian mirror in /etc/apt/sources.list{,.d}; give one with --mirror URL"
        exit 1
    }
fi
mirror="${mirror%/}"

# Debian's keyring too: an Ubuntu host (a GitHub-hosted runner) has debootstrap's scripts for
# Debian's suites but not the keys they check the archive with.
# Several of these scripts may run at once (the tests make base images in parallel): one
# installs, the others wait for it (a second apt-get beside the first fails at once).
lacks_tools() {
    ! command -v debootstrap >/dev/null 2>&1 || [[ ! -f /usr/share/keyrings/debian-archive-keyring.gpg ]]
}
if lacks_tools; then
    exec 9>/run/lock/ninfer-kits-make-base-image.lock
    flock 9
    if lacks_tools; then
        log "installing debootstrap and debian-archive-keyring with apt"
        export DEBIAN_FRONTEND=noninteractive
        apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
        apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
            debootstrap debian-archive-keyring >&2
    fi
    exec 9>&-
fi

workdir="$(mktemp -d /var/tmp/ninfer-kits-base.XXXXXX)"
cleanup() {
    # debootstrap may leave /proc or /sys mounted in the root after a failure.
    local mountpoint
    awk -v dir="$workdir" 'index($2, dir "/") == 1 {print $2}' /proc/mounts | sort -r |
        while read -r mountpoint; do umount -l "$mountpoint" 2>/dev/null || true; done
    rm -rf --one-file-system "$workdir"
}
trap cleanup EXIT
root="$workdir/root"

log "debootstrap --variant=minbase $suite from $mirror${packages:+ with $packages}"
started=$SECONDS
debootstrap_args=(--variant=minbase)
[[ -z "$packages" ]] || debootstrap_args+=("--include=$packages")
if ! debootstrap "${debootstrap_args[@]}" "$suite" "$root" "$mirror" >"$workdir/debootstrap.log" 2>&1; then
    log "debootstrap failed; the end of its log:"
    tail -n 30 "$workdir/debootstrap.log" >&2
    [[ -f "$root/debootstrap/debootstrap.log" ]] && tail -n 30 "$root/debootstrap/debootstrap.log" >&2
    exit 1
fi
debootstrap_seconds=$((SECONDS - started))

# Nothing that only records how and when the root was made.
rm -rf "${root:?}"/var/lib/apt/lists/* "${root:?}"/var/cache/apt/*.bin \
    "${root:?}"/var/cache/apt/archives/*.deb "${root:?}"/var/cache/apt/archives/partial/* \
    "${root:?}"/var/cache/ldconfig/aux-cache "${root:?}"/var/log/apt/* "${root:?}"/var/log/dpkg.log \
    "${root:?}"/var/log/alternatives.log "${root:?}"/var/log/bootstrap.log "${root:?}"/tmp/* \
    "${root:?}"/root/.cache
: >"$root/etc/machine-id" 2>/dev/null || true
printf 'deb %s %s main\n' "$mirror" "$suite" >"$root/etc/apt/sources.list"
root_size="$(du -sh --apparent-size "$root" | cut -f1)"

log "importing the root ($root_size) as $image"
started=$SECONDS
tar -C "$root" --numeric-owner --sort=name -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    --change "LABEL org.ninfer-kits.base.suite=$suite" \
    --change "LABEL org.ninfer-kits.base.mirror=$mirror" \
    --change "LABEL org.ninfer-kits.base.packages=${packages:-none}" \
    - "$image" >/dev/null
import_seconds=$((SECONDS - started))

size="$(docker image inspect --format '{{.Size}}' "$image")"
log "made $image: debootstrap ${debootstrap_seconds} s, import ${import_seconds} s, root $root_size, image $((size / 1000000)) MB"
