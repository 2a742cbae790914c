"""The runtime floor of a set of ELF files: what a machine must provide for all of them to run.

Pure functions over `ElfInfo` values; the table has the shape of the one users already know from
the hand-made kits ("Requirement / Why").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ninfer_kits.host import versions
from ninfer_kits.host.runtime_facts import RuntimeFacts, runtime_facts
from ninfer_kits.inspector.elf import ElfInfo
from ninfer_kits.inspector.fatbin import FatbinEntry
from ninfer_kits.inspector.inputs import printable

BASE_VERSION = "Base"  # a version node some libraries name so; never a requirement of its own
SYMBOL_VERSION = re.compile(r"^(?P<prefix>.+?)_(?P<version>\d+(?:\.\d+)*)$")
CUDART = re.compile(r"^libcudart\.so\.(?P<major>\d+)$")
GPU_ARCH = re.compile(r"^(?P<prefix>sm|compute)_(?P<number>\d+)(?P<suffix>[af]?)$")


# Named tuples, not dataclasses: each dataclass costs `inspect`'s start about a millisecond.


class SymbolVersion(NamedTuple):
    """A needed symbol version such as GLIBC_2.38, split so that 2.38 > 2.9 compares right."""

    prefix: str
    number: tuple[int, ...]
    name: str

    @classmethod
    def parse(cls, name: str) -> SymbolVersion:
        match = SYMBOL_VERSION.match(name)
        if match is None:  # GLIBC_PRIVATE and the like carry no number
            return cls(prefix=name, number=(), name=name)
        return cls(match["prefix"], versions.parse(match["version"]), name)

    @property
    def version(self) -> str:
        return versions.dotted(self.number)


class PrefixFloor(NamedTuple):
    """The highest version of one prefix that any file needs, and from which library."""

    prefix: str
    version: str
    name: str
    libraries: tuple[str, ...]
    needed_by: tuple[str, ...]


class Requirement(NamedTuple):
    requirement: str
    why: str


class DeviceCode(NamedTuple):
    """How many fatbin entries of one kind and arch the kit's files carry."""

    kind: str  # as FatbinEntry.kind: "sass", "ptx", "ltoir", "kind-N"
    arch: str
    count: int  # type: ignore[assignment]  # the field, in place of tuple.count (never called)


class SearchPath(NamedTuple):
    tag: str  # "RUNPATH" or "RPATH" (read only when a file has no RUNPATH)
    path: str


class KitFloor(NamedTuple):
    machines: tuple[str, ...]
    interpreters: tuple[str, ...]
    prefix_floors: tuple[PrefixFloor, ...]
    versions_by_library: tuple[tuple[str, tuple[str, ...]], ...]
    sonames: tuple[str, ...]
    provided_in_kit: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    # soname → the RUNPATH (or, without one, RPATH) entries of the files that need it
    search_paths: tuple[tuple[str, tuple[SearchPath, ...]], ...]
    # what a GPU runs (`.nv_fatbin` and containers found in other data): which GPU can run it
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    # `__nv_relfatbin`: its PTX is JIT-linked where the SASS does not fit (seen on an H200)
    relocatable: tuple[DeviceCode, ...]
    # loaded entries neither SASS nor PTX
    other_device_code: tuple[DeviceCode, ...]
    # loadable entries found outside `.nv_fatbin`, and where (cuobjdump lists none)
    embedded: tuple[DeviceCode, ...]
    embedded_in: tuple[str, ...]
    table: tuple[Requirement, ...]

    def floor(self, prefix: str) -> PrefixFloor | None:
        return next((item for item in self.prefix_floors if item.prefix == prefix), None)


def kit_floor(files: Sequence[ElfInfo], facts: RuntimeFacts | None = None) -> KitFloor:
    facts = facts or runtime_facts()
    provided = sorted({info.soname for info in files if info.soname})
    sonames = _unique(name for info in files for name in info.needed if name not in provided)
    prefix_floors = _prefix_floors(files, set(provided), facts)
    code = _DeviceCodeSort(files)
    floor = KitFloor(
        machines=_unique(info.machine for info in files),
        interpreters=_unique(info.interpreter for info in files if info.interpreter),
        prefix_floors=prefix_floors,
        versions_by_library=_versions_by_library(files),
        sonames=sonames,
        provided_in_kit=tuple(provided),
        rpath=_unique(path for info in files for path in info.rpath),
        runpath=_unique(path for info in files for path in info.runpath),
        search_paths=_search_paths(files, sonames),
        sass=_archs(code.sass),
        ptx=_archs(code.ptx),
        relocatable=_counted(code.relocatable),
        other_device_code=_counted(code.other),
        embedded=_counted(code.embedded),
        embedded_in=tuple(code.embedded_in),
        table=(),
    )
    return _with_table(floor, facts)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _search_paths(
    files: Sequence[ElfInfo], sonames: Sequence[str]
) -> tuple[tuple[str, tuple[SearchPath, ...]], ...]:
    """The loader ignores RPATH when RUNPATH is present, so each file offers one or the other."""
    return tuple(
        (soname, tuple(dict.fromkeys(
            SearchPath("RUNPATH" if info.runpath else "RPATH", path)
            for info in files if soname in info.needed
            for path in (info.runpath or info.rpath))))
        for soname in sonames
    )


