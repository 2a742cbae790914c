"""CUDA device code inside an ELF: list the SASS and PTX entries of its fatbin sections.

Two sections hold fatbins, and only one of them is device code a GPU can run: the CUDA runtime
loads `.nv_fatbin`. `__nv_relfatbin` holds the inputs of the device link (separable compilation,
`nvcc -rdc=true`), which nvlink consumed when the program was linked and which the runtime never
loads; they are read and reported, but as what they are (`FatbinEntry.loadable` is False).

Only headers are read, by seeking from one to the next, so the time taken grows with the number
of entries and not with the size of the payloads (a large CUDA library carries hundreds of MB).
Layout (checked against cuobjdump on binaries compiled by nvcc 13): a section holds containers
back to back, 8-byte aligned; each container is a 16-byte header followed by entries, each entry
a header of its own size followed by its payload.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

from ninfer_kits.errors import NotAnElf

LOADED_SECTION = ".nv_fatbin"  # what the CUDA runtime loads
RELOCATABLE_SECTION = "__nv_relfatbin"  # device-link inputs (-rdc): never loaded
FATBIN_SECTIONS = (LOADED_SECTION, RELOCATABLE_SECTION)

CONTAINER_MAGIC = 0xBA55ED50
CONTAINER_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, body size
ENTRY_PREFIX = struct.Struct("<HHIQ")  # kind, version, header size, payload size
ENTRY_ARCH_OFFSET = 28
ENTRY_FLAGS_OFFSET = 40
ENTRY_MIN_HEADER = ENTRY_FLAGS_OFFSET + 8
ENTRY_MAX_HEADER = 4096

KIND_PTX = 1
KIND_SASS = 2
KIND_LTOIR = 8  # LTO-IR (NVVM IR): nvcc 13 writes it for `code=lto_86` with -rdc=true
KIND_NAMES = {KIND_PTX: "ptx", KIND_SASS: "sass", KIND_LTOIR: "ltoir"}
ARCH_PREFIXES = {KIND_PTX: "compute", KIND_SASS: "sm", KIND_LTOIR: "lto"}
FLAG_COMPRESSED = 0x8000
# The arch-specific ("a") and family-specific ("f") variants are flag bits, not arch numbers.
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000


@dataclass(frozen=True)
class FatbinEntry:
    """One piece of device code: SASS for a real GPU arch, PTX for a virtual one, LTO-IR, or an
    entry of a kind this parser does not know (reported by its number, never read further)."""

    section: str
    kind: str  # "sass", "ptx", "ltoir", or "kind-N" for any other kind number N
    arch: str  # "sm_86", "sm_120a", "sm_100f" for SASS; "compute_90" PTX; "lto_86"; "arch_86"
    compressed: bool
    payload_size: int

    @property
    def loadable(self) -> bool:
        """Whether the CUDA runtime loads this entry (it never loads `__nv_relfatbin`)."""
        return self.section == LOADED_SECTION


def kind_name(kind: int) -> str:
    return KIND_NAMES.get(kind, f"kind-{kind}")


def arch_name(kind: int, number: int, flags: int) -> str:
    prefix = ARCH_PREFIXES.get(kind, "arch")
    suffix = ""
    if flags & FLAG_ARCH_SPECIFIC:
        suffix = "a"
    elif flags & FLAG_FAMILY_SPECIFIC:
        suffix = "f"
    return f"{prefix}_{number}{suffix}"


def read_fatbin(stream: BinaryIO, section: str, offset: int, size: int) -> list[FatbinEntry]:
    """Every entry of the fatbin section that lies at `offset` (file offset) with `size` bytes."""
    entries: list[FatbinEntry] = []
    position = 0
    while position + CONTAINER_HEADER.size <= size:
        header = _read(stream, offset + position, CONTAINER_HEADER.size, section)
        magic, _version, header_size, body_size = CONTAINER_HEADER.unpack(header)
        if magic != CONTAINER_MAGIC:
            if position > 0 and not header.strip(b"\0"):
                break  # zero padding after the last container
            raise _corrupt(section, position, f"bad container magic {magic:#x}")
        body_start = position + header_size
        body_end = body_start + body_size
        if header_size < CONTAINER_HEADER.size or body_end > size:
            raise _corrupt(section, position, "container runs past the end of the section")
        entries.extend(_read_entries(stream, section, offset, body_start, body_end))
        position = (body_end + 7) & ~7
    return entries


def _read_entries(
    stream: BinaryIO, section: str, offset: int, start: int, end: int
) -> list[FatbinEntry]:
    entries = []
    position = start
    while position + ENTRY_MIN_HEADER <= end:
        header = _read(stream, offset + position, ENTRY_MIN_HEADER, section)
        kind, _version, header_size, payload_size = ENTRY_PREFIX.unpack_from(header)
        if kind == 0:  # a kind this parser does not know is reported; no kind at all is not
            raise _corrupt(section, position, "entry kind 0")
        if not ENTRY_MIN_HEADER <= header_size <= ENTRY_MAX_HEADER:
            raise _corrupt(section, position, f"entry header size {header_size} out of range")
        if position + header_size + payload_size > end:
            raise _corrupt(section, position, "entry runs past the end of its container")
        (arch,) = struct.unpack_from("<I", header, ENTRY_ARCH_OFFSET)
        (flags,) = struct.unpack_from("<Q", header, ENTRY_FLAGS_OFFSET)
        entries.append(
            FatbinEntry(
                section=section,
                kind=kind_name(kind),
                arch=arch_name(kind, arch, flags),
                compressed=bool(flags & FLAG_COMPRESSED),
                payload_size=payload_size,
            )
        )
        position += header_size + payload_size
    return entries


def _read(stream: BinaryIO, at: int, count: int, section: str) -> bytes:
    stream.seek(at)
    data = stream.read(count)
    if len(data) != count:
        raise _corrupt(section, at, "truncated")
    return data


def _corrupt(section: str, position: int, why: str) -> NotAnElf:
    return NotAnElf(f"corrupt CUDA fatbin in section {section} at offset {position:#x}: {why}")
