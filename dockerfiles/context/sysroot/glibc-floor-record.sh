#!/usr/bin/env bash
# The record of glibc-2.28.h in /opt/ninfer-kits/built (toolchain.toml's `built`): the header is
# force-included into every compile, so it reaches every kit's binaries, and a kit names the
# origin and licence of each file that did (pipeline/compiled_in.py). It is this project's own
# file, under the MIT licence (context/sysroot/LICENSE, copied beside it).
set -euo pipefail
header=/opt/ninfer-kits/include/glibc-2.28.h
sum="$(sha256sum < "$header" | cut -d' ' -f1)"
mkdir -p /opt/ninfer-kits/built
cat > /opt/ninfer-kits/built/ninfer-kits-glibc-floor.toml <<RECORD
# ninfer-kits' own header, copied into this image from dockerfiles/context/sysroot/.
schema = 1
name = "ninfer-kits-glibc-floor"
version = "1"
licence = "MIT"
source = "$header"
source_sha256 = "$sum"
build_files = ["/opt/ninfer-kits/build/glibc-floor-record.sh"]
licence_files = ["/opt/ninfer-kits/share/doc/ninfer-kits/LICENSE"]

[files]
"$header" = "$sum"
RECORD
