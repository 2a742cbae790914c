"""A finished kit folder, dist/<tag>/: what `build` writes and `publish`, `verify` and `fetch` read.

    dist/<tag>/          the kit's release tag, rendered from matrix.toml
      <asset>            the kit tarball (<stem>.tar.gz)
      <stem>-portable.tar.gz
                         only for a kit built `portable`: the same compile carrying its own
                         libraries (kit/lib/, their copyright files in kit/third_party/, its own
                         kit/BUILDINFO.txt with `flavour: portable`)
      BUILDINFO.txt      how it was built; its `kit` key names the matrix entry that owns the
                         folder, its `portable_asset` key the portable tarball (or `none`)
      SHA256SUMS         sha256 of <asset>, of BUILDINFO.txt and of the portable tarball when
                         there is one, sorted by name (`sha256sum -c`)
      SHA1SUMS           the SHA-1 of <asset> and of the portable tarball, one line each,
                         sorted by name (`sha1sum -c`)
      build.log          the configure and compile log
      <stem>.cdx.json    per tarball (the plain kit's stem, and <stem>-portable's): its CycloneDX
                         1.6 SBOM (ninfer_kits.attestations; docs/attestations.md)
      <stem>.intoto.json per tarball: its in-toto Statement v1 with the SLSA Provenance v1
                         predicate; both listed in SHA256SUMS
      sources/           only for a portable kit that bundles GPL, LGPL or MPL libraries: the
                         Debian source packages of exactly the bundled versions (.dsc, orig and
                         debian tarballs), which their licences oblige the kit to publish;
                         SHA256SUMS lists each as sources/<file>; only those built in the
                         toolchain image (the Debian ones are fetched by publish)
      SOURCES.json       only for a portable kit that owes Debian source packages: which, and
                         the archives and keyrings to fetch them from (owed_sources); publish
                         fetches them and uploads each as an asset listed as sources/<file>

Nothing else is in a kit folder as `build` makes it. A kit built before them has no .cdx.json
or .intoto.json (neither for any tarball): still a kit folder; one built with them has both for
every tarball. A release of it (`publish --to local`'s
<out>/<tag>/, a release's assets downloaded into one folder, `fetch`'s DEST) is the same kit
without build.log (publish never uploads it), with SHA256SUMS.sig where the release is signed
(the OpenSSH signature of SHA256SUMS that publish makes, listed nowhere: it signs the list),
with REPRODUCTION.json where an independent rebuild was recorded (`reproduction`), and may hold
beside it what a release carries (RELEASE.md, the notes of the local store; ninfer-kits.pyz);
its SHA256SUMS lists every file of the release but the signature (SHA1SUMS, REPRODUCTION.json
and ninfer-kits.pyz too, so that the signature covers them; a release published before that
lists only the kit's files), and every one held here is checked; the files SHA256SUMS lists as
sources/<file>, flat (GitHub's assets are; each checked, none required), and kit/, the
tarball unpacked
(`fetch`, or `tar xzf` as the notes say). Its SHA1SUMS may be missing (not downloaded), and of
a release with a portable sibling one tarball may be missing, when SHA256SUMS lists it
(`sha256sum -c --ignore-missing`), and so may the SBOM and provenance files it lists. Nothing
else is accepted.

The kit's tarballs are its flavours: the plain kit, then each of SIBLINGS it was built with.
Which is the plain one is decided by pairing: with more than one, each other one must be a
sibling's name of it (`FlavourKind.asset`); one alone is the plain kit, whatever its name.
`read_kit_dir` checks all of it (and every hash, unless asked not to) and returns a KitDir;
`built=True` asks for the folder exactly as `build` makes it. `check_beside` checks one
tarball against the SHA256SUMS (and SHA1SUMS) beside it, `check_listed` every file here that
a folder's SHA256SUMS lists. `install` puts a finished staging folder in place of dist/<tag>/
with one rename, refuses to replace a folder that belongs to another kit, and puts the previous
folder back when the rename fails.
"""

from __future__ import annotations

