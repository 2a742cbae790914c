"""Which known distributions meet a kit's floor: their runtime facts (data/distros.toml, validated
on load: every key typed and formatted, and the libstdc++ and FFmpeg rows checked against
runtime_facts.toml) and a verdict per distribution, derived from the kit's KitFloor alone.

Each fact table says whether its values were confirmed (`checked`, `unchecked`) and where they
come from (`source`); every answer names the unconfirmed facts it rests on."""

from __future__ import annotations

import dataclasses
import datetime
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits import versions
from ninfer_kits.inspector.floor import BASE_VERSION, CUDART, KitFloor, SymbolVersion
from ninfer_kits.matrix.where import Table, read_data_file
from ninfer_kits.runtime_facts import GCC_RELEASE, RuntimeFacts, runtime_facts

SCHEMA = 1
DATA_FILE = Path(__file__).resolve().parent.parent / "data" / "distros.toml"

_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
_OS_ID = re.compile(r"[a-z0-9][a-z0-9._-]*")
_VERSION_ID = re.compile(r"[0-9]+(\.[0-9]+)*")
_DOTTED = re.compile(r"[0-9]+(\.[0-9]+)*")
_GCC = re.compile(r"[0-9]+\.[0-9]+(\.[0-9]+)?")
_GLIBCXX = re.compile(r"3\.4\.[0-9]+")
_CXXABI = re.compile(r"1\.3\.[0-9]+")
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+._-]*")
_FFMPEG_SONAME = re.compile(r"lib(?P<lib>avformat|avcodec|avutil|swscale|swresample)\.so\.[0-9]+")
FFMPEG_LIBRARIES = ("avformat", "avcodec", "avutil", "swscale", "swresample")
_LIBCURL_SONAME = re.compile(r"libcurl\.so\.[0-9]+")
_SYMBOL_VERSION = re.compile(r"[A-Z][A-Z0-9_]*_[0-9]+(\.[0-9]+)*")
_CUDART_SONAME = re.compile(r"libcudart\.so\.[0-9]+(\.[0-9]+)?")
_REPO = re.compile(r"[a-z][a-z0-9]*")
_IMAGE_OS = re.compile(r"[a-z]+[0-9.]*")
_MACHINE = re.compile(r"[a-z0-9][a-z0-9_-]*")

# Libraries that the NVIDIA driver brings, not a distribution: not judged here.
DRIVER_SONAMES = frozenset({"libcuda.so.1", "libnvidia-ml.so.1"})
GCC_SONAMES = frozenset({"libstdc++.so.6", "libgcc_s.so.1"})

MET, NOT_MET, NOT_KNOWN = "met", "not met", "not known"
YES, NO, UNKNOWN = "yes", "no", "not known"


# --------------------------------------------------------------------------- the facts


@dataclass(frozen=True)
class Provenance:
    """Whether a fact table's values were confirmed, and from what."""

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
    """Read and validate a distributions file; ConfigError names file, line, table and key."""
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
    return DistroFacts(path=root.source.path, as_of=_date(root, "as_of"),
                       arch=_string(root, "arch", _MACHINE), distros=tuple(distros))


def _distro(table: Table, facts: RuntimeFacts) -> Distro:
    table.check_keys(("name", "codename", "os_id", "version_id", "rolling", "glibc",
                      "libstdcxx", "ffmpeg", "libcurl", "cuda"), ("released", "as_of"))
    rolling = _bool(table, "rolling")
    if rolling and "as_of" not in table.data:
        raise table.error("as_of", "a rolling distribution needs as_of (the date of its facts)")
    if not rolling and "released" not in table.data:
        raise table.error("released", "missing required key 'released' (a date)")
    return Distro(
        id=table.id,
        name=_string(table, "name"),
        codename=_string(table, "codename", _OS_ID, empty=True),
        os_id=_string(table, "os_id", _OS_ID),
        version_id=_string(table, "version_id", _VERSION_ID, empty=rolling),
        released=_date(table, "released") if "released" in table.data else None,
        as_of=_date(table, "as_of") if "as_of" in table.data else None,
        rolling=rolling,
        glibc=_glibc(table.table("glibc")),
        libstdcxx=_libstdcxx(table.table("libstdcxx"), facts),
        ffmpeg=_ffmpeg(table.table("ffmpeg"), facts),
        libcurl=_libcurl(table.table("libcurl")),
        cuda=_cuda(table.table("cuda")),
    )


