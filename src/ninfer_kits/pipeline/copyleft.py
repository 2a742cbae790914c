"""What the libraries a portable kit bundles oblige its distributor to do: a curated verdict per
source package (data/copyleft.toml), and the record of the source packages owed (SOURCES.json),
which publish fetches. Why so: docs/portable.md, "Copyleft"."""

from __future__ import annotations

import dataclasses
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, read_data_file
from ninfer_kits.errors import CheckFailed
from ninfer_kits.files.atomic import hash_file
from ninfer_kits.kit import kitdir, spdx
from ninfer_kits.kit.owed_sources import (
    Archive,
    Keyring,
    OwedPackage,
    OwedSources,
    SourceFile,
    archive_stem,
    recordable,
)
from ninfer_kits.pipeline.image_facts import ImageFacts, check_schema
from ninfer_kits.pipeline.provenance import DPKG_STATUS, Origin

SCHEMA = 1
DATA_FILE = data_file("copyleft.toml")
SOURCE = "source"  # GPL, LGPL, MPL: publish the corresponding source beside the kit
NOTICE = "notice"  # permissive: the licence file in kit/third_party/ is the whole duty
OBLIGATIONS = (SOURCE, NOTICE)
MANAGERS = ("dpkg", "wheel", "built")
SOURCES = kitdir.SOURCES  # the kit folder's sub-folder, and the cache's, that holds them
_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]*")  # a Debian source package's or a wheel's name


class Unclassified(CheckFailed):
    """A bundled package has no verdict in data/copyleft.toml: what it obliges is unknown."""


class SourceUnavailable(CheckFailed):
    """The source of a bundled copyleft package could not be fetched, or did not check."""


@dataclass(frozen=True)
class Verdict:
    manager: Literal["dpkg", "wheel", "built"]
    package: str  # a Debian source package, a wheel's name, or a library built in the image
    licence: str  # the licence that governs the shipped library: an SPDX expression
    obligation: str  # SOURCE or NOTICE
    why: str  # "" where the licence says it all
    name: str = ""  # the licence in words, where the expression is a LicenseRef-…


@dataclass(frozen=True)
class Verdicts:
    path: Path
    rows: tuple[Verdict, ...]

    def of(self, manager: str, package: str) -> Verdict | None:
        return next((row for row in self.rows if (row.manager, row.package) == (manager, package)),
                    None)


@dataclass(frozen=True)
class SourcePackage:
    name: str
    version: str  # as dpkg has it, epoch included ("7:7.1.5-0+deb13u1")
    binaries: tuple[str, ...]  # the bundled binary packages built from it, sorted
    root: str = "/"  # whose dpkg records name it: the image's, or a package root's (a sysroot)

    @property
    def stem(self) -> str:
        return archive_stem(self.name, self.version)


@dataclass(frozen=True)
class Obligations:
    """Each bundled package's verdict, and the source packages the kit must publish."""

    verdicts: tuple[tuple[str, Verdict], ...]  # (source or wheel name, its verdict), sorted
    sources: tuple[SourcePackage, ...]  # those whose verdict is SOURCE, sorted
    built: tuple[tuple[str, str], ...] = ()  # (name, version) built in the image, owing source


def load_verdicts(path: Path | None = None) -> Verdicts:
    """The shipped verdicts, or the file at `path`; BadInput names file, line, table and key."""
    root = read_data_file(path or DATA_FILE, "the copyleft verdicts file")
    root.check_keys(("schema",), MANAGERS)
    check_schema(root, SCHEMA)
    rows: list[Verdict] = []
    for manager in MANAGERS:
        section = root.table(manager, optional=True)
        for name in section.data:
            if not _NAME.fullmatch(name):
                raise section.error(name, f"invalid package name {name!r} (a Debian source "
                                          "package's or a wheel's: lowercase letters, digits, "
                                          "'+', '.', '-')")
            rows.append(_verdict(manager, section.table(name)))
    if not rows:
        raise root.error("dpkg", "no verdicts (add a [dpkg.NAME] table per source package)")
    return Verdicts(root.source.path, tuple(rows))


