"""The known distributions' runtime facts (data/distros.toml, validated on load against
runtime_facts.toml too); each fact table says whether its values were confirmed, so that every
answer can name the unconfirmed facts it rests on. platforms.distro_verdict judges."""

from __future__ import annotations

import datetime
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, read_data_file
from ninfer_kits.host import versions
from ninfer_kits.host.runtime_facts import GCC_RELEASE, RuntimeFacts, runtime_facts

SCHEMA = 1
DATA_FILE = data_file("distros.toml")

_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
_OS_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
_GCC = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?")
_GLIBCXX = re.compile(r"3\.4\.[0-9]+")
_CXXABI = re.compile(r"1\.3\.[0-9]+")
PACKAGE = re.compile(r"[a-z0-9][a-z0-9+._-]*")
FFMPEG_SONAME = re.compile(r"lib(?P<lib>avformat|avcodec|avutil|swscale|swresample)\.so\.[0-9]+")
FFMPEG_LIBRARIES = ("avformat", "avcodec", "avutil", "swscale", "swresample")
LIBCURL_SONAME = re.compile(r"libcurl\.so\.[0-9]+")
_SYMBOL_VERSION = re.compile(r"[A-Z][A-Z0-9_]*_[0-9]+(\.[0-9]+)*")
_CUDART_SONAME = re.compile(r"libcudart\.so\.[0-9]+(\.[0-9]+)?")
_REPO = re.compile(r"[a-z][a-z0-9]*")
_IMAGE_OS = re.compile(r"[a-z]+[0-9.]*")
_MACHINE = re.compile(r"[a-z0-9][a-z0-9_-]*")

DRIVER_SONAMES = frozenset({"libcuda.so.1", "libnvidia-ml.so.1"})
GCC_SONAMES = frozenset({"libstdc++.so.6", "libgcc_s.so.1"})


# --------------------------------------------------------------------------- the facts


@dataclass(frozen=True)
class Provenance:
    table: str  # "glibc", "libstdcxx", ...
    checked: bool
    unchecked: tuple[str, ...]  # keys not confirmed; all keys when checked is false and empty
    source: str

    def confirmed(self, key: str) -> bool:
        return self.checked or (bool(self.unchecked) and key not in self.unchecked)


@dataclass(frozen=True)
class GlibcFacts:
    version: str
    provenance: Provenance


@dataclass(frozen=True)
class LibstdcxxFacts:
    gcc: str
    glibcxx: str
    cxxabi: str
    package: str
    provenance: Provenance


@dataclass(frozen=True)
class FfmpegFacts:
    version: str  # "" when the distribution packages no FFmpeg
    sonames: tuple[str, ...]
    packages: str
    extra_from: str  # where FFmpeg comes from otherwise ("" none known)
    extra_version: str
    extra_sonames: tuple[str, ...]
    note: str
    provenance: Provenance


@dataclass(frozen=True)
class LibcurlFacts:
    soname: str
    package: str
    versions: tuple[str, ...] | None  # the symbol versions it defines; None: not known
    provenance: Provenance


@dataclass(frozen=True)
class CudaFacts:
    cudart_sonames: tuple[str, ...]
    cudart_package: str
    nvidia_repo: str  # "" when NVIDIA's CUDA repository has none for the distribution
    nvidia_majors: tuple[int, ...]
    image: str  # the <os> of nvidia/cuda:<version>-runtime-<os>, "" none known
    image_since: str
    provenance: Provenance


@dataclass(frozen=True)
class Distro:
    id: str
    name: str
    codename: str
    os_id: str
    version_id: str
    released: datetime.date | None
    as_of: datetime.date | None  # rolling distributions: the date of the facts
    rolling: bool
    glibc: GlibcFacts
    libstdcxx: LibstdcxxFacts
    ffmpeg: FfmpegFacts
    libcurl: LibcurlFacts
    cuda: CudaFacts


@dataclass(frozen=True)
class DistroFacts:
    path: Path
    as_of: datetime.date
    arch: str
    distros: tuple[Distro, ...]

    def get(self, distro_id: str) -> Distro:
        return next(d for d in self.distros if d.id == distro_id)


@functools.cache
def shipped_distros() -> DistroFacts:
    return load_distros(DATA_FILE)


def load_distros(path: Path) -> DistroFacts:
    return validate(read_data_file(path, "the distributions file"))


