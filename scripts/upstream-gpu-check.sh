#!/usr/bin/env bash
# What only a GPU can answer about a real upstream's portable kit (issue 37 item 4): does it
# start with nothing of the host but its glibc and its NVIDIA driver, every module of its device
# code loaded — on the host, and in a Debian 11 root there — and do `verify` and the run agree
# on whether the host's GPU can run it?
#
# usage: scripts/upstream-gpu-check.sh prepare NAME PORTABLE.tar.gz   # here
#        scripts/upstream-gpu-check.sh run NAME [OUT]                # on the GPU host
#        scripts/upstream-gpu-check.sh run-root NAME [OUT]  # the same less the starts on the host
#   through the device tool:
#   run(command="bash scripts/upstream-gpu-check.sh run NAME $OUT",
#       carry=[".cache/upstream-gpu/NAME", ".cache/upstream-gpu/bullseye-libc6.tar.xz"])
#
# prepare (needs a Docker engine with the bullseye-sysroot toolchain image and the bullseye
# minbase image: the tests make both) puts into .cache/upstream-gpu/NAME/: the tarball's tar
# stream in xz (run checks its sha256 against the one `gzip -dc` of the tarball gave), startcuda.so (scripts/startcuda.c, compiled by the portable toolchain
# so that it loads on glibc 2.31) and KERNEL, one kernel of the kit's
# `ninfer` (a name its .symtab has for a kernel's launch stub); and, for every kit, into
# .cache/upstream-gpu/, the files of Debian 11's libc6 package (a glibc 2.31 root: nothing else
# of Debian is needed by a portable kit). Carry both folders.
#
# run, for the kit unpacked from that tarball into an empty folder:
# - `verify` on this host: its table and exit status;
# - `ldd kit/bin/ninfer` under `env -i`: where each library comes from;
# - the start: `kit/bin/ninfer` under `env -i` (HOME, CUDA_MODULE_LOADING=EAGER and the preload
#   only), startcuda.so in place of main: cudaFree(0) loads every module (on a GPU the SASS does
#   not fit, the driver JIT-links the relocatable PTX, into an empty JIT cache), then launches
#   KERNEL <<<1, 1>>> (its parameters zero: a fault in it still says the image loaded) and waits;
# - the same in the Debian 11 root, entered with chroot in a mount namespace of its own (as root,
#   or as an unprivileged user's namespace), the host's /dev, /proc and /sys bound into it and
#   the host's driver libraries copied into its /driver (LD_LIBRARY_PATH): its glibc is 2.31;
#   and `verify --root` of that root. (The host's chroot, started with the same environment,
#   says it cannot preload /startcuda.so, which is the root's: harmless.)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLCHAIN_REPOSITORY=ninfer-kits/toolchain-bullseye-sysroot-cuda130
ROOT_IMAGE=ninfer-kits/debian-bullseye-minbase:local

usage() { sed -n '8,12p' "$0" >&2; exit 2; }

