"""What the libraries a portable kit bundles oblige its distributor to do, and doing it.

A portable kit redistributes the object code of every library it bundles. For a permissive
licence the copyright file in kit/third_party/ is the whole duty (the repair writes it). GPL,
LGPL and MPL also require the corresponding source to be offered with the object code (GPL-2
section 3, LGPL-2.1 section 4, GPL-3 section 6, MPL-2.0 section 3.2). The kit meets that by
publishing, beside itself, the Debian source package of exactly each bundled version: `.dsc`,
orig and debian tarballs, as the archive holds them (docs/portable.md says why this and not a
rebuilt LGPL FFmpeg).

Which licence governs a shipped library is a verdict per source package, kept as data
(data/copyleft.toml, validated on load): a Debian copyright file names the licences of build
scripts and programs too, so reading copyleft off it flags libssl and libzstd. Every bundled
package must have a verdict; one without stops the build (Unclassified), naming the package and
the data file.

The sources are fetched with the host's apt-get from a scratch configuration: the deb-src
twins of the build environment's own apt sources, trusting its own keys, with lists, cache and
state in a temporary folder (nothing of the host's apt state is read or written). Each file is
checked against the size and sha256 the archive's signed Sources index gives (apt-get source
--print-uris) and against the `.dsc`'s Checksums-Sha256, then kept in the cache folder under
sources/<name>_<version>/, so a second build fetches nothing. deb.debian.org keeps only the
current version of a package: a bundled version it no longer has stops the build
(SourceUnavailable), since a kit must never ship without its source.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ninfer_kits import kitdir
from ninfer_kits.atomic import hash_file
from ninfer_kits.children import ProbeTimeout, probe
from ninfer_kits.errors import CheckFailed, EnvironmentFailure
from ninfer_kits.pipeline.image_facts import ImageFacts
from ninfer_kits.pipeline.provenance import DPKG_STATUS, Origin
from ninfer_kits.resources import data_file
from ninfer_kits.tables import Table, read_data_file

SCHEMA = 1
DATA_FILE = data_file("copyleft.toml")
SOURCE = "source"  # GPL, LGPL, MPL: publish the corresponding source beside the kit
NOTICE = "notice"  # permissive: the licence file in kit/third_party/ is the whole duty
OBLIGATIONS = (SOURCE, NOTICE)
MANAGERS = ("dpkg", "wheel", "built")
SOURCES = kitdir.SOURCES  # the kit folder's sub-folder, and the cache's, that holds them
APT_TIMEOUT = 1800  # a cold fetch of the example's sources is ~400 MB
_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]*")  # a Debian source package's or a wheel's name
# What apt-get source --print-uris prints per file: 'URI' NAME SIZE SHA256:HEX
_URI = re.compile(r"'(?P<uri>[^']+)' (?P<name>\S+) (?P<size>[0-9]+) "
                  r"SHA256:(?P<sha256>[0-9a-f]{64})")


class Unclassified(CheckFailed):
    """A bundled package has no verdict in data/copyleft.toml: what it obliges is unknown."""


class SourceUnavailable(CheckFailed):
    """The source of a bundled copyleft package could not be fetched, or did not check."""


@dataclass(frozen=True)
class Verdict:
    manager: Literal["dpkg", "wheel", "built"]
    package: str  # a Debian source package, a wheel's name, or a library built in the image
    licence: str  # the licence that governs the shipped library
    obligation: str  # SOURCE or NOTICE
    why: str  # "" where the licence says it all


@dataclass(frozen=True)
class Verdicts:
    path: Path
    rows: tuple[Verdict, ...]

    def of(self, manager: str, package: str) -> Verdict | None:
        return next((row for row in self.rows if (row.manager, row.package) == (manager, package)),
                    None)


@dataclass(frozen=True)
class SourcePackage:
    """A Debian source package some bundled libraries were built from."""

    name: str
    version: str  # as dpkg has it, epoch included ("7:7.1.5-0+deb13u1")
    binaries: tuple[str, ...]  # the bundled binary packages built from it, sorted
    root: str = "/"  # whose dpkg records name it: the image's, or a package root's (a sysroot)

    @property
    def stem(self) -> str:
        """name_version without the epoch: how the archive names its files."""
        return f"{self.name}_{self.version.partition(':')[2] or self.version}"


@dataclass(frozen=True)
class SourceFile:
    package: str  # the source package's name
    version: str
    name: str  # its file name, as the archive and the release name it
    path: Path  # in the cache folder
    size: int
    sha256: str


@dataclass(frozen=True)
class Obligations:
    """Each bundled package's verdict, and the source packages the kit must publish."""

    verdicts: tuple[tuple[str, Verdict], ...]  # (source or wheel name, its verdict), sorted
    sources: tuple[SourcePackage, ...]  # those whose verdict is SOURCE, sorted
    built: tuple[tuple[str, str], ...] = ()  # (name, version) built in the image, owing source


