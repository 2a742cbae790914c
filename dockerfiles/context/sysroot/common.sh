# Sourced by each step of toolchain-sysroot-debian.Dockerfile: where things go, and the
# compilers every library of the image is built with (the same wrappers the kits compile with).
set -eu
SYSROOT=/opt/sysroot
MULTIARCH=x86_64-linux-gnu
STDCXX=/opt/ninfer-kits/libstdc++
SOURCES=/opt/ninfer-kits/sources
WORK=/var/tmp/sysroot-build
JOBS="$(nproc)"
export CC=/opt/ninfer-kits/bin/gcc CXX=/opt/ninfer-kits/bin/g++
# pkg-config sees the sysroot's .pc files only (LIBDIR, not PATH: PATH would add the image's).
export PKG_CONFIG_LIBDIR="$SYSROOT/usr/local/lib/pkgconfig:$SYSROOT/usr/lib/$MULTIARCH/pkgconfig:$SYSROOT/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$SYSROOT"
export LC_ALL=C TZ=UTC SOURCE_DATE_EPOCH=0

step_started=$(date +%s)
done_step() { echo "sysroot: $1 in $(($(date +%s) - step_started)) s"; }
unpack() { mkdir -p "$WORK" && tar -xf "$SOURCES/$1" -C "$WORK" "${@:2}"; }

# install_recorded NAME VERSION TARBALL LICENCE LICENCE_FILE... (in the source folder, after
# `make install DESTDIR=$WORK/stage`): copy the staged files to where they belong (PREFIX,
# default the sysroot), the licence files to DOCS, and write /opt/ninfer-kits/built/NAME.toml:
# what was built from which pinned tarball and scripts under which licence, and the sha256 of
# every file it installed: how a kit that carries one of them names its origin and licence.
install_recorded() {
    local name="$1" version="$2" tarball="$3" licence="$4" prefix="${PREFIX:-$SYSROOT}"
    shift 4
    local stage="$WORK/stage" docs="${DOCS:-$SYSROOT/usr/local/share/doc/$name}" record
    mkdir -p "$docs" /opt/ninfer-kits/built
    cp "$@" "$docs/"
    record="/opt/ninfer-kits/built/$name.toml"
    {
        echo "# Built in this image from a pinned upstream tarball by $0."
        echo "schema = 1"
        echo "name = \"$name\""
        echo "version = \"$version\""
        echo "licence = \"$licence\""
        echo "source = \"$SOURCES/$tarball\""
        echo "source_sha256 = \"$(sha256sum "$SOURCES/$tarball" | cut -d' ' -f1)\""
        echo "build_files = [\"/opt/ninfer-kits/build/common.sh\", \"$0\"]"
        printf 'licence_files = ['
        local sep="" file
        for file in "$@"; do printf '%s"%s"' "$sep" "$docs/${file##*/}"; sep=", "; done
        echo "]"
        echo
        echo "[files]"
        (cd "$stage" && find . -type f | LC_ALL=C sort | while read -r file; do
            echo "\"${prefix%/}${file#.}\" = \"$(sha256sum < "$file" | cut -d' ' -f1)\""
        done)
    } > "$record"
    # Installed files carry SOURCE_DATE_EPOCH, not the moment of this build: nvcc -lineinfo
    # records the mtime of every header the device code uses, so it would reach the kit.
    find "$stage" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
    cp -a "$stage/." "$prefix/"
    rm -rf "$stage"
}