def validate(root: Table, facts: RuntimeFacts | None = None) -> DistroFacts:
    facts = facts or runtime_facts()
    root.check_keys(("schema", "as_of", "arch", "distros"))
    schema = root.integer("schema")
    if schema != SCHEMA:
        raise root.error("schema", f"unsupported schema {schema} (this ninfer-kits reads "
                                   f"schema {SCHEMA})")
    section = root.table("distros")
    if not section.data:
        raise root.error("distros", "no distributions (add a [distros.NAME] table)")
    distros = []
    for name in section.data:
        if not _ID.fullmatch(name):
            raise section.error(name, f"invalid name {name!r} (lowercase letters, digits, '-')")
        distros.append(_distro(section.table(name), facts))
    return DistroFacts(path=root.source.path, as_of=root.date("as_of"),
                       arch=root.text("arch", _MACHINE), distros=tuple(distros))


def _distro(table: Table, facts: RuntimeFacts) -> Distro:
    table.check_keys(("name", "codename", "os_id", "version_id", "rolling", "glibc",
                      "libstdcxx", "ffmpeg", "libcurl", "cuda"), ("released", "as_of"))
    rolling = table.boolean("rolling")
    if rolling and "as_of" not in table.data:
        raise table.error("as_of", "a rolling distribution needs as_of (the date of its facts)")
    if not rolling and "released" not in table.data:
        raise table.error("released", "missing required key 'released' (a date)")
    return Distro(
        id=table.id,
        name=table.text("name"),
        codename=table.text("codename", _OS_ID, empty=True),
        os_id=table.text("os_id", _OS_ID),
        version_id=table.text("version_id", versions.DOTTED, empty=rolling),
        released=table.date("released") if "released" in table.data else None,
        as_of=table.date("as_of") if "as_of" in table.data else None,
        rolling=rolling,
        glibc=_glibc(table.table("glibc")),
        libstdcxx=_libstdcxx(table.table("libstdcxx"), facts),
        ffmpeg=_ffmpeg(table.table("ffmpeg"), facts),
        libcurl=_libcurl(table.table("libcurl")),
        cuda=_cuda(table.table("cuda")),
    )


_PROVENANCE_KEYS = ("checked", "source")


def _provenance(table: Table, keys: Sequence[str]) -> Provenance:
    checked = table.boolean("checked")
    source = table.text("source")
    unchecked = table.strings("unchecked") if "unchecked" in table.data else ()
    if unchecked and checked:
        raise table.error("unchecked", "names unchecked keys, but checked = true")
    if "unchecked" in table.data and not unchecked:
        raise table.error("unchecked", "must not be empty (leave it out instead)")
    for key in unchecked:
        if key not in keys:
            raise table.error("unchecked", f"names {key!r}, which is not a fact of this table "
                                           f"({', '.join(keys)})")
    return Provenance(".".join(table.parts[-1:]), checked, unchecked, source)


def _glibc(table: Table) -> GlibcFacts:
    keys = ("version",)
    table.check_keys((*keys, *_PROVENANCE_KEYS), ("unchecked",))
    return GlibcFacts(table.text("version", versions.DOTTED), _provenance(table, keys))


def _libstdcxx(table: Table, facts: RuntimeFacts) -> LibstdcxxFacts:
    keys = ("gcc", "glibcxx", "cxxabi", "package")
    table.check_keys((*keys, *_PROVENANCE_KEYS), ("unchecked",))
    gcc = table.text("gcc", _GCC)
    row = LibstdcxxFacts(gcc, table.text("glibcxx", _GLIBCXX),
                         table.text("cxxabi", _CXXABI), table.text("package", PACKAGE),
                         _provenance(table, keys))
    for key, prefix, known in (("glibcxx", "GLIBCXX", facts.glibcxx),
                               ("cxxabi", "CXXABI", facts.cxxabi)):
        problem = _gcc_disagrees(versions.parse(gcc), versions.parse(getattr(row, key)), known)
        if problem:
            raise table.error(key, f"{prefix}_{getattr(row, key)} disagrees with GCC {gcc}: "
                                   f"runtime_facts.toml {problem}")
    return row


