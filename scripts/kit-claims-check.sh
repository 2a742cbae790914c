#!/usr/bin/env bash
# What a kit's BUILDINFO.txt claims, beside what binutils' readelf and NVIDIA's cuobjdump read
# from its files: for a real upstream's kit, which no test builds (issue 37 item 3).
#
# usage: scripts/kit-claims-check.sh KIT-FOLDER [CUOBJDUMP]
#
# KIT-FOLDER is dist/<tag>/ as `ninfer-kits build` leaves it (both tarballs and BUILDINFO.txt).
# CUOBJDUMP defaults to the one on PATH; NVIDIA's nvidia-cuda-cuobjdump wheel has one
# (`pip download --no-deps nvidia-cuda-cuobjdump`, unzip: nvidia/cu13/bin/cuobjdump).
# Prints, for the plain and the portable tarball: the highest GLIBC_ version any ELF file of it
# references (readelf -V) against BUILDINFO's glibc_floor and the floor `ninfer-kits inspect`
# gives the tarball; the libraries the portable one carries; and for each program the SASS and
# PTX of its .nv_fatbin (cuobjdump --list-elf / --list-ptx) against BUILDINFO's sass and ptx.
set -euo pipefail
folder="${1:?usage: $0 KIT-FOLDER [CUOBJDUMP]}"
cuobjdump="${2:-cuobjdump}"
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
