"""The runtime floor of a set of ELF files: what a machine must provide for all of them to run.

Pure functions over `ElfInfo` values; the table has the shape of the one users already know from
the hand-made kits ("Requirement / Why").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ninfer_kits.elf import ElfInfo
from ninfer_kits.facts import RuntimeFacts, parse_version, runtime_facts

SYMBOL_VERSION = re.compile(r"^(?P<prefix>.+?)_(?P<version>\d+(?:\.\d+)*)$")
CUDART = re.compile(r"^libcudart\.so\.(?P<major>\d+)$")


@dataclass(frozen=True, order=True)
class SymbolVersion:
    """A needed symbol version such as GLIBC_2.38, split so that 2.38 > 2.9 compares right."""

    prefix: str
    number: tuple[int, ...]
    name: str

    @classmethod
    def parse(cls, name: str) -> SymbolVersion:
        match = SYMBOL_VERSION.match(name)
        if match is None:  # GLIBC_PRIVATE and the like carry no number
            return cls(prefix=name, number=(), name=name)
        return cls(match["prefix"], parse_version(match["version"]), name)

    @property
    def version(self) -> str:
        return ".".join(map(str, self.number))


@dataclass(frozen=True)
class PrefixFloor:
    """The highest version of one prefix that any file needs, and from which library."""

    prefix: str
    version: str
    name: str
    libraries: tuple[str, ...]
    needed_by: tuple[str, ...]


@dataclass(frozen=True)
class Requirement:
    requirement: str
    why: str


@dataclass(frozen=True)
class KitFloor:
    machines: tuple[str, ...]
    interpreters: tuple[str, ...]
    prefix_floors: tuple[PrefixFloor, ...]
    versions_by_library: tuple[tuple[str, tuple[str, ...]], ...]
    sonames: tuple[str, ...]
    provided_in_kit: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    # soname → the RUNPATH (or, without one, RPATH) entries of the files that need it
    search_paths: tuple[tuple[str, tuple[str, ...]], ...]
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    table: tuple[Requirement, ...]

    def floor(self, prefix: str) -> PrefixFloor | None:
        return next((item for item in self.prefix_floors if item.prefix == prefix), None)


def kit_floor(files: Sequence[ElfInfo], facts: RuntimeFacts | None = None) -> KitFloor:
    facts = facts or runtime_facts()
    provided = sorted({info.soname for info in files if info.soname})
    sonames = _unique(name for info in files for name in info.needed if name not in provided)
    prefix_floors = _prefix_floors(files)
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
        sass=_archs(files, "sass"),
        ptx=_archs(files, "ptx"),
        table=(),
    )
    return _with_table(floor, facts)


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _search_paths(
    files: Sequence[ElfInfo], sonames: Sequence[str]
) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The loader ignores RPATH when RUNPATH is present, so each file offers one or the other."""
    return tuple(
        (soname, _unique(path for info in files if soname in info.needed
                         for path in (info.runpath or info.rpath)))
        for soname in sonames
    )


def _archs(files: Sequence[ElfInfo], kind: str) -> tuple[str, ...]:
    found = {entry.arch for info in files for entry in info.device_code if entry.kind == kind}
    return tuple(sorted(found, key=_arch_order))


def _arch_order(arch: str) -> tuple[int, str]:
    digits = re.search(r"\d+", arch)
    return (int(digits.group()) if digits else 0, arch)


