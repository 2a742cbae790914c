"""Resolve a program's libraries and symbol versions as glibc's dynamic loader does (x86-64).

The search order, the version rules and the test that holds this to the real loader:
docs/verify.md. Sources: glibc's elf/dl-load.c (_dl_map_object), dl-version.c (match_symbol)
and dl-lookup.c (check_match: a versioned reference to a file without DT_VERSYM asserts, so
it counts as the version missing); the portable repair's LoaderSetup.build_dirs is no loader's."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.elf import ElfInfo, read_elf
from ninfer_kits.inspector.elfsymbols import DynamicSymbols, Reference, read_dynamic_symbols
from ninfer_kits.loader.ldcache import CacheEntry
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.loader.symbols import UnboundSymbol, binds

GLIBC_BANNER = re.compile(rb"GNU C Library [^\n]{0,200}?release version (\d+\.\d+(?:\.\d+)?)")
DEFAULT_LOADERS = {"x86-64": "/lib64/ld-linux-x86-64.so.2",
                   "aarch64": "/lib/ld-linux-aarch64.so.1"}


@dataclass(frozen=True)
class Found:
    name: str  # as DT_NEEDED names it
    path: str  # where the loader maps it, in the target
    via: str  # "RUNPATH of kit/bin/ninfer", "ld.so.cache", "system folder", ...
    needed_by: str


@dataclass(frozen=True)
class NotFound:
    name: str
    needed_by: str
    searched: tuple[str, ...]  # the folders looked in, in order
    # files of that name skipped, of another ELF class or machine ("kit/lib/libx.so.1 (ELFCLASS32)")
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class VersionGap:
    library: str  # the name it was needed by (libstdc++.so.6)
    path: str  # the file that does not define the version
    version: str
    needed_by: str
    defined: tuple[str, ...]  # what that file defines


@dataclass(frozen=True)
class Unversioned:
    """A library without version definitions that satisfied versioned needs (the loader warns)."""

    library: str
    path: str
    versions: tuple[str, ...]
    needed_by: str


@dataclass(frozen=True)
class StaleSearchPath:
    """A RUNPATH/RPATH folder absent on the target, for a library found elsewhere."""

    kind: str  # RUNPATH or RPATH
    folder: str
    name: str
    found: str
    needed_by: str


@dataclass(frozen=True)
class Resolution:
    program: str
    interpreter_missing: str | None
    found: tuple[Found, ...]
    missing: tuple[NotFound, ...]
    gaps: tuple[VersionGap, ...]
    stale: tuple[StaleSearchPath, ...]
    libc_versions: tuple[str, ...] = ()  # what the libc.so.6 it maps defines
    libc_path: str = ""  # the libc.so.6 it maps
    libc_release: str = ""  # its glibc release, from its banner ("2.31"); "" not found
    unversioned: tuple[Unversioned, ...] = ()
    # libcuda.so.1 and such, absent from a root or image: the NVIDIA runtime brings them.
    from_driver: tuple[NotFound, ...] = ()
    unbound: tuple[UnboundSymbol, ...] = ()

    @property
    def loads(self) -> bool:
        return (self.interpreter_missing is None and not self.missing and not self.gaps
                and not self.unbound)


@dataclass(frozen=True)
class LoaderSetup:
    """What the target's loader knows besides the program."""

    rootfs: RootFS
    cache: tuple[CacheEntry, ...]
    system_dirs: tuple[str, ...]
    ld_library_path: tuple[str, ...] = ()
    # After RUNPATH, before the cache: the portable repair's, for a sysroot's libraries.
    build_dirs: tuple[str, ...] = ()
    lib: str = "lib64"  # what $LIB expands to (Debian: lib/x86_64-linux-gnu)
    platform: str = "x86_64"  # what $PLATFORM expands to (glibc's, on this CPU: target.py)
    driver_supplied: frozenset[str] = frozenset()
    # hwcaps and legacy subfolders tried before each folder, in order (target.py says which).
    subdirs: tuple[str, ...] = ()


@dataclass
class _Object:
    path: str  # as opened, in the target
    info: ElfInfo
    loader: _Object | None
    origin: str
    names: set[str] = field(default_factory=set)