# ---------------------------------------------------------------------------- the table


def load_verdicts(path: Path | None = None) -> Verdicts:
    """The shipped verdicts, or the file at `path`; BadInput names file, line, table and key."""
    root = read_data_file(path or DATA_FILE, "the copyleft verdicts file")
    root.check_keys(("schema",), MANAGERS)
    schema = root.integer("schema")
    if schema != SCHEMA:
        raise root.error("schema", f"unsupported schema {schema} (this ninfer-kits reads "
                                   f"schema {SCHEMA})")
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
    table.check_keys(("licence", "obligation"), ("why",))
    obligation = table.text("obligation")
    if obligation not in OBLIGATIONS:
        raise table.error("obligation", f"{obligation!r} is not one of "
                                        f"{', '.join(map(repr, OBLIGATIONS))}")
    why = " ".join((table.optional_text("why") or "").split())
    kind: Literal["dpkg", "wheel", "built"] = (
        "dpkg" if manager == "dpkg" else "wheel" if manager == "wheel" else "built")
    return Verdict(kind, table.id, " ".join(table.text("licence").split()), obligation, why)


# ---------------------------------------------------------------------------- classifying


def classify(origins: Iterable[Origin], root: Path, verdicts: Verdicts) -> Obligations:
    """The verdict of each package the `origins` (the bundled libraries') come from, by Debian
    source package (read from the dpkg status of `root`, or of the package root that holds
    it), wheel, or library built in the image; Unclassified names every package the table
    lacks, at once."""
    origins = list(origins)
    by_source: dict[str, SourcePackage] = {}
    for package_root in sorted({o.root for o in origins if o.manager == "dpkg"}):
        binaries = {o.package for o in origins if o.manager == "dpkg" and o.root == package_root}
        named = source_packages(root / package_root.lstrip("/"), binaries)
        by_source |= {name: dataclasses.replace(package, root=package_root)
                      for name, package in named.items()}
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


def source_packages(root: Path, binaries: set[str]) -> dict[str, SourcePackage]:
    """Source package name → SourcePackage, for the installed binary packages `binaries`, from
    `root`'s dpkg status (Source: "name" or "name (version)", else the binary's own)."""
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


# ---------------------------------------------------------------------------- fetching


def fetch_sources(packages: Sequence[SourcePackage], root: Path, cache_dir: Path,
                  log: Callable[[str], None]) -> tuple[SourceFile, ...]:
    """Each package's source files, checked, from `cache_dir`/sources/<stem>/ or fetched there.
    SourceUnavailable names each package that the archive no longer has or that did not check."""
    if not packages:
        return ()
    elsewhere = [f"{p.name} {p.version} (dpkg records in {p.root})" for p in packages
                 if p.root != "/"]
    if elsewhere:  # its own apt sources are not known: the image's are another distribution's
        raise SourceUnavailable(f"the source of {', '.join(elsewhere)} cannot be fetched: only "
                                "the packages of the toolchain image's own root have apt sources")
    store = cache_dir / SOURCES
    files: list[SourceFile] = []
    todo: list[SourcePackage] = []
    for package in packages:
        cached = _cached(store / package.stem, package)
        if cached is None:
            todo.append(package)
        else:
            files += cached
    if todo:
        log(f"sources: fetching {len(todo)} source package(s) with apt-get (cached: "
            f"{len(packages) - len(todo)})")
        with tempfile.TemporaryDirectory(prefix="ninfer-kits-apt-") as scratch:
            apt = _Apt(Path(scratch), root)
            apt.update(log)
            for package in todo:
                files += apt.fetch(package, store)
                log(f"sources: fetched {package.name} {package.version}")
    return tuple(sorted(files, key=lambda item: item.name))


