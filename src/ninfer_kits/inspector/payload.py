"""The entries of a CUDA fatbin with where their payloads lie, and the payloads inflated
(repro's cubin diff, compiled_in's line tables): the layout fatbin.py checked, walked again with
offsets. Compressed as flags say (zstd 0x8000, LZ4 0x2000), with the compressed length at +16
and the inflated size at +56. LZ4 is decoded here (a compiled `lz4` is not worth one block
format); zstd by Python's own module, `zstandard`, or the `zstd` tool."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from typing import Any

from ninfer_kits.inspector.fatbin import (
    CONTAINER_HEADER,
    CONTAINER_MAGIC,
    ENTRY_HEADER,
    ENTRY_MIN_HEADER,
    FLAG_COMPRESSED,
    arch_name,
    kind_name,
    read_fatbin,
)
from ninfer_kits.inspector.inputs import ByteSource

FLAG_ZSTD = FLAG_COMPRESSED  # 0x8000
FLAG_LZ4 = 0x2000
COMPRESSED_SIZE = struct.Struct("<I")  # at +16
INFLATED_SIZE = struct.Struct("<Q")  # at +56
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass(frozen=True)
class Entry:

    container: int
    kind: str
    arch: str
    flags: int
    offset: int
    size: int
    compressed_size: int
    inflated_size: int

    @property
    def label(self) -> str:
        return f"{self.kind} {self.arch}"

    @property
    def codec(self) -> str | None:
        if self.flags & FLAG_ZSTD:
            return "zstd"
        if self.flags & FLAG_LZ4:
            return "lz4"
        return None


def entries(data: ByteSource, section: str, offset: int, size: int) -> list[Entry]:
    """NotAnElf when it is not a fatbin (as read_fatbin decides)."""
    read_fatbin(data, section, offset, size)  # refuses a corrupt section with its own message
    found: list[Entry] = []
    position, container = 0, 0
    while position + CONTAINER_HEADER.size <= size:
        magic, _version, header_size, body_size = CONTAINER_HEADER.unpack_from(
            data, offset + position)
        if magic != CONTAINER_MAGIC:
            break  # zero padding after the last container (read_fatbin allowed only that)
        at, end = offset + position + header_size, offset + position + header_size + body_size
        while at + ENTRY_MIN_HEADER <= end:
            kind, _v, entry_header, payload, arch, flags = ENTRY_HEADER.unpack_from(data, at)
            compressed = COMPRESSED_SIZE.unpack_from(data, at + 16)[0]
            inflated = (INFLATED_SIZE.unpack_from(data, at + 56)[0]
                        if entry_header >= 64 else 0)
            found.append(Entry(container, kind_name(kind), arch_name(kind, arch, flags), flags,
                               at + entry_header, payload, compressed, inflated))
            at += entry_header + payload
        position = (position + header_size + body_size + 7) & ~7
        container += 1
    return found


class CannotInflate(Exception):
    """A payload that cannot be inflated here, and why."""


def payload(data: ByteSource, entry: Entry, limit: int) -> bytes:
    """Inflated, to at most `limit` bytes; CannotInflate when not."""
    raw = bytes(data[entry.offset:entry.offset + entry.size])
    codec = entry.codec
    if codec is None:
        return raw
    if entry.compressed_size:
        raw = raw[:entry.compressed_size]
    if not 0 < entry.inflated_size <= limit:
        raise CannotInflate(f"its inflated size {entry.inflated_size} is over the limit of "
                             f"{limit} bytes" if entry.inflated_size else
                             "no inflated size in its header")
    inflated = lz4_block(raw, entry.inflated_size) if codec == "lz4" else _zstd(
        raw, entry.inflated_size)
    if len(inflated) != entry.inflated_size:
        raise CannotInflate(f"{codec} gave {len(inflated)} bytes, the header says "
                             f"{entry.inflated_size}")
    return inflated


def lz4_block(source: bytes, size: int) -> bytes:
    """One LZ4 block (no frame) of `size` bytes; CannotInflate when it is not one."""
    out = bytearray()
    at, end = 0, len(source)
    try:
        while at < end:
            token = source[at]
            at += 1
            literals, at = _length(source, at, token >> 4)
            if len(out) + literals > size:
                raise CannotInflate("not an LZ4 block (it inflates past its size)")
            out += source[at:at + literals]
            at += literals
            if at >= end:
                break  # the last sequence is literals only
            distance = source[at] | source[at + 1] << 8
            at += 2
            match, at = _length(source, at, token & 15)
            match += 4
            if not 0 < distance <= len(out) or len(out) + match > size:
                raise CannotInflate("not an LZ4 block")
            start = len(out) - distance
            if distance >= match:
                out += out[start:start + match]
            else:  # overlapping: the copy repeats the last `distance` bytes
                pattern = bytes(out[start:])
                out += (pattern * (match // distance + 1))[:match]
    except IndexError as error:
        raise CannotInflate("a truncated LZ4 block") from error
    return bytes(out)


def _length(source: bytes, at: int, length: int) -> tuple[int, int]:
    if length == 15:
        while True:
            more = source[at]
            at += 1
            length += more
            if more != 255:
                break
    return length, at


def _zstd(raw: bytes, size: int) -> bytes:
    if not raw.startswith(ZSTD_MAGIC):
        raise CannotInflate("not a zstd frame")
    module = zstd_module()
    if module is not None:
        try:
            return _with_module(module, raw, size)
        except Exception as error:  # each module names its own error class
            raise CannotInflate(f"zstd: {error}") from error
    tool = shutil.which("zstd")
    if tool is None:
        raise CannotInflate("no zstd decoder here: Python's compression.zstd (3.14), the "
                             "zstandard package, or the zstd tool")
    return _with_tool(tool, raw, size)


def _with_tool(tool: str, raw: bytes, size: int) -> bytes:
    """The zstd tool's output, read at most one byte past `size`."""
    with tempfile.NamedTemporaryFile(prefix="ninfer-diff-", suffix=".zst") as frame:
        frame.write(raw)
        frame.flush()
        try:
            process = subprocess.Popen([tool, "-d", "-c", "-q", frame.name],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as error:
            raise CannotInflate(f"the zstd tool failed ({error})") from error
        with process:
            assert process.stdout is not None
            out = process.stdout.read(size + 1)
            process.kill()  # whatever it would write past size + 1 is not wanted
    if process.returncode not in (0, -9) or not out:
        raise CannotInflate(f"the zstd tool failed (status {process.returncode})")
    return out


@cache
def zstd_module() -> Any:
    for name in ("compression.zstd", "zstandard"):
        try:
            return __import__(name, fromlist=["_"])
        except ImportError:
            continue
    return None


def _with_module(module: Any, raw: bytes, size: int) -> bytes:
    if hasattr(module, "ZstdDecompressor") and hasattr(module, "ZstdCompressor") and hasattr(
            module, "__version__"):  # zstandard
        return bytes(module.ZstdDecompressor().decompress(raw, max_output_size=size))
    return bytes(module.ZstdDecompressor().decompress(raw, max_length=size))  # 3.14
