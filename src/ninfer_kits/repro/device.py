"""Which entry of a CUDA fatbin differs, and in it which kernel (SASS) or which lines (PTX).

inspector/fatbin.py lists entries (kind, arch) from their headers; a comparison needs where each
payload lies and how it is compressed, so the same layout is walked here (after
`read_fatbin` has checked it, with its constants), keeping offsets. Entries of two sides are
paired by (kind, arch) and their order among entries of that kind and arch, so a section that
grew in one entry still pairs the rest.

Payloads may be compressed, as flags say (checked on nvcc 13.0 output):
    0x8000  zstd (nvcc's default `--compress-mode`; PTX always, SASS with -compress-all)
    0x2000  LZ4 block format (`--compress-mode=speed`)
with the compressed length at +16 (u32) and the inflated size at +56 (u64) of the entry header.
LZ4 is decoded here (a short loop, bounded by the inflated size: the `lz4` package is a
compiled extension, not worth a dependency for one block format); zstd by Python's own module
where it has one (3.14's compression.zstd), the `zstandard` package, or the `zstd` tool, in that
order; without any, the entry is named and said to be compressed, its kernel not.

A SASS payload is a cubin, itself an ELF: it is compared section by section by the caller's ELF
comparison, and sections named `.text.<kernel>`, `.nv.info.<kernel>`, `.nv.constant0.<kernel>`
name the kernel. PTX is text: its differing lines are shown, each under the `.entry` (kernel) or
`.func` it belongs to.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ninfer_kits.errors import NotAnElf
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
from ninfer_kits.repro import model
from ninfer_kits.repro.bytesdiff import differing, first_difference, read_as
from ninfer_kits.repro.model import Cause, Limits, SectionDiff
from ninfer_kits.repro.textdiff import changed_lines

FLAG_ZSTD = FLAG_COMPRESSED  # 0x8000
FLAG_LZ4 = 0x2000
COMPRESSED_SIZE = struct.Struct("<I")  # at +16
INFLATED_SIZE = struct.Struct("<Q")  # at +56
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZSTD_TIMEOUT = 60
# Sections of a cubin that belong to one kernel: the suffix after the prefix is its name.
KERNEL_SECTION = re.compile(
    r"^(?:\.rela?)?\.(?:text|nv\.info|nv\.constant\d+|nv\.shared|nv\.local)\.(?P<kernel>.+)$")
PTX_FUNCTION = re.compile(r"\.(?P<what>entry|func)\s+(?:\([^)]*\)\s*)?(?P<name>[\w$.]+)")

# The caller's ELF comparison, for a cubin: (a bytes, b bytes, where) -> (sections, causes).
CubinDiff = Callable[[bytes, bytes, str], tuple[list[SectionDiff], list[Cause]]]


@dataclass(frozen=True)
class Entry:
    """One fatbin entry and where its payload lies (a file offset)."""

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
    """The entries of a fatbin section, with their payloads' offsets; NotAnElf when it is not
    a fatbin (as read_fatbin decides, which this checks first)."""
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


def compare(a: ByteSource, a_entries: list[Entry], b: ByteSource, b_entries: list[Entry],
            section: str, limits: Limits, cubin_diff: CubinDiff | None) -> list[Cause]:
    """Causes for every entry that differs between two fatbin sections."""
    causes: list[Cause] = []
    b_by_key = {key: entry for key, entry in _keyed(b_entries)}
    a_keys = set()
    for key, left in _keyed(a_entries):
        a_keys.add(key)
        right = b_by_key.get(key)
        if right is None:
            causes.append(_only(left, section, key[2], model.ONLY_IN_A))
        elif not _same_payload(a, left, b, right):
            causes.extend(_explain(a, left, b, right, key[2], section, limits, cubin_diff))
        if len(causes) >= limits.causes:
            causes.append(Cause(model.NOT_EXPLAINED, f"more entries of {section} may differ: "
                                                     f"the limit of {limits.causes} causes was "
                                                     f"reached", section=section))
            return causes
    causes.extend(_only(entry, section, key[2], model.ONLY_IN_B)
                  for key, entry in _keyed(b_entries) if key not in a_keys)
    return causes


def _keyed(found: list[Entry]) -> list[tuple[tuple[str, str, int], Entry]]:
    seen: dict[tuple[str, str], int] = {}
    keyed = []
    for entry in found:
        number = seen.get((entry.kind, entry.arch), 0)
        seen[(entry.kind, entry.arch)] = number + 1
        keyed.append(((entry.kind, entry.arch, number), entry))
    return keyed


def _only(entry: Entry, section: str, number: int, side: str) -> Cause:
    where = "a" if side == model.ONLY_IN_A else "b"
    return Cause(model.FATBIN_ENTRY, f"{_words(entry, number)}: only in {where}",
                 section=section, entry=entry.label)


def _words(entry: Entry, number: int) -> str:
    kind = {"sass": "SASS", "ptx": "PTX", "ltoir": "LTO-IR"}.get(entry.kind, entry.kind)
    nth = f" #{number + 1}" if number else ""
    return f"{kind} {entry.arch}{nth} (container {entry.container})"


def _same_payload(a: ByteSource, left: Entry, b: ByteSource, right: Entry) -> bool:
    if left.size != right.size or left.flags != right.flags:
        return False
    return not differing(a, left.offset, left.size, b, right.offset, right.size, 1)


def _explain(a: ByteSource, left: Entry, b: ByteSource, right: Entry, number: int,
             section: str, limits: Limits, cubin_diff: CubinDiff | None) -> list[Cause]:
    words = _words(left, number)
    try:
        a_payload, b_payload = _payload(a, left, limits), _payload(b, right, limits)
    except _CannotInflate as why:
        return [Cause(model.FATBIN_ENTRY, f"{words} differs; its payload is compressed and "
                                          f"was not decompressed ({why}): kernel not named",
                      section=section, entry=left.label,
                      a=_digest(a, left), b=_digest(b, right))]
    if a_payload == b_payload:
        codecs = f"{left.codec or 'none'} vs {right.codec or 'none'}"
        return [Cause(model.FATBIN_ENTRY, f"{words}: the same code, compressed differently "
                                          f"({codecs})", section=section, entry=left.label,
                      a=_digest(a, left), b=_digest(b, right))]
    if left.kind == "ptx":
        return _ptx(a_payload, b_payload, words, section, left.label, limits)
    if left.kind == "sass" and cubin_diff is not None and a_payload[:4] == b"\x7fELF":
        return _sass(a_payload, b_payload, words, section, left.label, cubin_diff)
    return [Cause(model.FATBIN_ENTRY, f"{words} differs ({len(a_payload)} vs "
                                      f"{len(b_payload)} bytes)",
                  section=section, entry=left.label, a=_digest(a, left), b=_digest(b, right))]


def _digest(data: ByteSource, entry: Entry) -> str:
    payload = bytes(data[entry.offset:entry.offset + entry.size])
    return "sha256:" + hashlib.sha256(payload).hexdigest()[:16]


def _sass(a_payload: bytes, b_payload: bytes, words: str, section: str, label: str,
          cubin_diff: CubinDiff) -> list[Cause]:
    where = f"{section} › {label}"
    try:
        sections, inner = cubin_diff(a_payload, b_payload, where)
    except NotAnElf as error:
        return [Cause(model.FATBIN_ENTRY, f"{words} differs; its cubin does not parse "
                                          f"({error})", section=section, entry=label)]
    kernels: dict[str, list[SectionDiff]] = {}
    others = []
    for diff in sections:
        match = KERNEL_SECTION.match(diff.name)
        if match:
            kernels.setdefault(match["kernel"], []).append(diff)
        else:
            others.append(diff.name)
    causes = []
    for kernel, parts in kernels.items():
        text = next((p for p in parts if p.name.startswith(".text.")), None)
        shown = ", ".join(_where(part) for part in parts)
        a_code, b_code = (_instruction(a_payload, b_payload, text) if text else (None, None))
        causes.append(Cause(model.FATBIN_ENTRY, f"{words}: kernel {kernel} differs ({shown})",
                            section=section, entry=label, kernel=kernel, a=a_code, b=b_code))
    if not kernels:
        shown = ", ".join(others) or "no section: the cubin's headers"
        causes.append(Cause(model.FATBIN_ENTRY, f"{words} differs, in no kernel's own section "
                                                f"({shown})", section=section, entry=label))
    # What the cubin comparison recognised beyond bytes (a symbol name, a path, a time) is
    # worth its own line; its plain byte differences are what the entry's cause already says.
    causes.extend(cause for cause in inner if cause.kind != model.BYTES)
    return causes


def _where(diff: SectionDiff) -> str:
    first = diff.first_offset
    return diff.name if first is None else f"{diff.name} at +{first:#x}"


def _instruction(a_payload: bytes, b_payload: bytes,
                 text: SectionDiff) -> tuple[str | None, str | None]:
    """The 16 bytes (one SASS instruction since Volta) where a kernel's code first differs."""
    first = text.first_offset
    if first is None or text.a is None or text.b is None:
        return None, None
    at = first & ~15
    shown = []
    for payload, extent in ((a_payload, text.a), (b_payload, text.b)):
        raw = payload[extent.offset + at:extent.offset + min(at + 16, extent.size)]
        shown.append(f"{text.name}+{at:#x}: {raw.hex(' ')}")
    return shown[0], shown[1]