def _versions_by_library(files: Sequence[ElfInfo]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    grouped: dict[str, set[str]] = {}
    for info in files:
        for need in info.version_needs:
            grouped.setdefault(need.library, set()).update(need.versions)
    return tuple(
        (library, tuple(sorted(names, key=SymbolVersion.parse)))
        for library, names in sorted(grouped.items())
    )


def _prefix_floors(files: Sequence[ElfInfo]) -> tuple[PrefixFloor, ...]:
    best: dict[str, SymbolVersion] = {}
    sources: dict[str, set[tuple[str, str]]] = {}
    for info in files:
        for need in info.version_needs:
            for name in need.versions:
                version = SymbolVersion.parse(name)
                if not version.number:
                    continue
                current = best.get(version.prefix)
                if current is None or version.number > current.number:
                    best[version.prefix] = version
                    sources[version.prefix] = set()
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


def _with_table(floor: KitFloor, facts: RuntimeFacts) -> KitFloor:
    rows = [
        _platform_row(floor),
        *_libstdcxx_rows(floor, facts),
        *_soname_rows(floor, facts),
        *_cuda_rows(floor),
    ]
    return KitFloor(**{**floor.__dict__, "table": tuple(rows)})


def _platform_row(floor: KitFloor) -> Requirement:
    machine = "/".join(floor.machines) or "unknown"
    glibc = floor.floor("GLIBC")
    if glibc is None:
        return Requirement(f"{machine} Linux", "no versioned glibc symbol is referenced")
    return Requirement(
        f"{machine} Linux, glibc ≥ {glibc.version}",
        f"highest versioned symbol referenced is {glibc.name}",
    )


def _libstdcxx_rows(floor: KitFloor, facts: RuntimeFacts) -> list[Requirement]:
    rows = []
    for prefix in ("GLIBCXX", "CXXABI"):
        item = floor.floor(prefix)
        if item is None:
            continue
        why = facts.gcc_advice(prefix, parse_version(item.version))
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
        extra = _own_versions(floor, soname)
        label = f"{soname} ({', '.join(extra)})" if extra else soname
        rows.append(Requirement(label, "linked directly"))
    family_rows = [
        Requirement(f"{family} — {', '.join(members)}", "linked directly, by soname")
        for family, members in families.items()
    ]
    return family_rows + rows


def _own_versions(floor: KitFloor, soname: str) -> list[str]:
    """The highest version of each prefix needed from one library, e.g. CURL_OPENSSL_4."""
    highest: dict[str, SymbolVersion] = {}
    for name in dict(floor.versions_by_library).get(soname, ()):
        version = SymbolVersion.parse(name)
        if version.prefix not in highest or version > highest[version.prefix]:
            highest[version.prefix] = version
    return [version.name for version in sorted(highest.values())]


def _cuda_rows(floor: KitFloor) -> list[Requirement]:
    rows = []
    majors = [m["major"] for m in map(CUDART.match, floor.sonames) if m]
    for major in majors:
        paths = dict(floor.search_paths)[f"libcudart.so.{major}"]
        where = (f"RUNPATH is {':'.join(paths)}" if paths
                 else "no RUNPATH: found through LD_LIBRARY_PATH or the loader's cache")
        rows.append(Requirement(f"CUDA {major} runtime — libcudart.so.{major}", where))
    if majors or floor.sass or floor.ptx:
        cuda = f"CUDA {majors[0]}" if majors else "this CUDA version"
        rows.append(Requirement(f"A driver providing libcuda.so.1, new enough for {cuda}",
                                "the CUDA runtime loads it when the program starts"))
    if floor.sass or floor.ptx:
        rows.append(_arch_row(floor))
    return rows


def _arch_row(floor: KitFloor) -> Requirement:
    sass = ", ".join(floor.sass) or "none"
    if floor.ptx:
        why = f"SASS for {sass}; PTX for {', '.join(floor.ptx)} (the driver JITs it for newer GPUs)"
    else:
        why = f"SASS for {sass} only, no PTX: no other GPU can run it"
    label = " or ".join(floor.sass) if floor.sass else "a GPU the PTX can be compiled for"
    return Requirement(f"The matching GPU architecture — {label}", why)


def render_table(table: Sequence[Requirement]) -> str:
    """The floor table as Markdown, the form the kit README and BUILDINFO use."""
    width = max([len("Requirement"), *(len(row.requirement) for row in table)])
    lines = [f"| {'Requirement'.ljust(width)} | Why |", f"|{'-' * (width + 2)}|-----|"]
    lines += [f"| {row.requirement.ljust(width)} | {row.why} |" for row in table]
    return "\n".join(lines)
