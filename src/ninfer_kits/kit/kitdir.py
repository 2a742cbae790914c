"""A finished kit folder, dist/<tag>/ or a release of it (docs/build.md, "The kit folder").
Everything reads a kit through `read_kit_dir`, so one place decides what a kit folder is; `install`
puts one in place with one rename, never over another kit's folder."""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.files import locks
from ninfer_kits.files.atomic import fsync_dir, hash_file
from ninfer_kits.kit import buildinfo, flavours
from ninfer_kits.kit.buildinfo import BuildInfo
from ninfer_kits.kit.flavours import PLAIN, PORTABLE
from ninfer_kits.release.checksums import SHA1, SHA256, parse_sums, read_sha256sums, render_sums

BUILDINFO = "BUILDINFO.txt"
SHA256SUMS = "SHA256SUMS"
SHA1SUMS = "SHA1SUMS"
BUILD_LOG = "build.log"
TARBALL_SUFFIX = flavours.TARBALL_SUFFIX  # every flavour's tarball ends so
FIXED_FILES = (BUILDINFO, SHA256SUMS, SHA1SUMS, BUILD_LOG)  # `build` writes them by the tarballs
REQUIRED = (BUILDINFO, SHA256SUMS)  # what every variant holds
SIGNATURE = f"{SHA256SUMS}.sig"  # a signed release's signature of SHA256SUMS (not `build`'s)
REPRODUCTION = "REPRODUCTION.json"  # a release's record of its independent rebuild (publish's)
NOTES = "RELEASE.md"  # the local store's release notes
PYZ = "ninfer-kits.pyz"  # the tools a release carries
UNPACKED = "kit"  # the tarball unpacked beside it (fetch's DEST; `tar xzf` of the notes)
SOURCES = "sources"  # the bundled copyleft libraries' source packages (pipeline.copyleft)
OWED = "SOURCES.json"  # the Debian source packages the kit owes (owed_sources.RECORD)
# The heading of an older portable kit built with NINFER_KITS_NO_SOURCES=1: publish refuses it.
SOURCES_NOT_FETCHED = "Corresponding source: NOT FETCHED"
PORTABLE_README = "kit/third_party/README"
RELEASE_EXTRAS = (NOTES, PYZ, UNPACKED)  # what a release may hold beside the kit's own files
# what publish adds to a release's SHA256SUMS
PUBLISH_LISTED = (SHA1SUMS, PYZ)
SBOM_SUFFIX = ".cdx.json"  # <tarball stem>.cdx.json: its CycloneDX SBOM
PROVENANCE_SUFFIX = ".intoto.json"  # <tarball stem>.intoto.json: its SLSA provenance statement
ATTESTATION_SUFFIXES = (SBOM_SUFFIX, PROVENANCE_SUFFIX)


def attestation_names(tarballs: Iterable[str]) -> tuple[str, ...]:
    """The SBOM and provenance files of these tarballs (<stem>.cdx.json, <stem>.intoto.json)."""
    return tuple(sorted(tarball.removesuffix(TARBALL_SUFFIX) + suffix for tarball in tarballs
                        for suffix in ATTESTATION_SUFFIXES))


class KitDirInvalid(CheckFailed):
    """A folder that should hold a finished kit does not."""


class TagTaken(BadInput):
    """dist/<tag>/ holds another kit, or no kit folder at all: building would delete it."""


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """One tarball of the kit folder, read and checked."""

    name: str  # PLAIN, or a flavours.FlavourKind's name
    folder: Path  # dist/<tag>, the kit folder that holds it
    asset: str  # its file name
    size: int
    sha256: str  # as SHA256SUMS lists it
    sha1: str | None  # as SHA1SUMS lists it; None in a release folder without SHA1SUMS

    @property
    def path(self) -> Path:
        return self.folder / self.asset