import os
import shutil
import stat
import tarfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ninfer_kits import buildinfo, locks
from ninfer_kits.atomic import fsync_dir, hash_file
from ninfer_kits.buildinfo import PORTABLE_SUFFIX, BuildInfo
from ninfer_kits.checksums import SHA1, SHA256, parse_sums, read_sha256sums, render_sums
from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure

BUILDINFO = "BUILDINFO.txt"
SHA256SUMS = "SHA256SUMS"
SHA1SUMS = "SHA1SUMS"
BUILD_LOG = "build.log"
TARBALL_SUFFIX = ".tar.gz"
FIXED_FILES = (BUILDINFO, SHA256SUMS, SHA1SUMS, BUILD_LOG)  # `build` writes them by the tarballs
REQUIRED = (BUILDINFO, SHA256SUMS)  # what every variant holds
SIGNATURE = f"{SHA256SUMS}.sig"  # a signed release's signature of SHA256SUMS (not `build`'s)
REPRODUCTION = "REPRODUCTION.json"  # a release's record of its independent rebuild (publish's)
NOTES = "RELEASE.md"  # the local store's release notes
PYZ = "ninfer-kits.pyz"  # the tools a release carries
UNPACKED = "kit"  # the tarball unpacked beside it (fetch's DEST; `tar xzf` of the notes)
SOURCES = "sources"  # the bundled copyleft libraries' source packages (pipeline.copyleft)
OWED = "SOURCES.json"  # the Debian source packages the kit owes (owed_sources.RECORD)
# An older ninfer-kits could build a portable kit without fetching its sources (a variable,
# NINFER_KITS_NO_SOURCES=1): its third_party/README opens its copyleft part with this heading,
# it has no SOURCES.json to fetch them by, and publish refuses it.
SOURCES_NOT_FETCHED = "Corresponding source: NOT FETCHED"
PORTABLE_README = "kit/third_party/README"
RELEASE_EXTRAS = (NOTES, PYZ, UNPACKED)  # what a release may hold beside the kit's own files
# what a release's SHA256SUMS lists beside the kit's files (publish adds them; REPRODUCTION too)
PUBLISH_LISTED = (SHA1SUMS, PYZ)
SBOM_SUFFIX = ".cdx.json"  # <tarball stem>.cdx.json: its CycloneDX SBOM
PROVENANCE_SUFFIX = ".intoto.json"  # <tarball stem>.intoto.json: its SLSA provenance statement
ATTESTATION_SUFFIXES = (SBOM_SUFFIX, PROVENANCE_SUFFIX)


def attestation_names(tarballs: Iterable[str]) -> tuple[str, ...]:
    """The SBOM and provenance files of these tarballs (<stem>.cdx.json, <stem>.intoto.json)."""
    return tuple(sorted(tarball.removesuffix(TARBALL_SUFFIX) + suffix for tarball in tarballs
                        for suffix in ATTESTATION_SUFFIXES))


@dataclass(frozen=True)
class FlavourKind:
    """A flavour a kit folder may hold beside the plain kit: the same compile, packed another
    way. A new flavour (split debug symbols, say) is one entry of SIBLINGS."""

    name: str  # BUILDINFO's `flavour` in its own BUILDINFO.txt
    suffix: str  # its tarball: <the plain tarball's stem><suffix>
    key: str  # the plain kit's BUILDINFO key that names its tarball (`none` without one)

    def asset(self, plain: str) -> str:
        """This flavour's tarball beside the plain kit `plain`."""
        if not plain.endswith(TARBALL_SUFFIX) or plain == TARBALL_SUFFIX:
            raise ValueError(f"{plain!r} is not a kit tarball's name (<stem>{TARBALL_SUFFIX})")
        return plain.removesuffix(TARBALL_SUFFIX) + self.suffix

    def named(self, info: BuildInfo) -> str | None:
        """The tarball of this flavour that the plain kit's BUILDINFO.txt names, or None."""
        return None if (value := str(getattr(info, self.key))) == "none" else value


PLAIN = "plain"
PORTABLE = FlavourKind("portable", PORTABLE_SUFFIX, "portable_asset")
SIBLINGS = (PORTABLE,)  # in the order their tarballs follow the plain one's


