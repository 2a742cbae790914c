#!/usr/bin/env bash
# Install a CUDA toolkit on this machine from NVIDIA's PyPI wheels (no NVIDIA apt repository,
# no registry image): what the tests expect at /usr/local/cuda (nvcc, cudart, the headers).
#
# usage: install-cuda-wheels.sh [13.0|13.1] [--prefix DIR] [--force] [--requirements]
#
# The wheel set (names, versions and sha256 pins) and the way a toolkit is made of it are the
# test toolchain images' own (dockerfiles/context/cuda-wheels/VERSION.txt and install.sh), so
# the host's toolkit and the image's are the same files: DIR/cuda-VERSION (DIR: /usr/local),
# with DIR/cuda -> cuda-VERSION. An install whose nvcc already reports the version is
# kept unless --force; --requirements only prints the pinned requirement lines. Needs python3
# with pip and network access to PyPI (PIP_CERT names a CA bundle where TLS goes through a local
# CA); root for /usr/local.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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

wheels="$here/dockerfiles/context/cuda-wheels"
pins="$(grep -E '^[A-Za-z0-9_.-]+==[^ ]+ --hash=sha256:[0-9a-f]{64}$' "$wheels/$version.txt" || true)"
nvcc_version="$(sed -n 's/^nvidia-cuda-nvcc==\([^ ]*\) .*/\1/p' <<<"$pins")"
if [[ -z "$pins" || ! "$nvcc_version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    log "found no wheel set for CUDA $version in $wheels/$version.txt"
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
    log "installing $(wc -l <<<"$pins") pinned wheels (nvcc V$nvcc_version) into $target"
    rm -rf "$target.partial"
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
        bash "$wheels/install.sh" "$version" "$target.partial" >&2
    rm -rf "$target"
    mv "$target.partial" "$target"
fi
ln -sfn "cuda-$version" "$prefix/cuda"
"$prefix/cuda/bin/nvcc" --version | grep -q -- ", V$nvcc_version\$" \
    || { log "$prefix/cuda/bin/nvcc does not report V$nvcc_version"; exit 1; }
[[ -f "$prefix/cuda/lib64/libcudart.so.13" && -f "$prefix/cuda/include/cuda_runtime.h" ]] \
    || { log "$prefix/cuda lacks libcudart.so.13 or cuda_runtime.h"; exit 1; }
log "nvcc V$nvcc_version at $prefix/cuda/bin/nvcc"