def _ptx(a_payload: bytes, b_payload: bytes, words: str, section: str, label: str,
         limits: Limits) -> list[Cause]:
    a_lines = a_payload.rstrip(b"\0").decode("utf-8", "replace").splitlines()
    b_lines = b_payload.rstrip(b"\0").decode("utf-8", "replace").splitlines()
    causes = []
    for hunk in changed_lines(a_lines, b_lines, limits.lines):
        kernel = _ptx_function(a_lines, hunk.a_start) or _ptx_function(b_lines, hunk.b_start)
        inside = f"kernel {kernel}" if kernel else "outside any function"
        a_text, b_text = "\n".join(hunk.a_lines), "\n".join(hunk.b_lines)
        embedded = _embedded(hunk.a_lines, hunk.b_lines)
        if embedded is not None:
            kind, a_value, b_value = embedded
            what = "path" if kind == model.EMBEDDED_PATH else "date or time"
            causes.append(Cause(kind, f"{words}: an embedded {what} in its PTX, {hunk.words} "
                                      f"({inside})", section=f"{section} › {label}",
                                entry=label, kernel=kernel, a=a_value, b=b_value))
            continue
        causes.append(Cause(model.FATBIN_ENTRY, f"{words}: {hunk.words} differ ({inside})",
                            section=section, entry=label, kernel=kernel, a=a_text, b=b_text))
    if not causes:
        causes.append(Cause(model.FATBIN_ENTRY, f"{words} differs (not in its lines: in "
                                                f"padding or its header)",
                            section=section, entry=label))
    return causes