_PROVENANCE_KEYS = ("checked", "source")


def _provenance(table: Table, keys: Sequence[str]) -> Provenance:
    checked = _bool(table, "checked")
    source = _string(table, "source")
    unchecked = _strings(table, "unchecked") if "unchecked" in table.data else ()
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
    return GlibcFacts(_string(table, "version", _DOTTED), _provenance(table, keys))


def _libstdcxx(table: Table, facts: RuntimeFacts) -> LibstdcxxFacts:
    keys = ("gcc", "glibcxx", "cxxabi", "package")
    table.check_keys((*keys, *_PROVENANCE_KEYS), ("unchecked",))
    gcc = _string(table, "gcc", _GCC)
    row = LibstdcxxFacts(gcc, _string(table, "glibcxx", _GLIBCXX),
                         _string(table, "cxxabi", _CXXABI), _string(table, "package", _PACKAGE),
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
    """None when `version` is what GCC `gcc`'s libstdc++ provides by runtime_facts: the highest
    version first provided by a release no newer than `gcc`; for a GCC major newer than any it
    knows, at least the highest version it knows."""
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
    version = _string(table, "version", _DOTTED, empty=True)
    sonames = _ffmpeg_sonames(table, "sonames", version, facts)
    extra_from = _string(table, "extra_from", empty=True) if "extra_from" in table.data else ""
    extra_version = (_string(table, "extra_version", _DOTTED, empty=True)
                     if "extra_version" in table.data else "")
    extra = (_ffmpeg_sonames(table, "extra_sonames", extra_version, facts)
             if "extra_sonames" in table.data else ())
    if bool(extra_from) != bool(extra):
        raise table.error("extra_from", "extra_from and extra_sonames go together")
    packages = _string(table, "packages", empty=not version)
    note = _string(table, "note") if "note" in table.data else ""
    return FfmpegFacts(version, sonames, packages, extra_from, extra_version, extra, note,
                       _provenance(table, keys))


def _ffmpeg_sonames(table: Table, key: str, version: str,
                    facts: RuntimeFacts) -> tuple[str, ...]:
    sonames = _strings(table, key, _FFMPEG_SONAME)
    version_key = "version" if key == "sonames" else "extra_version"
    if not version:
        if sonames:
            raise table.error(key, f"must be empty when {version_key} is \"\" (no FFmpeg)")
        return ()
    libraries = sorted(m["lib"] for m in map(_FFMPEG_SONAME.fullmatch, sonames) if m)
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
    versions = (_strings(table, "versions", _SYMBOL_VERSION)
                if "versions" in table.data else None)
    return LibcurlFacts(_string(table, "soname", _LIBCURL_SONAME),
                        _string(table, "package", _PACKAGE), versions, _provenance(table, keys))


def _cuda(table: Table) -> CudaFacts:
    keys = ("cudart_sonames", "cudart_package", "nvidia_repo", "nvidia_majors", "image",
            "image_since")
    table.check_keys((*keys, *_PROVENANCE_KEYS), ("unchecked",))
    sonames = _strings(table, "cudart_sonames", _CUDART_SONAME)
    package = _string(table, "cudart_package", empty=True)
    if bool(sonames) != bool(package):
        raise table.error("cudart_package", "cudart_sonames and cudart_package go together")
    repo = _string(table, "nvidia_repo", _REPO, empty=True)
    majors = _integers(table, "nvidia_majors")
    if bool(repo) != bool(majors):
        raise table.error("nvidia_majors", "nvidia_repo and nvidia_majors go together")
    image = _string(table, "image", _IMAGE_OS, empty=True)
    since = _string(table, "image_since", _DOTTED, empty=True)
    if bool(image) != bool(since):
        raise table.error("image_since", "image and image_since go together")
    return CudaFacts(sonames, package, repo, majors, image, since, _provenance(table, keys))


# Typed values, each failure naming its table and key.


def _kind(value: object) -> str:
    names = ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"),
             (list, "an array"), (dict, "a table"), (datetime.datetime, "a date-time"),
             (datetime.date, "a date"))
    return next((name for kind, name in names if isinstance(value, kind)), "nothing")


