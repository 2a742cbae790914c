"""The inspector stage: turn a file, a folder or a kit archive into ELF facts and a floor.

What a path is comes from looking at it, never from its name; special files are named and refused
without being opened (docs/inspect.md)."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING, NamedTuple

from ninfer_kits.errors import BadInput, NotAnElf
from ninfer_kits.inspector.elf import ELF_MAGIC, ElfInfo, read_elf_buffer
from ninfer_kits.inspector.floor import DeviceCode, KitFloor, kit_floor
from ninfer_kits.inspector.formats import (
    DEFAULT_MEMBER_LIMIT,
    HEAD_BYTES,
    SUPPORTED_WORDS,
    archive_format,
    unsupported_format,
)
from ninfer_kits.inspector.inputs import (
    kind_of,
    look,
    open_regular,
    os_error_words,
    printable,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from ninfer_kits.inspector.fatbin import FatbinEntry
    from ninfer_kits.inspector.inputs import StrPath

JSON_SCHEMA_VERSION = 3
TARBALL_NAMES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tar.zst")
LISTED = 10  # unreadable paths named in the error; the rest are counted


class PathNote(NamedTuple):
    path: str
    why: str


class Inspection(NamedTuple):
    source: str
    files: tuple[ElfInfo, ...]
    floor: KitFloor
    skipped: tuple[PathNote, ...] = ()  # in a folder: not regular files, never opened
    unreadable: tuple[PathNote, ...] = ()

    def unreadable_error(self) -> BadInput:
        return BadInput(describe_unreadable(self.source, self.unreadable))


def inspect_path(path: StrPath, *, member_limit: int = DEFAULT_MEMBER_LIMIT,
                 partial: bool = False, limit_hint: str = "") -> Inspection:
    """A folder's unreadable parts raise BadInput, unless `partial`: then they come back in
    `unreadable`, for the caller to report after the rest."""
    path = path_text(path)
    mode = look(path).st_mode
    skipped: list[PathNote] = []
    unreadable: list[PathNote] = []
    if stat.S_ISDIR(mode):
        files = _inspect_folder(path, skipped, unreadable)
    elif stat.S_ISREG(mode):
        files = _inspect_file(path, member_limit, limit_hint)
    else:
        raise BadInput(f"{printable(path)}: {kind_of(mode)}, not a regular file "
                       f"(inspect reads an ELF file, a folder or a kit archive)")
    if unreadable and (not partial or not files):
        raise BadInput(describe_unreadable(path, unreadable))
    if not files:
        raise BadInput(f"{printable(path)}: holds no ELF file")
    return Inspection(source=path, files=files, floor=kit_floor(files),
                      skipped=tuple(skipped), unreadable=tuple(unreadable))


def path_text(path: StrPath) -> str:
    """`str(pathlib.Path(path))` without loading pathlib (a quick `inspect` has no other use
    for it)."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"a path as text, not {type(text).__name__}")
    stripped = text.lstrip("/")
    slashes = len(text) - len(stripped)
    root = "//" if slashes == 2 else "/" if slashes else ""
    parts = [part for part in stripped.split("/") if part and part != "."]
    return root + "/".join(parts) if root or parts else "."


def describe_unreadable(source: str, unreadable: tuple[PathNote, ...] | list[PathNote]) -> str:
    listed = "; ".join(f"{printable(item.path)} ({item.why})" for item in unreadable[:LISTED])
    more = f"; and {len(unreadable) - LISTED} more" if len(unreadable) > LISTED else ""
    count = len(unreadable)
    return (f"{printable(source)}: {count} path{'s' * (count != 1)} under it could not be read, "
            f"so what they hold is not in the floor: {listed}{more}")