class KitDirInvalid(CheckFailed):
    """A folder that should hold a finished kit does not: a file missing or extra, a checksum
    file that disagrees with the files, a BUILDINFO.txt that does not parse."""


class TagTaken(BadInput):
    """dist/<tag>/ holds another kit (two matrix entries render the same tag), or something that
    is not a kit folder at all: building would delete it."""


@dataclass(frozen=True, kw_only=True)
class Flavour:
    """One tarball of the kit folder (the plain kit, or one of SIBLINGS), read and checked."""

    name: str  # PLAIN, or a FlavourKind's name
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
    """One finished kit folder, read and checked: as `build` makes it, or a release of it."""

    path: Path  # dist/<tag>
    asset: str  # the plain kit's tarball's file name
    info: BuildInfo  # BUILDINFO.txt beside the tarballs (with this run's keys)
    size: int  # of the tarball
    sha256: str  # of the tarball, as SHA256SUMS lists it
    sha1: str | None  # of the tarball, as SHA1SUMS lists it; None without SHA1SUMS
    buildinfo_sha256: str  # of BUILDINFO.txt, as SHA256SUMS lists it
    verified: bool  # every hash above (and the siblings') was checked against the bytes
    siblings: tuple[Flavour, ...] = ()  # the tarballs beside <asset> (SIBLINGS), when built
    held: tuple[str, ...] = FIXED_FILES  # the names of FIXED_FILES, SIGNATURE and
    # RELEASE_EXTRAS here
    absent: tuple[str, ...] = ()  # the sibling tarballs SHA256SUMS lists but not here
    # the SBOM and provenance files here (name, sha256 as SHA256SUMS lists it); () in a kit
    # built before them
    attestations: tuple[tuple[str, str], ...] = ()
    sources: tuple[str, ...] = ()  # sources/<file> as SHA256SUMS lists them, sorted
    owed: str | None = None  # SOURCES.json's sha256 where SHA256SUMS lists it
    here: tuple[str, ...] = ()  # what SHA256SUMS lists that the folder holds (each checked)

    @property
    def flavours(self) -> tuple[Flavour, ...]:
        """The kit's tarballs: the plain kit, then its siblings."""
        return (Flavour(name=PLAIN, folder=self.path, asset=self.asset, size=self.size,
                        sha256=self.sha256, sha1=self.sha1), *self.siblings)

    @property
    def portable(self) -> Flavour | None:
        return next((item for item in self.siblings if item.name == PORTABLE.name), None)

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
        """The kit's files in the folder (the tarballs, BUILDINFO.txt, the checksum files and
        build.log where they are), sorted by name: not a release's extras."""
        return tuple(sorted((*(name for name in self.held
                               if name in (*FIXED_FILES, SIGNATURE, REPRODUCTION, OWED)),
                             *self.tarballs, *(name for name, _ in self.attestations))))

    @property
    def signature(self) -> Path | None:
        """SHA256SUMS.sig, where the folder holds one (a signed release)."""
        return self.path / SIGNATURE if SIGNATURE in self.held else None

    @property
    def reproduction(self) -> Path | None:
        """REPRODUCTION.json, where the folder holds one (a release whose rebuild was
        recorded); SHA256SUMS lists it, and `verify` checked its hash."""
        return self.path / REPRODUCTION if REPRODUCTION in self.held else None

    @property
    def owed_record(self) -> Path | None:
        """SOURCES.json, where the folder holds one (checked against SHA256SUMS)."""
        return self.path / OWED if OWED in self.held else None

    @property
    def extras(self) -> tuple[str, ...]:
        """What a release holds beside the kit's files (RELEASE.md, ninfer-kits.pyz, kit/)."""
        return tuple(name for name in self.held if name in RELEASE_EXTRAS)

    @property
    def tarballs(self) -> tuple[str, ...]:
        """The tarballs' names: the plain kit, then its siblings'."""
        return tuple(flavour.asset for flavour in self.flavours)


