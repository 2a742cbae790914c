"""Which source files reached a kit's binaries, as the build's own records say.

Two records, because neither covers both sides:

- Device code: every cubin (a SASS entry of a fatbin, `.nv_fatbin` or `__nv_relfatbin`) of
  nvcc -lineinfo carries a DWARF `.debug_line` whose file table names each source file that
  produced its code (every entry had rows in the cubins checked: a table entry is a file whose
  code is in the cubin). PTX entries name theirs in `.file` directives. Read without cuobjdump
  (inspector.payload inflates the entries).
- Host code: -lineinfo writes no host line table, and a Release build has no -g. The compiler's
  dependency output is used instead: CMake's Ninja generator has every compiler (nvcc too) write
  a depfile, and Ninja keeps them; the recipe saves `ninja -t deps` in OUT/ninja-deps.txt, run
  where the compile ran, so its paths are the build environment's. That lists every header each
  object included, used or not: a superset of what produced code.

The paths are the build environment's (this host's, or the toolchain container's); which are the
upstream's own and which came from elsewhere is the caller's question (`outside`).
"""

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
    """A kit file's device code whose sources cannot be read."""


@dataclass(frozen=True)
class Deps:
    """The dependency output of one build (OUT/ninja-deps.txt)."""

    build: str  # the build folder, in the build environment
    source: str  # the upstream's tree, in the build environment
    files: tuple[str, ...]  # every dependency, made absolute, sorted, unique


def device_sources(folder: Path) -> tuple[str, ...]:
    """Every source file the device code of the ELF files under `folder` names (sorted,
    unique): its cubins' line tables, its PTX's `.file` lines. A relative name is joined to
    its table's directory (it may stay relative: the compile's own folder)."""
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
    """OUT/ninja-deps.txt as the recipe wrote it; BadInput naming the file and line when not."""
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
    """The dependencies `ninja -t deps` lists (sorted, unique) for every target whose record is
    VALID, relative ones joined to the build folder. Its form: `target: #deps N, deps mtime T
    (VALID)`, then one indented path a line, then a blank line."""
    found: set[str] = set()
    target: re.Match[str] | None = None
    for number, line in enumerate(text.splitlines(), first_line):
        if not line.strip():
            target = None
        elif line[0] in " \t":
            if target is None:
                raise BadInput(f"{shown}:{number}: a dependency before any target line")
            if target["state"] == "VALID":  # STALE: its output is gone, or made otherwise since
                # Joined, not normalised: `..` after a symlink (/usr/local/cuda/bin/../targets/…)
                # is for the root's own lookup to follow (provenance canonicalises inside it).
                found.add(posixpath.join(build, line.strip()))
        else:
            target = NINJA_TARGET.fullmatch(line)
            if target is None:
                raise BadInput(f"{shown}:{number}: not a line of `ninja -t deps`: "
                               f"{line[:120]!r}")
    return tuple(sorted(found))


def is_upstream(path: str, deps: Deps) -> bool:
    """A file of the upstream's own (its tree, its build folder, nvcc's temporaries made from
    it), whose licence the kit's copy of the upstream's licence files covers. Device line
    tables name them relative to the compile's folder, or through the recipe's prefix map as
    /proc/self/cwd/…; both lie in the build."""
    if not path.startswith("/") or path.startswith("/proc/self/cwd/"):
        return True
    path = posixpath.normpath(path)  # the build's own folders hold no symlinks of ours
    return NVCC_TEMPORARY.match(path) is not None or any(
        path == folder or path.startswith(folder.rstrip("/") + "/")
        for folder in (deps.build, deps.source))


# The link's dependency output names the shared libraries it linked against too (FFmpeg's, and
# through them every library they need): their code is loaded at run time, not compiled in
# (the floor names them), so they are left out. Archives and objects (libgcc.a, crtbeginS.o) are
# copied into the binary and stay.
SHARED_OBJECT = re.compile(r"\.so(\.[0-9]+)*$")


def outside(device: tuple[str, ...], deps: Deps) -> dict[str, tuple[str, ...]]:
    """path → where it reached the binaries ("device", "host" or both), for every file not the
    upstream's own, sorted by path."""
    where: dict[str, set[str]] = {}
    for side, paths in ((DEVICE, device), (HOST, deps.files)):
        for path in paths:
            if not is_upstream(path, deps) and not SHARED_OBJECT.search(path):
                where.setdefault(path, set()).add(side)
    return {path: tuple(sorted(where[path])) for path in sorted(where)}
