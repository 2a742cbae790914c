"""Which source files reached a kit's binaries, as the build's own records say.

Two records, because neither covers both sides: device code from the cubins' `.debug_line` and
PTX `.file` lines, host code from `ninja -t deps` (a superset: every header included); both in
the build environment's paths (docs/build.md, the compiled-in stage). Which are the upstream's
own is `outside`'s question."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.errors import BadInput, CheckFailed
from ninfer_kits.inspector.elf import ELF_MAGIC, is_elf
from ninfer_kits.inspector.elfread import read_layout, section_text
from ninfer_kits.inspector.fatbin import FATBIN_SECTIONS
from ninfer_kits.inspector.inputs import ByteSource
from ninfer_kits.inspector.linetable import file_entries
from ninfer_kits.inspector.payload import CannotInflate, entries, payload

DEPS_FILE = "ninja-deps.txt"  # in the recipe's OUT folder (build/recipe.py writes it)
DEPS_BUILD, DEPS_SOURCE = "# build folder: ", "# source folder: "  # its first two lines
DEVICE, HOST = "device", "host"
INFLATE_LIMIT = 512 << 20  # one cubin; the largest of a real kit is a few MB
PTX_FILE = re.compile(rb'^\s*\.file\s+\d+\s+"([^"]+)"', re.MULTILINE)
NINJA_TARGET = re.compile(r".+: #deps \d+, deps mtime \d+ \((?P<state>VALID|STALE)\)")
# nvcc's own intermediate files (cudafe1 stubs), generated from the upstream's source
NVCC_TEMPORARY = re.compile(r"^/tmp/tmpxft_")


class NoLineTable(CheckFailed):
    """Device code whose sources cannot be read."""


@dataclass(frozen=True)
class Deps:
    build: str  # the build folder, in the build environment
    source: str  # the upstream's tree, in the build environment
    files: tuple[str, ...]  # every dependency, made absolute, sorted, unique


def device_sources(folder: Path) -> tuple[str, ...]:
    """Every source file the device code under `folder` names, sorted (a relative one may
    stay relative: the compile's own folder)."""
    found: set[str] = set()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        if is_elf(path):
            found |= _file_sources(path.read_bytes(), str(path))
    return tuple(sorted(found))


def _file_sources(data: ByteSource, shown: str) -> set[str]:
    layout = read_layout(data, shown)
    found: set[str] = set()
    for name in FATBIN_SECTIONS:
        section = layout.named(name)
        if section is None or not section.has_bytes:
            continue
        for entry in entries(data, name, section.offset, section.size):
            if entry.kind not in ("sass", "ptx"):
                continue  # LTO-IR: NVVM bitcode, read by no one here; its SASS is linked in
            where = f"{shown} ({name}, {entry.label})"
            try:
                inner = payload(data, entry, INFLATE_LIMIT)
            except CannotInflate as why:
                raise NoLineTable(f"{where}: cannot read which sources it was compiled from: "
                                  f"{why}") from None
            if entry.kind == "ptx":
                found |= {m.decode("utf-8", "surrogateescape") for m in PTX_FILE.findall(inner)}
            elif inner[:4] == ELF_MAGIC:
                found |= _cubin_sources(inner, where)
    return found


def _cubin_sources(cubin: bytes, where: str) -> set[str]:
    layout = read_layout(cubin, where)
    section = layout.named(".debug_line")
    if section is None:
        return set()  # compiled without -lineinfo: the host's dependency output still lists it
    table = file_entries(section_text(cubin, layout, section))
    if table is None:
        raise NoLineTable(f"{where}: its .debug_line does not parse (DWARF 2 to 4 expected)")
    # Not normalised: /proc/self/cwd/../source/… must keep saying it is the compile's folder.
    return {posixpath.join(e.directory, e.name) for e in table}


def read_deps(path: Path) -> Deps:
    """OUT/ninja-deps.txt; BadInput naming the file and line when it does not read."""
    try:
        lines = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError as error:
        raise BadInput(f"{path}: cannot read the compile's dependency output ({error}); "
                       "the recipe writes it") from None
    if len(lines) < 2 or not lines[0].startswith(DEPS_BUILD) or \
            not lines[1].startswith(DEPS_SOURCE):
        raise BadInput(f"{path}:1: expected '{DEPS_BUILD}…' and '{DEPS_SOURCE}…' lines first")
    build = lines[0].removeprefix(DEPS_BUILD)
    source = lines[1].removeprefix(DEPS_SOURCE)
    return Deps(build, source, parse_ninja_deps("\n".join(lines[2:]), build, path, first_line=3))


def parse_ninja_deps(text: str, build: str, shown: Path | str, first_line: int = 1
                     ) -> tuple[str, ...]:
    """The dependencies of every VALID target `ninja -t deps` lists, sorted, joined to the
    build folder."""
    found: set[str] = set()
    target: re.Match[str] | None = None
    for number, line in enumerate(text.splitlines(), first_line):
        if not line.strip():
            target = None
        elif line[0] in " \t":
            if target is None:
                raise BadInput(f"{shown}:{number}: a dependency before any target line")
            if target["state"] == "VALID":  # STALE: its output is gone, or made otherwise since
                # Not normalised: `..` after a symlink is for the root's own lookup.
                found.add(posixpath.join(build, line.strip()))
        else:
            target = NINJA_TARGET.fullmatch(line)
            if target is None:
                raise BadInput(f"{shown}:{number}: not a line of `ninja -t deps`: "
                               f"{line[:120]!r}")
    return tuple(sorted(found))


def is_upstream(path: str, deps: Deps) -> bool:
    """A file of the upstream's own, which its licence files cover (relative and
    /proc/self/cwd/… names lie in the build)."""
    if not path.startswith("/") or path.startswith("/proc/self/cwd/"):
        return True
    path = posixpath.normpath(path)  # the build's own folders hold no symlinks of ours
    return NVCC_TEMPORARY.match(path) is not None or any(
        path == folder or path.startswith(folder.rstrip("/") + "/")
        for folder in (deps.build, deps.source))


# Shared libraries the link names are loaded at run time, not compiled in: left out (archives
# and objects stay).
SHARED_OBJECT = re.compile(r"\.so(\.[0-9]+)*$")


def outside(device: tuple[str, ...], deps: Deps) -> dict[str, tuple[str, ...]]:
    """path → "device", "host" or both, for every file not the upstream's own, by path."""
    where: dict[str, set[str]] = {}
    for side, paths in ((DEVICE, device), (HOST, deps.files)):
        for path in paths:
            if not is_upstream(path, deps) and not SHARED_OBJECT.search(path):
                where.setdefault(path, set()).add(side)
    return {path: tuple(sorted(where[path])) for path in sorted(where)}