class Resolver:
    """`check_symbols`: which mapped files have their undefined symbols looked up (verify:
    the kit's); None: only names and versions."""

    def __init__(self, setup: LoaderSetup,
                 check_symbols: Callable[[str], bool] | None = None) -> None:
        self.setup = setup
        self.check_symbols = check_symbols
        self._infos: dict[str, ElfInfo | None] = {}
        self._symbols: dict[str, DynamicSymbols | None] = {}
        # Where a reference was found defined: many files need the same names.
        self._definers: dict[Reference, str] = {}
        self._skipped: list[str] = []  # of the search under way

    def resolve(self, program: str, shown: str | None = None) -> Resolution:
        info = self.info(program)
        if info is None:
            raise NotAnElf(f"{program}: not a readable ELF file in the target")
        canonical = self.setup.rootfs.canonical(program) or program
        return self.resolve_info(program, info, posixpath.dirname(canonical), shown)

    def resolve_info(self, program: str, info: ElfInfo, origin: str,
                     shown: str | None = None) -> Resolution:
        """As `resolve`, for a program that need not exist in the target (fetch --auto judges
        a kit before it is downloaded)."""
        main = _Object(program, info, None, origin,
                       {program, *([info.soname] if info.soname else [])})
        label = shown or program
        interpreter = info.interpreter
        missing_interpreter = (interpreter if interpreter and not self.setup.rootfs.is_file(
            interpreter) else None)
        # A shared library has no PT_INTERP: whichever loader maps it is already there too.
        interpreter = interpreter or DEFAULT_LOADERS.get(info.machine)
        objects = [main]
        if interpreter and missing_interpreter is None:
            # The loader is mapped before any library: a DT_NEEDED on it is already satisfied.
            loader_info = self.info(interpreter)
            if loader_info is not None:
                names = {posixpath.basename(interpreter), loader_info.soname or ""} - {""}
                objects.append(_Object(interpreter, loader_info, main, "", names))
        found: list[Found] = []
        missing: list[NotFound] = []
        from_driver: list[NotFound] = []
        stale: list[StaleSearchPath] = []
        for obj in _walk(objects):
            for name in obj.info.needed:
                if any(name in other.names for other in objects):
                    continue
                hit = self._search(name, obj, main, label, stale)
                if isinstance(hit, NotFound):
                    (from_driver if name in self.setup.driver_supplied else missing).append(hit)
                    continue
                path, via, target = hit
                found.append(Found(name, path, via, self._shown(obj, main, label)))
                objects.append(_Object(path, target, obj, posixpath.dirname(path),
                                       {name, *([target.soname] if target.soname else [])}))
        gaps: list[VersionGap] = []
        unversioned: list[Unversioned] = []
        self._check_versions(objects, main, label, gaps, unversioned)
        unbound = self._check_symbols(objects, main, label, gaps, (*missing, *from_driver))
        libc = next((o for o in objects if "libc.so.6" in o.names), None)
        return Resolution(label, missing_interpreter, tuple(found), tuple(missing), tuple(gaps),
                          tuple(dict.fromkeys(stale)),
                          libc.info.version_defs if libc else (), libc.path if libc else "",
                          self.glibc_release(libc.path) if libc else "", tuple(unversioned),
                          tuple(from_driver), tuple(unbound))

    def glibc_release(self, libc: str) -> str:
        return glibc_release(self.setup.rootfs, libc)

    def info(self, path: str) -> ElfInfo | None:
        if path not in self._infos:
            real = self.setup.rootfs.real(path)
            try:
                self._infos[path] = read_elf(real, path) if real is not None else None
            except (NotAnElf, OSError):
                self._infos[path] = None
        return self._infos[path]

    def _search(self, name: str, requester: _Object, main: _Object, label: str,
                stale: list[StaleSearchPath]) -> tuple[str, str, ElfInfo] | NotFound:
        self._skipped = []
        if "/" in name:
            target = self._candidate(name, main.info)
            if target is not None:
                return name, "its path", target
            return NotFound(name, self._shown(requester, main, label), (name,),
                            tuple(self._skipped))
        searched: list[str] = []
        missing_dirs: list[tuple[str, str]] = []
        for via, folder, kind in self._folders(requester, main, label):
            if kind and not self.setup.rootfs.is_dir(folder):
                missing_dirs.append((kind, folder))
                continue
            searched.append(folder)
            for place in (*(posixpath.join(folder, sub) for sub in self.setup.subdirs), folder):
                target = self._candidate(posixpath.join(place, name), main.info)
                if target is not None:
                    return self._hit(posixpath.join(place, name), via, target, name, requester,
                                     main, label, missing_dirs, stale)
        for entry in self.setup.cache:
            if entry.soname == name and entry.fits(main.info.elf_class, main.info.machine):
                target = self._candidate(entry.path, main.info)
                if target is not None:
                    return self._hit(entry.path, "ld.so.cache", target, name, requester, main,
                                     label, missing_dirs, stale)
        searched.append("ld.so.cache")
        for folder in self.setup.system_dirs:
            searched.append(folder)
            for place in (*(posixpath.join(folder, sub) for sub in self.setup.subdirs), folder):
                target = self._candidate(posixpath.join(place, name), main.info)
                if target is not None:
                    return self._hit(posixpath.join(place, name), "system folder", target,
                                     name, requester, main, label, missing_dirs, stale)
        searched += [folder for _, folder in missing_dirs]
        shown = self._shown(requester, main, label)
        stale += [StaleSearchPath(kind, folder, name, "", shown) for kind, folder in missing_dirs]
        return NotFound(name, shown, tuple(searched), tuple(dict.fromkeys(self._skipped)))

    def _hit(self, path: str, via: str, target: ElfInfo, name: str, requester: _Object,
             main: _Object, label: str, missing_dirs: list[tuple[str, str]],
             stale: list[StaleSearchPath]) -> tuple[str, str, ElfInfo]:
        shown = self._shown(requester, main, label)
        stale += [StaleSearchPath(kind, folder, name, path, shown) for kind, folder in missing_dirs]
        return path, via, target

    def _folders(self, requester: _Object, main: _Object,
                 label: str) -> Iterator[tuple[str, str, str]]:
        """(how, folder, RUNPATH/RPATH or "") in the loader's order, before the cache."""
        if not requester.info.runpath:
            chain: _Object | None = requester
            seen_main = False
            while chain is not None:
                for folder in self._expand(chain.info.rpath, chain):
                    yield f"RPATH of {self._shown(chain, main, label)}", folder, "RPATH"
                seen_main |= chain is main
                chain = chain.loader
            if not seen_main:
                for folder in self._expand(main.info.rpath, main):
                    yield f"RPATH of {label}", folder, "RPATH"
        for folder in self.setup.ld_library_path:
            yield "LD_LIBRARY_PATH", folder, ""
        for folder in self._expand(requester.info.runpath, requester):
            yield f"RUNPATH of {self._shown(requester, main, label)}", folder, "RUNPATH"
        for folder in self.setup.build_dirs:
            yield "the build environment's library_path", folder, ""

    def _expand(self, entries: tuple[str, ...], obj: _Object) -> Iterator[str]:
        for entry in entries:
            if not entry:
                continue  # the current folder: not knowable here, and kits may not use it
            expanded = (entry.replace("${ORIGIN}", obj.origin).replace("$ORIGIN", obj.origin)
                        .replace("${LIB}", self.setup.lib).replace("$LIB", self.setup.lib)
                        .replace("${PLATFORM}", self.setup.platform)
                        .replace("$PLATFORM", self.setup.platform))
            if expanded.startswith("/"):
                yield posixpath.normpath(expanded)

    def _candidate(self, path: str, program: ElfInfo) -> ElfInfo | None:
        """The library at `path` if the loader would take it (the program's class and machine)."""
        if not self.setup.rootfs.is_file(path):
            return None
        info = self.info(path)
        if info is None:
            return None
        if info.elf_class != program.elf_class or info.machine != program.machine:
            self._skipped.append(f"{path} ({_kind(info, program)})")
            return None
        return info

    def _check_versions(self, objects: list[_Object], main: _Object, label: str,
                        gaps: list[VersionGap], unversioned: list[Unversioned]) -> None:
        for obj in objects:
            for need in obj.info.version_needs:
                provider = next((o for o in objects if need.library in o.names), None)
                if provider is None:
                    continue  # the library itself is missing: reported once, as missing
                required = [v for v in need.versions if v not in need.weak]
                defined = provider.info.version_defs
                if not defined and provider.info.versym and required:
                    unversioned.append(Unversioned(need.library, provider.path,
                                                   tuple(required),
                                                   self._shown(obj, main, label)))
                    continue
                for version in required:
                    if version not in defined:
                        gaps.append(VersionGap(need.library, provider.path, version,
                                               self._shown(obj, main, label), defined))

    def _needed(self, path: str) -> tuple[Reference, ...]:
        table = self.symbols(path) if self.check_symbols and self.check_symbols(path) else None
        try:
            return table.needed if table is not None else ()
        except NotAnElf:
            self._symbols[path] = None
            return ()

    def symbols(self, path: str) -> DynamicSymbols | None:
        """None when unreadable."""
        if path not in self._symbols:
            real = self.setup.rootfs.real(path)
            try:
                self._symbols[path] = (read_dynamic_symbols(real, path) if real is not None
                                       else None)
            except (NotAnElf, OSError):
                self._symbols[path] = None
        return self._symbols[path]

    def _binds(self, reference: Reference, path: str) -> bool:
        """Whether the file defines what `reference` binds to (a corrupt table: nothing)."""
        try:
            return binds(reference, self.symbols(path))
        except NotAnElf:
            self._symbols[path] = None
            return False

    def _check_symbols(self, objects: list[_Object], main: _Object, label: str,
                       gaps: list[VersionGap],
                       absent: tuple[NotFound, ...]) -> list[UnboundSymbol]:
        """Every strong undefined symbol of the checked files, looked up in the scope, except
        those a missing library or version already accounts for."""
        if self.check_symbols is None:
            return []
        missing = {item.name for item in absent}
        reported = {(gap.library, gap.version) for gap in gaps}
        scope = tuple(obj.path for obj in objects)
        in_scope = set(scope)
        unbound: list[UnboundSymbol] = []
        by_name = {name: obj for obj in reversed(objects) for name in obj.names}
        for obj in objects:
            dependencies = [by_name[name] for name in obj.info.needed if name in by_name]
            for reference in self._needed(obj.path):
                if reference.version:
                    if reference.library in missing or (
                            reference.library, reference.version) in reported:
                        continue
                elif missing:
                    continue
                if self._definers.get(reference) in in_scope:
                    continue  # bound already, in another file or program, to one here
                first = ([by_name[reference.library]] if reference.library in by_name
                         else dependencies)
                definer = next((other.path for other in _likely_first(first, objects)
                                if self._binds(reference, other.path)), None)
                if definer is not None:
                    self._definers[reference] = definer
                    continue
                unbound.append(UnboundSymbol(reference.name, reference.version,
                                             reference.library, self._shown(obj, main, label),
                                             scope))
        return unbound


    @staticmethod
    def _shown(obj: _Object, main: _Object, label: str) -> str:
        return label if obj is main else obj.path


def glibc_release(rootfs: RootFS, libc: str) -> str:
    """The release libc.so.6 names in its banner (`gnu_get_libc_version()`); "" if none."""
    real = rootfs.real(libc)
    try:
        data = real.read_bytes() if real is not None else b""
    except OSError:
        return ""
    match = GLIBC_BANNER.search(data)
    return match[1].decode() if match else ""


def _kind(info: ElfInfo, program: ElfInfo) -> str:
    """`ELFCLASS32` ("wrong ELF class"), or the machine when only that differs."""
    if info.elf_class != program.elf_class:
        return f"ELFCLASS{info.elf_class}"
    return f"machine {info.machine}"


def _likely_first(first: list[_Object], objects: list[_Object]) -> Iterator[_Object]:
    """The scope, likely definers first: whether any defines it matters, not which."""
    yield from first
    yield from (other for other in objects if other not in first)


def _walk(objects: list[_Object]) -> Iterator[_Object]:
    """Breadth first over a list that grows while it is walked."""
    index = 0
    while index < len(objects):
        yield objects[index]
        index += 1