def _verdict(manager: str, table: Table) -> Verdict:
    table.check_keys(("licence", "obligation"), ("why", "name"))
    licence, name = licence_expression(table)
    obligation = table.text("obligation")
    if obligation not in OBLIGATIONS:
        raise table.error("obligation", f"{obligation!r} is not one of "
                                        f"{', '.join(map(repr, OBLIGATIONS))}")
    why = " ".join((table.optional_text("why") or "").split())
    kind: Literal["dpkg", "wheel", "built"] = (
        "dpkg" if manager == "dpkg" else "wheel" if manager == "wheel" else "built")
    return Verdict(kind, table.id, licence, obligation, why, name)


def licence_expression(table: Table) -> tuple[str, str]:
    """The row's `licence` as a normalised SPDX expression, and its `name` (required with a
    LicenseRef-…, refused without one)."""
    try:
        licence = spdx.normalise(table.text("licence"))
    except spdx.NotAnExpression as error:
        raise table.error("licence", f"{error} (Debian's GPL-2+ is GPL-2.0-or-later, its "
                                     "'or' is OR: https://spdx.org/licenses/)") from None
    name = " ".join((table.optional_text("name") or "").split())
    if (spdx.REF_PREFIX in licence) != bool(name):
        raise table.error("name" if name else "licence",
                          "a LicenseRef-… licence needs a `name` saying it in words"
                          if not name else "`name` is only for a LicenseRef-… licence")
    return licence, name


def classify(origins: Iterable[Origin], root: Path, verdicts: Verdicts) -> Obligations:
    """The verdict of each package the bundled `origins` come from (Debian source package, wheel
    or built in the image); Unclassified names every package the table lacks, at once."""
    origins = list(origins)
    by_source = {package.name: package for package in dpkg_sources(origins, root)}
    keys = {("dpkg", name): name for name in by_source}
    keys |= {(o.manager, o.package): o.package for o in origins if o.manager != "dpkg"}
    missing, found = [], []
    for (manager, name) in sorted(keys):
        verdict = verdicts.of(manager, name)
        if verdict is None:
            what = (f"Debian source package {name} (of {', '.join(by_source[name].binaries)})"
                    if manager == "dpkg" else f"wheel {name}" if manager == "wheel" else
                    f"{name}, built in the toolchain image")
            missing.append(f"  [{manager}.{name}]: {what}")
        else:
            found.append((name, verdict))
    if missing:
        raise Unclassified(f"{verdicts.path}: no copyleft verdict for these bundled packages, so "
                           "what their licence obliges the kit to do is unknown (add a table "
                           "with licence and obligation for each):\n" + "\n".join(missing))
    sources = tuple(by_source[name] for name, verdict in found
                    if verdict.manager == "dpkg" and verdict.obligation == SOURCE)
    owing = {name for name, verdict in found
             if verdict.manager == "built" and verdict.obligation == SOURCE}
    built = tuple(sorted({(o.package, o.version) for o in origins
                          if o.manager == "built" and o.package in owing}))
    return Obligations(tuple(found), sources, built)


def dpkg_sources(origins: Iterable[Origin], root: Path) -> list[SourcePackage]:
    """The Debian source packages the dpkg `origins` come from, each root's from its own status."""
    origins, found = list(origins), []
    for package_root in sorted({o.root for o in origins if o.manager == "dpkg"}):
        binaries = {o.package for o in origins if o.manager == "dpkg" and o.root == package_root}
        found += [dataclasses.replace(package, root=package_root) for package in
                  source_packages(root / package_root.lstrip("/"), binaries).values()]
    return found


def source_packages(root: Path, binaries: set[str]) -> dict[str, SourcePackage]:
    """Source package name → SourcePackage for the installed `binaries` (`root`'s dpkg status)."""
    status = root / DPKG_STATUS.lstrip("/")
    try:
        text = status.read_text(encoding="utf-8", errors="replace")
    except OSError as error:
        raise CheckFailed(f"{status}: cannot read dpkg's status ({error.strerror or error})"
                          ) from None
    found: dict[tuple[str, str], set[str]] = {}
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = dict(re.findall(r"^([A-Za-z-]+): *(.*)$", stanza,
                                                 re.MULTILINE))
        package = fields.get("Package", "")
        if package not in binaries or not fields.get("Status", "").endswith(" installed"):
            continue
        source, _, version = fields.get("Source", package).partition(" ")
        version = version.strip("()") or fields.get("Version", "")
        found.setdefault((source, version), set()).add(package)
    lost = binaries - {name for names in found.values() for name in names}
    if lost:
        raise CheckFailed(f"{status}: does not list {', '.join(sorted(lost))} as installed")
    by_name: dict[str, SourcePackage] = {}
    for (source, version), names in sorted(found.items()):
        if source in by_name:
            raise CheckFailed(f"{status}: bundled packages come from two versions of source "
                              f"package {source} ({by_name[source].version} and {version})")
        by_name[source] = SourcePackage(source, version, tuple(sorted(names)))
    return by_name


