"""Read what an ELF file needs from its dynamic loader and what device code it carries.

Read-only and header-level: nothing here executes the file or loads large sections. pyelftools
raises many different exception types on corrupt input (its own, construct's, struct's, plain
ValueError/IndexError...), so each read is fenced and turned into one `NotAnElf` naming the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection
from elftools.elf.sections import NoteSection

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.fatbin import FATBIN_SECTIONS, FatbinEntry, read_fatbin

T = TypeVar("T")

ELF_MAGIC = b"\x7fELF"

MACHINES = {
    "EM_X86_64": "x86-64",
    "EM_386": "i386",
    "EM_AARCH64": "aarch64",
    "EM_ARM": "arm",
    "EM_PPC64": "ppc64",
    "EM_RISCV": "riscv",
    "EM_S390": "s390",
}


@dataclass(frozen=True)
class VersionNeed:
    """The symbol versions one file needs from one library (`.gnu.version_r`)."""

    library: str
    versions: tuple[str, ...]


@dataclass(frozen=True)
class ElfInfo:
    """Everything the floor is derived from, for one ELF file."""

    path: str
    elf_class: int
    machine: str
    type: str
    interpreter: str | None
    soname: str | None
    needed: tuple[str, ...]
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    build_id: str | None
    version_needs: tuple[VersionNeed, ...]
    version_defs: tuple[str, ...]
    device_code: tuple[FatbinEntry, ...]


def is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as stream:
            return stream.read(4) == ELF_MAGIC
    except OSError:
        return False


def read_elf(path: Path, name: str | None = None) -> ElfInfo:
    """Inspect one file; `name` is how it is shown (e.g. its path inside a tarball)."""
    with path.open("rb") as stream:
        return read_elf_stream(stream, name or str(path))


def read_elf_stream(stream: BinaryIO, shown: str) -> ElfInfo:
    if stream.read(4) != ELF_MAGIC:
        raise NotAnElf(f"{shown}: not an ELF file")
    stream.seek(0)
    with _fenced(shown):
        return _read(stream, shown)


@contextmanager
def _fenced(shown: str) -> Iterator[None]:
    try:
        yield
    except NotAnElf as error:
        raise NotAnElf(f"{shown}: {error}") from error
    except RecursionError as error:
        raise NotAnElf(f"{shown}: corrupt ELF file (unreadable structure)") from error
    except Exception as error:  # pyelftools has no single error type for corrupt input
        raise NotAnElf(f"{shown}: corrupt or truncated ELF file ({_describe(error)})") from error


def _describe(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:120]}" if text else type(error).__name__


def _read(stream: BinaryIO, shown: str) -> ElfInfo:
    elf = ELFFile(stream)
    sections = list(elf.iter_sections())  # pyelftools re-parses headers on every iteration
    dynamic = _dynamic_tags(sections)
    return ElfInfo(
        path=shown,
        elf_class=elf.elfclass,
        machine=MACHINES.get(elf["e_machine"], str(elf["e_machine"]).removeprefix("EM_").lower()),
        type=str(elf["e_type"]).removeprefix("ET_"),
        interpreter=_interpreter(elf),
        soname=next(iter(dynamic.get("DT_SONAME", [])), None),
        needed=tuple(dynamic.get("DT_NEEDED", [])),
        rpath=_split_paths(dynamic.get("DT_RPATH", [])),
        runpath=_split_paths(dynamic.get("DT_RUNPATH", [])),
        build_id=_build_id(sections),
        version_needs=_version_needs(sections),
        version_defs=_version_defs(sections),
        device_code=_device_code(sections, stream),
    )


def _bounded(items: Iterable[T], section: Any, entry_size: int) -> Iterator[T]:
    """Stop a corrupt count or a self-referencing `next` link from looping forever: a section
    cannot hold more entries than its size allows."""
    limit = section["sh_size"] // entry_size + 1
    for count, item in enumerate(items):
        if count >= limit:
            raise NotAnElf(f"section {section.name} lists more entries than it can hold")
        yield item


def _dynamic_tags(sections: list[Any]) -> dict[str, list[str]]:
    wanted = {"DT_NEEDED": "needed", "DT_SONAME": "soname", "DT_RPATH": "rpath",
              "DT_RUNPATH": "runpath"}
    tags: dict[str, list[str]] = {}
    for section in sections:
        if not isinstance(section, DynamicSection):
            continue
        for tag in _bounded(section.iter_tags(), section, 8):
            if tag.entry.d_tag in wanted:
                tags.setdefault(tag.entry.d_tag, []).append(getattr(tag, wanted[tag.entry.d_tag]))
    return tags


def _split_paths(values: list[str]) -> tuple[str, ...]:
    # Empty entries are kept: the loader reads one as the current directory, which a kit must
    # not search, so it has to stay visible.
    return tuple(part for value in values for part in value.split(":"))


def _interpreter(elf: Any) -> str | None:
    for segment in elf.iter_segments():
        if segment["p_type"] == "PT_INTERP":
            return str(segment.get_interp_name())
    return None


def _build_id(sections: list[Any]) -> str | None:
    for section in sections:
        if not isinstance(section, NoteSection):
            continue
        for note in _bounded(section.iter_notes(), section, 12):
            if note["n_type"] == "NT_GNU_BUILD_ID":
                return str(note["n_desc"])
    return None


def _version_needs(sections: list[Any]) -> tuple[VersionNeed, ...]:
    needs = []
    for section in sections:
        if isinstance(section, GNUVerNeedSection):
            for verneed, auxiliaries in _bounded(section.iter_versions(), section, 16):
                versions = tuple(aux.name for aux in _bounded(auxiliaries, section, 16))
                needs.append(VersionNeed(library=str(verneed.name), versions=versions))
    return tuple(needs)


def _version_defs(sections: list[Any]) -> tuple[str, ...]:
    names: list[str] = []
    for section in sections:
        if isinstance(section, GNUVerDefSection):
            for verdef, auxiliaries in _bounded(section.iter_versions(), section, 20):
                if verdef["vd_flags"] & 0x1:  # VER_FLG_BASE: the file's own name, not a version
                    continue
                first = next(iter(auxiliaries), None)
                if first is not None:
                    names.append(first.name)
    return tuple(names)


def _device_code(sections: list[Any], stream: BinaryIO) -> tuple[FatbinEntry, ...]:
    entries: list[FatbinEntry] = []
    for name in FATBIN_SECTIONS:
        for section in sections:
            if section.name == name and section["sh_type"] != "SHT_NOBITS":
                entries.extend(read_fatbin(stream, name, section["sh_offset"], section["sh_size"]))
    return tuple(entries)
