"""Which package a library file came from, and under which licence, from the build environment's
own records (dpkg, a wheel's RECORD, an image's facts) under a root folder; a file no package
claims is an error. What is read and why: docs/portable.md."""

from __future__ import annotations

import base64
import csv
import dataclasses
import email.parser
import functools
import hashlib
import io
import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ninfer_kits.errors import CheckFailed
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.pipeline.image_facts import NO_FACTS, BuiltLibrary, ImageFacts
from ninfer_kits.pipeline.parallel import in_parallel

DPKG_INFO = "/var/lib/dpkg/info"
DPKG_STATUS = "/var/lib/dpkg/status"
DOC = "/usr/share/doc"
DEP5_FORMAT = re.compile(r"copyright-format|dep5", re.IGNORECASE)
FREE_TEXT = "named in a free-text copyright file"

# Licences a free-text (not machine-readable) Debian copyright file may name, by the words it
# uses, and the short name we report. Every one found is reported, in the order of appearance:
# such files often name the programs' licence before the library's.
_NAMED_LICENCES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), name) for pattern, name in (
        (r"GNU (Lesser|Library) General Public License|\bLGPL", "LGPL"),
        (r"GNU General Public License|\bGPL", "GPL"),
        (r"GCC Runtime Library Exception", "GCC Runtime Library Exception"),
        (r"Apache License", "Apache"),
        (r"Mozilla Public License", "MPL"),
        (r"Artistic License", "Artistic"),
        (r"OpenSSL License", "OpenSSL"),
        (r"Redistribution and use in source and binary forms", "BSD-style"),
        (r"Permission is hereby granted, free of charge", "MIT-style"),
        (r"Permission to use, copy, modify,? and(/or)? distribute", "ISC/HPND-style"),
        # The X Consortium's wording (libXau, libXdmcp, libXrender, fontconfig): MIT-style.
        (r"Permission to use, copy, modify, distribute,? and sell", "MIT-style (X11)"),
        (r"\bpublic domain\b", "public-domain"),
    ))


class LicenseUnknown(CheckFailed):
    """A file whose licence cannot be determined: no package claims it, or none that we can name."""


@dataclass(frozen=True)
class Origin:
    # "libcurl4" (dpkg, without :arch), "nvidia-cuda-runtime" (the wheel's name), "ffmpeg" (built)
    package: str
    version: str
    manager: Literal["dpkg", "wheel", "built"]
    license: str  # short names, ", "-joined
    license_file: str  # the licence text, as a path inside the root
    root: str = "/"  # where the package's records are: the image's root, or a package root


@dataclass(frozen=True)
class _Wheel:
    folder: str  # the *.dist-info folder, in the root
    base: str  # the folder RECORD paths are relative to
    record: dict[str, str]  # path → "sha256=..." ("" when not hashed)

    def listed(self, relative: str) -> str | None:
        """The RECORD hash of the first entry that is `relative` or ends in it, or None."""
        return next((hashed for entry, hashed in self._by_name.get(posixpath.basename(relative),
                                                                    ())
                     if entry == relative or entry.endswith("/" + relative)), None)

    @functools.cached_property
    def _by_name(self) -> dict[str, list[tuple[str, str]]]:
        # RECORD order kept: the first entry that matches wins, as when scanning it whole.
        by_name: dict[str, list[tuple[str, str]]] = {}
        for entry, hashed in self.record.items():
            by_name.setdefault(posixpath.basename(entry), []).append((entry, hashed))
        return by_name