def _string(table: Table, key: str, pattern: re.Pattern[str] | None = None, *,
            empty: bool = False) -> str:
    if key not in table.data:
        raise table.error(key, f"missing required key {key!r}")
    value = table.data[key]
    if not isinstance(value, str):
        raise table.error(key, f"expected a string, got {_kind(value)}")
    if not value.strip():
        if empty and not value:
            return value
        raise table.error(key, "must not be empty")
    if pattern is not None and not pattern.fullmatch(value):
        raise table.error(key, f"{value!r} is not of the form {pattern.pattern}")
    return value


def _strings(table: Table, key: str,
             pattern: re.Pattern[str] | None = None) -> tuple[str, ...]:
    value = table.data.get(key)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise table.error(key, f"expected an array of strings, got {_kind(value)}")
    for item in value:
        if pattern is not None and not pattern.fullmatch(item):
            raise table.error(key, f"{item!r} is not of the form {pattern.pattern}")
    if len(set(value)) != len(value):
        raise table.error(key, "names an entry twice")
    return tuple(value)


def _integers(table: Table, key: str) -> tuple[int, ...]:
    value = table.data.get(key)
    if not isinstance(value, list) or not all(isinstance(item, int) and not isinstance(
            item, bool) and item > 0 for item in value):
        raise table.error(key, f"expected an array of positive integers, got {_kind(value)}")
    return tuple(value)


def _bool(table: Table, key: str) -> bool:
    value = table.data.get(key)
    if not isinstance(value, bool):
        raise table.error(key, f"expected a boolean, got {_kind(value)}")
    return value


def _date(table: Table, key: str) -> datetime.date:
    value = table.data.get(key)
    if isinstance(value, datetime.datetime) or not isinstance(value, datetime.date):
        raise table.error(key, f"expected a date (YYYY-MM-DD, unquoted), got {_kind(value)}")
    return value


# --------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Reason:
    """One requirement of the kit against one distribution."""

    requirement: str  # "glibc ≥ 2.38"
    status: str  # MET, NOT_MET or NOT_KNOWN
    text: str  # "glibc 2.34 < 2.38"
    unchecked: tuple[str, ...] = ()  # the unconfirmed facts it rests on: "glibc.version"


@dataclass(frozen=True)
class CudaRuntime:
    soname: str  # libcudart.so.13
    how: str  # "distribution", "nvidia", "none" or "not known"
    package: str
    image: str  # nvidia/cuda:13.0.x-runtime-ubuntu24.04, or ""
    text: str  # "from NVIDIA's repository (cuda-cudart-13-0)"
    unchecked: tuple[str, ...] = ()
    image_unchecked: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    distro: Distro
    answer: str  # YES, NO or UNKNOWN
    reasons: tuple[Reason, ...]
    cuda: tuple[CudaRuntime, ...]
    notes: tuple[str, ...] = ()

    @property
    def unchecked(self) -> tuple[str, ...]:
        """The unconfirmed facts the answer rests on: those of the unmet requirements for a no,
        of every requirement otherwise."""
        deciding = [r for r in self.reasons if r.status == NOT_MET] if self.answer == NO \
            else list(self.reasons)
        return tuple(dict.fromkeys(key for reason in deciding for key in reason.unchecked))

    def line(self) -> str:
        """`Ubuntu 24.04: no — libavcodec.so.61 (FFmpeg 7.x); it has libavcodec.so.60`."""
        if self.answer == YES:
            rests = self.unchecked
            return f"{self.distro.name}: yes" + (
                f" (rests on unchecked facts: {', '.join(rests)})" if rests else "")
        wanted = NOT_MET if self.answer == NO else NOT_KNOWN
        parts = [r.text + (" [unchecked]" if r.unchecked else "")
                 for r in self.reasons if r.status == wanted]
        return f"{self.distro.name}: {self.answer} — " + "; ".join(parts)


