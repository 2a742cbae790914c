"""/etc/ld.so.cache, the binary index ldconfig writes and the dynamic loader reads: the old layout
("ld.so-1.7.0") and the new ("glibc-ld.so.cache1.1"), preferring the new where both are, as the
loader does (glibc's sysdeps/generic/dl-cache.h). By hand: no Python library reads it, and
`ldconfig -p` would run a program of the root checked (or the host's, which may read another)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
OLD_HEADER = struct.Struct("<12sI")  # magic (11 bytes + NUL), number of entries
OLD_ENTRY = struct.Struct("<iII")  # flags, key, value
NEW_HEADER = struct.Struct("<20sIIB3xI12x")  # magic, entries, string bytes, flags, extensions
NEW_ENTRY = struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap

FLAG_TYPE_MASK = 0x00FF
FLAG_ELF_LIBC6 = 0x0003
FLAG_REQUIRED_MASK = 0xFF00
FLAG_X8664_LIB64 = 0x0300
FLAG_AARCH64_LIB64 = 0x0A00


class CacheError(ValueError):
    """Not an ld.so.cache the loader could read."""


@dataclass(frozen=True)
class CacheEntry:
    soname: str
    path: str
    flags: int

    def fits(self, elf_class: int, machine: str) -> bool:
        if self.flags & FLAG_TYPE_MASK != FLAG_ELF_LIBC6:
            return False
        required = self.flags & FLAG_REQUIRED_MASK
        if machine == "x86-64":
            return required == FLAG_X8664_LIB64
        if machine == "aarch64":
            return required == FLAG_AARCH64_LIB64
        return required == 0 and elf_class == 32


def parse(data: bytes) -> tuple[CacheEntry, ...]:
    """Every entry, in the file's order (the loader's preference)."""
    strings = _Strings(data)
    if data.startswith(NEW_MAGIC):
        return _parse_new(data, 0, strings)
    if not data.startswith(OLD_MAGIC):
        raise CacheError("neither the old nor the new ld.so.cache magic")
    _, count = _unpack(OLD_HEADER, data, 0)
    table_end = OLD_HEADER.size + count * OLD_ENTRY.size
    new_at = (table_end + 7) & ~7  # the compat layout puts the new cache right after, aligned
    if data[new_at:new_at + len(NEW_MAGIC)] == NEW_MAGIC:
        return _parse_new(data, new_at, strings)
    entries = []
    for index in range(count):
        flags, key, value = _unpack(OLD_ENTRY, data, OLD_HEADER.size + index * OLD_ENTRY.size)
        entries.append(CacheEntry(strings.at(table_end + key), strings.at(table_end + value),
                                  flags))
    return tuple(entries)


def _parse_new(data: bytes, base: int, strings: _Strings) -> tuple[CacheEntry, ...]:
    _, count, _strings, _flags, _extensions = _unpack(NEW_HEADER, data, base)
    entries = []
    for index in range(count):
        at = base + NEW_HEADER.size + index * NEW_ENTRY.size
        flags, key, value, _os, _hwcap = _unpack(NEW_ENTRY, data, at)
        entries.append(CacheEntry(strings.at(base + key), strings.at(base + value), flags))
    return tuple(entries)


def _unpack(layout: struct.Struct, data: bytes, at: int) -> tuple[Any, ...]:
    if at + layout.size > len(data):
        raise CacheError(f"truncated at byte {at}")
    return layout.unpack_from(data, at)


class _Strings:
    """Strings read with a budget, so that a small file cannot allocate without bound."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.budget = 4 * len(data) + (1 << 20)

    def at(self, offset: int) -> str:
        data = self.data
        end = data.find(b"\0", offset)
        if offset >= len(data) or end < 0:
            raise CacheError(f"string offset {offset} outside the file")
        self.budget -= end - offset
        if self.budget < 0:
            raise CacheError("strings referenced over and over (more bytes of them than four "
                             "times the file)")
        return data[offset:end].decode("utf-8", "surrogateescape")
