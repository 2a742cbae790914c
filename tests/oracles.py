"""The ground truth: what readelf and cuobjdump say about a file, parsed for comparison."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

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


def cuobjdump_entries(path: Path) -> Counter[tuple[str, str]]:
    """(kind, arch) as cuobjdump 13.5 lists them: `sm_86`, `sm_120a`; PTX named `sm_90`."""
    found: Counter[tuple[str, str]] = Counter()
    for flag, kind in (("--list-elf", "sass"), ("--list-ptx", "ptx")):
        text = run(cuobjdump(), "--all-fatbin", flag, path)
        for arch in re.findall(r"\.(sm_\d+[a-z]?)\.(?:cubin|ptx)", text):
            found[(kind, arch)] += 1
    return found


def as_cuobjdump_names(entries: list[tuple[str, str]]) -> Counter[tuple[str, str]]:
    """Our names in cuobjdump's spelling: it shows an `sm_100f` entry as `sm_100` (seen with
    cuobjdump 13.5) and names PTX by `sm_` rather than `compute_`; the `a` suffix it keeps."""
    renamed: Counter[tuple[str, str]] = Counter()
    for kind, arch in entries:
        arch = arch.replace("compute_", "sm_")
        arch = arch[:-1] if arch.endswith("f") else arch
        renamed[(kind, arch)] += 1
    return renamed