def _gcc_disagrees(gcc: tuple[int, ...], version: tuple[int, ...],
                   known: Sequence[tuple[tuple[int, ...], str]]) -> str | None:
    """None when `version` is what GCC `gcc`'s libstdc++ provides by runtime_facts (for a GCC
    newer than any known, at least the highest known); else why not."""
    releases = [(key, _release(name)) for key, name in known]
    if not releases:
        return None
    newest_key, newest_release = releases[-1]
    if gcc[0] > newest_release[0]:
        if version < newest_key:
            return (f"says {_gcc_name(newest_release)} already provides "
                    f"{'.'.join(map(str, newest_key))}")
        return None
    provided = [key for key, release in releases if release <= gcc]
    if not provided:
        return None  # older than every release it knows
    expected = provided[-1]
    if version != expected:
        return f"says GCC {'.'.join(map(str, gcc))} provides up to {'.'.join(map(str, expected))}"
    return None


def _release(name: str) -> tuple[int, ...]:
    match = GCC_RELEASE.match(name)
    return versions.parse(match["release"]) if match else ()


def _gcc_name(release: tuple[int, ...]) -> str:
    return "GCC " + ".".join(map(str, release))


def _ffmpeg(table: Table, facts: RuntimeFacts) -> FfmpegFacts:
    keys = ("version", "sonames", "packages", "extra_from", "extra_version", "extra_sonames",
            "note")
    table.check_keys(("version", "sonames", "packages", *_PROVENANCE_KEYS),
                     ("extra_from", "extra_version", "extra_sonames", "note", "unchecked"))
    version = table.text("version", versions.DOTTED, empty=True)
    sonames = _ffmpeg_sonames(table, "sonames", version, facts)
    extra_from = table.text("extra_from", empty=True) if "extra_from" in table.data else ""
    extra_version = (table.text("extra_version", versions.DOTTED, empty=True)
                     if "extra_version" in table.data else "")
    extra = (_ffmpeg_sonames(table, "extra_sonames", extra_version, facts)
             if "extra_sonames" in table.data else ())
    if bool(extra_from) != bool(extra):
        raise table.error("extra_from", "extra_from and extra_sonames go together")
    packages = table.text("packages", empty=not version)
    note = table.text("note") if "note" in table.data else ""
    return FfmpegFacts(version, sonames, packages, extra_from, extra_version, extra, note,
                       _provenance(table, keys))


def _ffmpeg_sonames(table: Table, key: str, version: str,
                    facts: RuntimeFacts) -> tuple[str, ...]:
    sonames = table.strings(key, FFMPEG_SONAME)
    version_key = "version" if key == "sonames" else "extra_version"
    if not version:
        if sonames:
            raise table.error(key, f"must be empty when {version_key} is \"\" (no FFmpeg)")
        return ()
    libraries = sorted(m["lib"] for m in map(FFMPEG_SONAME.fullmatch, sonames) if m)
    if libraries != sorted(FFMPEG_LIBRARIES):
        raise table.error(key, f"must name each of {', '.join(FFMPEG_LIBRARIES)} once")
    family = dict(facts.families).get(f"FFmpeg {version.split('.')[0]}.x runtime")
    if family is not None and set(family) != set(sonames):
        raise table.error(key, f"FFmpeg {version}'s sonames are {', '.join(family)} "
                               f"(runtime_facts.toml), not {', '.join(sonames)}")
    return sonames


def _libcurl(table: Table) -> LibcurlFacts:
    keys = ("soname", "package", "versions")
    table.check_keys(("soname", "package", *_PROVENANCE_KEYS), ("versions", "unchecked"))
    versions = (table.strings("versions", _SYMBOL_VERSION)
                if "versions" in table.data else None)
    return LibcurlFacts(table.text("soname", LIBCURL_SONAME),
                        table.text("package", PACKAGE), versions, _provenance(table, keys))


def _cuda(table: Table) -> CudaFacts:
    keys = ("cudart_sonames", "cudart_package", "nvidia_repo", "nvidia_majors", "image",
            "image_since")
    table.check_keys((*keys, *_PROVENANCE_KEYS), ("unchecked",))
    sonames = table.strings("cudart_sonames", _CUDART_SONAME)
    package = table.text("cudart_package", empty=True)
    if bool(sonames) != bool(package):
        raise table.error("cudart_package", "cudart_sonames and cudart_package go together")
    repo = table.text("nvidia_repo", _REPO, empty=True)
    majors = table.integers("nvidia_majors")
    if bool(repo) != bool(majors):
        raise table.error("nvidia_majors", "nvidia_repo and nvidia_majors go together")
    image = table.text("image", _IMAGE_OS, empty=True)
    since = table.text("image_since", versions.DOTTED, empty=True)
    if bool(image) != bool(since):
        raise table.error("image_since", "image and image_since go together")
    return CudaFacts(sonames, package, repo, majors, image, since, _provenance(table, keys))
