"""Section-level reading of an ELF file (cubins too), for comparing two: sections, symbols, notes.

inspector/elf.py reads what the loader reads and avoids sections on purpose; explaining a
difference needs exactly those. Bounded as elf.py (one NotAnElf), and not pyelftools for the
same reason: it believes the counts a file states."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.elf import ELF_MAGIC, FILELESS
from ninfer_kits.inspector.inputs import ByteSource

SHT_SYMTAB, SHT_STRTAB, SHT_NOTE, SHT_DYNSYM = 2, 3, 7, 11
SHF_ALLOC, SHF_EXECINSTR, SHF_STRINGS, SHF_COMPRESSED = 0x2, 0x4, 0x20, 0x800
STT_FUNC, STT_FILE = 2, 4
SHN_UNDEF, SHN_XINDEX = 0, 0xFFFF
NT_GNU_BUILD_ID = 3
ELFCOMPRESS_ZLIB = 1
MAX_SECTIONS = 1 << 16
MAX_SYMBOLS = 1 << 19  # 512 Ki symbols: more than a kit binary holds; a larger table is not read
MAX_INFLATED = 256 << 20  # a compressed debug section is inflated up to this many bytes


@dataclass(frozen=True)
class Section:
    number: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    entsize: int

    @property
    def has_bytes(self) -> bool:
        return self.type not in FILELESS and self.size > 0

    @property
    def end(self) -> int:
        return self.offset + (0 if self.type in FILELESS else self.size)


@dataclass(frozen=True, slots=True)
class Symbol:
    name: str
    value: int
    size: int
    type: int
    section: int  # st_shndx


@dataclass(frozen=True)
class ElfLayout:
    is64: bool
    order: str  # "<" or ">"
    type: int  # e_type
    machine: int
    sections: tuple[Section, ...]
    header_end: int  # the ELF header's size
    tables: tuple[tuple[int, int], ...]  # (offset, size) of the program and section headers

    def named(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)


class _Corrupt(Exception):
    pass


def read_layout(data: ByteSource, shown: str) -> ElfLayout:
    """NotAnElf (naming `shown`) when `data` is not an ELF file."""
    if data[:4] != ELF_MAGIC:
        raise NotAnElf(f"{shown}: not an ELF file")
    try:
        return _layout(data)
    except (_Corrupt, struct.error) as error:
        raise NotAnElf(f"{shown}: corrupt or truncated ELF file ({error})") from error


def _layout(data: ByteSource) -> ElfLayout:
    size = len(data)
    if size < 52 or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise _Corrupt("no valid ELF identification")
    is64, order = data[4] == 2, "<" if data[5] == 1 else ">"
    header = struct.Struct(order + ("HHIQQQIHHHHHH" if is64 else "HHIIIIIHHHHHH"))
    if 16 + header.size > size:
        raise _Corrupt("the ELF header runs past the end of the file")
    (e_type, machine, _version, _entry, phoff, shoff, _flags, ehsize, phentsize, phnum,
     shentsize, shnum, shstrndx) = header.unpack_from(data, 16)
    word = "Q" if is64 else "I"
    row = struct.Struct(order + f"II{word}{word}{word}{word}II{word}{word}")
    tables = [(phoff, phentsize * phnum)] if phoff else []
    sections: list[Section] = []
    if shoff:
        if shentsize < row.size:
            raise _Corrupt(f"section headers of {shentsize} bytes")
        if shnum == 0 and shoff + row.size <= size:  # more than 0xff00: the count is in [0]
            shnum = row.unpack_from(data, shoff)[5]
        if shstrndx == SHN_XINDEX and shoff + row.size <= size:
            shstrndx = row.unpack_from(data, shoff)[6]
        if shnum > MAX_SECTIONS or shoff + shnum * shentsize > size:
            raise _Corrupt(f"the section header table ({shnum} entries at {shoff:#x}) runs past "
                           f"the end of the file ({size} bytes)")
        rows = [row.unpack_from(data, shoff + i * shentsize) for i in range(shnum)]
        tables.append((shoff, shnum * shentsize))
        names = _names(data, rows, shstrndx)
        for number, (name, kind, flags, addr, offset, length, link, _info, _align,
                     entsize) in enumerate(rows):
            if kind not in FILELESS and offset + length > size:
                raise _Corrupt(f"section {number} ({length} bytes at {offset:#x}) runs past the "
                               f"end of the file ({size} bytes)")
            sections.append(Section(number, names(name), kind, flags, addr, offset, length,
                                    link, entsize))
    return ElfLayout(is64=is64, order=order, type=e_type, machine=machine,
                     sections=tuple(sections), header_end=ehsize or header.size + 16,
                     tables=tuple(tables))


def _names(data: ByteSource, rows: list[tuple[int, ...]], index: int) -> _NameTable:
    if 0 < index < len(rows) and rows[index][1] not in FILELESS:
        offset, length = rows[index][4], rows[index][5]
        if offset + length <= len(data):
            return _NameTable(bytes(data[offset:offset + length]))
    return _NameTable(b"")


class _NameTable:
    """Names from a string table in memory; an index outside it is ""."""

    def __init__(self, table: bytes) -> None:
        self.table = table

    def __call__(self, index: int) -> str:
        if index >= len(self.table):
            return ""
        end = self.table.find(b"\0", index)
        raw = self.table[index:] if end < 0 else self.table[index:end]
        return raw.decode("utf-8", "surrogateescape")


def section_bytes(data: ByteSource, section: Section) -> bytes:
    if not section.has_bytes:
        return b""
    return bytes(data[section.offset:section.offset + section.size])


def section_text(data: ByteSource, layout: ElfLayout, section: Section) -> bytes:
    """A section's bytes, SHF_COMPRESSED zlib inflated up to MAX_INFLATED."""
    raw = section_bytes(data, section)
    if not section.flags & SHF_COMPRESSED:
        return raw
    header = struct.Struct(layout.order + ("IIQQ" if layout.is64 else "III"))
    if len(raw) < header.size:
        return raw
    kind, *rest = header.unpack_from(raw)
    inflated_size = rest[1] if layout.is64 else rest[0]
    if kind != ELFCOMPRESS_ZLIB or inflated_size > MAX_INFLATED:
        return raw
    try:
        return zlib.decompressobj().decompress(raw[header.size:], MAX_INFLATED)
    except zlib.error:
        return raw


