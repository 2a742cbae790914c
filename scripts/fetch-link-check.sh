#!/usr/bin/env bash
# The fetch-link benchmark on a machine with more cores than CI's two: does fetch keep pace with a
# 200 MB/s link when hashing, inflating and unpacking have cores to run on?
#
# Run on the GPU host (16 cores; no PyPI there), from the repository root, by the device tool:
#   run(command="bash scripts/fetch-link-check.sh $OUT", carry=[".cache/device-wheels"])
# where .cache/device-wheels holds the pinned deflate wheel (abi3), made here with
#   pip download --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_17_x86_64 deflate==0.9.0 -d .cache/device-wheels
# The kit is built there from that machine's own NVIDIA libraries (NINFER_KITS_BENCH_LIBRARIES:
# the four libraries of the pinned wheels, from its CUDA 13.0 toolkit), then its largest shared
# libraries, as on any machine. What comes back: the run's log and its report rows, kept in
# tests/benchmarks/recorded/.
set -euo pipefail
out=${1:?usage: fetch-link-check.sh OUTDIR}
deps=$(mktemp -d)
python3 -m pip install --quiet --no-index --no-deps --target "$deps" .cache/device-wheels/deflate-*.whl
libs=$(dirname "$(readlink -f /usr/local/cuda/lib64/libcurand.so.10)")
export PYTHONPATH="$PWD/src:$deps" NINFER_KITS_BENCH_LIBRARIES="$libs"
{
    echo "machine: $(nproc) cores, $(python3 --version), $(curl --version | head -1)"
    echo "libraries: $libs"
    python3 -c 'import deflate; print("deflate", deflate.__version__ if hasattr(deflate, "__version__") else "present")'
} | tee "$out/fetch-link-check.txt"
python3 tests/benchmarks/run.py fetch-link 2>&1 | tee -a "$out/fetch-link-check.txt"
cp docs/benchmarks.md "$out/benchmarks.md"
