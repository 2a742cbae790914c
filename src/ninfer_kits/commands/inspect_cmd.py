"""`ninfer-kits inspect PATH`: the runtime floor of an ELF file, a folder, a kit tarball, or a
kit folder's kit tarball."""

from __future__ import annotations

import gc
import sys
from collections import Counter
from typing import TYPE_CHECKING

from ninfer_kits.inspector.elf import ElfInfo
from ninfer_kits.inspector.fatbin import FatbinEntry
from ninfer_kits.inspector.floor import SymbolVersion, device_code_order, kind_label, render_table
from ninfer_kits.inspector.formats import DEFAULT_MEMBER_LIMIT, size_words
from ninfer_kits.inspector.inputs import printable
from ninfer_kits.inspector.inspection import Inspection, dumps_json, inspect_path

if TYPE_CHECKING:
    import argparse

SIZE = r"^(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]?)(?:i?B)?$"  # compiled when used


def member_size(text: str) -> int:
    """`4G`, `512M`, `1.5GiB`, `100000` (bytes): for --max-member-size."""
    import argparse
    import re

    match = re.match(SIZE, text.strip(), re.IGNORECASE)
    if match is None or float(match["number"]) <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size such as 4G, 512M or 1000000")
    shift = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}[match["unit"].upper()]
    return int(float(match["number"]) * (1 << shift))


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path",
                        help="an ELF file, a folder, a kit archive (.tar.gz, .tar.xz, "
                             ".tar.bz2, .tar), or a kit folder (its kit tarball)")
    parser.add_argument("--json", action="store_true",
                        help="versioned JSON (indented on a terminal, compact when piped)")
    parser.add_argument("--floor-only", action="store_true",
                        help="print only the floor table, not each file")
    parser.add_argument("--max-member-size", type=member_size, default=DEFAULT_MEMBER_LIMIT,
                        metavar="SIZE",
                        help=f"refuse an ELF member of a kit archive larger than this "
                             f"(default {size_words(DEFAULT_MEMBER_LIMIT)}); it is held in a "
                             f"temporary file while it is read")


def execute(args: argparse.Namespace) -> int:
    # Thousands of fatbin entries are small objects, none in a cycle: the cyclic collector
    # only costs time here (half the work on a library of 10,000 entries).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _execute(args)
    finally:
        if collecting:
            gc.enable()


def _execute(args: argparse.Namespace) -> int:
    path = _kit_tarball(args.path) or args.path
    inspection = inspect_path(path, member_limit=args.max_member_size, partial=True,
                              limit_hint=" (--max-member-size)")
    if args.json:
        # Compact when piped: the C encoder is several times faster (jq re-indents).
        indent = 2 if sys.stdout.isatty() else None
        sys.stdout.write(dumps_json(inspection, indent) + "\n")
    else:
        sys.stdout.write(render_text(inspection, files=not args.floor_only))
        if args.floor_only:  # the table alone would hide what could not be read as usual
            for info in inspection.files:
                for remark in info.remarks:
                    print(f"ninfer-kits: note: {printable(info.path)}: {printable(remark)}",
                          file=sys.stderr)
    if inspection.unreadable:
        sys.stdout.flush()
        raise inspection.unreadable_error()
    return 0


def _kit_tarball(path: str) -> str | None:
    """A kit folder's plain kit tarball, once kitdir checked the folder; else None (read as is)."""
    import os

    if not os.path.isdir(path) or os.path.islink(path):
        return None
    try:
        names = os.listdir(path)
    except OSError:
        return None  # inspect_path says what is wrong
    if "kit" in names or not any(name.endswith(".tar.gz") for name in names) or not (
            "BUILDINFO.txt" in names or "SHA256SUMS" in names):
        return None
    from pathlib import Path

    from ninfer_kits.kit.kitdir import read_kit_dir

    kit = read_kit_dir(Path(path))
    other = (f"; its portable tarball: ninfer-kits inspect {printable(str(kit.portable.path))}"
             if kit.portable is not None else "")
    print(f"ninfer-kits: note: {printable(path)} is a kit folder ({len(kit.files)} files, "
          f"SHA256SUMS ok): reading its kit tarball {printable(kit.asset)}{other}",
          file=sys.stderr)
    return str(kit.tarball)


def render_text(inspection: Inspection, files: bool = True) -> str:
    parts = [_describe_file(info) for info in inspection.files] if files else []
    if inspection.skipped:
        parts.append("".join(f"skipped: {printable(note.path)}: {note.why}\n"
                             for note in inspection.skipped))
    count = len(inspection.files)
    missing = len(inspection.unreadable)
    unread = (f"; {missing} path{'s' * (missing != 1)} could not be read, see below"
              if missing else "")
    title = (f"Runtime floor of {printable(inspection.source)} "
             f"({count} ELF file{'s' * (count != 1)}{unread}):")
    parts.append(f"{title}\n\n{render_table(inspection.floor.table)}\n")
    return "\n".join(parts)


def _describe_file(info: ElfInfo) -> str:
    lines = [f"{printable(info.path)}: ELF{info.elf_class} {info.machine} {info.type}"]
    fields = [
        ("interpreter", info.interpreter or ""),
        ("soname", info.soname or ""),
        ("needed", " ".join(info.needed)),
        ("rpath", ":".join(info.rpath)),
        ("runpath", ":".join(info.runpath)),
        ("build-id", info.build_id or ""),
    ]
    lines += [f"  {name:<12}{printable(value)}" for name, value in fields if value]
    lines += [f"  {'versions':<12}{printable(need.library)}: "
              f"{printable(' '.join(sorted(need.versions, key=SymbolVersion.parse)))}"
              for need in info.version_needs]
    loaded = [entry for entry in info.device_code if entry.placement == "fatbin"]
    relocatable = [entry for entry in info.device_code if not entry.loadable]
    embedded: dict[str, list[FatbinEntry]] = {}
    for entry in info.device_code:
        if entry.placement in ("data", "segment"):
            embedded.setdefault(entry.where, []).append(entry)
    if loaded:
        lines.append(f"  {'cuda':<12}{_device_summary(loaded)}")
    for where, entries in embedded.items():
        why = ("found without section headers" if where.startswith("segment ")
               else "fatbin containers outside .nv_fatbin, loaded by the library itself; "
                    "cuobjdump does not list them")
        lines.append(f"  {'cuda':<12}{_device_summary(entries)} in {printable(where)} ({why})")
    if relocatable:
        lines.append(f"  {'relocatable':<12}{_device_summary(relocatable)} "
                     f"(device-link inputs; the CUDA runtime JIT-links their PTX when the "
                     f"SASS does not fit the GPU)")
    lines += [f"  {'remark':<12}{printable(remark)}" for remark in info.remarks]
    return "\n".join(lines) + "\n"


def _device_summary(entries: list[FatbinEntry]) -> str:
    counts = Counter((entry.kind, entry.arch, entry.compressed) for entry in entries)
    pieces = [
        f"{kind_label(kind)} {arch}{' (compressed)' * compressed} ×{n}"
        for (kind, arch, compressed), n in sorted(
            counts.items(), key=lambda item: (*device_code_order(*item[0][:2]), item[0][2]))
    ]
    return ", ".join(pieces)
