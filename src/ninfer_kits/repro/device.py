"""Which entry of a CUDA fatbin differs, and in it which kernel (SASS, a cubin compared by the
caller's ELF comparison) or which lines (PTX, under their `.entry` or `.func`). Entries pair by
(kind, arch) and their order within it, so a section that grew in one entry still pairs the
rest; the payloads come from inspector/payload.py."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.inputs import ByteSource
from ninfer_kits.inspector.payload import CannotInflate as _CannotInflate
from ninfer_kits.inspector.payload import Entry, entries
from ninfer_kits.inspector.payload import payload as inflated
from ninfer_kits.inspector.payload import zstd_module as _zstd_module
from ninfer_kits.repro import model
from ninfer_kits.repro.bytesdiff import differing, first_difference, read_as
from ninfer_kits.repro.model import Cause, Limits, SectionDiff
from ninfer_kits.repro.textdiff import changed_lines

__all__ = ["Entry", "_zstd_module", "compare", "entries"]  # entries, Entry: elfdiff's names

# Sections of a cubin that belong to one kernel: the suffix after the prefix is its name.
KERNEL_SECTION = re.compile(
    r"^(?:\.rela?)?\.(?:text|nv\.info|nv\.constant\d+|nv\.shared|nv\.local)\.(?P<kernel>.+)$")
PTX_FUNCTION = re.compile(r"\.(?P<what>entry|func)\s+(?:\([^)]*\)\s*)?(?P<name>[\w$.]+)")

# The caller's ELF comparison, for a cubin: (a bytes, b bytes, where) -> (sections, causes).
CubinDiff = Callable[[bytes, bytes, str], tuple[list[SectionDiff], list[Cause]]]


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
        a_payload, b_payload = inflated(a, left, limits.inflate), inflated(b, right, limits.inflate)
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
    # What the cubin comparison recognised beyond bytes gets its own line.
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
    """The `.entry` or `.func` whose body holds line `index` (a module-level line, such as a
    `.file` after the last function, belongs to none)."""
    name, depth = None, 0
    for line in lines[:index + 1]:
        match = PTX_FUNCTION.search(line)
        if match and depth == 0:
            name = match["name"]
        depth += line.count("{") - line.count("}")
        if depth <= 0 and "}" in line:
            name, depth = None, 0
    return name