def judge(floor: KitFloor, distro: Distro, *, arch: str = "x86-64",
          cuda_version: str | None = None, facts: RuntimeFacts | None = None) -> Verdict:
    """Whether `distro` meets the kit's floor, requirement by requirement. `cuda_version` (the
    kit's CUDA, from BUILDINFO) names the cuda-cudart package; without it the minor is left open."""
    facts = facts or runtime_facts()
    reasons = [*_machine(floor, arch), *_glibc_reason(floor, distro),
               *_libstdcxx_reasons(floor, distro, facts), *_soname_reasons(floor, distro, facts)]
    runtimes = [_cuda_runtime(int(m["major"]), distro, cuda_version)
                for m in map(CUDART.match, floor.sonames) if m]
    reasons += [_as_reason(runtime) for runtime in runtimes]
    statuses = {r.status for r in reasons}
    answer = NO if NOT_MET in statuses else UNKNOWN if NOT_KNOWN in statuses else YES
    ffmpeg = any(_FFMPEG_SONAME.fullmatch(soname) for soname in floor.sonames)
    notes = (distro.ffmpeg.note,) if ffmpeg and distro.ffmpeg.note else ()
    return Verdict(distro, answer, tuple(reasons), tuple(runtimes), notes)


def judge_all(floor: KitFloor, known: DistroFacts, *,
              cuda_version: str | None = None) -> tuple[Verdict, ...]:
    return tuple(judge(floor, distro, arch=known.arch, cuda_version=cuda_version)
                 for distro in known.distros)


def _unconfirmed(provenance: Provenance, *keys: str) -> tuple[str, ...]:
    return tuple(f"{provenance.table}.{key}" for key in keys if not provenance.confirmed(key))


def _machine(floor: KitFloor, arch: str) -> list[Reason]:
    other = [machine for machine in floor.machines if machine != arch]
    if not other:
        return []
    return [Reason(f"{'/'.join(floor.machines)} Linux", NOT_KNOWN,
                   f"the kit is for {'/'.join(other)}; these facts are for {arch}")]


def _glibc_reason(floor: KitFloor, distro: Distro) -> list[Reason]:
    need = floor.floor("GLIBC")
    if need is None:
        return []
    have = distro.glibc.version
    met = versions.parse(need.version) <= versions.parse(have)
    text = f"glibc {have} ≥ {need.version}" if met else f"glibc {have} < {need.version}"
    return [Reason(f"glibc ≥ {need.version}", MET if met else NOT_MET, text,
                   _unconfirmed(distro.glibc.provenance, "version"))]


def _libstdcxx_reasons(floor: KitFloor, distro: Distro, facts: RuntimeFacts) -> list[Reason]:
    row, reasons = distro.libstdcxx, []
    for prefix, key in (("GLIBCXX", "glibcxx"), ("CXXABI", "cxxabi")):
        need = floor.floor(prefix)
        if need is None:
            continue
        have: str = getattr(row, key)
        advice = facts.gcc_advice(prefix, versions.parse(need.version))
        met = versions.parse(need.version) <= versions.parse(have)
        text = (f"{need.name} ({advice}); it has {prefix}_{have} (GCC {row.gcc})" if not met
                else f"{row.package} provides {prefix}_{have}")
        reasons.append(Reason(f"{need.libraries[0]} providing {need.name}",
                              MET if met else NOT_MET, text,
                              _unconfirmed(row.provenance, key)))
    need = floor.floor("GCC")
    if need is not None and need.version:
        # libgcc_s of GCC N defines GCC_<N>.0.0 at most (a new node only when symbols are
        # added): a need of a later major is not met.
        met = int(need.version.split(".")[0]) <= versions.parse(row.gcc)[0]
        text = (f"libgcc_s.so.1 of GCC {row.gcc}" if met
                else f"{need.name} (libgcc_s.so.1); it has the libgcc_s of GCC {row.gcc}")
        reasons.append(Reason(f"libgcc_s.so.1 providing {need.name}", MET if met else NOT_MET,
                              text, _unconfirmed(row.provenance, "gcc")))
    return reasons


