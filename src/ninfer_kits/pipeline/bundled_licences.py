"""Each bundled library's licence as an SPDX expression, written into the portable kit
(kit/third_party/licences.json) for its SBOM and the licence gate.

The licence that governs a shipped library is the verdict data/copyleft.toml keeps per source
package (a Debian copyright file names the licences of every file of the package, programs and
build scripts too). The SBOM is made from the kit alone, which does not know that libavcodec61
comes from the source package ffmpeg: the build, which does (the environment's dpkg records),
writes it down.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ninfer_kits import attestations, kitdir
from ninfer_kits.attestations import BundledLicence
from ninfer_kits.pipeline.copyleft import Verdicts, source_packages
from ninfer_kits.pipeline.repair import Bundled


def bundled_licences(bundled: Sequence[Bundled], root: Path, verdicts: Verdicts
                     ) -> tuple[BundledLicence, ...]:
    """The verdict on each bundled library's package, by soname (every package has one:
    copyleft.classify refuses a kit with one it lacks, before this runs)."""
    source_of: dict[tuple[str, str], str] = {}  # (package root, binary package) → source
    for package_root in sorted({b.origin.root for b in bundled if b.origin.manager == "dpkg"}):
        binaries = {b.origin.package for b in bundled
                    if b.origin.manager == "dpkg" and b.origin.root == package_root}
        for name, source in source_packages(root / package_root.lstrip("/"), binaries).items():
            source_of |= {(package_root, binary): name for binary in source.binaries}
    rows = []
    for item in bundled:
        origin = item.origin
        package = source_of.get((origin.root, origin.package), origin.package) \
            if origin.manager == "dpkg" else origin.package
        verdict = verdicts.of(origin.manager, package)
        if verdict is not None:
            rows.append(BundledLicence(soname=item.soname, package=package,
                                       licence=verdict.licence, name=verdict.name))
    return tuple(rows)


def write_bundled_licences(kit_root: Path, rows: Sequence[BundledLicence]) -> str:
    """kit/third_party/licences.json in the kit tree `kit_root`; its path in the tarball."""
    path = kit_root / attestations.BUNDLED_LICENCES
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(attestations.bundled_licences_json(rows))
    os.chmod(path, 0o644)
    return f"{kitdir.UNPACKED}/{attestations.BUNDLED_LICENCES}"
