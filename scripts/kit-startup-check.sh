#!/usr/bin/env bash
# What nvcc's fatbin compression costs a real upstream's kit at start-up, on a real GPU
# (issue 23 item 4; scripts/startup-check.sh does the same for the example engine): the
# `kit/bin/ninfer` of two builds of one kit, one with --compress-mode=default and one with
# =size, each started RUNS times with every module of its device code loaded at once.
#
# usage: scripts/kit-startup-check.sh prepare DEFAULT.tar.gz SIZE.tar.gz PORTABLE.tar.gz
#        scripts/kit-startup-check.sh run [OUT]    # on the GPU host, through the device tool:
#   run(command="bash scripts/kit-startup-check.sh run $OUT", carry=[".cache/kit-startup"])
#
# A real upstream's ninfer reaches CUDA only once it has loaded a model (gigabytes), and its
# portable kit is larger than what the device tool carries, so the check starts what matters
# to this question, the loading of the binary's device code, and nothing else:
# - startcuda.so, preloaded, runs in place of main (after every constructor, so the fatbins are
#   registered as in any start): cudaFree(0) under CUDA_MODULE_LOADING=EAGER creates the
#   context and loads every module — on a GPU newer than the kit's SASS (the host's H200, 9.0,
#   for an sm_86 kit) the driver JIT-links the relocatable PTX — then exits;
# - the kit's libstdc++, libgcc_s and libcudart come from its portable tarball; FFmpeg and
#   libcurl, which nothing calls before main, are empty stand-ins that define the versioned
#   symbols ninfer imports, so that the loader accepts them (made from ninfer's own dynamic
#   symbol table).
# Times: the whole process; its first start with an empty JIT cache (every module compiled, as a
# user's first start on a GPU the SASS does not fit; median of COLD_RUNS, default 3), then the
# median of RUNS (default 5) with
# the cache warm (a user's next starts), and one with lazy loading (CUDA's default: nothing
# loaded until a kernel runs, which these starts never do).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$here/.cache/kit-startup"
RUNS="${RUNS:-5}"
COLD_RUNS="${COLD_RUNS:-3}"  # each compiles every module: about a minute for a real upstream
COLD_TIMEOUT="${COLD_TIMEOUT:-240}"
KIT_LIBS=(libstdc++.so.6 libgcc_s.so.1 libcudart.so.13)

stubs() {  # the stand-in libraries for the versioned imports of $1, into $2
    local bin="$1" out="$2" lib version
    mkdir -p "$out"
    readelf -V -W "$bin" | awk '{ for (i = 1; i < NF; i++) {
            if ($i == "File:") file = $(i + 1); if ($i == "Name:") print file, $(i + 1) } }' \
        | while read -r lib version; do
            case "$lib" in libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|libcudart.so.*) continue ;; esac
            readelf --dyn-syms -W "$bin" \
                | awk -v v="$version" '$7 == "UND" && $8 ~ ("@" v "$") { sub(/@.*/, "", $8); print $8 }' \
                | sort -u >"$out/$lib.symbols"
            sed 's/.*/void &(void) {}/' "$out/$lib.symbols" >"$out/$lib.c"
            { echo "$version {"; echo "  global: *;"; echo "};"; } >"$out/$lib.map"
            gcc -shared -fPIC -o "$out/$lib" -Wl,-soname,"$lib" \
                -Wl,--version-script="$out/$lib.map" "$out/$lib.c"
            rm "$out/$lib.c" "$out/$lib.map"
        done
}

prepare() {
    local default_kit="$1" size_kit="$2" portable_kit="$3" mode
    rm -rf "$work" && mkdir -p "$work/lib"
    echo "Kit: $(basename "$size_kit") (default mode: $default_kit; size mode: $size_kit)" \
        >"$work/KIT"
    for mode in default size; do
        mkdir -p "$work/$mode"
        local kit=$default_kit
        [[ $mode == size ]] && kit=$size_kit
        tar -xzf "$kit" -C "$work/$mode" --strip-components=2 --wildcards '*/bin/ninfer'
    done
    for lib in "${KIT_LIBS[@]}"; do
        tar -xzf "$portable_kit" -C "$work/lib" --strip-components=2 --wildcards "*/lib/$lib"
    done
    stubs "$work/size/ninfer" "$work/stubs"
    cmp -s <(readelf -V -W "$work/size/ninfer" | grep -c Name:) \
        <(readelf -V -W "$work/default/ninfer" | grep -c Name:) \
        || { echo "the two builds import different symbol versions" >&2; exit 1; }
    gcc -shared -fPIC -O2 -o "$work/startcuda.so" "$here/scripts/startcuda.c" -ldl
    du -sh "$work"
}

start_once() {  # seconds of one start of $1 (module loading $2), or "failed: why"
    local bin="$1" loading="${2:-EAGER}" start end output
    start="$(date +%s.%N)"
    # (timeout first: LD_PRELOAD is for ninfer alone, startcuda.so would run in timeout's place)
    if ! output="$(timeout "$COLD_TIMEOUT" env -i HOME="$work/home" \
            CUDA_CACHE_MAXSIZE=4294967296 CUDA_MODULE_LOADING="$loading" \
            LD_LIBRARY_PATH="$work/lib:$work/stubs" LD_PRELOAD="$work/startcuda.so" \
            "$bin" 2>&1)"; then
        echo "failed: $(echo "$output" | tail -n1)"
        return
    fi
    end="$(date +%s.%N)"
    awk -v a="$start" -v b="$end" 'BEGIN {printf "%.3f\n", b - a}'
}

median_of() {  # median seconds of $1 starts of $2; $3 = cold: each with an empty JIT cache
    local count="$1" bin="$2" cold="${3:-}" times=() t
    for _ in $(seq "$count"); do
        [[ -n $cold ]] && rm -rf "${work:?}/home" && mkdir -p "$work/home"
        t="$(start_once "$bin")"
        [[ $t == failed* ]] && { echo "$t"; return; }
        times+=("$t")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk '{t[NR] = $1} END {print t[int((NR + 1) / 2)]}'
}

run() {
    local gpu driver mode bin cold
    gpu="$( (nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader || echo "no GPU") | head -n1)"
    driver="$( (nvidia-smi --query-gpu=driver_version --format=csv,noheader || echo none) | head -n1)"
    echo "GPU: $gpu, driver $driver; warm: median of $RUNS starts; cold: median of $COLD_RUNS"
    cat "$work/KIT"
    echo
    echo "| build | ninfer | first start, empty JIT cache | start, JIT cache warm | lazy loading | what startcuda said |"
    echo "|---|---|---|---|---|---|"
    for mode in default size; do
        bin="$work/$mode/ninfer"
        cold="$(median_of "$COLD_RUNS" "$bin" cold)"  # the last one leaves the cache filled
        echo "| $mode | $(stat -c %s "$bin") | $cold s | $(median_of "$RUNS" "$bin") s |" \
            "$(start_once "$bin" LAZY) s |" \
            "$(env -i HOME="$work/home" CUDA_MODULE_LOADING=EAGER \
                LD_LIBRARY_PATH="$work/lib:$work/stubs" LD_PRELOAD="$work/startcuda.so" \
                "$bin" 2>&1 | tail -n1) |"
    done
}

case "${1:-}" in
    prepare) shift; [[ $# -eq 3 ]] || { sed -n '7,9p' "$0" >&2; exit 2; }; prepare "$@" ;;
    run)
        if [[ -n "${2:-}" ]]; then
            run 2>&1 | tee "$2/kit-startup-check.txt"
        else
            run
        fi ;;
    *) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