def _embedded(a_lines: tuple[str, ...], b_lines: tuple[str, ...]
              ) -> tuple[str, str, str] | None:
    """(cause kind, a, b) when a hunk's first differing lines differ in a path or a time."""
    if not a_lines or not b_lines:
        return None
    at = first_difference(a_lines[0], b_lines[0])
    a_read, b_read = read_as(a_lines[0], at), read_as(b_lines[0], at)
    if "time" in (a_read.kind, b_read.kind):
        return model.EMBEDDED_TIME, a_read.shown, b_read.shown
    if "path" in (a_read.kind, b_read.kind):
        return model.EMBEDDED_PATH, a_read.shown, b_read.shown
    return None


def _ptx_function(lines: list[str], index: int) -> str | None:
    """The `.entry` or `.func` whose body holds line `index`: the last one declared above it,
    while braces opened after it are still open (module-level lines, such as `.file`
    directives after the last function, belong to none)."""
    name, depth = None, 0
    for line in lines[:index + 1]:
        match = PTX_FUNCTION.search(line)
        if match and depth == 0:
            name = match["name"]
        depth += line.count("{") - line.count("}")
        if depth <= 0 and "}" in line:
            name, depth = None, 0
    return name


# --- payloads ----------------------------------------------------------------------------------


class _CannotInflate(Exception):
    pass