@dataclass(frozen=True, kw_only=True)
class KitDir:
    """One finished kit folder, read and checked."""

    path: Path  # dist/<tag>
    asset: str  # the plain kit's tarball's file name
    info: BuildInfo  # BUILDINFO.txt beside the tarballs (with this run's keys)
    size: int  # of the tarball
    sha256: str  # of the tarball, as SHA256SUMS lists it
    sha1: str | None  # of the tarball, as SHA1SUMS lists it; None without SHA1SUMS
    buildinfo_sha256: str  # of BUILDINFO.txt, as SHA256SUMS lists it
    verified: bool  # every hash above (and the other flavours') was checked against the bytes
    siblings: tuple[Flavour, ...] = ()  # the other flavours' tarballs (flavours.KINDS' order)
    held: tuple[str, ...] = FIXED_FILES  # the names of FIXED_FILES, SIGNATURE and
    absent: tuple[str, ...] = ()  # the other flavours' tarballs SHA256SUMS lists, not here
    # (name, sha256); () in a kit built before them
    attestations: tuple[tuple[str, str], ...] = ()
    sources: tuple[str, ...] = ()  # sources/<file> as SHA256SUMS lists them, sorted
    owed: str | None = None  # SOURCES.json's sha256 where SHA256SUMS lists it
    here: tuple[str, ...] = ()  # what SHA256SUMS lists that the folder holds (each checked)

    @property
    def flavours(self) -> tuple[Flavour, ...]:
        return (Flavour(name=PLAIN, folder=self.path, asset=self.asset, size=self.size,
                        sha256=self.sha256, sha1=self.sha1), *self.siblings)

    def flavour(self, name: str) -> Flavour | None:
        """The tarball of flavour `name`, where the folder holds it."""
        return next((item for item in self.flavours if item.name == name), None)

    @property
    def portable(self) -> Flavour | None:
        return self.flavour(PORTABLE.name)

    @property
    def tag(self) -> str:
        return self.path.name

    @property
    def kit(self) -> str:
        return self.info.kit

    @property
    def tarball(self) -> Path:
        return self.path / self.asset

    @property
    def buildinfo_path(self) -> Path:
        return self.path / BUILDINFO

    @property
    def has_build_log(self) -> bool:
        return BUILD_LOG in self.held

    @property
    def build_log(self) -> Path:
        """build.log; KitDirInvalid when the folder has none (a release never carries it)."""
        if not self.has_build_log:
            raise KitDirInvalid(f"kit folder {self.path}: no {BUILD_LOG} (a published or "
                                f"downloaded kit folder holds none; `build` writes it in "
                                f"dist/<tag>/)")
        return self.path / BUILD_LOG

    @property
    def files(self) -> tuple[str, ...]:
        """The kit's own files in the folder, sorted by name (not a release's extras)."""
        return tuple(sorted((*(name for name in self.held
                               if name in (*FIXED_FILES, SIGNATURE, REPRODUCTION, OWED)),
                             *self.tarballs, *(name for name, _ in self.attestations))))

    @property
    def signature(self) -> Path | None:
        return self.path / SIGNATURE if SIGNATURE in self.held else None

    @property
    def reproduction(self) -> Path | None:
        """REPRODUCTION.json where the folder holds one (its hash checked)."""
        return self.path / REPRODUCTION if REPRODUCTION in self.held else None

    @property
    def owed_record(self) -> Path | None:
        return self.path / OWED if OWED in self.held else None

    @property
    def extras(self) -> tuple[str, ...]:
        return tuple(name for name in self.held if name in RELEASE_EXTRAS)

    @property
    def tarballs(self) -> tuple[str, ...]:
        return tuple(flavour.asset for flavour in self.flavours)


