"""The licences of code compiled into a kit's binaries from outside the upstream's tree: each file's
package (provenance), its licence and texts in kit/third_party/. A file whose terms cannot be
named fails the build: docs/build.md, "Code compiled in from the toolchain"."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config.resources import data_file
from ninfer_kits.config.tables import Table, read_data_file
from ninfer_kits.errors import CheckFailed
from ninfer_kits.kit import attestations, spdx
from ninfer_kits.loader.rootfs import RootFS
from ninfer_kits.pipeline.image_facts import check_schema, read_image_facts
from ninfer_kits.pipeline.provenance import (
    MANAGER_WORDS,
    LicenseUnknown,
    Origin,
    PackageIndex,
    licence_path,
    package_folder,
    write_notice,
)

SCHEMA = 1
DATA_FILE = data_file("compiled_licences.toml")
TEXTS = data_file("licences")
README = "third_party/README"  # in kit/, as pipeline.repair writes it for bundled libraries
SECTION = "Source code compiled into the binaries"
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+-]*\.txt")
# A leading comment: one /* … */ block, or a run of // lines.
_BLOCK = re.compile(r"\A\s*(/\*.*?\*/)", re.DOTALL)
_LINES = re.compile(r"\A\s*((?://[^\n]*\n?)+)")


@dataclass(frozen=True)
class Part:
    """One [parts.NAME] of data/compiled_licences.toml."""

    name: str
    package: str
    paths: tuple[str, ...]
    licence: str
    header: str  # "" when the header's own comment is not shipped
    texts: tuple[str, ...]

    def claims(self, package: str, canonical: str) -> bool:
        return package == self.package and any(fnmatch.fnmatchcase(canonical, pattern)
                                               for pattern in self.paths)


@dataclass(frozen=True)
class LicenceTable:
    path: Path
    parts: tuple[Part, ...]

    @property
    def packages(self) -> frozenset[str]:
        return frozenset(part.package for part in self.parts)


@dataclass(frozen=True)
class CompiledFile:
    path: str  # as the build named it, in the build environment
    where: tuple[str, ...]  # "device", "host" or both


@dataclass(frozen=True)
class CompiledIn:
    """One package (or part of one) whose code reached the binaries: a README row, an SBOM entry."""

    package: str
    version: str
    manager: str  # "dpkg" or "wheel"
    part: str  # the table's part ("cub"), or "" for the whole package under its own licence
    licence: str  # an SPDX expression (table), or the package's own names (provenance)
    terms: tuple[str, ...]  # its licence texts, relative to kit/'s parent
    files: tuple[CompiledFile, ...]


def load_table(path: Path | None = None) -> LicenceTable:
    """The shipped table, or the file at `path`; BadInput names file, line, table and key."""
    root = read_data_file(path or DATA_FILE, "the compiled-in licence table")
    root.check_keys(("schema", "parts"))
    check_schema(root, SCHEMA)
    section = root.table("parts")
    parts = []
    for name in section.data:
        if not _NAME.fullmatch(name):
            raise section.error(name, f"invalid part name {name!r} (lowercase letters, digits, "
                                      "'-')")
        parts.append(_part(section.table(name)))
    return LicenceTable(root.source.path, tuple(parts))


def _part(table: Table) -> Part:
    table.check_keys(("package", "paths", "licence"), ("header", "texts"))
    texts = table.strings("texts", _TEXT) if "texts" in table.data else ()
    for text in texts:
        if not (TEXTS / text).is_file():
            raise table.error("texts", f"{text}: no such licence text in {TEXTS}")
    header = table.optional_text("header") or ""
    if not header and not texts:
        raise table.error("texts", "no licence text: give `texts`, `header`, or both")
    return Part(table.id, table.text("package"), table.texts("paths"), _expression(table),
                header, texts)


def find_licences(files: Mapping[str, tuple[str, ...]], root: Path, table: LicenceTable
                  ) -> tuple[tuple[CompiledIn, ...], dict[str, bytes]]:
    """The rows for `files` (path → where), and the licence texts to ship (path under kit/ →
    bytes); LicenseUnknown names every file that fails."""
    rootfs = RootFS(root)
    index = PackageIndex(rootfs, read_image_facts(root))
    origins = index.origins(list(files))
    failed = [str(origin) for origin in origins if isinstance(origin, LicenseUnknown)]
    groups: dict[tuple[str, str], tuple[Origin, Part | None, list[str]]] = {}
    for path, origin in zip(files, origins, strict=True):
        if isinstance(origin, LicenseUnknown):
            continue
        canonical = index.canonical(path) or path
        part = next((p for p in table.parts if p.claims(origin.package, canonical)), None)
        if part is None and origin.package in table.packages:
            failed.append(f"{path} ({canonical}): package {origin.package} {origin.version} is "
                          f"in {table.path}, but none of its parts' paths match this file, so "
                          "its licence cannot be determined")
            continue
        key = (origin.package, part.name if part else "")
        groups.setdefault(key, (origin, part, []))[2].append(path)
    if failed:
        raise LicenseUnknown(f"{len(failed)} files compiled into the kit's binaries have no "
                             "licence we can name:\n" + "\n".join(f"  {f}" for f in failed))
    rows: list[CompiledIn] = []
    texts: dict[str, bytes] = {}
    for (_, _), (origin, part, paths) in sorted(groups.items()):
        terms = _terms(rootfs, origin, part, paths)
        for relative, data in terms.items():
            if texts.setdefault(relative, data) != data:
                raise CheckFailed(f"kit/{relative}: two licence texts would be written there")
        rows.append(CompiledIn(
            package=origin.package, version=origin.version, manager=origin.manager,
            part=part.name if part else "", licence=part.licence if part else origin.license,
            terms=tuple(f"kit/{relative}" for relative in terms),
            files=tuple(CompiledFile(path, files[path]) for path in sorted(paths))))
    return tuple(rows), texts


def _terms(rootfs: RootFS, origin: Origin, part: Part | None, paths: list[str]
           ) -> dict[str, bytes]:
    folder = f"third_party/{package_folder(origin)}"
    if part is None:  # the package's own licence file, named as the portable repair names it
        name = "copyright" if origin.manager == "dpkg" else "LICENSE"
        return {f"{folder}/{name}": licence_path(rootfs, origin).read_bytes()}
    terms: dict[str, bytes] = {}
    if part.header:
        comments = {_leading_comment(rootfs, path) for path in paths}
        notices = sorted(comment for comment in comments if part.header in comment)
        if not notices:
            raise LicenseUnknown(f"{', '.join(sorted(paths))}: part {part.name} of package "
                                 f"{origin.package} {origin.version} ships each file's own notice, "
                                 f"but none of them holds {part.header!r}")
        terms[f"{folder}/{part.name}.LICENSE"] = "\n\n".join(notices).encode() + b"\n"
    for text in part.texts:
        terms[f"{folder}/{text}"] = (TEXTS / text).read_bytes()
    return terms


def _leading_comment(rootfs: RootFS, path: str) -> str:
    data = rootfs.read_bytes(path)
    text = (data or b"")[:65536].decode("utf-8", errors="replace")
    match = _BLOCK.match(text) or _LINES.match(text)
    return match.group(1).rstrip() if match else ""


def write_licences(kit_root: Path, rows: tuple[CompiledIn, ...], texts: dict[str, bytes],
                   upstream: str) -> tuple[str, ...]:
    """The texts and the README's section into kit_root (a text already there must be the same
    bytes); the files written, relative to kit/'s parent."""
    for relative, data in sorted(texts.items()):
        dest = kit_root / relative
        if dest.exists() and dest.read_bytes() != data:
            raise CheckFailed(f"{dest}: holds another text than the licence of the code "
                              "compiled in (two packages of one name?)")
        write_notice(dest, data)
    # what the SBOM lists as components
    write_notice(kit_root / attestations.COMPILED_IN,
                 attestations.compiled_in_json(_components(rows)))
    readme = kit_root / README
    before = readme.read_text(encoding="utf-8") + "\n" if readme.exists() else ""
    write_notice(readme, (before + render_section(rows, upstream, kit_root.name)).encode())
    return tuple(sorted({f"{kit_root.name}/{relative}" for relative in (*texts, README)}))


