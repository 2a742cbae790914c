#!/usr/bin/env bash
# What only a real GPU can answer: does `ninfer-kits verify` say what the kit then does?
#
# usage: scripts/gpu-check.sh prepare          # here: build the kits into .cache/gpu-check/
#        scripts/gpu-check.sh prepare-sysroot  # here: add `sysroot` (docker builder, ~1 min
#                                              # once the toolchain image is made)
#        scripts/gpu-check.sh run [OUT]        # on the GPU host: verify each kit, then run it
#
# prepare builds four kits of the example engine (2 cores: about 3 minutes); the GPU host needs
# nothing but python3 ≥ 3.11 and a driver (verify uses the standard library alone):
#   example  the kit as `ninfer-kits build example` makes it: FFmpeg, separable compilation
#            (SASS sm_86 device-linked, PTX compute_86 only in the relocatable objects)
#   rdc      the same without FFmpeg (the GPU host has no FFmpeg libraries)
#   jit      without FFmpeg, whole-program compiles: SASS sm_86 and loadable PTX compute_86
#   sass     without FFmpeg, separable compilation, arch 86-real: SASS sm_86 and no PTX at all
#   portable the example kit's portable tarball (same compile, every library but glibc's and
#            the driver's in kit/lib): unpacked into an empty folder and run under `env -i`,
#            with `ldd` showing where each library comes from. The device tool carries 64 MiB at
#            most, so it travels as its tar stream in xz; run checks that stream's sha256
#            against the one `gzip -dc` of the published .tar.gz gave here.
#   sysroot  the portable tarball of `example-glibc228` (the glibc 2.31 toolchain), checked and
#            run as `portable` is: GPU_CHECK_KITS=sysroot runs it alone.
# run prints, for each kit, verify's table and exit status, then what `kit/bin/ninfer` does (it
# runs every example kernel when a GPU is there); then which of them `fetch --auto --dry-run`
# chooses from kits/auto-index.json (a kit index of these kits, their needs read here; the
# newest first: sass, example with its portable flavour, jit, rdc) and that kit's run; last one
# Markdown row per kit for docs/verify.md's "Verified on" table. With OUT, everything also goes
# to OUT/gpu-check.txt.
# Through the device tool: run(command="bash scripts/gpu-check.sh run $OUT",
#                              carry=[".cache/gpu-check"])
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$here/.cache/gpu-check"
# GPU_CHECK_KITS="example portable" runs only those (the device tool carries 64 MiB: with the
# portable kit, drop the others from .cache/gpu-check/kits to fit).
read -r -a KITS <<<"${GPU_CHECK_KITS:-example rdc jit sass portable}"

prepare() {
    # PYTHON: one where ninfer-kits and CMake >= 3.28 are installed (pip install '.[local]')
    local python="${PYTHON:-python3}" recipe="$here/build/recipe.py"
    PATH="$(dirname "$python"):$PATH"
    export PATH
    rm -rf "$work" && mkdir -p "$work/kits" "$work/build"
    # The check's kits are never distributed: the portable one need not carry its copyleft
    # libraries' sources (which the mirror of this project's machines only partly serves).
    (cd "$work" && NINFER_KITS_NO_SOURCES="${NINFER_KITS_NO_SOURCES:-1}" \
        "$python" -m ninfer_kits build example --matrix "$here/matrix.toml" \
        --dist "$work/dist" --cache-dir "$work/build/cache")
    local folder portable
    folder="$(find "$work/dist" -mindepth 1 -maxdepth 1 -type d)"
    portable="$(find "$folder" -name '*-portable.tar.gz')"
    mkdir -p "$work/kits/example"
    tar -C "$work/kits/example" -xzf "$(find "$folder" -name '*.tar.gz' ! -name '*-portable.tar.gz')"
    pack_portable portable "$portable"
    local name arch separable
    for spec in rdc:86:ON jit:86:OFF sass:86-real:ON; do
        IFS=: read -r name arch separable <<<"$spec"
        "$python" "$recipe" --source "$here/examples/engine" --build-dir "$work/build/$name" \
            --out "$work/kits/$name" --arch "$arch" \
            --target ninfer=apps/ninfer --target ninfer-serve=apps/ninfer-serve \
            --cmake-option NINFER_WITH_FFMPEG=OFF \
            --cmake-option "NINFER_SEPARABLE_COMPILATION=$separable" >"$work/build/$name.log"
    done
    auto_index
    rm -rf "$work/build" "$work/dist"
    du -sh "$work"
}