pretty_name() { sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$1"; }  # of os-release $1

kernel_of() {  # one kernel of ELF $1: "_Z<n>__device_stub__<name>…" names the stub of "_<name>"
    local symbols
    symbols="$(mktemp)"
    nm "$1" >"$symbols"
    awk 'NR == FNR { if ($2 == "t" || $2 == "T") function_named[$3] = 1; next }
         $3 ~ /^_Z[0-9]+__device_stub__/ {
             s = substr($3, 3); n = s + 0; id = substr(s, length(n "") + 1, n)
             kernel = "_" substr(id, 16)
             if (kernel in function_named && !(kernel in seen)) { seen[kernel] = 1; print kernel }
         }' "$symbols" "$symbols" | sort | awk 'NR == 1'
    rm -f "$symbols"
}

prepare() {
    local name="$1" tarball="$2" work="$here/.cache/upstream-gpu/$1" image
    [[ -f "$tarball" ]] || { echo "no such tarball: $tarball" >&2; exit 2; }
    rm -rf "$work" && mkdir -p "$work/tmp"
    # Its tar stream in xz (the device tool carries 64 MiB; a 5090 kit's .tar.gz is more), and
    # that stream's sha256, which run checks: what `gzip -dc` of the tarball as built gives.
    gzip -dc "$tarball" >"$work/tmp/kit.tar"
    sha256sum "$work/tmp/kit.tar" | cut -d' ' -f1 >"$work/kit.tar.sha256"
    xz -T0 -9 -c "$work/tmp/kit.tar" >"$work/kit.tar.xz"
    echo "$(basename "$tarball") (sha256 $(sha256sum "$tarball" | cut -d' ' -f1))" >"$work/KIT"
    tar -xzf "$tarball" -C "$work/tmp" --wildcards '*/bin/ninfer'
    kernel_of "$(find "$work/tmp" -path '*/bin/ninfer' -type f)" >"$work/KERNEL"
    [[ -s "$work/KERNEL" ]] || { echo "no kernel found in $tarball's ninfer" >&2; exit 1; }
    image="$(docker images --format '{{.Repository}}:{{.Tag}}' "$TOOLCHAIN_REPOSITORY" | head -n1)"
    [[ -n "$image" ]] || { echo "no $TOOLCHAIN_REPOSITORY image on this engine" >&2; exit 1; }
    docker run --rm -v "$here/scripts/startcuda.c:/in/startcuda.c:ro" -v "$work:/out" "$image" \
        gcc -shared -fPIC -O2 -o /out/startcuda.so /in/startcuda.c -ldl
    # Its folders too, and each path through the real folder (in a merged-/usr root /lib is a
    # link to usr/lib, which dpkg's list goes through).
    docker run --rm "$ROOT_IMAGE" sh -c \
        'dpkg -L libc6 | grep -vx "/\." | while read -r f; do
             d="$(readlink -f "$(dirname "$f")")"; echo "${d#/}/$(basename "$f")"; done \
         | sed "s|^/||" | sort -u | tar -C / --no-recursion -cf - -T - \
             etc/os-release usr/lib/os-release' \
        | xz -T0 -6 >"$here/.cache/upstream-gpu/bullseye-libc6.tar.xz"
    rm -rf "$work/tmp"
    du -sh "$work"
}

# The host's NVIDIA driver libraries (what the loader's cache says libcuda.so.1 is, and the
# libnvidia-*.so beside it: the JIT compiler among them), for the root's /driver.
driver_libraries() {
    local libcuda folder
    libcuda="$(ldconfig -p | awk '/libcuda\.so\.1 .*x86-64/ { print $NF; exit }')"
    [[ -n "$libcuda" ]] || return 0
    folder="$(dirname "$(readlink -f "$libcuda")")"
    find "$folder" -maxdepth 1 \( -name 'libcuda.so*' -o -name 'libnvidia-*.so*' \)
}

start() {  # label, then the command; prints what startcuda said and the seconds it took
    local label="$1" started output status
    shift
    started="$(date +%s.%N)"
    set +e
    output="$(timeout 600 "$@" 2>&1)"
    status=$?
    set -e
    echo "== $label: exit status $status in $(awk -v a="$started" -v b="$(date +%s.%N)" \
        'BEGIN { printf "%.1f", b - a }') s"
    echo "$output" | tail -n 20
}

run() {  # NAME; $mode: "all", or "root" for the Debian 11 root's part alone
    local name="$1" work="$here/.cache/upstream-gpu/$1" kit root kernel python
    kit="/tmp/upstream-gpu-$name" root="/tmp/upstream-gpu-$name-root"
    kernel="$(cat "$work/KERNEL")"
    python="${PYTHON:-python3}"
    echo "== $name: $(cat "$work/KIT")"
    echo "== host: $( (nvidia-smi --query-gpu=name,compute_cap,driver_version \
        --format=csv,noheader || echo "no GPU") | head -n1); $(pretty_name /etc/os-release); $(ldd --version | head -n1)"
    rm -rf "$kit" "$root" && mkdir -p "$kit" "$root" "$kit-home"
    xz -dc "$work/kit.tar.xz" >"$kit.tar"
    [[ "$(sha256sum "$kit.tar" | cut -d' ' -f1)" == "$(cat "$work/kit.tar.sha256")" ]] \
        || { echo "the kit's tar stream is not the one prepare saw" >&2; exit 1; }
    tar -xf "$kit.tar" -C "$kit" && rm "$kit.tar"
    echo "== verify (this host)"
    PYTHONPATH="$here/src" "$python" -m ninfer_kits verify "$kit" --matrix "$here/matrix.toml" \
        && echo "== verify exit status 0" || echo "== verify exit status $?"
    echo "== ldd kit/bin/ninfer (env -i)"
    env -i ldd "$kit/kit/bin/ninfer" | sed 's/ (0x[0-9a-f]*)//'
    if [[ "$mode" == root ]]; then
        echo "== the starts on the host are left out (run-root): see an earlier run's output"
    else
    start "start on the host, empty JIT cache (env -i; EAGER; launch $kernel)" \
        env -i HOME="$kit-home" CUDA_MODULE_LOADING=EAGER STARTCUDA_KERNEL="$kernel" \
        LD_PRELOAD="$work/startcuda.so" "$kit/kit/bin/ninfer"
    start "start on the host again, JIT cache warm" \
        env -i HOME="$kit-home" CUDA_MODULE_LOADING=EAGER LD_PRELOAD="$work/startcuda.so" \
        "$kit/kit/bin/ninfer"
    fi
    xz -dc "$here/.cache/upstream-gpu/bullseye-libc6.tar.xz" | tar -C "$root" -x
    mkdir -p "$root/driver" "$root/dev" "$root/proc" "$root/sys" "$root/tmp" "$root/home"
    # where verify --root takes a kit to be inside a root (loader/facts.py KIT_MOUNT)
    mkdir -p "$root/opt/ninfer-kit"
    cp -a "$kit/kit" "$root/opt/ninfer-kit/kit" && cp "$work/startcuda.so" "$root/startcuda.so"
    driver_libraries | while read -r library; do cp -a "$library" "$root/driver/"; done
    echo "== the Debian 11 root: $(pretty_name "$root/etc/os-release"), $(find "$root/usr/lib/x86_64-linux-gnu" -maxdepth 1 -name 'libc-*.so' -printf '%f'); driver: $(find "$root/driver" -mindepth 1 -printf '%f ')"
    echo "== verify --root (the Debian 11 root)"
    PYTHONPATH="$here/src" "$python" -m ninfer_kits verify "$kit" --root "$root" \
        --ld-library-path /driver --matrix "$here/matrix.toml" \
        && echo "== verify exit status 0" || echo "== verify exit status $?"
    local enter=(unshare -m) chroot
    [[ "$(id -u)" == 0 ]] || enter=(unshare -r -m)
    chroot="$(command -v chroot)"
    # shellcheck disable=SC2016  # the inner script's own positional parameters
    start "start in the Debian 11 root, empty JIT cache (chroot; env -i; EAGER; launch $kernel)" \
        "${enter[@]}" sh -c 'for d in dev proc sys; do mount --rbind "/$d" "$1/$d"; done
            exec env -i HOME=/home CUDA_MODULE_LOADING=EAGER STARTCUDA_KERNEL="$2" \
                LD_LIBRARY_PATH=/driver LD_PRELOAD=/startcuda.so "$3" "$1" /opt/ninfer-kit/kit/bin/ninfer' \
        sh "$root" "$kernel" "$chroot"
}

case "${1:-}" in
    prepare) shift; [[ $# -eq 2 ]] || usage; prepare "$@" ;;
    run|run-root)
        [[ "$1" == run ]] && mode=all || mode=root
        shift; [[ $# -ge 1 ]] || usage
        if [[ -n "${2:-}" ]]; then
            mkdir -p "$2" && run "$1" 2>&1 | tee "$2/upstream-gpu-check-$1.txt"
        else run "$1"; fi ;;
    *) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