def read_kit_dir(path: Path, *, verify: bool = True, built: bool = False) -> KitDir:
    """Read a kit folder and check its layout, its checksum files, that BUILDINFO.txt names the
    sibling tarballs the folder holds (or none), and (with `verify`) that the hashes they list
    are the files' own. It is dist/<tag>/ as `build` makes it, or a release of it (module
    docstring); `built` accepts only the former. KitDirInvalid names the folder and what is
    wrong."""
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
        kind.name: named for kind in SIBLINGS if kind.name not in siblings
        and (named := kind.named(info)) is not None and named in sums}
    _check_flavours(path, info, siblings | absent)
    names = {PLAIN: asset} | siblings
    listed = (*names.values(), *absent.values())
    _check_attested(path, attested, names.values(), listed, built)
    # a release may lack what SHA256SUMS lists of the attestations, as it may lack a tarball
    missing = () if built else tuple(name for name in attestation_names(listed)
                                     if name in sums and name not in attested)
    recorded = (REPRODUCTION,) if REPRODUCTION in held else ()
    # SOURCES.json: build's, where the kit owes Debian sources; a release may lack it
    owed = (OWED,) if OWED in held or (not built and OWED in sums) else ()
    # what publish adds to a release's SHA256SUMS, held here or not (a fetch takes no pyz)
    added = () if built else tuple(name for name in PUBLISH_LISTED if name in sums)
    expected = sorted((*listed, BUILDINFO, *attested, *missing, *recorded, *added, *owed))
    sources = _check_sources(path, sums, built)
    sums = {name: sha for name, sha in sums.items() if name not in sources}
    if sorted(sums) != expected:
        raise KitDirInvalid(f"kit folder {path}: {SHA256SUMS} lists {', '.join(sorted(sums))}; "
                            f"it must list exactly {', '.join(expected)}")
    sha1 = _read_sha1sums(path / SHA1SUMS, listed) if SHA1SUMS in held else {}
    flavours = [Flavour(name=name, folder=path, asset=tarball,
                        size=(path / tarball).stat().st_size, sha256=sums[tarball],
                        sha1=sha1.get(tarball)) for name, tarball in names.items()]
    for name in (*recorded, *(name for name in (*added, *owed) if name in held)):
        if verify and hash_file(path / name).sha256 != sums[name]:
            raise KitDirInvalid(f"kit folder {path}: {name} does not match {SHA256SUMS}")
    kit = KitDir(path=path, asset=asset, info=info, size=flavours[0].size, sha256=sums[asset],
                 sha1=sha1.get(asset), buildinfo_sha256=sums[BUILDINFO], verified=False,
                 siblings=tuple(flavours[1:]), held=held, absent=tuple(absent.values()),
                 attestations=tuple((name, sums[name]) for name in attested),
                 sources=tuple(sorted(sources)), owed=sums.get(OWED),
                 here=_held_listed(path, sums, sources))
    if verify:
        for name, listed_sha in sorted(sources.items()):
            place = source_file(path, name)
            if place is not None and hash_file(place).sha256 != listed_sha:
                raise KitDirInvalid(f"kit folder {path}: {place.relative_to(path)} does not "
                                    f"match {SHA256SUMS}'s {name}")
    return _verified(kit) if verify else kit


def _held_listed(path: Path, sums: Mapping[str, str], sources: Mapping[str, str]
                 ) -> tuple[str, ...]:
    """What SHA256SUMS lists (`sums`, and the sources/<file> lines) that the folder holds."""
    return tuple(sorted((*(name for name in sums if (path / name).is_file()),
                         *(name for name in sources if source_file(path, name) is not None))))


def _check_sources(path: Path, sums: Mapping[str, str], built: bool) -> dict[str, str]:
    """The sources/<file> lines of SHA256SUMS (name → sha256), once the folder's sources/
    holds exactly those files (a release's folder may hold none of them: GitHub's assets are
    flat, and a fetch downloads only the kit)."""
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
    """Where the folder holds the source file SHA256SUMS lists as sources/<file>: there, or
    flat beside the kit in a release; None when it holds neither."""
    for place in (path / listed, path / listed.removeprefix(f"{SOURCES}/")):
        if place.exists() or place.is_symlink():
            return place
    return None


