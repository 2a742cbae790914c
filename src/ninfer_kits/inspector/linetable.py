"""The file table of a DWARF line program (`.debug_line`, versions 2 to 4), as `diff` needs it:
each entry carries the source's mtime and length, where two builds of one source from other
checkouts differ. Headers only; None for anything else (DWARF 5, 64-bit, truncated). Not
pyelftools: same entries but 13× slower, only through its internals (a cubin has no
.debug_info), and unbounded (a 76-byte table cost it minutes and gigabytes)."""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class FileEntry:
    unit: int  # which line program of the section
    name: str
    directory: str  # "" for the compile's own folder (index 0)
    mtime: int
    length: int


def file_entries(data: bytes) -> list[FileEntry] | None:
    entries: list[FileEntry] = []
    offset, unit = 0, 0
    try:
        while offset < len(data):
            (length,) = struct.unpack_from("<I", data, offset)
            if length >= 0xFFFFFFF0:
                return None  # the 64-bit format, or reserved
            end = offset + 4 + length
            if end > len(data):
                return None
            entries += _unit(data, offset + 4, end, unit)
            offset, unit = end, unit + 1
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None
    return entries


def _unit(data: bytes, at: int, end: int, unit: int) -> list[FileEntry]:
    version, _header_length = struct.unpack_from("<HI", data, at)
    if not 2 <= version <= 4:
        raise ValueError(f"DWARF line table version {version}")
    at += 6 + 1 + (1 if version >= 4 else 0) + 1 + 1 + 1  # lengths, is_stmt, base, range
    opcode_base = data[at]
    at += 1 + opcode_base - 1  # the standard opcodes' lengths
    directories = [""]
    while data[at]:
        name, at = _string(data, at, end)
        directories.append(name)
    at += 1
    entries = []
    while data[at]:
        name, at = _string(data, at, end)
        directory, at = _uleb(data, at)
        mtime, at = _uleb(data, at)
        length, at = _uleb(data, at)
        entries.append(FileEntry(unit, name, directories[directory], mtime, length))
    return entries


def _string(data: bytes, at: int, end: int) -> tuple[str, int]:
    stop = data.index(b"\0", at, end)
    return data[at:stop].decode("utf-8", "surrogateescape"), stop + 1


def _uleb(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at
        if shift > 63:
            raise ValueError("ULEB128 longer than 64 bits")
