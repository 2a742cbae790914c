"""The file table of a DWARF line program (`.debug_line`, versions 2 to 4), as `diff` needs it.

nvcc -lineinfo writes such a table into every cubin, and each file entry carries the source
file's modification time and length as the compiler saw them: two builds of the same source
whose files carry other times (a checkout rather than an export at one fixed time) differ
there and nowhere else. This reads the headers only (no line program) and gives up, returning
None, on anything it does not know: DWARF 5 (whose file entries are described by formats), the
64-bit format, a table that runs past the section.

Why not pyelftools: it reads these headers the same (identical entries on the tests' tables and
on a linked cubin of the example engine's kernels), but 13× slower (5.5 ms against 0.42 ms on
that cubin's 82 kB table), only through its internals (a cubin of nvcc -lineinfo has no
.debug_info, which its public line-program path starts from), and unbounded: a 76-byte table
with a mangled version kept it parsing for minutes and gigabytes, where this returns None in
microseconds. Without it, the package imports no ELF or DWARF library at all.
"""

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
    """Every file entry of every line program in `data`, or None when it does not parse."""
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