def built_sources(built: Sequence[tuple[str, str]], facts: ImageFacts, root: Path,
                  cache_dir: Path) -> tuple[SourceFile, ...]:
    """The source of each library the image built, `built` as (name, version): the upstream
    tarball it was built from (checked against its record) and the scripts that built it (as
    <name>_<version>-<script>), copied from the image's `root` to
    `cache_dir`/sources/<name>_<version>/."""
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


MANIFEST = "SHA256SUMS"  # in each cached package's folder: what the archive's index said


def _cached(folder: Path, package: SourcePackage) -> list[SourceFile] | None:
    """The cached files of `package`, rechecked against the archive's hashes kept beside them
    and the .dsc's; None when there are none (or they do not check: fetched again)."""
    try:
        listed = dict(line.split("  ", 1)[::-1] for line in
                      (folder / MANIFEST).read_text(encoding="utf-8").splitlines())
    except (OSError, ValueError):
        return None
    try:
        return _checked(folder, package, {name: (None, sha) for name, sha in listed.items()})
    except SourceUnavailable:
        return None


def _checked(folder: Path, package: SourcePackage,
             expected: dict[str, tuple[int | None, str]]) -> list[SourceFile]:
    """The files of `folder` as SourceFiles, once each matches the archive's (size, sha256)
    and the .dsc's Checksums-Sha256 names exactly the others with the same hashes."""
    names = sorted(os.listdir(folder))
    if sorted(expected) != [name for name in names if name != MANIFEST]:
        raise SourceUnavailable(f"{folder}: holds {', '.join(names)}; the archive lists "
                                f"{', '.join(sorted(expected))} for {package.name} "
                                f"{package.version}")
    files = []
    for name in sorted(expected):
        size, sha256 = expected[name]
        hashed = hash_file(folder / name)
        if hashed.sha256 != sha256 or (size is not None and hashed.size != size):
            raise SourceUnavailable(f"{folder / name}: sha256 {hashed.sha256}, {hashed.size} "
                                    f"bytes; the archive's index says {sha256}"
                                    f"{f', {size} bytes' if size is not None else ''}")
        files.append(SourceFile(package.name, package.version, name, folder / name,
                                hashed.size, hashed.sha256))
    dsc = folder / f"{package.stem}.dsc"
    if not dsc.is_file():
        raise SourceUnavailable(f"{folder}: no {dsc.name} for {package.name} {package.version}")
    in_dsc = dsc_checksums(dsc.read_text(encoding="utf-8", errors="replace"))
    others = {item.name: item.sha256 for item in files if item.name != dsc.name}
    if in_dsc != others:
        raise SourceUnavailable(f"{dsc}: its Checksums-Sha256 lists {in_dsc}; the files "
                                f"fetched are {others}")
    return files


def dsc_checksums(text: str) -> dict[str, str]:
    """File name → sha256 from a .dsc's Checksums-Sha256 field (signed or not)."""
    match = re.search(r"^Checksums-Sha256:[ \t]*\n((?:[ \t]+\S.*\n?)+)", text, re.MULTILINE)
    if match is None:
        return {}
    rows = (line.split() for line in match.group(1).splitlines())
    return {row[2]: row[0] for row in rows if len(row) == 3}