def _payload(data: ByteSource, entry: Entry, limits: Limits) -> bytes:
    raw = bytes(data[entry.offset:entry.offset + entry.size])
    codec = entry.codec
    if codec is None:
        return raw
    if entry.compressed_size:
        raw = raw[:entry.compressed_size]
    if not 0 < entry.inflated_size <= limits.inflate:
        raise _CannotInflate(f"its inflated size {entry.inflated_size} is over the limit of "
                             f"{limits.inflate} bytes" if entry.inflated_size else
                             "no inflated size in its header")
    inflated = lz4_block(raw, entry.inflated_size) if codec == "lz4" else _zstd(
        raw, entry.inflated_size)
    if len(inflated) != entry.inflated_size:
        raise _CannotInflate(f"{codec} gave {len(inflated)} bytes, the header says "
                             f"{entry.inflated_size}")
    return inflated


def lz4_block(source: bytes, size: int) -> bytes:
    """Decode one LZ4 block (no frame) of `size` bytes; _CannotInflate when it is not one."""
    out = bytearray()
    at, end = 0, len(source)
    try:
        while at < end:
            token = source[at]
            at += 1
            literals, at = _length(source, at, token >> 4)
            if len(out) + literals > size:
                raise _CannotInflate("not an LZ4 block (it inflates past its size)")
            out += source[at:at + literals]
            at += literals
            if at >= end:
                break  # the last sequence is literals only
            distance = source[at] | source[at + 1] << 8
            at += 2
            match, at = _length(source, at, token & 15)
            match += 4
            if not 0 < distance <= len(out) or len(out) + match > size:
                raise _CannotInflate("not an LZ4 block")
            start = len(out) - distance
            if distance >= match:
                out += out[start:start + match]
            else:  # overlapping: the copy repeats the last `distance` bytes
                pattern = bytes(out[start:])
                out += (pattern * (match // distance + 1))[:match]
    except IndexError as error:
        raise _CannotInflate("a truncated LZ4 block") from error
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
        raise _CannotInflate("not a zstd frame")
    module = _zstd_module()
    if module is not None:
        try:
            return _with_module(module, raw, size)
        except Exception as error:  # each module names its own error class
            raise _CannotInflate(f"zstd: {error}") from error
    tool = shutil.which("zstd")
    if tool is None:
        raise _CannotInflate("no zstd decoder here: Python's compression.zstd (3.14), the "
                             "zstandard package, or the zstd tool")
    return _with_tool(tool, raw, size)


def _with_tool(tool: str, raw: bytes, size: int) -> bytes:
    """The zstd tool's output, read no further than one byte past `size` (a frame that
    inflates further is not what its header says, and is not read on)."""
    with tempfile.NamedTemporaryFile(prefix="ninfer-diff-", suffix=".zst") as frame:
        frame.write(raw)
        frame.flush()
        try:
            process = subprocess.Popen([tool, "-d", "-c", "-q", frame.name],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as error:
            raise _CannotInflate(f"the zstd tool failed ({error})") from error
        with process:
            assert process.stdout is not None
            out = process.stdout.read(size + 1)
            process.kill()  # whatever it would write past size + 1 is not wanted
    if process.returncode not in (0, -9) or not out:
        raise _CannotInflate(f"the zstd tool failed (status {process.returncode})")
    return out


@cache
def _zstd_module() -> Any:
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