def symbols(data: ByteSource, layout: ElfLayout, table: Section) -> list[Symbol]:
    row = struct.Struct(layout.order + ("IBBHQQ" if layout.is64 else "IIIBBH"))
    if not table.has_bytes or table.size // row.size > MAX_SYMBOLS:
        return []
    strtab = (layout.sections[table.link] if 0 < table.link < len(layout.sections)
              else None)
    names = _NameTable(section_bytes(data, strtab) if strtab else b"")
    raw = section_bytes(data, table)
    count = len(raw) // row.size
    found = []
    for fields in row.iter_unpack(raw[:count * row.size]):
        if layout.is64:
            name, info, _other, shndx, value, size = fields
        else:
            name, value, size, info, _other, shndx = fields
        found.append(Symbol(names(name), value, size, info & 0xF, shndx))
    return found


def build_id(data: ByteSource, layout: ElfLayout, section: Section) -> str | None:
    raw = section_bytes(data, section)
    note = struct.Struct(layout.order + "III")
    position = 0
    while position + note.size <= len(raw):
        namesz, descsz, kind = note.unpack_from(raw, position)
        name_at = position + note.size
        desc_at = name_at + ((namesz + 3) & ~3)
        if desc_at + descsz > len(raw):
            return None
        if raw[name_at:name_at + namesz].rstrip(b"\0") == b"GNU" and kind == NT_GNU_BUILD_ID:
            return raw[desc_at:desc_at + descsz].hex()
        position = desc_at + ((descsz + 3) & ~3)
    return None


def is_string_table(section: Section) -> bool:
    """Sections of NUL-terminated strings only: compared string by string."""
    return section.type == SHT_STRTAB or bool(section.flags & SHF_STRINGS) or section.name in (
        ".comment", ".debug_str", ".debug_line_str")