class _Apt:
    """The host's apt-get on a scratch configuration: the deb-src twins of `root`'s sources,
    trusting `root`'s keys; lists, cache and status in `scratch`."""

    def __init__(self, scratch: Path, root: Path) -> None:
        self.apt_get = shutil.which("apt-get")
        if self.apt_get is None:
            raise EnvironmentFailure("apt-get not found: a portable kit that bundles copyleft "
                                     "libraries publishes their Debian source packages, which "
                                     "are fetched with apt-get (run the build on a Debian or "
                                     "Ubuntu host)")
        self.scratch = scratch
        for sub in ("lists/partial", "cache/archives/partial", "parts", "prefs"):
            (scratch / sub).mkdir(parents=True)
        (scratch / "status").write_text("", encoding="utf-8")
        lines = deb_src_lines(root)
        if not lines:
            raise SourceUnavailable(f"{root}/etc/apt: names no Debian archive to fetch the "
                                    "bundled packages' sources from")
        (scratch / "sources.list").write_text("\n".join(lines) + "\n", encoding="utf-8")
        self.options = [
            "-o", f"Dir::Etc::sourcelist={scratch / 'sources.list'}",
            "-o", f"Dir::Etc::sourceparts={scratch / 'parts'}",
            "-o", f"Dir::Etc::preferencesparts={scratch / 'prefs'}",
            "-o", f"Dir::Etc::trusted={root / 'etc/apt/trusted.gpg'}",
            "-o", f"Dir::Etc::trustedparts={root / 'etc/apt/trusted.gpg.d'}",
            "-o", f"Dir::State::Lists={scratch / 'lists'}",
            "-o", f"Dir::State::status={scratch / 'status'}",
            "-o", f"Dir::Cache={scratch / 'cache'}",
            "-o", "Debug::NoLocking=1", "-o", "Acquire::Retries=3",
            "-o", "APT::Get::Only-Source=true", "-q",
        ]
        if os.geteuid() == 0:  # apt's _apt user could not write the scratch folder
            self.options += ["-o", "APT::Sandbox::User=root"]

    def _run(self, *args: str, cwd: Path | None = None) -> str:
        command = [str(self.apt_get), *self.options, *args]
        try:
            done = probe(command, timeout=APT_TIMEOUT, cwd=cwd,
                         env={**os.environ, "LC_ALL": "C.UTF-8"})
        except ProbeTimeout as error:
            raise SourceUnavailable(str(error)) from None
        if done.returncode != 0:
            raise SourceUnavailable(f"apt-get {' '.join(args)} failed ({done.returncode}): "
                                    f"{(done.stderr or done.stdout).strip()[-1500:]}")
        return done.stdout

    def update(self, log: Callable[[str], None]) -> None:
        """Read the archives' source indexes. One that fails (a vendor's repository without
        deb-src, say) is logged, not fatal: a package it was needed for then fails by name."""
        try:
            self._run("update")
        except SourceUnavailable as error:
            log(f"sources: {error}")

    def fetch(self, package: SourcePackage, store: Path) -> list[SourceFile]:
        spec = f"{package.name}={package.version}"
        try:
            printed = self._run("source", "--print-uris", spec)
        except SourceUnavailable as error:
            raise SourceUnavailable(
                f"source package {package.name} {package.version} (of the bundled "
                f"{', '.join(package.binaries)}) cannot be fetched: {error}. The archive keeps "
                "only current versions: rebuild the toolchain image so it installs what the "
                "archive has now") from None
        expected: dict[str, tuple[int | None, str]] = {
            m["name"]: (int(m["size"]), m["sha256"]) for m in _URI.finditer(printed)}
        if f"{package.stem}.dsc" not in expected:
            raise SourceUnavailable(f"apt-get source --print-uris {spec} named no "
                                    f"{package.stem}.dsc:\n{printed.strip()[-1500:]}")
        store.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{package.stem}-", dir=store))
        try:
            self._run("source", "--download-only", spec, cwd=work)
            files = _checked(work, package, expected)
            manifest = "".join(f"{item.sha256}  {item.name}\n" for item in files)
            (work / MANIFEST).write_text(manifest, encoding="utf-8")
            os.chmod(work, 0o755)  # mkdtemp's 0700: the cache is as readable as its files
            final = store / package.stem
            shutil.rmtree(final, ignore_errors=True)  # one that did not check
            work.rename(final)  # whole or not at all: a cache reader never sees half of it
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return [SourceFile(item.package, item.version, item.name, final / item.name, item.size,
                           item.sha256) for item in files]


