#!/usr/bin/env bash
# Install a CUDA toolkit on this machine from NVIDIA's PyPI wheels (no NVIDIA apt repository,
# no registry image): what the tests expect at /usr/local/cuda (nvcc, cudart, the headers).
#
# usage: install-cuda-wheels.sh [13.0|13.1] [--prefix DIR] [--force] [--requirements]
#
# The wheel set (names, versions and sha256 pins) is read from
# dockerfiles/toolchain-wheels-debian.Dockerfile, the test toolchain image's own recipe, so the
# host's toolkit and the image's are the same files. pip installs them with --require-hashes into
# a temporary folder; their nvidia/cu13/ tree becomes DIR/cuda-VERSION (DIR: /usr/local), with the
# links a CUDA install has and wheels cannot carry (lib64 -> lib, lib/libX.so -> libX.so.N,
# targets/x86_64-linux/{include,lib}) and DIR/cuda -> cuda-VERSION. The wheels' dist-info folders
# are kept in DIR/cuda-VERSION/dist-info. An install whose nvcc already reports the version is
# kept unless --force; --requirements only prints the pinned requirement lines. Needs python3
# with pip and network access to PyPI (PIP_CERT names a CA bundle where TLS goes through a local
# CA); root for /usr/local.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dockerfile="$here/dockerfiles/toolchain-wheels-debian.Dockerfile"
log() { echo "install-cuda-wheels: $*" >&2; }
usage() { echo "usage: $0 [13.0|13.1] [--prefix DIR] [--force] [--requirements]" >&2; exit 2; }

version=13.0
prefix=/usr/local
force=0
list=0
while (($#)); do
    case "$1" in
        --prefix) [[ $# -ge 2 ]] || usage; prefix="$2"; shift 2 ;;
        --force) force=1; shift ;;
        --requirements) list=1; shift ;;
        -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
        13.0|13.1) version="$1"; shift ;;
        *) log "unknown argument: $1"; usage ;;
    esac
done

# The pins of this version's case in the Dockerfile: `13.0) echo NVCC > ...; printf ...
# 'NAME==VERSION --hash=sha256:HEX' ... ;;`.
pins="$(awk -v want="$version)" '
    $1 == want { inside = 1 }
    inside { while (match($0, /\047[A-Za-z0-9_.-]+==[^ \047]+ --hash=sha256:[0-9a-f]+\047/)) {
                 print substr($0, RSTART + 1, RLENGTH - 2); $0 = substr($0, RSTART + RLENGTH) } }
    inside && /;;/ { exit }' "$dockerfile")"
nvcc_version="$(awk -v want="$version)" '$1 == want { print $3; exit }' "$dockerfile")"
if [[ -z "$pins" || ! "$nvcc_version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    log "found no wheel set for CUDA $version in $dockerfile"
    exit 1
fi
if ((list)); then
    printf '%s\n' "$pins"
    exit 0
fi

target="$prefix/cuda-$version"
if ((force == 0)) && [[ -x "$target/bin/nvcc" ]] \
        && "$target/bin/nvcc" --version 2>/dev/null | grep -q -- ", V$nvcc_version\$"; then
    log "$target already has nvcc V$nvcc_version"
else
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    printf '%s\n' "$pins" >"$work/requirements.txt"
    log "installing $(wc -l <"$work/requirements.txt") pinned wheels (nvcc V$nvcc_version) into $target"
    PIP_DISABLE_PIP_VERSION_CHECK=1 python3 -m pip install --quiet --no-deps --no-compile \
        --no-cache-dir --only-binary=:all: --require-hashes --target "$work/wheels" \
        -r "$work/requirements.txt" >&2
    rm -rf "$target.partial"
    mkdir -p "$target.partial/dist-info" "$target.partial/targets/x86_64-linux"
    cp -a "$work/wheels/nvidia/cu13/." "$target.partial/"
    rm -rf "$target.partial/.metadata"
    mv "$work"/wheels/*.dist-info "$target.partial/dist-info/"
    ln -s lib "$target.partial/lib64"
    for versioned in "$target.partial"/lib/lib*.so.*; do
        link="${versioned%%.so.*}.so"
        [[ -e "$link" ]] || ln -s "$(basename "$versioned")" "$link"
    done
    ln -s ../../include "$target.partial/targets/x86_64-linux/include"
    ln -s ../../lib "$target.partial/targets/x86_64-linux/lib"
    rm -rf "$target"
    mv "$target.partial" "$target"
fi
ln -sfn "cuda-$version" "$prefix/cuda"
"$prefix/cuda/bin/nvcc" --version | grep -q -- ", V$nvcc_version\$" \
    || { log "$prefix/cuda/bin/nvcc does not report V$nvcc_version"; exit 1; }
[[ -f "$prefix/cuda/lib64/libcudart.so.13" && -f "$prefix/cuda/include/cuda_runtime.h" ]] \
    || { log "$prefix/cuda lacks libcudart.so.13 or cuda_runtime.h"; exit 1; }
log "nvcc V$nvcc_version at $prefix/cuda/bin/nvcc"
