"""A target's loader as it stands in a root folder ("/" for this host): ld.so.cache, its family's
built-in folders (loader_facts.toml), os-release, and the CPU's hwcaps subfolders and $PLATFORM."""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, read_data_file
from ninfer_kits.loader.ldcache import CacheEntry, CacheError, parse
from ninfer_kits.loader.resolve import LoaderSetup, glibc_release
from ninfer_kits.loader.rootfs import RootFS

FOLDER = re.compile(r"^/[^\0]*$")


@dataclass(frozen=True)
class LoaderFamily:
    name: str
    ids: tuple[str, ...]
    system_dirs: tuple[str, ...]
    lib: str


@dataclass(frozen=True)
class OsRelease:
    id: str
    id_like: tuple[str, ...]
    pretty_name: str
    version_id: str


@functools.cache
def loader_families() -> tuple[LoaderFamily, ...]:
    return _validate(read_data_file(data_file("loader_facts.toml"), "the loader facts file"))


def _validate(root: Table) -> tuple[LoaderFamily, ...]:
    root.check_keys(("schema", "families"))
    schema = root.integer("schema")
    if schema != 1:
        raise root.error("schema", f"unsupported schema {schema!r}")
    section = root.table("families")
    families = []
    for family in section.data:
        table = section.table(family)
        table.check_keys(("ids", "system_dirs", "lib"))
        dirs = table.texts("system_dirs")
        if not all(FOLDER.match(d) for d in dirs):
            raise table.error("system_dirs", "system_dirs must be absolute folders")
        lib = table.text("lib")
        if lib.startswith("/"):
            raise table.error("lib", "lib must be a relative folder")
        families.append(LoaderFamily(family, table.strings("ids"), dirs, lib))
    if not any(family.name == "generic" for family in families):
        raise section.error("generic", "a [families.generic] fallback is required")
    return tuple(families)


def os_release(rootfs: RootFS) -> OsRelease:
    """The target's os-release; empty fields when it has none."""
    data = rootfs.read_bytes("/etc/os-release") or rootfs.read_bytes("/usr/lib/os-release") or b""
    fields: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip().isidentifier():
            try:
                fields[key.strip()] = "".join(shlex.split(value))
            except ValueError:
                fields[key.strip()] = value.strip().strip('"')
    return OsRelease(id=fields.get("ID", ""), id_like=tuple(fields.get("ID_LIKE", "").split()),
                     pretty_name=fields.get("PRETTY_NAME", ""),
                     version_id=fields.get("VERSION_ID", ""))


def family_of(release: OsRelease) -> LoaderFamily:
    families = loader_families()
    for candidate in (release.id, *release.id_like):
        for family in families:
            if candidate and candidate in family.ids:
                return family
    return next(family for family in families if family.name == "generic")


def loader_setup(rootfs: RootFS, ld_library_path: tuple[str, ...] = (),
                 driver_supplied: frozenset[str] = frozenset()) -> LoaderSetup:
    """What the loader searches besides RPATH/RUNPATH (an unreadable cache: none, as for it)."""
    family = family_of(os_release(rootfs))
    data = rootfs.read_bytes("/etc/ld.so.cache")
    try:
        cache = parse(data) if data else ()
    except CacheError:
        cache = ()
    release = _target_glibc(rootfs, cache, family.system_dirs)
    return LoaderSetup(rootfs=rootfs, cache=cache, system_dirs=family.system_dirs,
                       ld_library_path=ld_library_path, lib=family.lib,
                       platform=glibc_platform(), driver_supplied=driver_supplied,
                       subdirs=hwcaps_subdirs(_cpuinfo(), release))


def _target_glibc(rootfs: RootFS, cache: tuple[CacheEntry, ...],
                  system_dirs: tuple[str, ...]) -> tuple[int, ...]:
    """(2, 36), from the libc.so.6 the loader would map; () when none is found."""
    paths = [entry.path for entry in cache if entry.soname == "libc.so.6"
             and entry.fits(64, "x86-64")] + [f"{folder}/libc.so.6" for folder in system_dirs]
    for path in paths:
        release = glibc_release(rootfs, path)
        if release:
            return tuple(int(part) for part in release.split("."))
    return ()


# glibc-hwcaps/x86-64-vN (glibc 2.33 on, sysdeps/x86/get-isa-level.h): the cpuinfo flags each
# level adds to the one below (LZCNT is "abm" there, SSE3 "pni", OSXSAVE "xsave").
ISA_LEVELS = (
    ("x86-64-v2", frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"})),
    ("x86-64-v3", frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe",
                             "xsave"})),
    ("x86-64-v4", frozenset({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})),
)
AVX512_1_FLAGS = frozenset({"avx512cd", "avx512bw", "avx512dq", "avx512vl"})


def hwcaps_subdirs(cpuinfo: str, glibc: tuple[int, ...]) -> tuple[str, ...]:
    """The subfolders tried before each search folder: hwcaps levels, highest first, then (up
    to glibc 2.36) the legacy combinations, as `LD_DEBUG=libs` lists them."""
    fields = _first_processor(cpuinfo)
    flags = set(fields.get("flags", "").split())
    if "lm" not in flags:
        return ()
    subdirs: list[str] = []
    if not glibc or glibc >= (2, 33):
        have: set[str] = set()
        for level, needs in ISA_LEVELS:
            have |= needs
            if have <= flags:
                subdirs.insert(0, f"glibc-hwcaps/{level}")
    if glibc and glibc <= (2, 36):
        intel = fields.get("vendor_id") == "GenuineIntel"
        platform = platform_of(cpuinfo)
        # A plain "x86_64" platform counts too: tls/x86_64/x86_64, and tls/x86_64 twice.
        parts = ["tls", platform,
                 *(["avx512_1"] if intel and flags >= AVX512_1_FLAGS and "avx512er" not in flags
                   else []), "x86_64"]
        for mask in range((1 << len(parts)) - 1, 0, -1):
            subdirs.append("/".join(part for bit, part in enumerate(parts)
                                    if mask & (1 << (len(parts) - 1 - bit))))
    return tuple(subdirs)


@functools.cache
def _cpuinfo(path: str = "/proc/cpuinfo") -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


# `$PLATFORM` on an Intel CPU (sysdeps/x86/cpu-features.c): "xeon_phi", else "haswell" with
# these flags usable, else the kernel's "x86_64".
HASWELL_FLAGS = frozenset({"avx2", "fma", "bmi1", "bmi2", "abm", "movbe", "popcnt"})
XEON_PHI_FLAGS = frozenset({"avx512cd", "avx512er", "avx512pf"})


def glibc_platform() -> str:
    """`$PLATFORM` on this machine's CPU: a root or image runs on some CPU, this is at hand."""
    return platform_of(_cpuinfo())


def _first_processor(cpuinfo: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor is enough: they are alike
            continue
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def platform_of(cpuinfo: str) -> str:
    fields = _first_processor(cpuinfo)
    flags = set(fields.get("flags", "").split())
    if fields.get("vendor_id") != "GenuineIntel" or "lm" not in flags:
        return "x86_64"
    if flags >= XEON_PHI_FLAGS:
        return "xeon_phi"
    return "haswell" if flags >= HASWELL_FLAGS else "x86_64"


KIT_MOUNT = "/opt/ninfer-kit"  # where a kit appears inside a root or an image