def deb_src_lines(root: Path) -> list[str]:
    """One-line deb-src entries for each `deb` archive of `root`'s apt sources (sources.list,
    sources.list.d/*.list and *.sources), keyring paths made paths inside `root`."""
    apt = root / "etc/apt"
    lines: list[str] = []
    texts = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.list"))]
    for path in texts:
        if path.is_file():
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                words = line.split("#", 1)[0].split()
                if words[:1] == ["deb"]:
                    lines.append(_rooted(" ".join(["deb-src", *words[1:]]), root))
    for path in sorted((apt / "sources.list.d").glob("*.sources")):
        for stanza in path.read_text(encoding="utf-8", errors="replace").split("\n\n"):
            fields = {k.lower(): v.strip() for k, v in
                      re.findall(r"^([A-Za-z-]+):(.*)$", stanza, re.MULTILINE)}
            if "deb" not in fields.get("types", "").split() or \
                    fields.get("enabled", "yes") == "no":
                continue
            key = fields.get("signed-by", "")
            option = f" [signed-by={root / key.lstrip('/')}]" if key.startswith("/") else ""
            for uri in fields.get("uris", "").split():
                for suite in fields.get("suites", "").split():
                    lines.append(f"deb-src{option} {uri} {suite} {fields.get('components', '')}")
    return lines


def _rooted(line: str, root: Path) -> str:
    return re.sub(r"signed-by=(/[^\] ]+)",
                  lambda m: f"signed-by={root / m.group(1).lstrip('/')}", line)


# ---------------------------------------------------------------------------- the kit's notice


README_HEAD = """\
Corresponding source
--------------------

Some libraries above are licensed under the GNU GPL, the GNU LGPL or the Mozilla Public
License, which require whoever distributes their object code to make the corresponding source
available. This kit does so by publishing, beside itself, the Debian source package of exactly
the version of each one it carries: the .dsc, the upstream (orig) and Debian tarballs, as
Debian's archive holds them; for a library built in the toolchain image from its release
tarball, that tarball and the scripts that built it. They are assets of the
same release as this kit ({tag}), and in the kit folder's {sources}/ folder; SHA256SUMS lists
them, and each file's sha256 is below. `dpkg-source -x <name>.dsc` unpacks a Debian source
package.

Written statement: the source is offered from the same place as the object code, for as long
as the release is available. Should a file be missing, ask the publisher of this release (its
repository's issue tracker) for it, quoting the file name and sha256 below; the offer is valid
for three years from the release's date to any third party.
"""


NOT_FETCHED = f"""\
{kitdir.SOURCES_NOT_FETCHED}
{"-" * len(kitdir.SOURCES_NOT_FETCHED)}

Some libraries above are licensed under the GNU GPL, the GNU LGPL or the Mozilla Public
License, which require whoever distributes their object code to make the corresponding source
available. This kit was built with {{variable}}=1 (a machine that cannot
reach Debian's source archive), so their sources were NOT fetched:
it must not be distributed. The packages whose source is owed are:
"""

SKIP_VARIABLE = kitdir.NO_SOURCES_VARIABLE


def sources_skipped(log: Callable[[str], None]) -> bool:
    """Whether this build was told not to fetch the sources ({SKIP_VARIABLE}=1): for test
    machines that cannot reach the archive's pool; said in the log and in the kit's README."""
    if os.environ.get(SKIP_VARIABLE) != "1":
        return False
    log(f"WARNING: {SKIP_VARIABLE}=1: the copyleft libraries' source packages are not fetched; "
        "this kit must not be distributed")
    return True


def readme_section(obligations: Obligations, files: Sequence[SourceFile], tag: str,
                   skipped: bool = False) -> str:
    """The third_party/README part that names each copyleft package's source files (or, for a
    build that skipped them, says it must not be distributed)."""
    if not obligations.sources and not obligations.built:
        return ""
    verdicts = dict(obligations.verdicts)
    owed = [(package.name, package.version, f" (source of {', '.join(package.binaries)})")
            for package in obligations.sources]
    owed += [(name, version, " (built in the toolchain image)")
             for name, version in obligations.built]
    if skipped:
        return "\n".join([NOT_FETCHED.format(variable=SKIP_VARIABLE), *(
            f"  {name} {version} ({verdicts[name].licence})" for name, version, _ in owed)]
            ) + "\n"
    parts = [README_HEAD.format(tag=tag, sources=SOURCES)]
    for name, version, what in owed:
        rows = [f"{name} {version}{what}\n  licence:  {verdicts[name].licence}\n"]
        rows += [f"  file:     {item.name}\n  sha256:   {item.sha256}\n" for item in files
                 if (item.package, item.version) == (name, version)]
        parts.append("".join(rows))
    return "\n".join(parts)
