#!/bin/bash
# install.sh SET: a CUDA toolkit at /usr/local/cuda-SET from the pinned NVIDIA wheels of SET.txt
# (run in the first stage of the Debian toolchain Dockerfiles, with pip and its CA at hand).
set -euo pipefail
set_name="$1"
here="$(dirname "$0")"
pins="$here/$set_name.txt"
[ -f "$pins" ] || { echo "CUDA_WHEELS='$set_name' names no wheel set of context/cuda-wheels/:" \
    "use $(cd "$here" && ls -- *.txt | sed 's/[.]txt$//' | paste -sd' ' -)" >&2; exit 1; }
python3 -m pip install --no-deps --no-compile --only-binary=:all: --require-hashes \
    --target /tmp/wheels -r "$pins"
# The wheels' nvidia/cu13/ tree becomes the prefix; then the links a CUDA install has and wheels
# cannot carry: lib64 -> lib, lib/libX.so -> libX.so.N, targets/x86_64-linux/{include,lib}.
prefix="/usr/local/cuda-$set_name"
mkdir -p "$prefix/dist-info" "$prefix/targets/x86_64-linux"
cp -a /tmp/wheels/nvidia/cu13/. "$prefix/"
rm -rf "$prefix/.metadata"
mv /tmp/wheels/*.dist-info "$prefix/dist-info/"
rm -rf /tmp/wheels
ln -s lib "$prefix/lib64"
for versioned in "$prefix"/lib/lib*.so.*; do
    link="${versioned%%.so.*}.so"
    [ -e "$link" ] || ln -s "$(basename "$versioned")" "$link"
done
ln -s ../../include "$prefix/targets/x86_64-linux/include"
ln -s ../../lib "$prefix/targets/x86_64-linux/lib"
test -x "$prefix/bin/nvcc" && test -x "$prefix/nvvm/bin/cicc" \
    && test -L "$prefix/lib/libcudart.so" && test -f "$prefix/include/cuda_runtime.h"
expected="V$(sed -n 's/^nvidia-cuda-nvcc==\([^ ]*\) .*/\1/p' "$pins")"
"$prefix/bin/nvcc" --version | grep -q -- ", $expected\$" \
    || { echo "nvcc does not report $expected:" >&2; "$prefix/bin/nvcc" --version >&2; exit 1; }
