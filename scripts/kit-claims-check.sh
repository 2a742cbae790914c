#!/usr/bin/env bash
# What a kit's BUILDINFO.txt claims, beside what binutils' readelf and NVIDIA's cuobjdump read
# from its files: for a real upstream's kit, which no test builds (issue 37 item 3).
#
# usage: scripts/kit-claims-check.sh KIT-FOLDER [CUOBJDUMP [ROOT...]]
#
# KIT-FOLDER is dist/<tag>/ as `ninfer-kits build` leaves it (both tarballs and BUILDINFO.txt).
# CUOBJDUMP defaults to the one on PATH; NVIDIA's nvidia-cuda-cuobjdump wheel has one
# (`pip download --no-deps nvidia-cuda-cuobjdump`, unzip: nvidia/cu13/bin/cuobjdump).
# Prints, for the plain and the portable tarball: the highest GLIBC_ version any ELF file of it
# references (readelf -V) against BUILDINFO's glibc_floor and the floor `ninfer-kits inspect`
# gives the tarball; the libraries the portable one carries; and for each program the SASS and
# PTX of its .nv_fatbin (cuobjdump --list-elf / --list-ptx) against BUILDINFO's sass and ptx.
# Then, in each ROOT (a Debian minbase root folder, as the tests make them in .cache/roots/: no
# FFmpeg, libcurl, OpenSSL or CUDA there), each program of the portable kit started with
# `--help` under `env -i` with chroot (as root), by the root's own loader and glibc.
set -euo pipefail
folder="${1:?usage: $0 KIT-FOLDER [CUOBJDUMP [ROOT...]]}"
cuobjdump="${2:-cuobjdump}"
roots=("${@:3}")
info="$folder/BUILDINFO.txt"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

claim() { sed -n "s/^$1: //p" "$info" | head -n1; }

highest_glibc() {  # over every ELF file under $1
    find "$1" -type f -print0 | while IFS= read -r -d '' file; do
        [[ "$(head -c4 "$file" | od -An -tx1 | tr -d ' ')" == 7f454c46 ]] || continue
        readelf -V -W "$file" | grep -oE 'Name: GLIBC_[0-9.]+' | sed 's/Name: GLIBC_//'
    done | sort -uV | tail -n1
}

echo "kit: $folder"
echo "BUILDINFO: glibc_floor $(claim glibc_floor); sass $(claim sass); ptx $(claim ptx);" \
    "relocatable $(claim relocatable_device_code); cuda $(claim cuda_version)"
for tarball in "$folder"/*.tar.gz; do
    name="$(basename "$tarball" .tar.gz)"
    mkdir -p "$work/$name"
    tar -xzf "$tarball" -C "$work/$name"
    inspected="$(PYTHONPATH="$(dirname "$0")/../src${PYTHONPATH:+:$PYTHONPATH}" \
        "${PYTHON:-python3}" -m ninfer_kits inspect "$tarball" | grep -oE 'glibc ≥ [0-9.]+' | head -n1)"
    echo "== $name: readelf: highest GLIBC_ $(highest_glibc "$work/$name"); inspect: $inspected"
    if [[ -d "$work/$name/kit/lib" ]]; then
        echo "   kit/lib: $(find "$work/$name/kit/lib" -type f | wc -l) files," \
            "$(du -sb "$work/$name/kit/lib" | cut -f1) bytes:" \
            "$(find "$work/$name/kit/lib" -type f -printf '%f ' )"
        echo "   libcudart.so carried: $(find "$work/$name/kit" -name 'libcudart.so*' | wc -l)"
    fi
done
plain="$(find "$folder" -maxdepth 1 -name '*.tar.gz' ! -name '*-portable.tar.gz' | head -n1)"
for program in "$work/$(basename "$plain" .tar.gz)"/kit/bin/*; do
    echo "== $(basename "$program"): NEEDED $(readelf -d "$program" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | paste -sd' ')"
    echo "   cuobjdump --list-elf: $("$cuobjdump" --list-elf "$program" 2>&1 \
        | grep -oE 'sm_[0-9]+[af]?' | sort | uniq -c | awk '{printf "%s ×%s ", $2, $1}')"
    echo "   cuobjdump --list-ptx: $("$cuobjdump" --list-ptx "$program" 2>&1 \
        | grep -oE 'compute_[0-9]+[af]?|sm_[0-9]+[af]?' | sort | uniq -c \
        | awk '{printf "%s ×%s ", $2, $1}')"
    echo "   static CUDA runtime symbols (.symtab): $(nm "$program" 2>/dev/null | grep -c ' libcudart_static_' || true)"
done
portable="$work/$(basename "$(find "$folder" -maxdepth 1 -name '*-portable.tar.gz' | head -n1)" .tar.gz)"
for root in "${roots[@]}"; do
    rm -rf "$root/opt/kit-claims" && mkdir -p "$root/opt/kit-claims" "$root/proc"
    cp -a "$portable/kit" "$root/opt/kit-claims/kit"
    # /proc: the loader finds $ORIGIN (the kit's RUNPATH) through /proc/self/exe
    mountpoint -q "$root/proc" || { mount -t proc proc "$root/proc"; mounted=1; }
    for program in "$root"/opt/kit-claims/kit/bin/*; do
        set +e
        said="$(chroot "$root" /usr/bin/env -i "/opt/kit-claims/kit/bin/$(basename "$program")" --help 2>&1)"
        status=$?
        set -e
        echo "== in $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/etc/os-release")" \
            "($(basename "$root")):" \
            "$(basename "$program") --help: exit status $status; $(echo "$said" | head -n1 | cut -c1-100)"
    done
    rm -rf "$root/opt/kit-claims"
    [[ -z "${mounted:-}" ]] || umount "$root/proc"
    unset mounted
done
