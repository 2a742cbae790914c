"""What `repro --against DIST` takes from the kit it reproduces: the revision and the toolchain
image its BUILDINFO.txt records. The kit folder comes from outside, so both are checked before
a build: a full SHA, and a pin from a registry the matrix names (repro runs no image from a
registry a kit folder chose; docs/repro.md)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config.tables import printable
from ninfer_kits.errors import BadInput
from ninfer_kits.kit import buildinfo
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.kit.kitdir import BUILDINFO
from ninfer_kits.matrix import Matrix
from ninfer_kits.oci.reference import ImageReference, parse_pin
from ninfer_kits.repro.drift import recorded_pin

FULL_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Recorded:
    """What the kit compared with records of how it was built (BUILDINFO.txt beside it)."""

    source: Path  # its BUILDINFO.txt
    info: BuildInfo
    revision: str  # the upstream commit it was built from
    pin: str | None  # the toolchain image it was built in, when it was pinned


def buildinfo_of(against: Path) -> Path | None:
    """The BUILDINFO.txt beside `against` (a kit folder, or a tarball in one), else None."""
    place = against if against.is_dir() else against.parent
    found = place / BUILDINFO
    return found if found.is_file() else None


def read_recorded(against: Path, kit: str) -> Recorded | None:
    """What `against` records for a rebuild of `kit`, None where nothing does; BadInput for
    another kit's folder or a revision that is not a SHA (the pin: `check_trusted`)."""
    source = buildinfo_of(against)
    if source is None:
        return None
    info = buildinfo.read(source)
    if info.kit != kit:
        raise BadInput(f"--against {printable(str(against))}: {source} describes a kit of "
                       f"{printable(info.kit)!r}, not of {kit!r}")
    if FULL_SHA.fullmatch(info.revision) is None:
        raise BadInput(f"{source}: revision {printable(info.revision[:80])!r} is not a commit "
                       f"SHA (40 hex digits); repro builds the revision a kit records")
    return Recorded(source=source, info=info, revision=info.revision, pin=recorded_pin(info))


def check_trusted(pin: str, matrix: Matrix, source: Path) -> ImageReference:
    """The pin `source` records; BadInput if malformed or from a registry the matrix omits."""
    try:
        reference = parse_pin(pin)
    except ValueError as error:
        raise BadInput(f"{source}: run.toolchain_image {printable(pin[:200])}: {error}") from None
    if not _named_by(reference, matrix):
        prefix = matrix.registry.prefix if matrix.registry else "none"
        raise BadInput(
            f"{source}: the kit was built in {printable(pin)}, from a repository "
            f"{matrix.path.name} does not name ([registry] prefix: {printable(prefix)}; nor "
            f"does it pin an image from there); repro runs no image a kit folder chose: "
            f"`repro --toolchain-image {printable(pin)}` runs it, if you trust it")
    return reference


def _named_by(reference: ImageReference, matrix: Matrix) -> bool:
    if matrix.registry is not None and reference.repository.startswith(
            f"{matrix.registry.prefix}/"):
        return True
    return reference.repository in set(_pinned_repositories(matrix))


def _pinned_repositories(matrix: Matrix) -> Iterator[str]:
    """The repositories of every image the matrix pins by digest."""
    for toolchain in matrix.toolchains.values():
        for text in (toolchain.image, toolchain.runtime_image, toolchain.base_image,
                     toolchain.runtime_base_image):
            if "@" in text:
                try:
                    yield parse_pin(text).repository
                except ValueError:  # the matrix's loader refuses it; nothing to trust here
                    continue