class PackageIndex:
    """The packages of one root, read once and asked about many files."""

    def __init__(self, rootfs: RootFS, facts: ImageFacts = NO_FACTS) -> None:
        self.rootfs = rootfs
        self.facts = facts
        # canonical path → the record that lists it, and the sha256 it gives
        self._built: dict[str, tuple[BuiltLibrary, str]] | None = None
        self._nested: dict[str, PackageIndex] = {}  # package root → its own index
        self._dpkg: dict[str, list[tuple[str, str]]] | None = None  # basename → (package, path)
        self._status: dict[str, list[tuple[str, str]]] | None = None  # name → (arch, version)
        self._wheels: dict[str, _Wheel | None] = {}
        self._wheel_folders: dict[str, tuple[_Wheel, ...]] = {}  # base → the wheels there
        self._canonical: dict[str, str | None] = {}  # path → rootfs.canonical(path)
        # Per package, not per file: a kit's compiled-in headers are a thousand files of a
        # dozen packages, and libc6-dev's copyright and md5sums are large.
        self._md5sums: dict[str, dict[str, str]] = {}  # package → listed path → md5
        self._package_origins: dict[str, Origin] = {}  # package (or dist-info) → its Origin

    def origins(self, paths: Iterable[str]) -> list[Origin | LicenseUnknown]:
        """`origin` of each path, in parallel, or the LicenseUnknown saying why there is none."""
        self._dpkg_index()  # read once, before the threads share them
        self._status_index()
        self._built_index()

        def one(path: str) -> Origin | LicenseUnknown:
            try:
                return self.origin(path)
            except LicenseUnknown as error:
                return error

        return in_parallel(one, paths)

    def canonical(self, path: str) -> str | None:
        """rootfs.canonical, once per path (every header of one name is a candidate for each)."""
        if path not in self._canonical:
            self._canonical[path] = self.rootfs.canonical(path)
        return self._canonical[path]

    def origin(self, path: str) -> Origin:
        """The package that installed `path` (in the root) and its licence; else LicenseUnknown."""
        canonical = self.canonical(path)
        if canonical is None or not self.rootfs.is_file(canonical):
            raise LicenseUnknown(f"{path}: not a file in root {self.rootfs.root}")
        built = self._built_index().get(canonical)
        if built is not None:
            return self._built_origin(path, canonical, *built)
        for package_root in self.facts.package_roots:
            if canonical.startswith(package_root + "/"):
                return self._nested_origin(path, canonical, package_root)
        owner = self._dpkg_owner(path, canonical)
        if owner is not None:
            self._check_md5(path, canonical, *owner)
            return self._dpkg_origin(path, owner[0])
        wheel, other_build = self._wheel_owner(canonical)
        if wheel is not None:
            return self._wheel_origin(path, wheel)
        looked = ", ".join(f"{folder}/{{,dist-info/}}*.dist-info"
                           for folder in _ancestors(posixpath.dirname(canonical)))
        differs = (f"; the RECORD of {other_build} lists a file of that name with another "
                   "sha256" if other_build else "")
        raise LicenseUnknown(
            f"{path} ({canonical}): no package claims it in root {self.rootfs.root}: it is in no "
            f"dpkg file list ({DPKG_INFO}/*.list) and no wheel RECORD (looked in {looked})"
            f"{differs}; its licence cannot be determined")

    def _built_index(self) -> dict[str, tuple[BuiltLibrary, str]]:
        if self._built is None:  # made whole, then published
            index: dict[str, tuple[BuiltLibrary, str]] = {}
            for library in self.facts.built:
                for listed, digest in library.files.items():
                    index[self.canonical(listed) or listed] = (library, digest)
            self._built = index
        return self._built

    def _built_origin(self, path: str, canonical: str, library: BuiltLibrary,
                      want: str) -> Origin:
        if _digest(self.rootfs, canonical, hashlib.sha256()) != want:
            raise LicenseUnknown(f"{path} ({canonical}): differs from the file {library.name} "
                                 f"{library.version} installed ({library.record} in root "
                                 f"{self.rootfs.root}): changed after it was built, so that "
                                 "build's licence does not tell what it is")
        return Origin(library.name, library.version, "built", library.licence,
                      library.licence_files[0])

    def _nested_origin(self, path: str, canonical: str, package_root: str) -> Origin:
        """The origin of a file under a package root, from that root's own records."""
        if package_root not in self._nested:
            inner = RootFS(self.rootfs.root / package_root.lstrip("/"))
            self._nested[package_root] = PackageIndex(inner)
        found = self._nested[package_root].origin(canonical.removeprefix(package_root))
        return dataclasses.replace(found, root=package_root,
                                   license_file=package_root + found.license_file)

    def _dpkg_owner(self, path: str, canonical: str) -> tuple[str, str] | None:
        """(package, the path its list names the file by), or None."""
        index = self._dpkg_index()
        claims = set()
        for name in {posixpath.basename(canonical), posixpath.basename(path)}:
            for package, listed in index.get(name, ()):
                if listed == canonical or self.canonical(listed) == canonical:
                    # A list naming the file by its canonical path is the better witness.
                    claims.add((listed != canonical, package, listed))
        return min(claims)[1:] if claims else None

    def _check_md5(self, path: str, canonical: str, package: str, listed: str) -> None:
        """The file must be the one dpkg installed: its package's licence covers only that."""
        want = self._md5sums_of(package).get(listed.lstrip("/"))
        if want is None:
            return  # dpkg keeps no sum for it (older packages, conffiles): nothing to compare
        if _digest(self.rootfs, canonical, hashlib.md5(usedforsecurity=False)) != want:
            raise LicenseUnknown(f"{path} ({canonical}): differs from the file package "
                                 f"{package} installed ({DPKG_INFO}/{package}.md5sums in root "
                                 f"{self.rootfs.root}): changed after installation, so that "
                                 "package's licence does not tell what it is")

    def _md5sums_of(self, package: str) -> dict[str, str]:
        if package not in self._md5sums:
            data = self.rootfs.read_bytes(f"{DPKG_INFO}/{package}.md5sums") or b""
            sums: dict[str, str] = {}
            for line in data.decode(errors="replace").splitlines():
                digest, _, listed = line.partition("  ")
                if listed:
                    sums.setdefault(listed, digest)
            self._md5sums[package] = sums
        return self._md5sums[package]

    def _dpkg_index(self) -> dict[str, list[tuple[str, str]]]:
        if self._dpkg is None:  # made whole, then published, as _status_index
            index: dict[str, list[tuple[str, str]]] = {}
            info = self.rootfs.real(DPKG_INFO)
            for listing in sorted(info.glob("*.list")) if info is not None else ():
                package = listing.name.removesuffix(".list")
                text = listing.read_text(encoding="utf-8", errors="surrogateescape")
                for line in text.splitlines():
                    if line.startswith("/"):
                        index.setdefault(posixpath.basename(line), []).append((package, line))
            self._dpkg = index
        return self._dpkg

    def _dpkg_origin(self, path: str, package: str) -> Origin:
        if (known := self._package_origins.get(package)) is not None:
            return known
        name, _, arch = package.partition(":")
        version = self._dpkg_version(name, arch)
        if version is None:
            raise LicenseUnknown(f"{path}: dpkg lists it in package {package}, which "
                                 f"{DPKG_STATUS} in root {self.rootfs.root} does not show as "
                                 "installed")
        copyright_file = f"{DOC}/{name}/copyright"
        data = self.rootfs.read_bytes(copyright_file)
        if data is None:
            raise LicenseUnknown(f"{path}: package {name} {version} (dpkg) has no copyright file "
                                 f"{copyright_file} in root {self.rootfs.root}: its licence "
                                 "cannot be determined")
        licence = copyright_licence(data.decode("utf-8", errors="replace"))
        if licence is None:
            raise LicenseUnknown(f"{path}: the copyright file of package {name} {version} "
                                 f"({copyright_file} in root {self.rootfs.root}) names no "
                                 "licence we recognise")
        origin = self._package_origins[package] = Origin(name, version, "dpkg", licence,
                                                         copyright_file)
        return origin

    def _status_index(self) -> dict[str, list[tuple[str, str]]]:
        # Made whole, then published: threads asking at once make it twice, never see half.
        if self._status is None:
            status: dict[str, list[tuple[str, str]]] = {}
            data = self.rootfs.read_bytes(DPKG_STATUS) or b""
            for fields in _stanzas(data.decode("utf-8", errors="replace")):
                if fields.get("status", "").endswith(" installed") and "package" in fields:
                    status.setdefault(fields["package"], []).append(
                        (fields.get("architecture", ""), fields.get("version", "")))
            self._status = status
        return self._status

    def _dpkg_version(self, name: str, arch: str) -> str | None:
        rows = self._status_index().get(name, [])
        # A list named without :arch is a package of one architecture (or "all").
        return next((version for got, version in rows if not arch or got == arch), None)

    def _wheel_owner(self, canonical: str) -> tuple[_Wheel | None, str]:
        """The wheel whose RECORD lists the file with its sha256; else None and the dist-info of one
        listing that name with another sha256 ("" if none)."""
        digest: str | None = None
        other_build = ""
        for base in _ancestors(posixpath.dirname(canonical)):
            relative = posixpath.relpath(canonical, base)
            for wheel in self._wheels_in(base):
                listed = wheel.listed(relative)
                if listed is None:
                    continue
                if listed:
                    digest = digest or _record_hash(self.rootfs, canonical)
                    if listed != digest:
                        other_build = other_build or wheel.folder
                        continue  # another build of a file of that name: not this file
                return wheel, ""
        return None, other_build

    def _wheels_in(self, base: str) -> tuple[_Wheel, ...]:
        if base not in self._wheel_folders:
            self._wheel_folders[base] = tuple(self._find_wheels(base))
        return self._wheel_folders[base]

    def _find_wheels(self, base: str) -> Iterator[_Wheel]:
        for folder in (base, posixpath.join(base, "dist-info")):
            real = self.rootfs.real(folder)
            if real is None or not real.is_dir():
                continue
            for child in sorted(real.glob("*.dist-info")):
                wheel = self._wheel(posixpath.join(folder, child.name), base)
                if wheel is not None:
                    yield wheel

    def _wheel(self, folder: str, base: str) -> _Wheel | None:
        key = f"{folder}\0{base}"
        if key not in self._wheels:
            data = self.rootfs.read_bytes(f"{folder}/RECORD")
            rows = csv.reader(io.StringIO(data.decode("utf-8", errors="replace"))) if data else ()
            record = {row[0]: (row[1] if len(row) > 1 else "") for row in rows if row}
            self._wheels[key] = _Wheel(folder, base, record) if record else None
        return self._wheels[key]

    def _wheel_origin(self, path: str, wheel: _Wheel) -> Origin:
        if (known := self._package_origins.get(wheel.folder)) is not None:
            return known
        data = self.rootfs.read_bytes(f"{wheel.folder}/METADATA") or b""
        metadata = email.parser.HeaderParser().parsestr(data.decode("utf-8", errors="replace"))
        name, version = metadata.get("Name", ""), metadata.get("Version", "")
        if not name or not version:
            raise LicenseUnknown(f"{path}: the wheel {wheel.folder} claims it, but its METADATA "
                                 "names no Name or Version")
        licence = _wheel_licence(metadata.get_all("License-Expression") or [],
                                 metadata.get_all("License") or [],
                                 metadata.get_all("Classifier") or [])
        if licence is None:
            raise LicenseUnknown(f"{path}: the METADATA of wheel {name} {version} "
                                 f"({wheel.folder}) names no licence (License-Expression, "
                                 "License or a License :: classifier)")
        licence_file = self._wheel_licence_file(wheel, metadata.get_all("License-File") or [])
        if licence_file is None:
            raise LicenseUnknown(f"{path}: wheel {name} {version} ({wheel.folder}) carries no "
                                 "licence file (License-File, licenses/, LICENSE*)")
        origin = self._package_origins[wheel.folder] = Origin(name, version, "wheel", licence,
                                                              licence_file)
        return origin

    def _wheel_licence_file(self, wheel: _Wheel, declared: list[str]) -> str | None:
        candidates = [f"{wheel.folder}/{sub}{name}" for name in declared
                      for sub in ("licenses/", "")]
        real = self.rootfs.real(wheel.folder)
        if real is not None:
            candidates += sorted(f"{wheel.folder}/licenses/{p.name}"
                                 for p in real.glob("licenses/*"))
            candidates += sorted(f"{wheel.folder}/{p.name}" for p in real.iterdir()
                                 if re.match(r"(LICEN[CS]E|COPYING|NOTICE)", p.name, re.I))
        return next((c for c in candidates if self.rootfs.is_file(c)), None)


