"""What a toolchain image says about itself in /etc/ninfer-kits/toolchain.toml (its sysroot's
libraries, package roots and the libraries it built), validated when read; an ordinary image has
none. The keys: docs/portable.md, "Older distributions"."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.config.tables import Table, read_data_file

FACTS_FILE = "/etc/ninfer-kits/toolchain.toml"
SCHEMA = 1
FOLDER = re.compile(r"/[^\0]*[^/]")  # absolute, no trailing slash
SHA256 = re.compile(r"[0-9a-f]{64}")
NAME = re.compile(r"[a-z0-9][a-z0-9+.-]*")


@dataclass(frozen=True)
class BuiltLibrary:
    """One record of `built`: a library set the image built from a pinned upstream tarball."""

    name: str  # "ffmpeg"
    version: str
    licence: str  # an SPDX expression
    licence_files: tuple[str, ...]  # in the image's root
    source: str  # the tarball it was built from, kept in the image
    source_sha256: str
    build_files: tuple[str, ...]  # the scripts that built it, kept in the image
    files: dict[str, str]  # every file it installed (path in the root) → sha256
    record: str  # the record's own path in the root


@dataclass(frozen=True)
class ImageFacts:
    library_path: tuple[str, ...] = ()
    package_roots: tuple[str, ...] = ()
    built: tuple[BuiltLibrary, ...] = ()


NO_FACTS = ImageFacts()  # an ordinary image's, and this host's


def read_image_facts(root: Path) -> ImageFacts:
    """The facts of the exported image at `root`; empty ones where it has no FACTS_FILE."""
    path = root / FACTS_FILE.lstrip("/")
    if not path.is_file():
        return NO_FACTS
    return _read(path, root)


def check_schema(table: Table, schema: int) -> None:
    """A data file's `schema` must be `schema`: this ninfer-kits reads no other."""
    if (found := table.integer("schema")) != schema:
        raise table.error("schema", f"unsupported schema {found} (this ninfer-kits reads "
                                    f"schema {schema})")


@functools.cache
def _read(path: Path, root: Path) -> ImageFacts:
    table = read_data_file(path, "the toolchain image's facts file")
    table.check_keys(("schema",), ("library_path", "package_roots", "built"))
    check_schema(table, SCHEMA)
    library_path = _folders(table, "library_path")
    package_roots = _folders(table, "package_roots")
    built: tuple[BuiltLibrary, ...] = ()
    if "built" in table.data:
        (folder,) = _folders(table, "built", one=True)
        records = sorted((root / folder.lstrip("/")).glob("*.toml"))
        built = tuple(_built(read_data_file(record, "record of a library built in the image"),
                             f"{folder}/{record.name}") for record in records)
    return ImageFacts(library_path, package_roots, built)


def _folders(table: Table, key: str, one: bool = False) -> tuple[str, ...]:
    if key not in table.data:
        return ()
    folders = (table.text(key),) if one else table.texts(key)
    for folder in folders:
        if not FOLDER.fullmatch(folder):
            raise table.error(key, f"{folder!r} is not an absolute folder")
    return folders


def _built(table: Table, record: str) -> BuiltLibrary:
    table.check_keys(("schema", "name", "version", "licence", "licence_files", "source",
                      "source_sha256", "build_files", "files"))
    if table.integer("schema") != SCHEMA:
        raise table.error("schema", f"unsupported schema (this ninfer-kits reads {SCHEMA})")
    files = table.table("files")
    hashes = {path: files.text(path, SHA256) for path in files.data}
    for path in hashes:
        if not path.startswith("/"):
            raise files.error(path, "a file's path must be absolute (in the image's root)")
    if not hashes:
        raise table.error("files", "lists no file")
    return BuiltLibrary(name=table.text("name", NAME), version=table.text("version"),
                        licence=table.text("licence"),
                        licence_files=table.texts("licence_files"),
                        source=table.text("source"),
                        source_sha256=table.text("source_sha256", SHA256),
                        build_files=table.texts("build_files"), files=hashes, record=record)