pack_portable() {  # NAME TARBALL: its tar stream in xz, and the sha256s run checks it against
    local name="$1" tarball="$2"
    gzip -dc "$tarball" >"$work/build/$name.tar"
    sha256sum "$work/build/$name.tar" | cut -d' ' -f1 >"$work/kits/$name.tar.sha256"
    xz -T0 -6 -c "$work/build/$name.tar" >"$work/kits/$name.tar.xz"
    sha256sum "$tarball" | sed "s|$(dirname "$tarball")/||" >"$work/kits/$name.tar.gz.sha256"
}

prepare_sysroot() {  # the portable kit of example-glibc228, beside what prepare made
    local python="${PYTHON:-python3}" tarball
    mkdir -p "$work/kits" "$work/build"
    (cd "$work" && NINFER_KITS_NO_SOURCES="${NINFER_KITS_NO_SOURCES:-1}" \
        "$python" -m ninfer_kits build example-glibc228 --builder docker \
        --matrix "$here/matrix.toml" --dist "$work/build/sysroot-dist" \
        --cache-dir "$work/build/sysroot-cache")
    tarball="$(find "$work/build/sysroot-dist" -name '*-portable.tar.gz')"
    pack_portable sysroot "$tarball"
    rm -rf "$work/build"
    du -sh "$work/kits/sysroot.tar.xz"
}

auto_index() {  # kits/auto-index.json: a kit index of these kits, for `fetch --auto` there
    mkdir -p "$work/build/portable-tree" && tar -C "$work/build/portable-tree" -xf "$work/build/portable.tar"
    "${PYTHON:-python3}" - "$work" <<'PY'
import datetime, sys
from pathlib import Path
from ninfer_kits.release import kitindex, ledger
from ninfer_kits.inspector.elf import is_elf, read_elf
from ninfer_kits.inspector.floor import kit_floor
from ninfer_kits.publish.needs import needs_of

work = Path(sys.argv[1])

def needs(tree):
    files = [read_elf(p, str(p.relative_to(tree))) for p in sorted(tree.rglob("*"))
             if p.is_file() and not p.is_symlink() and is_elf(p)]
    return needs_of(kit_floor(files))

def entry(name, minute, flavours):
    assets = tuple(ledger.LedgerAsset(name=asset, size=0, sha256="0" * 64, sha1="0" * 40,
                                      urls=(("local", f"file:///gpu-check/{asset}"),))
                   for _, asset, _ in flavours)
    return ledger.LedgerEntry(
        tag=f"gpu-check-{name}", kit=f"gpu-check-{name}", card="any", upstream="example",
        upstream_url="examples/engine", revision="0" * 40, version="", arch="sm_86",
        cuda_version="13.0", toolchain="trixie-cuda130", asset=assets[0].name,
        published_at=datetime.datetime(2026, 12, 1, 0, minute, tzinfo=datetime.UTC),
        stores=(ledger.LedgerStore(name="local", location="file:///gpu-check"),),
        assets=assets, floor=(), driver_minimum="580",
        flavours=tuple(ledger.LedgerFlavour(flavour=flavour, asset=asset, needs=needs(tree))
                       for flavour, asset, tree in flavours))

kits = work / "kits"
entries = [entry("rdc", 1, [("plain", "rdc.tar.gz", kits / "rdc")]),
           entry("jit", 2, [("plain", "jit.tar.gz", kits / "jit")]),
           entry("example", 3, [("plain", "example.tar.gz", kits / "example" / "kit"),
                                ("portable", "example-portable.tar.gz",
                                 work / "build" / "portable-tree" / "kit")]),
           entry("sass", 4, [("plain", "sass.tar.gz", kits / "sass")])]
(kits / "auto-index.json").write_bytes(kitindex.render(kitindex.document(entries)))
PY
}

