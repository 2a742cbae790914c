"""The ground truth: what readelf and cuobjdump say about a file, parsed for comparison."""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools import cuobjdump, run, tool


@dataclass(frozen=True)
class ReadelfView:
    needed: tuple[str, ...]
    soname: str | None
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    interpreter: str | None
    build_id: str | None
    version_needs: dict[str, set[str]]


def readelf(path: Path) -> ReadelfView:
    text = run(tool("readelf"), "-d", "-V", "-W", "-l", "-n", path)
    tags: dict[str, list[str]] = {}
    for tag, value in re.findall(r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+[^\[]*\[(.*)\]", text):
        tags.setdefault(tag, []).append(value)
    interpreter = re.search(r"\[Requesting program interpreter: (.*)\]", text)
    build_id = re.search(r"Build ID: ([0-9a-f]+)", text)
    return ReadelfView(
        needed=tuple(tags.get("NEEDED", [])),
        soname=next(iter(tags.get("SONAME", [])), None),
        rpath=tuple(p for v in tags.get("RPATH", []) for p in v.split(":")),
        runpath=tuple(p for v in tags.get("RUNPATH", []) for p in v.split(":")),
        interpreter=interpreter.group(1) if interpreter else None,
        build_id=build_id.group(1) if build_id else None,
        version_needs=_version_needs(text),
    )


def _version_needs(text: str) -> dict[str, set[str]]:
    section = text.split("Version needs section", 1)
    needs: dict[str, set[str]] = {}
    if len(section) < 2:
        return needs
    current = None
    for line in section[1].splitlines()[1:]:
        file_match = re.search(r"File: (\S+)\s+Cnt:", line)
        name_match = re.search(r"Name: (\S+)\s+Flags:", line)
        if file_match:
            current = file_match.group(1)
            needs[current] = set()
        elif name_match and current:
            needs[current].add(name_match.group(1))
        elif line.strip() and not line.startswith(" "):
            break
    return needs


def cuobjdump_entries(path: Path, all_fatbin: bool = True) -> Counter[tuple[str, str]]:
    """(kind, arch) as cuobjdump 13.5 lists them: `sm_86`, `sm_120a`; PTX named `sm_90`.
    Every fatbin section (`--all-fatbin`), or cuobjdump's default (see `cuobjdump_loaded`)."""
    found: Counter[tuple[str, str]] = Counter()
    for flag, kind in (("--list-elf", "sass"), ("--list-ptx", "ptx")):
        text = run(cuobjdump(), *(["--all-fatbin"] if all_fatbin else []), flag, path)
        for arch in re.findall(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)", text):
            found[(kind, arch)] += 1
    return found


def section_names(path: Path) -> set[str]:
    text = run(tool("readelf"), "-S", "-W", path)
    return set(re.findall(r"^\s*\[\s*\d+\]\s+(\S+)", text, re.MULTILINE))


def cuobjdump_loaded(path: Path) -> Counter[tuple[str, str]]:
    """What the CUDA runtime loads: `.nv_fatbin`. cuobjdump without `--all-fatbin` lists the
    executable fatbin, or the relocatable one when a file has no executable fatbin (its
    --help says so), so a file without `.nv_fatbin` (readelf) loads nothing."""
    if ".nv_fatbin" not in section_names(path):
        return Counter()
    return cuobjdump_entries(path, all_fatbin=False)


def cuobjdump_relocatable(path: Path) -> Counter[tuple[str, str]]:
    """The entries of `__nv_relfatbin`: everything `--all-fatbin` lists that is not loaded."""
    return cuobjdump_entries(path) - cuobjdump_loaded(path)


def cuobjdump_says_no_ptx(path: Path) -> bool:
    """cuobjdump's own words for a file whose loaded fatbin has no PTX (13.5: "No PTX file
    found to extract from '...'"), which it prints on stdout or stderr."""
    result = subprocess.run([str(cuobjdump()), "--list-ptx", str(path)], capture_output=True,
                            text=True, check=False)
    return "No PTX file found" in result.stdout + result.stderr


def as_cuobjdump_names(entries: list[tuple[str, str]]) -> Counter[tuple[str, str]]:
    """Our names in cuobjdump's spelling: it shows an `sm_100f` SASS entry as `sm_100` but a
    `compute_100f` PTX entry as `sm_100f` (seen with cuobjdump 13.5), and names PTX by `sm_`
    rather than `compute_`; the `a` suffix it keeps. Entries of other kinds (LTO-IR) it does
    not list at all, so they are left out here."""
    renamed: Counter[tuple[str, str]] = Counter()
    for kind, arch in entries:
        if kind not in ("sass", "ptx"):
            continue
        arch = arch.replace("compute_", "sm_")
        arch = arch[:-1] if kind == "sass" and arch.endswith("f") else arch
        renamed[(kind, arch)] += 1
    return renamed


def containers_in_sections(path: Path, names: set[str] | None = None
                           ) -> dict[str, list[tuple[int, int]]]:
    """Every fatbin container (magic 0xBA55ED50, any version) in the file's allocated data
    sections other than the fatbin sections, as (file offset, length), by section. Found with
    pyelftools and a plain search: independent of the inspector's reader."""
    import struct

    from elftools.elf.elffile import ELFFile

    found: dict[str, list[tuple[int, int]]] = {}
    with path.open("rb") as stream:
        data = stream.read()
        for section in ELFFile(stream).iter_sections():
            flags, name = section["sh_flags"], section.name
            if (section["sh_type"] != "SHT_PROGBITS" or not flags & 0x2 or flags & 0x4
                    or name in (".nv_fatbin", "__nv_relfatbin")
                    or (names is not None and name not in names)):
                continue
            start, end = section["sh_offset"], section["sh_offset"] + section["sh_size"]
            at = data.find(b"\x50\xed\x55\xba", start, end)
            while at >= 0:
                _magic, _version, header, body = struct.unpack_from("<IHHQ", data, at)
                found.setdefault(name, []).append((at, header + body))
                at = data.find(b"\x50\xed\x55\xba", at + header + body, end)
    return found


def cuobjdump_of_containers(path: Path, containers: list[tuple[int, int]],
                            scratch: Path) -> Counter[tuple[str, str]]:
    """What cuobjdump lists in these containers, carved out of the file into one .fatbin (it
    reads containers laid back to back) — cuobjdump does not look for them in the library."""
    with path.open("rb") as stream, scratch.open("wb") as sink:
        for offset, length in containers:
            stream.seek(offset)
            blob = stream.read(length)
            sink.write(blob + b"\0" * (-len(blob) % 8))
    return cuobjdump_entries(scratch, all_fatbin=False)


@dataclass(frozen=True)
class SymbolsView:
    """A file's dynamic symbols as pyelftools reads them (through the section headers):
    name → the versions it is defined with (None: base or none), and the strong undefined
    references as (name, version or "")."""

    defined: dict[str, set[str | None]]
    needed: set[tuple[str, str]]


def dynamic_symbols(path: Path) -> SymbolsView:
    from elftools.elf.elffile import ELFFile

    bindable = {"STT_NOTYPE", "STT_OBJECT", "STT_FUNC", "STT_COMMON", "STT_TLS",
                "STT_GNU_IFUNC", "STT_LOOS"}  # STT_LOOS is how it names STT_GNU_IFUNC
    defined: dict[str, set[str | None]] = {}
    needed: set[tuple[str, str]] = set()
    with path.open("rb") as stream:
        elf: Any = ELFFile(stream)  # its sections' own classes (GNUVerNeedSection…), untyped
        table, versym = elf.get_section_by_name(".dynsym"), elf.get_section_by_name(
            ".gnu.version")
        definitions, needs = {}, {}
        if (section := elf.get_section_by_name(".gnu.version_d")) is not None:
            for version, names in section.iter_versions():
                if not version["vd_flags"] & 1:
                    definitions[version["vd_ndx"]] = next(names).name
        if (section := elf.get_section_by_name(".gnu.version_r")) is not None:
            for _library, entries in section.iter_versions():
                for entry in entries:
                    needs[entry["vna_other"] & 0x7FFF] = entry.name
        for index, symbol in enumerate(table.iter_symbols() if table is not None else ()):
            bind, kind = symbol["st_info"]["bind"], symbol["st_info"]["type"]
            if not index or not symbol.name or kind not in bindable or bind not in (
                    "STB_GLOBAL", "STB_WEAK", "STB_GNU_UNIQUE", "STB_LOOS"):
                continue
            raw = versym.get_symbol(index)["ndx"] if versym is not None else 1
            number = raw if isinstance(raw, int) else {"VER_NDX_LOCAL": 0,
                                                       "VER_NDX_GLOBAL": 1}[raw]
            if symbol["st_shndx"] == "SHN_UNDEF":
                if bind != "STB_WEAK":
                    needed.add((symbol.name, needs.get(number & 0x7FFF, "")))
            elif symbol["st_value"] or symbol["st_shndx"] == "SHN_ABS" or kind == "STT_TLS":
                defined.setdefault(symbol.name, set()).add(definitions.get(number & 0x7FFF))
    return SymbolsView(defined, needed)