class _DeviceCodeSort:
    """Every fatbin entry, sorted in one pass into what the floor counts (a CUDA library has
    thousands)."""

    def __init__(self, files: Sequence[ElfInfo]) -> None:
        self.sass: set[str] = set()
        self.ptx: set[str] = set()
        self.other: list[FatbinEntry] = []
        self.relocatable: list[FatbinEntry] = []
        self.embedded: list[FatbinEntry] = []
        self.embedded_in: dict[str, None] = {}
        placements: dict[tuple[str, int | None], str] = {}  # one per section, not per entry
        for info in files:
            for entry in info.device_code:
                placement = placements.get((entry.section, entry.segment))
                if placement is None:
                    placement = placements[entry.section, entry.segment] = entry.placement
                if placement == "relocatable":
                    self.relocatable.append(entry)
                    continue
                if entry.kind == "sass":
                    self.sass.add(entry.arch)
                elif entry.kind == "ptx":
                    self.ptx.add(entry.arch)
                else:
                    self.other.append(entry)
                if placement != "fatbin":
                    self.embedded.append(entry)
                    self.embedded_in[entry.where] = None


def _archs(found: set[str]) -> tuple[str, ...]:
    return tuple(sorted(found, key=_arch_order))


def _counted(entries: Iterable[FatbinEntry]) -> tuple[DeviceCode, ...]:
    counts: dict[tuple[str, str], int] = {}
    for entry in entries:
        key = (entry.kind, entry.arch)
        counts[key] = counts.get(key, 0) + 1
    return tuple(DeviceCode(kind, arch, count) for (kind, arch), count
                 in sorted(counts.items(), key=lambda item: device_code_order(*item[0])))


def device_code_order(kind: str, arch: str) -> tuple[int, str, int, str]:
    """SASS, then PTX, then LTO-IR, then other kinds; archs numerically within each."""
    return ({"sass": 0, "ptx": 1, "ltoir": 2}.get(kind, 3), kind, *_arch_order(arch))


def describe_device_code(items: Iterable[DeviceCode]) -> str:
    """`SASS sm_86 ×12, PTX compute_86 ×12`: the form inspect and BUILDINFO print."""
    return ", ".join(f"{kind_label(item.kind)} {item.arch} ×{item.count}" for item in items)


def kind_label(kind: str) -> str:
    return {"sass": "SASS", "ptx": "PTX", "ltoir": "LTO-IR"}.get(kind, kind)


def _arch_order(arch: str) -> tuple[int, str]:
    digits = re.search(r"\d+", arch)
    return (int(digits.group()) if digits else 0, arch)