def read_kit_dir(path: Path, *, verify: bool = True, built: bool = False) -> KitDir:
    """Read a kit folder and check its layout, checksum files and BUILDINFO.txt (the hashes
    too with `verify`); `built` accepts only dist/<tag>/ as `build` makes it, not a release.
    KitDirInvalid names the folder and what is wrong."""
    if not path.is_dir():
        raise BadInput(f"{path}: not a kit folder (no such folder)")
    held, asset, siblings, attested = _check_layout(path, built)
    try:
        info = buildinfo.read(path / BUILDINFO)
        sums = read_sha256sums(path / SHA256SUMS)
    except BadInput as error:
        raise KitDirInvalid(f"kit folder {path}: {error}") from None
    # a release may lack one tarball of two; what `build` made (with build.log) never does
    absent = {} if BUILD_LOG in held else {
        kind.name: named for kind in flavours.beside() if kind.name not in siblings
        and (named := info.asset_of(kind.name)) is not None and named in sums}
    _check_flavours(path, info, siblings | absent)
    names = {PLAIN: asset} | siblings
    listed = (*names.values(), *absent.values())
    _check_attested(path, attested, names.values(), listed, built)
    # a release may lack listed attestations, as it may lack a tarball
    missing = () if built else tuple(name for name in attestation_names(listed)
                                     if name in sums and name not in attested)
    recorded, owed, added = _beside(held, sums, built)
    expected = sorted((*listed, BUILDINFO, *attested, *missing, *recorded, *added, *owed))
    sources = _check_sources(path, sums, built)
    sums = {name: sha for name, sha in sums.items() if name not in sources}
    if sorted(sums) != expected:
        raise KitDirInvalid(f"kit folder {path}: {SHA256SUMS} lists {', '.join(sorted(sums))}; "
                            f"it must list exactly {', '.join(expected)}")
    sha1 = _read_sha1sums(path / SHA1SUMS, listed) if SHA1SUMS in held else {}
    held_flavours = [Flavour(name=name, folder=path, asset=tarball,
                             size=(path / tarball).stat().st_size, sha256=sums[tarball],
                             sha1=sha1.get(tarball)) for name, tarball in names.items()]
    if verify:
        _check_hashes(path, (*recorded, *(name for name in (*added, *owed) if name in held)),
                      sums, sources)
    kit = KitDir(path=path, asset=asset, info=info, size=held_flavours[0].size, sha256=sums[asset],
                 sha1=sha1.get(asset), buildinfo_sha256=sums[BUILDINFO], verified=False,
                 siblings=tuple(held_flavours[1:]), held=held, absent=tuple(absent.values()),
                 attestations=tuple((name, sums[name]) for name in attested),
                 sources=tuple(sorted(sources)), owed=sums.get(OWED),
                 here=_held_listed(path, sums, sources))
    return _verified(kit) if verify else kit


def _check_hashes(path: Path, names: Iterable[str], sums: Mapping[str, str],
                  sources: Mapping[str, str]) -> None:
    """The files beside the tarballs, and those of sources/, match SHA256SUMS."""
    for name in names:
        if hash_file(path / name).sha256 != sums[name]:
            raise KitDirInvalid(f"kit folder {path}: {name} does not match {SHA256SUMS}")
    for name, listed_sha in sorted(sources.items()):
        place = source_file(path, name)
        if place is not None and hash_file(place).sha256 != listed_sha:
            raise KitDirInvalid(f"kit folder {path}: {place.relative_to(path)} does not "
                                f"match {SHA256SUMS}'s {name}")