def _soname_reasons(floor: KitFloor, distro: Distro, facts: RuntimeFacts) -> list[Reason]:
    skip = facts.glibc_sonames | GCC_SONAMES | DRIVER_SONAMES
    ffmpeg = [s for s in floor.sonames if _FFMPEG_SONAME.fullmatch(s)]
    reasons = [_ffmpeg_reason(ffmpeg, distro, facts)] if ffmpeg else []
    for soname in floor.sonames:
        if soname in skip or soname in ffmpeg or CUDART.match(soname):
            continue
        if _LIBCURL_SONAME.fullmatch(soname):
            reasons += _libcurl_reasons(floor, soname, distro)
        else:
            reasons.append(Reason(soname, NOT_KNOWN, f"{soname}: not in the distributions file"))
    return reasons


def _family(sonames: Iterable[str], facts: RuntimeFacts) -> str:
    names = {facts.family_of(s) for s in sonames}
    if len(names) == 1 and (name := names.pop()):
        return name.removesuffix(" runtime")
    return "FFmpeg"


def _ffmpeg_reason(needed: list[str], distro: Distro, facts: RuntimeFacts) -> Reason:
    row = distro.ffmpeg
    requirement = f"{', '.join(needed)} ({_family(needed, facts)})"
    missing = [s for s in needed if s not in row.sonames]
    keys = _unconfirmed(row.provenance, "version", "sonames")
    if not missing:
        return Reason(requirement, MET, f"FFmpeg {row.version} ({row.packages})", keys)
    family = _family(missing, facts)
    if row.version:
        libraries = {m["lib"] for m in map(_FFMPEG_SONAME.fullmatch, missing) if m}
        have = [s for s in row.sonames
                if (m := _FFMPEG_SONAME.fullmatch(s)) and m["lib"] in libraries]
        text = f"{', '.join(missing)} ({family}); it has {', '.join(have)} (FFmpeg {row.version})"
        return Reason(requirement, NOT_MET, text, keys)
    text = f"{', '.join(missing)} ({family}); {distro.name} packages no FFmpeg"
    if row.extra_from:
        covered = all(s in row.extra_sonames for s in missing)
        text += (f"; {row.extra_from} has FFmpeg {row.extra_version}"
                 + (" with these sonames" if covered else f": {', '.join(row.extra_sonames)}"))
        keys += _unconfirmed(row.provenance, "extra_sonames")
    return Reason(requirement, NOT_MET, text, keys)


def _libcurl_reasons(floor: KitFloor, soname: str, distro: Distro) -> list[Reason]:
    row = distro.libcurl
    if soname != row.soname:
        return [Reason(soname, NOT_MET, f"{soname}; it has {row.soname} ({row.package})",
                       _unconfirmed(row.provenance, "soname"))]
    reasons = [Reason(soname, MET, f"{soname} ({row.package})",
                      _unconfirmed(row.provenance, "soname", "package"))]
    wanted = [name for name in dict(floor.versions_by_library).get(soname, ())
              if name != BASE_VERSION and SymbolVersion.parse(name).number]
    if not wanted:
        return reasons
    requirement = f"{soname} defining {', '.join(wanted)}"
    keys = _unconfirmed(row.provenance, "versions")
    if row.versions is None:
        reasons.append(Reason(requirement, NOT_KNOWN,
                              f"whether its {soname} defines {', '.join(wanted)} is not known "
                              f"here"))
    elif not row.versions:
        reasons.append(Reason(requirement, MET,
                              f"its {soname} defines no symbol versions: the loader warns \"no "
                              f"version information available\" and goes on", keys))
    else:
        lacking = [name for name in wanted if name not in row.versions]
        reasons.append(
            Reason(requirement, NOT_MET,
                   f"{soname} defining {', '.join(lacking)}; its libcurl defines "
                   f"{', '.join(row.versions)}", keys) if lacking
            else Reason(requirement, MET, f"its {soname} defines {', '.join(wanted)}", keys))
    return reasons


