#!/bin/bash
# install.sh SET [TARGET]: a CUDA toolkit in TARGET (default /usr/local/cuda-SET) from the pinned
# NVIDIA wheels of SET.txt beside this script. Run by the Debian toolchain Dockerfiles and by
# scripts/install-cuda-wheels.sh (the same toolkit on a CI runner). Needs python3 with pip.
set -euo pipefail
set_name="$1"
here="$(cd "$(dirname "$0")" && pwd)"
pins="$here/$set_name.txt"
[ -f "$pins" ] || { echo "CUDA_WHEELS='$set_name' names no wheel set of context/cuda-wheels/:" \
    "use $(cd "$here" && ls -- *.txt | sed 's/[.]txt$//' | paste -sd' ' -)" >&2; exit 1; }
target="${2:-/usr/local/cuda-$set_name}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip install --quiet --no-deps --no-compile --only-binary=:all: --require-hashes \
    --target "$work/wheels" -r "$pins"
# The wheels' nvidia/cu13/ tree becomes the prefix; then the links a CUDA install has and wheels
# cannot carry: lib64 -> lib, lib/libX.so -> libX.so.N, targets/x86_64-linux/{include,lib}.
mkdir -p "$target/dist-info" "$target/targets/x86_64-linux"
cp -a "$work/wheels/nvidia/cu13/." "$target/"
rm -rf "$target/.metadata"
mv "$work"/wheels/*.dist-info "$target/dist-info/"
ln -s lib "$target/lib64"
for versioned in "$target"/lib/lib*.so.*; do
    link="${versioned%%.so.*}.so"
    [ -e "$link" ] || ln -s "$(basename "$versioned")" "$link"
done
ln -s ../../include "$target/targets/x86_64-linux/include"
ln -s ../../lib "$target/targets/x86_64-linux/lib"
# This script in the tree it made: Docker's layer cache compares what a `COPY --from` copies by
# content alone, so without it an engine holding the tree of an earlier version of this script
# (other mtimes, below) would reuse that tree.
cp "${BASH_SOURCE[0]}" "$target/dist-info/ninfer-kits-install.sh"
# One mtime for every file (the epoch): pip writes the moment of the install, and nvcc -lineinfo
# records each header's mtime in the device code's line table, so a toolkit installed at another
# moment (another runner's image, next week's) would make other binaries of the same source.
find "$target" -exec touch -h -d @0 {} +
test -x "$target/bin/nvcc" && test -x "$target/nvvm/bin/cicc" \
    && test -L "$target/lib/libcudart.so" && test -f "$target/include/cuda_runtime.h"
expected="V$(sed -n 's/^nvidia-cuda-nvcc==\([^ ]*\) .*/\1/p' "$pins")"
"$target/bin/nvcc" --version | grep -q -- ", $expected\$" \
    || { echo "nvcc does not report $expected:" >&2; "$target/bin/nvcc" --version >&2; exit 1; }