def _check_layout(path: Path, built: bool
                  ) -> tuple[tuple[str, ...], str, dict[str, str], tuple[str, ...]]:
    """(the names of FIXED_FILES, SIGNATURE and RELEASE_EXTRAS the folder holds, the plain
    tarball's name, the siblings' by flavour, the SBOM and provenance files it holds), once the
    folder holds only what a kit folder may hold."""
    names = sorted(os.listdir(path))
    # a release's copy of sources/<file> is flat (GitHub's assets are): <file> beside the kit,
    # and an orig tarball may end in .tar.gz too (gcc-14_14.2.0.orig.tar.gz)
    flat = () if built else tuple(name.removeprefix(f"{SOURCES}/")
                                  for name in _listed_sources(path))
    tarballs = [name for name in names if name.endswith(TARBALL_SUFFIX) and name not in flat]
    asset, siblings = _paired(path, tarballs)
    # the documents of the plain tarball and of each sibling it may have (held or not)
    possible = attestation_names((asset, *(kind.asset(asset) for kind in SIBLINGS
                                           if asset != TARBALL_SUFFIX)))
    attested = tuple(name for name in names if name in possible)
    names = [name for name in names if name not in possible]
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
    for name in (*tarballs, *(name for name in names if name in allowed)):
        mode = (path / name).lstat().st_mode
        if name in (UNPACKED, SOURCES) and not stat.S_ISDIR(mode):
            raise KitDirInvalid(f"kit folder {path}: {name} is not a folder (a release's kit/ "
                                f"is its tarball unpacked; sources/ holds source packages)")
        if name not in (UNPACKED, SOURCES) and not stat.S_ISREG(mode):
            raise KitDirInvalid(f"kit folder {path}: {name} is not a regular file")
    for name in attested:
        if not stat.S_ISREG((path / name).lstat().st_mode):
            raise KitDirInvalid(f"kit folder {path}: {name} is not a regular file")
    return (tuple(name for name in names if name in allowed and name != SOURCES
                  and name not in flat), asset, siblings, attested)


def _check_attested(path: Path, attested: tuple[str, ...], here: Iterable[str],
                    listed: tuple[str, ...], built: bool) -> None:
    """The SBOM and provenance files belong to the kit's tarballs; as `build` makes the
    folder, every tarball has both or (a kit built before them) none has any."""
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
    """The sources/<file> lines of the folder's SHA256SUMS, before it is read in earnest."""
    try:
        text = (path / SHA256SUMS).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return listed_sources(text)


def listed_sources(sums: str) -> list[str]:
    """The sources/<file> names a SHA256SUMS text lists: the copyleft sources published beside
    the kit, never a kit tarball, though one may end in .tar.gz too."""
    return [line.split("  ", 1)[1] for line in sums.splitlines()
            if "  " in line and line.split("  ", 1)[1].startswith(f"{SOURCES}/")]


def _paired(path: Path, tarballs: list[str]) -> tuple[str, dict[str, str]]:
    """(the plain tarball, its siblings' by flavour): one tarball alone is the plain kit; with
    more, one is the plain kit and each other one of its siblings (SIBLINGS)."""
    if len(tarballs) == 1:
        return tarballs[0], {}
    if 1 < len(tarballs) <= 1 + len(SIBLINGS):
        for plain in tarballs:
            kinds = {kind.asset(plain): kind.name for kind in SIBLINGS} \
                if plain != TARBALL_SUFFIX else {}
            others = [name for name in tarballs if name != plain]
            if all(name in kinds for name in others):
                return plain, {kinds[name]: name for name in others}
        raise KitDirInvalid(f"kit folder {path}: holds {len(tarballs)} tarballs "
                            f"({', '.join(tarballs)}) that are not a pair; beside the kit's one "
                            f"*{TARBALL_SUFFIX} a kit folder holds at most its portable sibling "
                            f"<stem>{PORTABLE_SUFFIX}")
    found = ", ".join(tarballs) or "none"
    raise KitDirInvalid(f"kit folder {path}: holds {len(tarballs)} tarballs ({found}); a kit "
                        f"folder holds exactly one *{TARBALL_SUFFIX}, and beside it at most its "
                        f"portable sibling <stem>{PORTABLE_SUFFIX}")


