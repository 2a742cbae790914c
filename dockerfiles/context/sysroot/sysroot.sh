#!/bin/bash
# Fetch every file of sources.txt (refusing any whose sha256 differs) and unpack the Debian 11
# packages into the sysroot.
. /opt/ninfer-kits/build/common.sh
mirror="${DEBIAN_MIRROR:-$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list)}"
mirror="${mirror%/}"
[ -n "$mirror" ] || { echo "sysroot: no Debian mirror: give DEBIAN_MIRROR" >&2; exit 1; }
mkdir -p "$SOURCES" "$SYSROOT"
grep -v -e '^#' -e '^$' /opt/ninfer-kits/build/sources.txt | while read -r sha256 path; do
    curl -fsS --retry 5 --retry-all-errors -o "$SOURCES/${path##*/}" "$mirror/$path" \
        || { echo "sysroot: could not fetch $mirror/$path" >&2; exit 1; }
    echo "$sha256  $SOURCES/${path##*/}"
done > /tmp/sources.sha256
sha256sum --check --strict --quiet /tmp/sources.sha256
# Each package's dpkg records, as dpkg would write them (status, file list, md5sums): where each
# library of the sysroot comes from, for the licences of the kits that bundle one.
info="$SYSROOT/var/lib/dpkg/info"
mkdir -p "$info"
for deb in "$SOURCES"/*.deb; do
    dpkg-deb --extract "$deb" "$SYSROOT"
    name="$(dpkg-deb --field "$deb" Package)"
    { echo "Package: $name"; echo "Status: install ok installed"
      dpkg-deb --field "$deb" | grep -v '^Package:'; echo; } >> "$SYSROOT/var/lib/dpkg/status"
    [ "$(dpkg-deb --field "$deb" Multi-Arch)" != same ] \
        || name="$name:$(dpkg-deb --field "$deb" Architecture)"
    dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -e 's|^\./|/|' -e 's|/$||' -e 's|^$|/.|' \
        > "$info/$name.list"
    dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./md5sums > "$info/$name.md5sums"
done
rm "$SOURCES"/*.deb
# Absolute links (libc.so -> /lib/...) would resolve on the image's own tree, not the sysroot's.
find "$SYSROOT" -type l -lname '/*' | while read -r link; do
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$SYSROOT$(readlink "$link")")" "$link"
done
# GCC's unwinder, linked statically into everything (-static-libgcc), from Debian 11's GCC 10:
# trixie's libgcc_eh.a calls _dl_find_object (glibc 2.35) and pthread_once without a weak
# reference, and a libgcc_s.so.1 in a kit would be one more library to carry. Alone in its
# folder (a link, so that its package is known), so that -lgcc stays GCC 14's own.
mkdir -p /opt/ninfer-kits/libgcc_eh
ln -s "../../sysroot/usr/lib/gcc/$MULTIARCH/10/libgcc_eh.a" /opt/ninfer-kits/libgcc_eh/
test -f /opt/ninfer-kits/libgcc_eh/libgcc_eh.a
rm -rf "$SYSROOT/usr/share/man" "$SYSROOT/usr/share/info" "$SYSROOT/usr/share/lintian"
test -f "$SYSROOT/usr/include/stdio.h" && test -e "$SYSROOT/lib/$MULTIARCH/libc.so.6"
done_step "Debian 11 sysroot ($(ls "$SYSROOT/lib/$MULTIARCH"/libc-*.so))"
