"""What to do about a library the target lacks, in the target's own terms: a package of its
distribution (data/distros.toml, data/soname_packages.toml), or that it has none and what to do
instead. A distribution without facts gets no guessed package name: the fix says how to find one."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, read_data_file
from ninfer_kits.inspector.floor import CUDART
from ninfer_kits.platforms.distros import (
    FFMPEG_SONAME,
    LIBCURL_SONAME,
    PACKAGE,
    Distro,
    shipped_distros,
)

DATA_FILE = data_file("soname_packages.toml")


@dataclass(frozen=True)
class FamilyCommands:
    install: str  # "apt-get install"
    search: str  # "apt-file search {soname}"


@dataclass(frozen=True)
class PackageRule:
    soname: re.Pattern[str]
    what: str
    names: tuple[tuple[str, str], ...]  # (distros.toml id, package name)
    checked: bool


@dataclass(frozen=True)
class PackageFacts:
    families: tuple[tuple[str, FamilyCommands], ...]
    rules: tuple[PackageRule, ...]


@dataclass(frozen=True)
class System:
    name: str  # "Ubuntu 24.04" (distros.toml) or os-release's PRETTY_NAME
    family: str  # loader family: debian, redhat, arch, generic
    distro: Distro | None  # None: no facts for it


@dataclass(frozen=True)
class Advice:
    kit: str = ""  # the kit's name (BUILDINFO `kit`), "" when not known
    portable: bool = False  # the kit has a portable flavour


@functools.cache
def package_facts() -> PackageFacts:
    return _validate(read_data_file(DATA_FILE, "the soname package facts file"),
                     {distro.id for distro in shipped_distros().distros})


def _validate(root: Table, distro_ids: set[str]) -> PackageFacts:
    root.check_keys(("schema",), ("families", "package"))
    schema = root.integer("schema")
    if schema != 2:
        raise root.error("schema", f"unsupported schema {schema!r}")
    families = []
    section = root.table("families", optional=True)
    for family in section.data:
        table = section.table(family)
        table.check_keys(("install", "search"))
        install, search = table.text("install"), table.text("search")
        if "{soname}" not in search:
            raise table.error("search", "needs {soname}, where the soname goes")
        families.append((family, FamilyCommands(install, search)))
    rules = []
    for entry in root.tables("package"):
        entry.check_keys(("soname", "what", "checked", "names"))
        pattern, what, checked = entry.regex("soname"), entry.text("what"), entry.boolean("checked")
        names = entry.table("names")
        if not names.data:
            raise entry.error("names", "names must be a table of distribution id = package")
        for distro_id, package in entry.text_pairs("names"):
            if distro_id not in distro_ids:
                raise names.error(distro_id, f"names {distro_id!r}, not a distribution of "
                                             f"distros.toml ({', '.join(sorted(distro_ids))})")
            if not PACKAGE.fullmatch(package):
                raise names.error(distro_id, f"{distro_id} = {package!r} is not a package name")
        rules.append(PackageRule(pattern, what, entry.text_pairs("names"), checked))
    return PackageFacts(tuple(families), tuple(rules))


def system_of(os_id: str, id_like: tuple[str, ...], version_id: str, pretty_name: str,
              family: str) -> System:
    """The distros.toml row for an os-release ("9.4" is RHEL 9; rolling ones by ID alone)."""
    for candidate in (os_id, *id_like):
        for distro in shipped_distros().distros:
            if distro.os_id != candidate or not candidate:
                continue
            if distro.rolling or version_id == distro.version_id or (
                    version_id.startswith(distro.version_id + ".")
                    and "." not in distro.version_id):
                return System(distro.name, family, distro)
    return System(pretty_name or "an unknown distribution", family, None)


def _commands(system: System) -> FamilyCommands | None:
    return dict(package_facts().families).get(system.family)


def _search(system: System, soname: str) -> str:
    commands = _commands(system)
    return commands.search.format(soname=soname) if commands else ""


def _install(system: System, package: str) -> str:
    commands = _commands(system)
    return f"{commands.install} {package}" if commands else f"the package {package}"


def _instead(system: System, soname: str, advice: Advice) -> str:
    kit = advice.kit or "KIT"
    if advice.portable:
        return (f"use the kit's portable flavour, which carries {soname} "
                f"(`ninfer-kits fetch {kit} --portable`), or a kit built for {system.name}")
    return f"use a kit built for {system.name}, or one with a portable flavour (it carries " \
           f"{soname})"


def fix_for(soname: str, system: System | None = None, advice: Advice | None = None) -> str:
    system = system or System("this system", "generic", None)
    advice = advice or Advice()
    distro = system.distro
    if distro is None:
        search = _search(system, soname)
        how = f" ({search})" if search else ""
        return (f"this tool has no package facts for {system.name}: install what provides "
                f"{soname} there{how}, or {_instead(system, soname, advice)}")
    known = _from_distro(soname, distro, system, advice)
    if known:
        return known
    for rule in package_facts().rules:
        if rule.soname.fullmatch(soname):
            package = dict(rule.names).get(distro.id)
            if package:
                return f"install {rule.what}: {_install(system, package)}"
            break
    search = _search(system, soname)
    return (f"install the package of {system.name} that provides {soname}"
            + (f" ({search})" if search else ""))


def _from_distro(soname: str, distro: Distro, system: System, advice: Advice) -> str:
    name = system.name
    if FFMPEG_SONAME.fullmatch(soname):
        row = distro.ffmpeg
        if soname in row.sonames:
            return f"install FFmpeg's {soname.split('.so')[0]}: " \
                   f"{_install(system, _ffmpeg_package(row.packages, row.sonames, soname))}"
        library = soname.split(".so")[0]
        have = [s for s in (*row.sonames, *row.extra_sonames) if s.split(".so")[0] == library]
        if row.version:
            what = f"it has FFmpeg {row.version}: {have[0]}" if have else \
                f"it has FFmpeg {row.version}"
        else:
            what = "it packages no FFmpeg"
        extra = ""
        if row.extra_from:
            extra = (f"; {row.extra_from} has it" if soname in row.extra_sonames
                     else f"; {row.extra_from} has FFmpeg {row.extra_version}")
        return (f"no package of {name} provides {soname} ({what}{extra}): "
                f"{_instead(system, soname, advice)}")
    if LIBCURL_SONAME.fullmatch(soname):
        row_curl = distro.libcurl
        if soname == row_curl.soname:
            return f"install libcurl: {_install(system, row_curl.package)}"
        return (f"no package of {name} provides {soname} (it has {row_curl.soname}): "
                f"{_instead(system, soname, advice)}")
    cudart = CUDART.match(soname)
    if cudart:
        major, cuda = int(cudart[1]), distro.cuda
        pip = "or `pip install nvidia-cuda-runtime` and add its lib folder to LD_LIBRARY_PATH"
        if soname in cuda.cudart_sonames:
            return (f"install the CUDA {major} runtime: "
                    f"{_install(system, cuda.cudart_package.split()[0])}")
        if major in cuda.nvidia_majors:
            return (f"install the CUDA {major} runtime from NVIDIA's CUDA repository for {name} "
                    f"({cuda.nvidia_repo}): {_install(system, f'cuda-cudart-{major}-0')} "
                    f"(or a later cuda-cudart-{major}-N), {pip}")
        return (f"neither {name} nor NVIDIA's CUDA repository packages {soname} here: {pip}, "
                f"or {_instead(system, soname, advice)}")
    if soname == "libstdc++.so.6":
        return f"install GCC's C++ runtime: {_install(system, distro.libstdcxx.package)}"
    return ""


def _ffmpeg_package(packages: str, sonames: tuple[str, ...], soname: str) -> str:
    """distros.toml lists one package per soname in order, or one for all (Arch's ffmpeg)."""
    words = packages.split("(")[0].split()
    if len(words) == len(sonames):
        return words[sonames.index(soname)]
    return words[0] if words else packages


def too_old(soname: str, system: System | None, advice: Advice | None) -> str:
    system = system or System("this system", "generic", None)
    advice = advice or Advice()
    return (f"{system.name}'s {soname} is older than the kit's: run it on a newer release, or "
            f"{_instead(system, soname, advice)}")


def another_build(soname: str, what: str, system: System | None, advice: Advice | None) -> str:
    system = system or System("this system", "generic", None)
    advice = advice or Advice()
    return (f"the kit was linked against a build of {soname} that {what}, and {system.name}'s "
            f"is another: install that build, or {_instead(system, soname, advice)}")


def kit_lacks(path: str, what: str) -> str:
    return (f"the kit's own {path} lacks {what}, which its programs were linked against: the "
            f"kit is inconsistent; rebuild it (or put back the library it was built with)")