def _check_flavours(path: Path, info: BuildInfo, siblings: Mapping[str, str]) -> None:
    """BUILDINFO.txt beside the tarballs is the plain kit's, and names each sibling tarball the
    folder holds (`none` when it holds none)."""
    if info.flavour != PLAIN:
        raise KitDirInvalid(f"kit folder {path}: {BUILDINFO} says flavour {info.flavour!r}; the "
                            f"one beside the tarballs is the plain kit's")
    for kind in SIBLINGS:
        held = siblings.get(kind.name)
        if kind.named(info) != held:
            holds = f"holds {held}" if held else f"holds no {kind.name} tarball"
            raise KitDirInvalid(f"kit folder {path}: {BUILDINFO} names {kind.key} "
                                f"{getattr(info, kind.key)}, but the folder {holds}")


def _read_sha1sums(path: Path, tarballs: tuple[str, ...]) -> dict[str, str]:
    """Tarball name → SHA-1, once SHA1SUMS is exactly one line per tarball, sorted by name
    (as `build` writes it)."""
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
    # the plain kit's, BUILDINFO.txt's, then the siblings': the first difference is named
    checks.insert(2, (BUILDINFO, kit.buildinfo_sha256, info.sha256, SHA256SUMS))
    checks += [(name, listed, hash_file(kit.path / name).sha256, SHA256SUMS)
               for name, listed in kit.attestations]
    for name, listed, actual, sums in checks:
        if listed is not None and listed != actual:  # None: no SHA1SUMS in this release
            raise KitDirInvalid(f"kit folder {kit.path}: {name} does not match {sums} (listed "
                                f"{listed}, the file hashes to {actual})")
    return replace(kit, verified=True)


# --------------------------------------------------------------------------- checksums beside


def check_beside(tarball: Path) -> str | None:
    """Check a tarball against the SHA256SUMS beside it, and the SHA1SUMS beside it where that
    lists it: the words for what was checked, or None when no SHA256SUMS is beside it.
    KitDirInvalid when SHA256SUMS does not list the tarball or a hash differs (naming the
    file)."""
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
    """Check every file of `folder` that its SHA256SUMS lists (`sha256sum -c --ignore-missing`:
    a fetch's DEST holds one of a release's two tarballs), and SHA1SUMS's where there is one:
    the words for what was checked. KitDirInvalid when a hash differs (naming the file), or
    when SHA256SUMS lists no file that is here."""
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


# --------------------------------------------------------------------------- putting one in place


def check_tag_free(dist_dir: Path, tag: str, kit: str, *, revision: str | None = None,
                   replace_revision: bool = False) -> None:
    """Refuse, before anything is built, a tag whose folder belongs to another kit: two matrix
    entries that render the same tag would otherwise delete each other's kit. The same kit's
    older build of the same `revision` is fine: `install` replaces it. One of another revision
    (a tag template without {rev}, and `--revision` or a moved branch head) is replaced only
    with `replace_revision`: one tag would otherwise name two kits, silently."""
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
    """(the kit that BUILDINFO.txt in `folder` names, or None and why not)."""
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
    """Move the finished folder `staging` to dist_dir/tag with one rename.

    Under a lock on dist_dir (builds running at once take turns here): refuse a folder of
    another kit, or of the same kit at another revision unless `replace_revision` (TagTaken),
    check the staging folder as a kit folder, set the same kit's older folder aside, rename, and
    drop the older folder. When the rename fails the older folder is put back: dist/ then holds
    what it held before."""
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
    """An exclusive lock on the folder itself (flock works on a directory's descriptor), so
    that nothing is left in dist/ but kit folders."""
    with locks.held(folder, wait=None):
        yield


def sources_not_fetched(kit: KitDir) -> bool:
    """Whether the kit's portable tarball says its copyleft libraries' sources were not fetched
    (an older ninfer-kits, built with NINFER_KITS_NO_SOURCES=1): its third_party/README holds
    SOURCES_NOT_FETCHED."""
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
