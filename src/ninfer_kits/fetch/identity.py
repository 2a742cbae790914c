"""What a fetch was asked for, and the checks binding what it got to that release: a release's
checksums and signature pass another kit's release too (docs/fetch.md, "The kit fetched is the
kit asked for"). Each mismatch is CheckFailed naming both sides, release text escaped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ninfer_kits.errors import BadInput, CheckFailed
from ninfer_kits.inspector.inputs import printable
from ninfer_kits.kit import buildinfo, flavours
from ninfer_kits.kit.flavours import PLAIN
from ninfer_kits.kit.kitdir import BUILDINFO
from ninfer_kits.matrix import Kit, RevisionFacts, UnresolvedPlaceholders


@dataclass(frozen=True)
class Request:
    """The release a fetch must end up with."""

    tag: str
    asset: str | None  # None: a tag nothing records (bound after unpacking, by the matrix)
    kit: str | None  # the kit id, where the matrix or a record names it
    flavour: str = PLAIN  # BUILDINFO's `flavour` of the tarball asked for
    revision: str | None = None  # the upstream commit, as the record says it was built
    sha256: str | None = None  # the tarball's, as the record says it was published
    recorded_by: str = ""  # "the ledger" or "the kit index", when a record is known
    record: str = ""  # the record itself, for messages: "the ledger releases/<tag>.toml"
    # their tag and asset templates bind a tag that no record knows
    kits: Mapping[str, Kit] = field(default_factory=dict)

    @property
    def words(self) -> str:
        return f"release {self.tag}" + (f" of kit {self.kit}" if self.kit else "")

    @property
    def bound(self) -> str:
        """What check_unpacked holds the kit to, for `checked`."""
        if self.revision is not None:
            return (f"kit/{BUILDINFO} is kit {self.kit} at {self.revision[:12]}, as "
                    f"{self.recorded_by} records")
        return f"kit/{BUILDINFO}'s kit makes tag {self.tag} in the matrix"


def check_located(request: Request, asset: str, names: Mapping[str, object],
                  where: str) -> None:
    """The located tarball is the one asked for, and the release holds it (no stand-in)."""
    if request.asset is not None and asset != request.asset:
        raise CheckFailed(f"{where}: its tarball is {printable(asset)}, and the "
                          f"{request.words} is {request.asset}: not the kit asked for")
    if asset not in names:
        listed = ", ".join(printable(name) for name in sorted(names)) or "no files"
        raise CheckFailed(f"{where} has no {asset}, the tarball of the {request.words} (it "
                          f"holds {listed}): no other tarball is taken in its place")


def check_listed(request: Request, asset: str, listed: str, source: str) -> str | None:
    """SHA256SUMS's sha256 of the tarball against the record's: words, or None unrecorded."""
    if request.sha256 is None:
        return None
    if listed != request.sha256:
        raise CheckFailed(f"{asset}: {source} says {listed}, {request.record} records "
                          f"{request.sha256} for the {request.words}: not the kit asked for")
    return request.recorded_by


def check_unpacked(request: Request, asset: str, kit: Path, where: str) -> None:
    """kit/BUILDINFO.txt of the unpacked tarball says it is the kit asked for."""
    path = kit / BUILDINFO
    if not path.is_file():
        raise CheckFailed(f"{asset} from {where} holds no kit/{BUILDINFO}: nothing "
                          f"says which kit it is, so it is not taken for the {request.words}")
    try:  # named as the tarball has it: the staging folder it is in means nothing to a user
        info = buildinfo.parse(path.read_text(encoding="utf-8"), f"kit/{BUILDINFO}")
    except (BadInput, UnicodeDecodeError) as error:
        why = str(error) if isinstance(error, BadInput) else "not UTF-8 text"
        raise CheckFailed(f"{asset} from {where}: its kit/{BUILDINFO} cannot be read "
                          f"({why}), so it is not taken for the {request.words}") from None
    differences = _differences(request, asset, info)
    if differences:
        raise CheckFailed(f"{asset} from {where} is not the {request.words}: its "
                          f"kit/{BUILDINFO} says {'; '.join(differences)}. Nothing "
                          f"was unpacked into DEST")


def _differences(request: Request, asset: str, info: buildinfo.BuildInfo) -> list[str]:
    said = []
    if request.kit is not None and info.kit != request.kit:
        said.append(f"kit {printable(info.kit)}, not {request.kit}")
    if info.flavour != request.flavour:
        said.append(f"flavour {printable(info.flavour)}, not {request.flavour}")
    if request.revision is not None:
        if info.revision.lower() != request.revision.lower():
            said.append(f"revision {printable(info.revision)}, where {request.record} records "
                        f"{request.revision}")
    elif not said:  # no record: the matrix's templates bind the tag to what was built
        said += _unbound(request, asset, info)
    return said


def _unbound(request: Request, asset: str, info: buildinfo.BuildInfo) -> list[str]:
    """Where the matrix's templates, filled from BUILDINFO, do not give the tag and tarball."""
    kit = request.kits.get(info.kit)
    if kit is None:
        return [f"kit {printable(info.kit)}, which the matrix does not have, and nothing "
                f"records release {request.tag}: nothing binds the kit to that tag"]
    kind = flavours.named(request.flavour)
    try:  # ValueError: not a revision, or an asset with no other flavour's name
        facts = RevisionFacts(revision=info.revision, version=info.version)
        tag, plain = kit.render_tag(facts), kit.render_asset(facts)
        made = kind.asset(plain) if kind is not None else plain
    except (ValueError, UnresolvedPlaceholders) as error:
        return [f"revision {printable(info.revision)} and version {printable(info.version)}, "
                f"from which kit {kit.id}'s tag cannot be made ({printable(str(error))})"]
    said = []
    if tag != request.tag:
        said.append(f"kit {kit.id} at revision {printable(info.revision)}, version "
                    f"{printable(info.version)}, whose tag is {tag}, not {request.tag}")
    if made != asset:
        said.append(f"kit {kit.id}'s tarball of that build is {made}, not {printable(asset)}")
    return said