def owed_record(obligations: Obligations, root: Path) -> OwedSources:
    """What publish needs to fetch the owed source packages without the build root: each package,
    its root's apt archives and the keyrings they trust (their bytes). Reads files only."""
    verdicts = dict(obligations.verdicts)
    packages = tuple(OwedPackage(p.name, p.version, p.binaries, verdicts[p.name].licence)
                     for p in obligations.sources)
    if not packages:
        return OwedSources((), (), ())
    archives: list[Archive] = []
    keyrings: dict[str, Keyring] = {}
    for package_root in sorted({p.root for p in obligations.sources}):
        found, trusted = apt_archives(root / package_root.lstrip("/"))
        if not found:
            owing = [f"{p.name} {p.version}" for p in obligations.sources
                     if p.root == package_root]
            raise SourceUnavailable(f"{root / package_root.lstrip('/')}/etc/apt: names no "
                                    f"Debian archive, so where the source of "
                                    f"{', '.join(owing)} comes from cannot be recorded")
        clash = [k.name for k in trusted if keyrings.get(k.name, k) != k]
        if clash:
            raise SourceUnavailable(f"{root / package_root.lstrip('/')}/etc/apt: keyrings "
                                    f"{', '.join(clash)} differ from those of the same name in "
                                    f"another root")
        keyrings |= {k.name: k for k in trusted}
        archives += [a for a in found if a not in archives]
    return OwedSources(tuple(archives), tuple(sorted(keyrings.values(), key=lambda k: k.name)),
                       packages)