def _cuda_runtime(major: int, distro: Distro, cuda_version: str | None) -> CudaRuntime:
    row, soname = distro.cuda, f"libcudart.so.{major}"
    image = _image(row, major, cuda_version)
    runtime = _runtime(row, soname, major, distro.name, cuda_version, image)
    image_keys = _unconfirmed(row.provenance, "image", "image_since") if image else ()
    return dataclasses.replace(runtime, image_unchecked=image_keys)


def _runtime(row: CudaFacts, soname: str, major: int, name: str, cuda_version: str | None,
             image: str) -> CudaRuntime:
    if soname in row.cudart_sonames:
        return CudaRuntime(soname, "distribution", row.cudart_package, image,
                           f"from {name} itself ({row.cudart_package})",
                           _unconfirmed(row.provenance, "cudart_sonames"))
    if major in row.nvidia_majors:
        package = _cudart_package(major, cuda_version)
        return CudaRuntime(soname, "nvidia", package, image,
                           f"from NVIDIA's repository ({package}; repository {row.nvidia_repo})",
                           _unconfirmed(row.provenance, "nvidia_repo", "nvidia_majors"))
    if row.nvidia_repo:
        return CudaRuntime(soname, NOT_KNOWN, "", image,
                           f"{soname} (CUDA {major} runtime): not packaged by {name}; "
                           f"whether NVIDIA's {row.nvidia_repo} repository has CUDA {major} is "
                           f"not recorded here")
    return CudaRuntime(soname, "none", "", image,
                       f"{soname} (CUDA {major} runtime): neither {name} nor NVIDIA's "
                       f"CUDA repository packages it",
                       _unconfirmed(row.provenance, "cudart_sonames", "nvidia_repo"))


def _as_reason(runtime: CudaRuntime) -> Reason:
    status = {"distribution": MET, "nvidia": MET, NOT_KNOWN: NOT_KNOWN}.get(runtime.how, NOT_MET)
    return Reason(f"CUDA runtime {runtime.soname}", status, runtime.text, runtime.unchecked)


def _cudart_package(major: int, cuda_version: str | None) -> str:
    """cuda-cudart-13-0 for a kit built with CUDA 13.0.x; any later 13.y provides the same
    libcudart.so.13 (CUDA's minor-version compatibility)."""
    kit = _kit_cuda(cuda_version, major)
    return f"cuda-cudart-{major}-{kit[1]}" if kit else f"cuda-cudart-{major}-<minor>"


def _image(row: CudaFacts, major: int, cuda_version: str | None) -> str:
    """nvidia/cuda:13.0.x-runtime-ubuntu24.04: the kit's CUDA minor, or the earliest image the
    facts know when that is later (a newer 13.y runtime runs a 13.0 kit)."""
    since = versions.parse(row.image_since) if row.image else ()
    if not since or since[0] > major:
        return ""
    version = since[:2] if since[0] == major else (major, 0)
    kit = _kit_cuda(cuda_version, major)
    if kit is not None and kit > version:
        version = kit
    return f"nvidia/cuda:{major}.{version[1] if len(version) > 1 else 0}.x-runtime-{row.image}"


def _kit_cuda(cuda_version: str | None, major: int) -> tuple[int, ...] | None:
    """(13, 0) from the kit's `13.0.88`, when it is of that major."""
    if not cuda_version or not _DOTTED.fullmatch(cuda_version):
        return None
    version = versions.parse(cuda_version)
    return version[:2] if version[0] == major and len(version) > 1 else None


# --------------------------------------------------------------------------- the summary


def floor_summary(floor: KitFloor, facts: RuntimeFacts | None = None) -> tuple[str, ...]:
    """The kit's needs in short, in the order of the floor table."""
    facts = facts or runtime_facts()
    parts = ["/".join(floor.machines) or "unknown machine"]
    for prefix in ("GLIBC", "GLIBCXX", "CXXABI", "GCC"):
        need = floor.floor(prefix)
        if need is not None:
            parts.append(f"glibc ≥ {need.version}" if prefix == "GLIBC" else need.name)
    skip = facts.glibc_sonames | GCC_SONAMES
    parts += [soname for soname in floor.sonames if soname not in skip]
    return tuple(parts)
