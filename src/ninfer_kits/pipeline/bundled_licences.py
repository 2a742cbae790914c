"""Each bundled library's licence as an SPDX expression (kit/third_party/licences.json), for the
SBOM and the licence gate. Written by the build, which alone knows each library's source package
(its verdict in data/copyleft.toml governs it): docs/portable.md, "The licence gate"."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ninfer_kits.kit import attestations, kitdir
from ninfer_kits.kit.attestations import BundledLicence
from ninfer_kits.pipeline.copyleft import Verdicts, dpkg_sources
from ninfer_kits.pipeline.provenance import write_notice
from ninfer_kits.pipeline.repair import Bundled


def bundled_licences(bundled: Sequence[Bundled], root: Path, verdicts: Verdicts
                     ) -> tuple[BundledLicence, ...]:
    """The verdict on each bundled library's package, by soname (copyleft.classify has refused
    a kit with a package the table lacks, before this runs)."""
    source_of = {(source.root, binary): source.name  # (package root, binary) → source
                 for source in dpkg_sources((b.origin for b in bundled), root)
                 for binary in source.binaries}
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
    write_notice(kit_root / attestations.BUNDLED_LICENCES,
                 attestations.bundled_licences_json(rows))
    return f"{kitdir.UNPACKED}/{attestations.BUNDLED_LICENCES}"