def copyright_licence(text: str) -> str | None:
    """The licences a Debian copyright file names (DEP-5 `License:` fields, else those its free
    text names, marked so), ", "-joined; None when it names none."""
    paragraphs = list(_stanzas(text))
    if paragraphs and DEP5_FORMAT.search(paragraphs[0].get("format", "")):
        names: dict[str, str] = {}
        for index, fields in enumerate(paragraphs):
            if (index == 0 or "files" in fields) and fields.get("license", "").strip():
                short = fields["license"].strip().splitlines()[0].strip()
                names.setdefault(short.casefold(), short)
        if names:
            return ", ".join(names[key] for key in sorted(names))
    found = sorted((match.start(), name) for pattern, name in _NAMED_LICENCES
                   if (match := pattern.search(text)) is not None)
    if not found:
        return None
    return f"{', '.join(name for _, name in found)} ({FREE_TEXT})"


def _wheel_licence(expressions: list[str], licences: list[str],
                   classifiers: list[str]) -> str | None:
    for value in (*expressions, *licences):
        value = " ".join(value.split())
        # A whole licence text pasted into License is not a name; UNKNOWN is setuptools' blank.
        if value and value.upper() != "UNKNOWN" and len(value) <= 120:
            return value
    named = sorted({c.split("::")[-1].strip() for c in classifiers
                    if c.startswith("License ::") and c.count("::") >= 2})
    return ", ".join(named) or None


