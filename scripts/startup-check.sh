#!/usr/bin/env bash
# What nvcc's fatbin compression costs a kit at start-up, on a real GPU (issue 23 item 4):
# the example engine's ninfer built with --compress-mode=default and =size, for each arch of
# ARCHS (default 86; the engine, as the upstreams, builds 86, 89 and 120a only: on the GPU
# host's H200, 9.0, the driver JIT-compiles their PTX), started RUNS times under `env -i`; the
# smoke test runs every kernel.
#
# usage: scripts/startup-check.sh prepare     # here: the builds into .cache/startup-check/
#        scripts/startup-check.sh run [OUT]   # on the GPU host: time them, print a table
#
# prepare: a build of the example per arch and mode, without FFmpeg (the GPU host has none),
# separable compilation as the upstreams build; about a minute each on 2 cores. run: for each
# build, the size of kit/bin/ninfer and of its tar.gz, then the median wall time of RUNS
# starts (default 5) with the driver's JIT cache off
# (CUDA_CACHE_DISABLE=1: every start compiles what it must) and on (a warm cache, as a user's
# second start). Through the device tool:
#   run(command="bash scripts/startup-check.sh run $OUT", carry=[".cache/startup-check"])
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$here/.cache/startup-check"
read -r -a ARCHS <<<"${ARCHS:-86}"
MODES=(default size)
RUNS="${RUNS:-5}"

prepare() {
    local python="${PYTHON:-python3}" arch mode out
    PATH="$(dirname "$python"):$PATH"
    export PATH
    rm -rf "$work" && mkdir -p "$work"
    for arch in "${ARCHS[@]}"; do
        for mode in "${MODES[@]}"; do
            out="$work/sm$arch-$mode"
            # the recipe adds its own CUDA flags (reproducibility) after this one
            "$python" "$here/build/recipe.py" --source "$here/examples/engine" \
                --build-dir "$work/build-$arch-$mode" --out "$out" --arch "$arch" \
                --target ninfer=apps/ninfer --target ninfer-serve=apps/ninfer-serve \
                --cmake-option NINFER_WITH_FFMPEG=OFF \
                --cmake-option NINFER_SEPARABLE_COMPILATION=ON \
                --cmake-option "CMAKE_CUDA_FLAGS=--compress-mode=$mode" \
                >"$work/build-$arch-$mode.log" 2>&1
            rm -rf "$work/build-$arch-$mode"
        done
    done
    du -sh "$work"
}

median_seconds() {  # median wall time of RUNS starts of $1, in seconds, env: $2
    local bin="$1" cache="$2" times=() start end
    for _ in $(seq "$RUNS"); do
        start="$(date +%s.%N)"
        env -i CUDA_CACHE_DISABLE="$cache" HOME="$work/home" "$bin" >/dev/null 2>&1 \
            || { echo "failed"; return; }
        end="$(date +%s.%N)"
        times+=("$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.3f", b - a}')")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{t[NR] = $1} END {print t[int((NR + 1) / 2)]}'
}

run() {
    local gpu driver name bin size packed
    gpu="$( (nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader || echo "no GPU") | head -n1)"
    driver="$( (nvidia-smi --query-gpu=driver_version --format=csv,noheader || echo none) | head -n1)"
    mkdir -p "$work/home"
    echo "GPU: $gpu, driver $driver; median of $RUNS starts each"
    echo
    echo "| build | ninfer | its tar.gz (both programs) | start, JIT cache off | start, JIT cache warm | smoke test |"
    echo "|---|---|---|---|---|---|"
    for folder in "$work"/sm*; do
        name="$(basename "$folder")" bin="$folder/kit/bin/ninfer"
        size="$(stat -c %s "$bin")"
        packed="$(tar -C "$folder" -cf - kit/bin | gzip -6 | wc -c)"
        env -i HOME="$work/home" "$bin" >/dev/null 2>&1 || true  # warms the JIT cache
        echo "| $name | $size | $packed | $(median_seconds "$bin" 1) s | $(median_seconds "$bin" 0) s |" \
            "$(env -i HOME="$work/home" "$bin" 2>&1 | grep -m1 -E "kernel smoke test|failed" || echo "?") |"
    done
}

case "${1:-}" in
    prepare) prepare ;;
    run)
        if [[ -n "${2:-}" ]]; then
            run 2>&1 | tee "$2/startup-check.txt"
        else
            run
        fi ;;
    *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