def _versions_by_library(files: Sequence[ElfInfo]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    grouped: dict[str, set[str]] = {}
    for info in files:
        for need in info.version_needs:  # a weak need (VER_FLG_WEAK) is not a requirement
            grouped.setdefault(need.library, set()).update(
                name for name in need.versions if name not in need.weak)
    return tuple(
        (library, tuple(sorted(names, key=SymbolVersion.parse)))
        for library, names in sorted(grouped.items())
    )


def _prefix_floors(files: Sequence[ElfInfo], provided: set[str],
                   facts: RuntimeFacts) -> tuple[PrefixFloor, ...]:
    """The highest version of each prefix needed from libraries the kit does not carry; glibc's
    ABI markers count as the release that brought them."""
    best: dict[str, SymbolVersion] = {}
    sources: dict[str, set[tuple[str, str]]] = {}
    for info in files:
        for need in info.version_needs:
            if need.library in provided:
                continue
            for name in need.versions:
                if name in need.weak:
                    continue  # not required by the loader
                version = _as_version(name, need.library, facts)
                if not version.number:
                    continue
                current = best.get(version.prefix)
                if current is None or (version.number, _numbered(version)) > (
                        current.number, _numbered(current)):
                    if current is None or version.number > current.number:
                        sources[version.prefix] = set()
                    best[version.prefix] = version
                if best[version.prefix].number == version.number:
                    sources[version.prefix].add((need.library, info.path))
    return tuple(
        PrefixFloor(
            prefix=prefix,
            version=version.version,
            name=version.name,
            libraries=tuple(sorted({library for library, _ in sources[prefix]})),
            needed_by=tuple(sorted({path for _, path in sources[prefix]})),
        )
        for prefix, version in sorted(best.items())
    )


def _as_version(name: str, library: str, facts: RuntimeFacts) -> SymbolVersion:
    marker = facts.glibc_abi_marker(name)
    if marker is not None and library in facts.glibc_sonames:
        return SymbolVersion(prefix="GLIBC", number=marker.glibc, name=name)
    return SymbolVersion.parse(name)


def _numbered(version: SymbolVersion) -> bool:
    """At the same version, a numbered name (GLIBC_2.36) is shown rather than a marker."""
    return SymbolVersion.parse(version.name).number == version.number


def _with_table(floor: KitFloor, facts: RuntimeFacts) -> KitFloor:
    rows = [
        _platform_row(floor, facts),
        *_libstdcxx_rows(floor, facts),
        *_soname_rows(floor, facts),
        *_cuda_rows(floor),
    ]
    return floor._replace(table=tuple(rows))


def _platform_row(floor: KitFloor, facts: RuntimeFacts) -> Requirement:
    machine = "/".join(floor.machines) or "unknown"
    glibc = floor.floor("GLIBC")
    if glibc is None:
        return Requirement(f"{machine} Linux", "no versioned glibc symbol is referenced")
    marker = facts.glibc_abi_marker(glibc.name)
    why = (f"{glibc.name} ({marker.meaning}) needs glibc {glibc.version} or newer"
           if marker is not None else f"highest versioned symbol referenced is {glibc.name}")
    return Requirement(f"{machine} Linux, glibc ≥ {glibc.version}", why)


def _libstdcxx_rows(floor: KitFloor, facts: RuntimeFacts) -> list[Requirement]:
    rows = []
    for prefix in ("GLIBCXX", "CXXABI"):
        item = floor.floor(prefix)
        if item is None:
            continue
        why = facts.gcc_advice(prefix, versions.parse(item.version))
        rows.append(Requirement(f"{item.libraries[0]} providing {item.name}", why))
    gcc_s = floor.floor("GCC")
    if gcc_s is not None:
        rows.append(Requirement(f"{gcc_s.libraries[0]} providing {gcc_s.name}",
                                "GCC's runtime support library"))
    return rows


def _soname_rows(floor: KitFloor, facts: RuntimeFacts) -> list[Requirement]:
    covered = facts.glibc_sonames | {"libstdc++.so.6", "libgcc_s.so.1"}
    families: dict[str, list[str]] = {}
    rows = []
    for soname in floor.sonames:
        if soname in covered or CUDART.match(soname):
            continue
        family = facts.family_of(soname)
        if family:
            families.setdefault(family, []).append(soname)
            continue
        extra = [version.name for version in highest_needed(floor, soname)]
        label = f"{soname} ({', '.join(extra)})" if extra else soname
        rows.append(Requirement(label, "linked directly"))
    family_rows = [
        Requirement(f"{family} — {', '.join(members)}", "linked directly, by soname")
        for family, members in families.items()
    ]
    return family_rows + rows


def highest_needed(floor: KitFloor, soname: str) -> list[SymbolVersion]:
    """The highest version of each prefix needed from one library (for the table and verify);
    unnumbered ones as they are, Base not at all."""
    highest: dict[str, SymbolVersion] = {}
    for name in dict(floor.versions_by_library).get(soname, ()):
        if name == BASE_VERSION:
            continue
        version = SymbolVersion.parse(name)
        if version.prefix not in highest or version > highest[version.prefix]:
            highest[version.prefix] = version
    return sorted(highest.values())


def _cuda_rows(floor: KitFloor) -> list[Requirement]:
    rows = []
    majors = [m["major"] for m in map(CUDART.match, floor.sonames) if m]
    for major in majors:
        paths = dict(floor.search_paths)[f"libcudart.so.{major}"]
        where = (describe_search_paths(paths) if paths
                 else "no RUNPATH: found through LD_LIBRARY_PATH or the loader's cache")
        rows.append(Requirement(f"CUDA {major} runtime — libcudart.so.{major}", where))
    # A kit that carries its own CUDA runtime (portable) still needs a driver for its major.
    carried = [m["major"] for m in map(CUDART.match, floor.provided_in_kit) if m]
    if majors or carried or floor.sass or floor.ptx:
        known = majors or carried
        cuda = f"CUDA {known[0]}" if known else "this CUDA version"
        rows.append(Requirement(f"A driver providing libcuda.so.1, new enough for {cuda}",
                                "the CUDA runtime loads it when the program starts"))
    if floor.sass or floor.ptx:
        rows.append(_arch_row(floor))
    return rows


def describe_search_paths(paths: Sequence[SearchPath]) -> str:
    """`RUNPATH is /usr/local/cuda/lib64`, `RPATH is $ORIGIN`, or both kinds, each named."""
    by_tag: dict[str, list[str]] = {}
    for item in paths:
        by_tag.setdefault(item.tag, []).append(item.path)
    return "; ".join(f"{tag} is {':'.join(found)}" for tag, found in by_tag.items())


def _arch_row(floor: KitFloor) -> Requirement:
    """Which GPUs can run the kit, by CUDA's rules (docs/inspect.md). The PTX of `__nv_relfatbin`
    counts: the runtime JIT-links it where the SASS does not fit (docs/verify.md, "Verified on")."""
    linked_ptx = tuple(sorted({code.arch for code in floor.relocatable if code.kind == "ptx"}
                              - set(floor.ptx), key=_arch_order))
    archs = (*floor.sass, *floor.ptx, *linked_ptx)
    reaches = [reach for arch in archs if (reach := _reach(arch))]
    label = ", or ".join(_describe_reach(reach) for reach in _union(reaches))
    why = [_describe_arch(arch) for arch in (*floor.sass, *floor.ptx)]
    why += [f"{_describe_arch(arch)}, from the device-link inputs (__nv_relfatbin), which the "
            f"CUDA runtime JIT-links when the SASS does not fit; cuobjdump --list-ptx does not "
            f"show it" for arch in linked_ptx]
    if not floor.ptx and not linked_ptx:
        why.append("no PTX: the driver cannot JIT-compile it for any other GPU")
    if floor.embedded:
        segments = any(where.startswith("segment ") for where in floor.embedded_in)
        why.append(f"counted: {describe_device_code(floor.embedded)} in fatbin containers in "
                   f"{', '.join(floor.embedded_in)}, outside .nv_fatbin "
                   + ("(no section headers: they may include device-link inputs, which the CUDA "
                      "runtime never loads)" if segments else
                      "(loaded by the library itself; cuobjdump does not list them)"))
    if floor.other_device_code:
        why.append(f"not counted: {describe_device_code(floor.other_device_code)} (neither SASS "
                   f"nor PTX)")
    if floor.relocatable:
        why.append(f"device-link inputs: {describe_device_code(floor.relocatable)} in "
                   f"__nv_relfatbin")
    return Requirement(f"An NVIDIA GPU of compute capability {label or 'unknown'}", "; ".join(why))


ANY = 1 << 30  # no upper bound, as a major or a minor


class Reach(NamedTuple):
    """The compute capabilities code for one arch runs on, both ends included: (8, 6)–(8, ANY)
    is 8.6 and every later 8.x."""

    low: tuple[int, int]
    high: tuple[int, int]

    def covers(self, other: Reach) -> bool:
        return self.low <= other.low and other.high <= self.high


def _reach(arch: str) -> Reach | None:
    match = GPU_ARCH.match(arch)
    if match is None:
        return None
    major, minor = divmod(int(match["number"]), 10)  # sm_86 → 8.6, sm_120 → 12.0
    if match["suffix"] == "a":
        return Reach((major, minor), (major, minor))
    if match["suffix"] == "f" or match["prefix"] == "sm":
        return Reach((major, minor), (major, ANY))
    return Reach((major, minor), (ANY, ANY))


def _union(reaches: Iterable[Reach]) -> list[Reach]:
    unique = sorted(set(reaches))
    return [reach for reach in unique
            if not any(other != reach and other.covers(reach) for other in unique)]


def _describe_reach(reach: Reach) -> str:
    major, minor = reach.low
    if reach.high == reach.low:
        return f"{major}.{minor} only"
    if reach.high == (major, ANY):
        return f"{major}.{minor} or a later {major}.x"
    return f"{major}.{minor} or higher"


def _describe_arch(arch: str) -> str:
    match, reach = GPU_ARCH.match(arch), _reach(arch)
    if match is None or reach is None:
        return arch
    kind = {"a": " (arch-specific)", "f": " (family-specific)", "": ""}[match["suffix"]]
    where = _describe_reach(reach)
    if match["prefix"] == "sm":
        return f"SASS {arch}{kind} runs on {where}"
    if match["suffix"]:
        where = where.removesuffix(" only")
        return f"PTX {arch}{kind}: the driver can JIT-compile it only for {where}"
    return f"PTX {arch}: the driver JIT-compiles it for any GPU of {where}"


def render_table(table: Sequence[Requirement]) -> str:
    """The floor table as Markdown, the form the kit README and BUILDINFO use."""
    width = max([len("Requirement"), *(len(printable(row.requirement)) for row in table)])
    lines = [f"| {'Requirement'.ljust(width)} | Why |", f"|{'-' * (width + 2)}|-----|"]
    lines += [f"| {printable(row.requirement).ljust(width)} | {printable(row.why)} |"
              for row in table]
    return "\n".join(lines)