def _record_hash(rootfs: RootFS, path: str) -> str:
    """sha256 as a wheel's RECORD writes it: urlsafe base64 without padding."""
    raw = bytes.fromhex(_digest(rootfs, path, hashlib.sha256()))
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _digest(rootfs: RootFS, path: str, digest: hashlib._Hash) -> str:
    real = rootfs.real(path)
    if real is not None:
        with real.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def _stanzas(text: str) -> Iterator[dict[str, str]]:
    """RFC-822-style paragraphs: field names lowercased, continuation lines joined."""
    fields: dict[str, str] = {}
    last = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                yield fields
            fields, last = {}, ""
        elif line[0] in " \t":
            if last:
                fields[last] += "\n" + line.strip()
        elif ":" in line:
            name, _, value = line.partition(":")
            last = name.strip().lower()
            fields[last] = value.strip()
    if fields:
        yield fields


def _ancestors(folder: str) -> Iterator[str]:
    """`folder` and every folder above it, up to (not including) "/"."""
    while folder not in ("/", ""):
        yield folder
        folder = posixpath.dirname(folder)


MANAGER_WORDS = {"dpkg": "Debian package", "wheel": "Python wheel",
                 "built": "built in the toolchain image from its release tarball"}


def package_folder(origin: Origin) -> str:
    """The folder under third_party/ for a package (a wheel's name normalized, PEP 503)."""
    if origin.manager == "wheel":
        return re.sub(r"[-_.]+", "-", origin.package).lower()
    return origin.package


def write_notice(path: Path, data: bytes) -> None:
    """A licence or notice file of a kit, mode 0644 whatever the umask."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o644)


def licence_path(rootfs: RootFS, origin: Origin) -> Path:
    real = rootfs.real(origin.license_file)
    if real is None:
        raise LicenseUnknown(f"{origin.license_file}: gone from root {rootfs.root}")
    return real