def _components(rows: tuple[CompiledIn, ...]) -> list[attestations.CompiledIn]:
    """One SBOM component per package: a package's parts are one purl, under all their licences."""
    merged: dict[tuple[str, str, str], list[CompiledIn]] = {}
    for row in rows:
        merged.setdefault((row.package, row.version, row.manager), []).append(row)
    return [attestations.CompiledIn(
        package=package, version=version, manager=manager,
        licence=_all_of(part.licence for part in parts),
        files=tuple(sorted({item.path for part in parts for item in part.files})),
        terms=tuple(sorted({path for part in parts for path in part.terms})))
        for (package, version, manager), parts in sorted(merged.items())]


def _expression(table: Table) -> str:
    """The part's `licence`: an SPDX expression (the SBOM's, the licence policy's input)."""
    try:
        return spdx.normalise(table.text("licence"))
    except spdx.NotAnExpression as error:
        raise table.error("licence", str(error)) from None


def _all_of(licences: Iterable[str]) -> str:
    """One SPDX expression, each term once; Debian's words (no expression) are joined instead."""
    named = sorted(set(licences))
    if all(spdx.is_expression(licence) for licence in named):
        return spdx.all_of(named)
    return " AND ".join(named)


SECTION_HEAD = """\
{title}
{rule}

The programs in {kit}/bin contain code compiled from these files of the build environment,
outside {upstream}'s own tree (whose licence files are in {kit}/). Device code: the files
named by the line tables of the binaries' cubins (nvcc -lineinfo). Host code: the files the
compiler's dependency output lists (`ninja -t deps`), which names every header an object
included, whether it produced code or not: a superset. Each is named with the package that
installed it, that package's version and licence, and the files here holding its terms.
"""


def render_section(rows: tuple[CompiledIn, ...], upstream: str, kit: str) -> str:
    title = f"{SECTION} ({kit}/bin)"
    parts = [SECTION_HEAD.format(title=title, rule="=" * len(title), kit=kit,
                                 upstream=upstream)]
    if not rows:
        parts.append("None: only the upstream's own files reached the binaries.\n")
    for row in rows:
        manager = MANAGER_WORDS[row.manager]
        part = f", its {row.part} files" if row.part else ""
        lines = [f"{row.package} {row.version} ({manager}{part})",
                 f"  licence:  {row.licence}",
                 f"  terms:    {', '.join(row.terms)}",
                 f"  files ({len(row.files)}):"]
        lines += [f"    {'+'.join(f.where):<11} {f.path}" for f in row.files]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)