def _beside(held: tuple[str, ...], sums: Mapping[str, str], built: bool
            ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(REPRODUCTION.json, SOURCES.json, publish's additions): those the folder's SHA256SUMS
    must list besides tarballs and attestations. A release may lack SOURCES.json; publish's
    additions are listed whether held or not (a fetch takes no pyz)."""
    recorded = (REPRODUCTION,) if REPRODUCTION in held else ()
    owed = (OWED,) if OWED in held or (not built and OWED in sums) else ()
    added = () if built else tuple(name for name in PUBLISH_LISTED if name in sums)
    return recorded, owed, added


def _held_listed(path: Path, sums: Mapping[str, str], sources: Mapping[str, str]
                 ) -> tuple[str, ...]:
    return tuple(sorted((*(name for name in sums if (path / name).is_file()),
                         *(name for name in sources if source_file(path, name) is not None))))


def _check_sources(path: Path, sums: Mapping[str, str], built: bool) -> dict[str, str]:
    """The sources/<file> lines of SHA256SUMS, once sources/ holds exactly those files or none
    (GitHub's assets are flat; a fetch downloads only the kit)."""
    listed = {name: sha for name, sha in sums.items() if name.startswith(f"{SOURCES}/")}
    folder = path / SOURCES
    held = sorted(f"{SOURCES}/{name}" for name in os.listdir(folder)) if folder.is_dir() else []
    if (held or built) and held != sorted(listed):
        raise KitDirInvalid(f"kit folder {path}: {SOURCES}/ holds "
                            f"{', '.join(held) or 'nothing'}, but {SHA256SUMS} lists "
                            f"{', '.join(sorted(listed)) or 'none of it'}")
    for name in listed:
        if "/" in name.removeprefix(f"{SOURCES}/") or name == f"{SOURCES}/":
            raise KitDirInvalid(f"kit folder {path}: {SHA256SUMS} lists {name!r}, not a file "
                                f"of {SOURCES}/")
        place = source_file(path, name)
        if place is not None and not stat.S_ISREG(place.lstat().st_mode):
            raise KitDirInvalid(f"kit folder {path}: {place.relative_to(path)} is not a regular "
                                f"file")
    return listed


def source_file(path: Path, listed: str) -> Path | None:
    """The source file listed as sources/<file>: there, or flat beside the kit; else None."""
    for place in (path / listed, path / listed.removeprefix(f"{SOURCES}/")):
        if place.exists() or place.is_symlink():
            return place
    return None


def _check_layout(path: Path, built: bool
                  ) -> tuple[tuple[str, ...], str, dict[str, str], tuple[str, ...]]:
    """What the folder holds of each kind of file, once it holds only what a kit folder may."""
    names = sorted(os.listdir(path))
    # a release's sources/<file> is flat (GitHub's assets are); an orig tarball may end .tar.gz
    flat = () if built else tuple(name.removeprefix(f"{SOURCES}/")
                                  for name in _listed_sources(path))
    tarballs = [name for name in names if name.endswith(TARBALL_SUFFIX) and name not in flat]
    asset, siblings = _paired(path, tarballs)
    possible = attestation_names((asset, *(kind.asset(asset) for kind in flavours.beside()
                                           if asset != TARBALL_SUFFIX)))
    attested = tuple(name for name in names if name in possible)
    names = [name for name in names if name not in possible]
    allowed = _check_names(path, names, tarballs, flat, built)
    _check_kinds(path, (*tarballs, *(name for name in names if name in allowed), *attested))
    return (tuple(name for name in names if name in allowed and name != SOURCES
                  and name not in flat), asset, siblings, attested)


def _check_names(path: Path, names: list[str], tarballs: list[str], flat: tuple[str, ...],
                 built: bool) -> tuple[str, ...]:
    """Refuse a folder lacking a required file or holding one a kit folder does not; the names
    it may hold besides its tarballs."""
    required, extras = (FIXED_FILES, ()) if built else \
        (REQUIRED, (SIGNATURE, REPRODUCTION, *RELEASE_EXTRAS))
    missing = [name for name in required if name not in names]
    if missing:
        what = f"{', '.join(FIXED_FILES)}" if built else f"{BUILDINFO} and {SHA256SUMS}"
        raise KitDirInvalid(f"kit folder {path}: {', '.join(missing)} missing (beside its "
                            f"tarball a kit folder holds {what})")
    allowed = (*FIXED_FILES, *extras, OWED, SOURCES, *flat)
    extra = [name for name in names if name not in tarballs and name not in allowed]
    if extra:
        kept = (f"{', '.join(('<the tarballs>', *FIXED_FILES))}" +
                ("" if built else
                 f"; a release also {', '.join((SIGNATURE, REPRODUCTION, *RELEASE_EXTRAS))}/"))
        raise KitDirInvalid(f"kit folder {path}: holds {', '.join(extra)}, which is not part of "
                            f"a kit folder ({kept})")
    return allowed


def _check_kinds(path: Path, held: Iterable[str]) -> None:
    """kit/ and sources/ are folders, everything else a regular file (no link, no device)."""
    for name in held:
        mode = (path / name).lstat().st_mode
        if name in (UNPACKED, SOURCES) and not stat.S_ISDIR(mode):
            raise KitDirInvalid(f"kit folder {path}: {name} is not a folder (a release's kit/ "
                                f"is its tarball unpacked; sources/ holds source packages)")
        if name not in (UNPACKED, SOURCES) and not stat.S_ISREG(mode):
            raise KitDirInvalid(f"kit folder {path}: {name} is not a regular file")


def _check_attested(path: Path, attested: tuple[str, ...], here: Iterable[str],
                    listed: tuple[str, ...], built: bool) -> None:
    """Every tarball has its SBOM and provenance, or (a kit built before them) none has."""
    strays = sorted(set(attested) - set(attestation_names(listed)))
    if strays:
        raise KitDirInvalid(f"kit folder {path}: holds {', '.join(strays)}, the SBOM or "
                            f"provenance of a tarball that is not part of this kit")
    every = attestation_names(here)
    if built and attested and sorted(attested) != sorted(every):
        lacking = sorted(set(every) - set(attested))
        raise KitDirInvalid(f"kit folder {path}: {', '.join(lacking)} missing (a kit folder "
                            f"holds the SBOM and provenance of every tarball, or of none)")


def _listed_sources(path: Path) -> list[str]:
    try:
        text = (path / SHA256SUMS).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return listed_sources(text)


def listed_sources(sums: str) -> list[str]:
    """The sources/<file> names a SHA256SUMS text lists (never a kit tarball)."""
    return [line.split("  ", 1)[1] for line in sums.splitlines()
            if "  " in line and line.split("  ", 1)[1].startswith(f"{SOURCES}/")]


def _paired(path: Path, tarballs: list[str]) -> tuple[str, dict[str, str]]:
    """(the plain tarball, the other flavours' by name)."""
    if len(tarballs) == 1:
        return tarballs[0], {}
    if 1 < len(tarballs) <= 1 + len(flavours.beside()):
        for plain in tarballs:
            kinds = {kind.asset(plain): kind.name for kind in flavours.beside()} \
                if plain != TARBALL_SUFFIX else {}
            others = [name for name in tarballs if name != plain]
            if all(name in kinds for name in others):
                return plain, {kinds[name]: name for name in
                               sorted(others, key=lambda name: flavours.rank(kinds[name]))}
        raise KitDirInvalid(f"kit folder {path}: holds {len(tarballs)} tarballs "
                            f"({', '.join(tarballs)}) that are not a pair; beside the kit's one "
                            f"*{TARBALL_SUFFIX} a kit folder holds at most its portable sibling "
                            f"<stem>{PORTABLE.suffix}")
    found = ", ".join(tarballs) or "none"
    raise KitDirInvalid(f"kit folder {path}: holds {len(tarballs)} tarballs ({found}); a kit "
                        f"folder holds exactly one *{TARBALL_SUFFIX}, and beside it at most its "
                        f"portable sibling <stem>{PORTABLE.suffix}")


def _check_flavours(path: Path, info: BuildInfo, siblings: Mapping[str, str]) -> None:
    """BUILDINFO.txt beside the tarballs is the plain kit's, naming each flavour's it holds."""
    if info.flavour != PLAIN:
        raise KitDirInvalid(f"kit folder {path}: {BUILDINFO} says flavour {info.flavour!r}; the "
                            f"one beside the tarballs is the plain kit's")
    for kind in flavours.beside():
        held, named = siblings.get(kind.name), info.asset_of(kind.name)
        if named != held:
            holds = f"holds {held}" if held else f"holds no {kind.name} tarball"
            raise KitDirInvalid(f"kit folder {path}: {BUILDINFO} names {kind.key} "
                                f"{named or buildinfo.NO_ASSET}, but the folder {holds}")


def _read_sha1sums(path: Path, tarballs: tuple[str, ...]) -> dict[str, str]:
    """Tarball name → SHA-1, once SHA1SUMS is one sorted line per tarball."""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        sha1s = parse_sums(text, SHA1, str(path))
    except CheckFailed:
        sha1s = {}  # said below, with the shape it should have
    if sorted(sha1s) != sorted(tarballs) or render_sums(sha1s, SHA1) != text:
        shape = ", ".join(f"'<sha1>  {name}'" for name in sorted(tarballs))
        lines = f"{len(tarballs)} lines" if len(tarballs) > 1 else "one line"
        raise KitDirInvalid(f"{path}: expected {lines} {shape}, got {text[:200]!r}")
    return sha1s


def _verified(kit: KitDir) -> KitDir:
    hashed = {flavour.asset: hash_file(flavour.path) for flavour in kit.flavours}
    info = hash_file(kit.buildinfo_path)
    checks = [(flavour.asset, listed, actual, sums) for flavour in kit.flavours
              for listed, actual, sums in ((flavour.sha256, hashed[flavour.asset].sha256,
                                            SHA256SUMS),
                                           (flavour.sha1, hashed[flavour.asset].sha1, SHA1SUMS))]
    checks.insert(2, (BUILDINFO, kit.buildinfo_sha256, info.sha256, SHA256SUMS))
    checks += [(name, listed, hash_file(kit.path / name).sha256, SHA256SUMS)
               for name, listed in kit.attestations]
    for name, listed, actual, sums in checks:
        if listed is not None and listed != actual:  # None: no SHA1SUMS in this release
            raise KitDirInvalid(f"kit folder {kit.path}: {name} does not match {sums} (listed "
                                f"{listed}, the file hashes to {actual})")
    return replace(kit, verified=True)


def check_beside(tarball: Path) -> str | None:
    """Check a tarball against the SHA256SUMS (and SHA1SUMS) beside it: the words for what was
    checked, None without a SHA256SUMS. KitDirInvalid when unlisted or a hash differs."""
    folder = tarball.parent
    if not (folder / SHA256SUMS).is_file():
        return None
    sums = _sums_file(folder / SHA256SUMS, SHA256)
    if tarball.name not in sums:
        raise KitDirInvalid(f"{tarball}: the {SHA256SUMS} beside it does not list "
                            f"{tarball.name} (it lists {', '.join(sorted(sums)) or 'nothing'}): "
                            f"it is not this tarball's checksum file")
    sha1s = _sums_file(folder / SHA1SUMS, SHA1) if (folder / SHA1SUMS).is_file() else {}
    hashed = hash_file(tarball)
    _compare(folder, tarball.name, sums[tarball.name], hashed.sha256, SHA256SUMS)
    checked = [f"{SHA256SUMS} beside it ok"]
    if tarball.name in sha1s:
        _compare(folder, tarball.name, sha1s[tarball.name], hashed.sha1, SHA1SUMS)
        checked.append(f"{SHA1SUMS} ok")
    return ", ".join(checked)


def check_listed(folder: Path) -> str:
    """Check what `folder`'s SHA256SUMS (and SHA1SUMS) list and it holds, as `sha256sum -c
    --ignore-missing`: the words for what was checked. KitDirInvalid when a hash differs or
    it holds nothing listed."""
    sums = _sums_file(folder / SHA256SUMS, SHA256)
    sha1s = _sums_file(folder / SHA1SUMS, SHA1) if (folder / SHA1SUMS).is_file() else {}
    here = sorted(name for name in sums if "/" not in name and name not in (".", "..")
                  and (folder / name).is_file())
    if not here:
        raise KitDirInvalid(f"{folder}: its {SHA256SUMS} lists "
                            f"{', '.join(sorted(sums)) or 'nothing'}, none of which is here")
    for name in here:
        hashed = hash_file(folder / name)
        _compare(folder, name, sums[name], hashed.sha256, SHA256SUMS)
        if name in sha1s:
            _compare(folder, name, sha1s[name], hashed.sha1, SHA1SUMS)
    return f"{SHA256SUMS} ok ({', '.join(here)})"


def _sums_file(path: Path, width: int) -> dict[str, str]:
    """Name → hex digest of the SHA256SUMS or SHA1SUMS file `path` (digits: `width`)."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as error:
        raise KitDirInvalid(f"{path}: cannot read it ({error.strerror or error})") from None
    return parse_sums(text, width, str(path), KitDirInvalid)


def _compare(folder: Path, name: str, listed: str, actual: str, sums: str) -> None:
    if listed.lower() != actual:
        raise KitDirInvalid(f"{folder / name} does not match the {sums} beside it (listed "
                            f"{listed}, the file hashes to {actual})")


def check_tag_free(dist_dir: Path, tag: str, kit: str, *, revision: str | None = None,
                   replace_revision: bool = False) -> None:
    """Refuse, before building, a tag whose folder holds another kit (two matrix entries
    rendering one tag would delete each other's), or this kit at another revision unless
    `replace_revision` (one tag would silently name two kits)."""
    final = dist_dir / tag
    if not final.exists() and not final.is_symlink():
        return
    owner, problem = _owner(final)
    if owner == kit:
        held = _revision(final)
        if revision is None or replace_revision or held == revision:
            return
        raise TagTaken(f"{final} holds kit {kit} built from revision {held[:12]}, and this build "
                       f"of revision {revision[:12]} renders the same release tag {tag!r}: one "
                       f"tag would name two kits. Keep that kit: build into another --dist; "
                       f"replace it: build again with --replace")
    if owner is None:
        raise TagTaken(f"{final} exists and is not a kit folder ({problem}); kit {kit} renders "
                       f"the tag {tag!r} and would replace it: move it away, or build into "
                       f"another --dist")
    raise TagTaken(f"kits {owner} and {kit} both render the release tag {tag!r}: {final} holds "
                   f"kit {owner}, and building kit {kit} would replace it; give one of them "
                   f"another tag in matrix.toml, or build into another --dist")


def _revision(folder: Path) -> str:
    """The upstream revision the kit folder's BUILDINFO.txt names (its owner was read)."""
    return buildinfo.read(folder / BUILDINFO).revision


def _owner(folder: Path) -> tuple[str | None, str]:
    if folder.is_symlink() or not folder.is_dir():
        return None, "not a folder"
    try:
        return buildinfo.read(folder / BUILDINFO).kit, ""
    except FileNotFoundError:
        return None, f"no {BUILDINFO}"
    except (BadInput, OSError) as error:
        return None, str(error)


def install(staging: Path, dist_dir: Path, tag: str, kit: str, *,
            replace_revision: bool = False) -> KitDir:
    """Move the finished folder `staging` to dist_dir/tag with one rename, under a lock on
    dist_dir. TagTaken as `check_tag_free`; when the rename fails the older folder is put back."""
    final = dist_dir / tag
    with _locked(dist_dir):
        placed = read_kit_dir(staging, built=True)
        check_tag_free(dist_dir, tag, kit, revision=placed.info.revision,
                       replace_revision=replace_revision)
        if placed.kit != kit:
            raise KitDirInvalid(f"{staging}: {BUILDINFO} names kit {placed.kit}, not {kit}")
        retired = dist_dir / f".retired-{tag}-{os.getpid()}"
        had_previous = final.exists()
        if had_previous:
            final.rename(retired)
        try:
            staging.rename(final)
        except BaseException as error:
            if had_previous:
                retired.rename(final)
            if isinstance(error, OSError):
                kept = "the previous kit folder is back in place" if had_previous else \
                    "dist/ is as it was"
                raise EnvironmentFailure(f"cannot move the finished kit {staging} to {final} "
                                         f"({error.strerror or error}); {kept}") from error
            raise
        fsync_dir(dist_dir)
        shutil.rmtree(retired, ignore_errors=True)
    return replace(placed, path=final, siblings=tuple(
        replace(sibling, folder=final) for sibling in placed.siblings))


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """flock on dist_dir's own descriptor, so that dist/ holds nothing but kit folders."""
    with locks.held(folder, wait=None):
        yield


def sources_not_fetched(kit: KitDir) -> bool:
    """Whether the portable tarball's third_party/README says its sources were not fetched."""
    if kit.portable is None or not kit.portable.path.is_file():
        return False
    try:
        with tarfile.open(kit.portable.path, mode="r:gz") as archive:
            for member in archive:
                if member.name == PORTABLE_README and member.isfile():
                    readme = archive.extractfile(member)
                    return readme is not None and SOURCES_NOT_FETCHED.encode() in readme.read()
    except (OSError, tarfile.TarError, EOFError) as error:
        raise KitDirInvalid(f"{kit.portable.path}: cannot be read as a gzip tarball "
                            f"({error})") from None
    return False