def _inspect_file(path: str, member_limit: int, limit_hint: str) -> tuple[ElfInfo, ...]:
    shown = path
    with open_regular(path, shown) as file:
        head = file.head(HEAD_BYTES)
        if head[:4] == ELF_MAGIC:
            return (file.read_with(lambda data: read_elf_buffer(data, shown)),)
    if archive_format(head) is not None or unsupported_format(head) is not None:
        return _inspect_archive(path, member_limit, limit_hint)
    if not head:
        raise NotAnElf(f"{printable(shown)}: an empty file, not an ELF file")
    starts = f"it starts with {head[:8].hex(' ')}"
    if os.path.basename(path).endswith(TARBALL_NAMES):
        raise NotAnElf(f"{printable(shown)}: named like a kit archive, but neither "
                       f"{SUPPORTED_WORDS} nor an ELF file ({starts})")
    raise NotAnElf(f"{printable(shown)}: not an ELF file, a folder or a kit archive ({starts})")


def _inspect_archive(path: str, member_limit: int, limit_hint: str) -> tuple[ElfInfo, ...]:
    from ninfer_kits.inspector.archive import KitArchive

    files = []
    with KitArchive(path, member_limit=member_limit, limit_hint=limit_hint) as archive:
        for member in archive:
            if member.kind != "file" or member.size < 4 or member.head(4) != ELF_MAGIC:
                continue
            with member.contents() as data:
                files.append(read_elf_buffer(data, member.name,
                                             f"{path}: member {member.name}"))
    return tuple(sorted(files, key=lambda info: info.path))


def _inspect_folder(folder: str, skipped: list[PathNote],
                    unreadable: list[PathNote]) -> tuple[ElfInfo, ...]:
    """Every regular ELF file under the folder; symlinks are not followed (a kit's
    `libx.so -> libx.so.1` would count twice)."""
    found: list[tuple[list[str], ElfInfo]] = []
    pending = [(folder, ".")]
    while pending:
        current, current_relative = pending.pop()
        try:
            with os.scandir(current) as listing:
                entries = list(listing)
        except OSError as error:
            unreadable.append(PathNote(current_relative, os_error_words(error)))
            continue
        for entry in entries:
            item = _child(current, entry.name)
            relative = _child(current_relative, entry.name)
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as error:
                unreadable.append(PathNote(relative, os_error_words(error)))
                continue
            if stat.S_ISLNK(mode):
                continue
            if stat.S_ISDIR(mode):
                pending.append((item, relative))
            elif stat.S_ISREG(mode):
                info = _folder_file(item, relative, unreadable)
                if info is not None:
                    found.append((relative.split("/"), info))
            else:
                skipped.append(PathNote(relative, f"{kind_of(mode)}, not a regular file: not "
                                                  f"read"))
    skipped.sort(key=lambda note: note.path)
    unreadable.sort(key=lambda note: note.path)
    return tuple(info for _, info in sorted(found, key=lambda pair: pair[0]))


def _child(folder: str, name: str) -> str:
    """As pathlib joins them: `kit/x`, `/x`, and `x` in `.`."""
    if folder == ".":
        return name
    return folder + name if folder.endswith("/") else f"{folder}/{name}"


def _folder_file(item: str, relative: str, unreadable: list[PathNote]) -> ElfInfo | None:
    try:
        with open_regular(item) as file:
            if file.head(4) != ELF_MAGIC:
                return None
            return file.read_with(lambda data: read_elf_buffer(data, relative, item))
    except NotAnElf:
        raise
    except BadInput as error:  # opening or reading it failed: the message names the path
        unreadable.append(PathNote(relative, str(error).split(": ", 1)[-1]))
        return None


def to_json(inspection: Inspection) -> dict[str, object]:
    return _document(inspection, _cuda_json)