run_kit() {  # one kit: verify, then the program itself
    local name="$1" kit="$work/kits/$1" bin status ran
    if [[ -f "$work/kits/$name.tar.xz" ]]; then  # unpacked into an empty folder, checked
        kit="/tmp/gpu-check-$name" && rm -rf "$kit" && mkdir -p "$kit"
        xz -dc "$work/kits/$name.tar.xz" >"$kit.tar" && tar -x -C "$kit" -f "$kit.tar"
        echo "== $name: tar stream sha256 $(sha256sum "$kit.tar" | cut -d' ' -f1), built:" \
            "$(cat "$work/kits/$name.tar.sha256") ($(cat "$work/kits/$name.tar.gz.sha256"))"
    fi
    echo "== $name: ninfer-kits verify"
    set +e
    python3 -m ninfer_kits verify "$kit"
    status=$?
    echo "== $name: verify exit status $status"
    if [[ -d "$kit/kit" ]]; then
        bin="$kit/kit/bin/ninfer"
    else  # a finished kit folder: unpack its (plain) tarball
        local plain
        plain="$(find "$kit" -maxdepth 1 -name '*.tar.gz' ! -name '*-portable.tar.gz')"
        mkdir -p "/tmp/gpu-check-$name" && tar -C "/tmp/gpu-check-$name" -xzf "$plain"
        bin="/tmp/gpu-check-$name/kit/bin/ninfer"
    fi
    if [[ -f "$work/kits/$name.tar.xz" ]]; then
        echo "== $name: ldd kit/bin/ninfer (no LD_LIBRARY_PATH)"
        env -i /usr/bin/ldd "$bin"
    fi
    ran="$(env -i "$bin" 2>&1)"
    local code=$?
    set -e
    echo "$ran"
    echo "== $name: ninfer exit status $code"
    local said smoke
    case $status in  # 4: sound, and this host does not meet its floor; 1: refused
        0) said="runs" ;;
        4) said="does not run" ;;
        *) said="refused or failed" ;;
    esac
    smoke="$(grep -m1 -E "kernels ok|failed|error while loading|no kernel image" <<<"$ran" \
        || tail -n1 <<<"$ran")"
    ROWS+=("| $GPU | $DRIVER | $DISTRO | $name | $said (exit $status) | $smoke (exit $code) |")
}

run_auto() {  # fetch --auto's choice among these kits, then the chosen kit itself
    local chose tag flavour code
    echo "== auto: ninfer-kits fetch --auto --dry-run (kits/auto-index.json)"
    set +e
    chose="$(python3 -m ninfer_kits fetch --auto --dry-run --index "$work/kits/auto-index.json" \
        --matrix "$here/matrix.toml")"
    code=$?
    set -e
    echo "$chose"
    echo "== auto: exit status $code"
    [[ $code == 0 ]] || { ROWS+=("| $GPU | $DRIVER | $DISTRO | auto | chose none (exit $code) | |"); return; }
    tag="$(awk '{print $3}' <<<"$chose")"
    flavour="$(grep -q -- --portable <<<"$chose" && echo portable || echo "${tag#gpu-check-}")"
    echo "== auto: chose $tag ($flavour): running it"
    local before=${#ROWS[@]}
    run_kit "$flavour"
    ROWS[before]="${ROWS[before]/| $flavour |/| auto → $flavour |}"
}

run() {
    export PYTHONPATH="$here/src" PYTHONUNBUFFERED=1
    GPU="$( (nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader || echo "no GPU, 0") | head -n1 \
        | sed 's/, / (compute capability /; s/$/)/')"
    DRIVER="$( (nvidia-smi --query-gpu=driver_version --format=csv,noheader || echo none) | head -n1)"
    # shellcheck disable=SC1091  # the GPU host's own file
    DISTRO="$(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | awk 'NR == 1 {print $NF}')"
    ROWS=()
    for name in "${KITS[@]}"; do
        run_kit "$name"
    done
    [[ -f "$work/kits/auto-index.json" ]] && run_auto
    echo
    echo "| GPU | driver | distribution | kit | verify says | the kit's run |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
}

case "${1:-}" in
    prepare) prepare ;;
    prepare-sysroot) prepare_sysroot ;;
    run)
        if [[ -n "${2:-}" ]]; then
            run 2>&1 | tee "$2/gpu-check.txt"
        else
            run
        fi ;;
    *) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