def apt_archives(root: Path) -> tuple[tuple[Archive, ...], tuple[Keyring, ...]]:
    """Each `deb` archive of `root`'s apt sources, and the keyrings it trusts: its signed-by
    files, else trusted.gpg and trusted.gpg.d/ (as apt does)."""
    apt = root / "etc/apt"
    entries: list[tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = []
    for path in [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]:
        if path.is_file():
            entries += _one_line_entries(path.read_text(encoding="utf-8", errors="replace"))
    for path in sorted((apt / "sources.list.d").glob("*.sources")):
        entries += _deb822_entries(path.read_text(encoding="utf-8", errors="replace"))
    trusted = tuple(path for path in [apt / "trusted.gpg",
                                      *sorted((apt / "trusted.gpg.d").glob("*.gpg")),
                                      *sorted((apt / "trusted.gpg.d").glob("*.asc"))]
                    if path.is_file())
    keyrings: dict[str, Keyring] = {}
    archives: list[Archive] = []
    for uri, suites, components, signed_by in entries:
        if not recordable(uri):
            continue  # cdrom: "[label]/" and the like: nothing publish could ever ask
        files = tuple(root / key.lstrip("/") for key in signed_by) or trusted
        names = tuple(_keep(keyrings, path) for path in files if path.is_file())
        archive = Archive(uri.rstrip("/") if suites != ("./",) else uri, suites, components,
                          tuple(sorted(set(names))))
        if archive not in archives:
            archives.append(archive)
    return tuple(archives), tuple(sorted(keyrings.values(), key=lambda k: k.name))


def _keep(keyrings: dict[str, Keyring], path: Path) -> str:
    """The keyring's name in the record (another file of the same name gets a numbered one)."""
    data = path.read_bytes()
    suffix = ".asc" if path.suffix == ".asc" else ".gpg"
    stem = re.sub(r"[^A-Za-z0-9._+-]", "-", path.stem).lstrip("._+-") or "keyring"
    name, number = f"{stem}{suffix}", 1
    while name in keyrings and keyrings[name].data != data:
        number += 1
        name = f"{stem}-{number}{suffix}"
    keyrings[name] = Keyring(name, data)
    return name


_Entry = tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # uri, suites,
# components, signed-by paths


def _one_line_entries(text: str) -> list[_Entry]:
    found: list[_Entry] = []
    for line in text.splitlines():
        match = re.fullmatch(r"\s*deb\s+(?:\[(?P<options>[^\]]*)\]\s*)?(?P<rest>.*)",
                             line.split("#", 1)[0])
        if match is None or len(match["rest"].split()) < 2:
            continue
        words = match["rest"].split()
        options = dict(item.partition("=")[::2] for item in (match["options"] or "").split())
        keys = tuple(key for key in options.get("signed-by", "").split(",") if key.startswith("/"))
        found.append((words[0], (words[1],), tuple(words[2:]), keys))
    return found


def _deb822_entries(text: str) -> list[_Entry]:
    found: list[_Entry] = []
    for stanza in text.split("\n\n"):
        fields = {k.lower(): v.strip() for k, v in
                  re.findall(r"^([A-Za-z-]+):(.*)$", stanza, re.MULTILINE)}
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
            continue
        keys = tuple(key for key in fields.get("signed-by", "").split() if key.startswith("/"))
        for uri in fields.get("uris", "").split():
            found.append((uri, tuple(fields.get("suites", "").split()),
                          tuple(fields.get("components", "").split()), keys))
    return [entry for entry in found if entry[1]]


def built_sources(built: Sequence[tuple[str, str]], facts: ImageFacts, root: Path,
                  cache_dir: Path) -> tuple[SourceFile, ...]:
    """The source of each library the image built (`built`: name, version): its tarball (checked
    against its record) and build scripts, copied to `cache_dir`/sources/<name>_<version>/."""
    files: list[SourceFile] = []
    for library in (item for item in facts.built if (item.name, item.version) in built):
        folder = cache_dir / SOURCES / f"{library.name}_{library.version}"
        folder.mkdir(parents=True, exist_ok=True)
        for path in (library.source, *library.build_files):
            # kit folders keep sources/ flat: a script is named after its library too
            name = Path(path).name if path == library.source else \
                f"{folder.name}-{Path(path).name}"
            copy = folder / name
            shutil.copyfile(root / path.lstrip("/"), copy)
            hashed = hash_file(copy)
            if path == library.source and hashed.sha256 != library.source_sha256:
                raise SourceUnavailable(f"{path} in the toolchain image: sha256 {hashed.sha256}; "
                                        f"{library.record} says {library.source_sha256}")
            files.append(SourceFile(library.name, library.version, copy.name, copy,
                                    hashed.size, hashed.sha256))
    return tuple(files)


README_HEAD = """\
Corresponding source
--------------------

Some libraries above are licensed under the GNU GPL, the GNU LGPL or the Mozilla Public
License, which require whoever distributes their object code to make the corresponding source
available. This kit does so by publishing, beside itself, the Debian source package of exactly
the version of each one it carries: the .dsc, the upstream (orig) and Debian tarballs, as
Debian's archive holds them; for a library built in the toolchain image from its release
tarball, that tarball and the scripts that built it. They are assets of the same release as
this kit ({tag}), and the release's SHA256SUMS lists each file with its sha256 (as
{sources}/<file>). `dpkg-source -x <name>.dsc` unpacks a Debian source package. The source
packages owed are:
"""

OFFER = """
Written statement: the source is offered from the same place as the object code, for as long
as the release is available. Should a file be missing, ask the publisher of this release (its
repository's issue tracker) for it, quoting the package and version above; the offer is valid
for three years from the release's date to any third party.
"""


def readme_section(obligations: Obligations, tag: str) -> str:
    """The third_party/README part naming each package whose source is published, and the offer."""
    if not obligations.sources and not obligations.built:
        return ""
    verdicts = dict(obligations.verdicts)
    owed = [(package.name, package.version, f"source of {', '.join(package.binaries)}")
            for package in obligations.sources]
    owed += [(name, version, "built in the toolchain image")
             for name, version in obligations.built]
    rows = [f"\n{name} {version} ({what})\n  licence:  {verdicts[name].licence}\n"
            for name, version, what in owed]
    return README_HEAD.format(tag=tag, sources=SOURCES) + "".join(rows) + OFFER