def dumps_json(inspection: Inspection, indent: int | None = None) -> str:
    """`json.dumps(to_json(...), sort_keys=True)`, faster for thousands of fatbin entries: one
    template per distinct entry, put in place of a marker in the dump of the rest."""
    import json

    if indent is not None:
        return json.dumps(to_json(inspection), indent=indent, sort_keys=True)
    pieces = json.dumps(_document(inspection, lambda _info: _CUDA_MARKER),
                        sort_keys=True).split(json.dumps(_CUDA_MARKER))
    if len(pieces) != len(inspection.files) + 1:  # cannot be (no name holds a NUL); if it were
        return json.dumps(to_json(inspection), sort_keys=True)
    templates: dict[tuple[object, ...], tuple[str, str]] = {}
    out = [pieces[0]]
    for info, piece in zip(inspection.files, pieces[1:], strict=True):
        entries = []
        for entry in info.device_code:
            key = (entry.section, entry.segment, entry.kind, entry.arch, entry.compressed)
            template = templates.get(key)
            if template is None:
                text = json.dumps(_entry_json(entry, payload_size=-1), sort_keys=True)
                before, after = text.split('"payload_size": -1')
                template = templates[key] = (before + '"payload_size": ', after)
            entries.append(f"{template[0]}{entry.payload_size}{template[1]}")
        out += ["[", ", ".join(entries), "]", piece]
    return "".join(out)


_CUDA_MARKER = "\0cuda\0"


def _document(inspection: Inspection,
              cuda: Callable[[ElfInfo], object]) -> dict[str, object]:
    from ninfer_kits import __version__

    floor = inspection.floor
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": f"ninfer-kits {__version__}",
        "source": inspection.source,
        "files": [_file_json(info, cuda(info)) for info in inspection.files],
        "skipped": [{"path": note.path, "why": note.why} for note in inspection.skipped],
        "unreadable": [{"path": note.path, "why": note.why} for note in inspection.unreadable],
        "floor": {
            "machines": list(floor.machines),
            "interpreters": list(floor.interpreters),
            "symbol_versions": {
                item.prefix: {"floor": item.version, "name": item.name,
                              "libraries": list(item.libraries), "needed_by": list(item.needed_by)}
                for item in floor.prefix_floors
            },
            "versions_by_library": {lib: list(names) for lib, names in floor.versions_by_library},
            "sonames": list(floor.sonames),
            "provided_in_kit": list(floor.provided_in_kit),
            "rpath": list(floor.rpath),
            "runpath": list(floor.runpath),
            "search_paths": {soname: [{"tag": item.tag, "path": item.path} for item in paths]
                             for soname, paths in floor.search_paths},
            "cuda": {"sass": list(floor.sass), "ptx": list(floor.ptx),
                     "relocatable": _device_code_json(floor.relocatable),
                     "other": _device_code_json(floor.other_device_code),
                     "embedded": _device_code_json(floor.embedded),
                     "embedded_in": list(floor.embedded_in)},
            "table": [{"requirement": row.requirement, "why": row.why} for row in floor.table],
        },
    }


def _file_json(info: ElfInfo, cuda: object) -> dict[str, object]:
    return {
        "path": info.path,
        "class": info.elf_class,
        "machine": info.machine,
        "type": info.type,
        "interpreter": info.interpreter,
        "soname": info.soname,
        "needed": list(info.needed),
        "rpath": list(info.rpath),
        "runpath": list(info.runpath),
        "build_id": info.build_id,
        "version_needs": {need.library: list(need.versions) for need in info.version_needs},
        "version_defs": list(info.version_defs),
        "remarks": list(info.remarks),
        "cuda": cuda,
    }


def _cuda_json(info: ElfInfo) -> list[dict[str, object]]:
    return [_entry_json(entry, entry.payload_size) for entry in info.device_code]


def _entry_json(entry: FatbinEntry, payload_size: int) -> dict[str, object]:
    return {"section": entry.section or None, "segment": entry.segment,
            "placement": entry.placement, "loadable": entry.loadable, "kind": entry.kind,
            "arch": entry.arch, "compressed": entry.compressed, "payload_size": payload_size}


def _device_code_json(items: tuple[DeviceCode, ...]) -> list[dict[str, object]]:
    return [{"kind": item.kind, "arch": item.arch, "count": item.count} for item in items]
