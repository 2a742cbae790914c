"""The inspector stage: turn a file, a folder or a kit tarball into ELF facts and a floor."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ninfer_kits.errors import BadInput
from ninfer_kits.inspector.elf import ELF_MAGIC, ElfInfo, is_elf, read_elf
from ninfer_kits.inspector.floor import DeviceCode, KitFloor, kit_floor

if TYPE_CHECKING:
    import tarfile

# 2: device code says which entries the CUDA runtime loads ("loadable"; floor "sass"/"ptx" count
# only those), relocatable entries are listed apart, entries of other kinds ("ltoir", "kind-N").
JSON_SCHEMA_VERSION = 2


@dataclass(frozen=True)
class Inspection:
    source: str
    files: tuple[ElfInfo, ...]
    floor: KitFloor


def inspect_path(path: Path) -> Inspection:
    """Inspect one ELF file, every ELF under a folder, or every ELF inside a .tar.gz kit."""
    if not path.exists():
        raise BadInput(f"{path}: no such file or folder")
    if path.is_dir():
        files = tuple(read_elf(item, str(item.relative_to(path))) for item in _elfs_under(path))
    elif _is_tarball(path):
        files = _inspect_tarball(path)
    else:
        files = (read_elf(path),)
    if not files:
        raise BadInput(f"{path}: holds no ELF file")
    return Inspection(source=str(path), files=files, floor=kit_floor(files))


def _elfs_under(folder: Path) -> Iterator[Path]:
    for item in sorted(folder.rglob("*")):
        if item.is_file() and not item.is_symlink() and is_elf(item):
            yield item


def _is_tarball(path: Path) -> bool:
    with path.open("rb") as stream:
        head = stream.read(4)
    return head[:2] == b"\x1f\x8b" or path.name.endswith((".tar", ".tar.gz", ".tgz"))


def _inspect_tarball(path: Path) -> tuple[ElfInfo, ...]:
    """Copy each ELF member to a private temporary folder, under a numbered name we choose."""
    import tarfile  # imported here: most runs inspect files or folders, and start-up counts
    import tempfile

    workdir = Path(tempfile.mkdtemp(prefix="ninfer-kits-inspect-"))
    try:
        with tarfile.open(path, "r:*") as archive:
            return tuple(_read_members(archive, workdir))
    except (tarfile.TarError, EOFError, OSError) as error:
        if isinstance(error, OSError) and error.errno is not None:
            raise
        raise BadInput(f"{path}: not a readable tarball ({error})") from error
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _read_members(archive: tarfile.TarFile, workdir: Path) -> Iterator[ElfInfo]:
    for index, member in enumerate(sorted(archive.getmembers(), key=lambda m: m.name)):
        if not member.isfile():
            continue
        stream = archive.extractfile(member)
        if stream is None or stream.read(4) != ELF_MAGIC:
            continue
        target = workdir / f"{index:06d}.elf"
        with archive.extractfile(member) as source, target.open("wb") as sink:  # type: ignore[union-attr]
            shutil.copyfileobj(source, sink, 1 << 20)
        yield read_elf(target, member.name)


def to_json(inspection: Inspection) -> dict[str, object]:
    """The versioned JSON form (`inspect --json`); schema in data/inspect.schema.json."""
    from ninfer_kits import __version__

    floor = inspection.floor
    return {
        "schema_version": JSON_SCHEMA_VERSION,
        "tool": f"ninfer-kits {__version__}",
        "source": inspection.source,
        "files": [_file_json(info) for info in inspection.files],
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
            "search_paths": {soname: list(paths) for soname, paths in floor.search_paths},
            "cuda": {"sass": list(floor.sass), "ptx": list(floor.ptx),
                     "relocatable": _device_code_json(floor.relocatable),
                     "other": _device_code_json(floor.other_device_code)},
            "table": [{"requirement": row.requirement, "why": row.why} for row in floor.table],
        },
    }


def _file_json(info: ElfInfo) -> dict[str, object]:
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
        "cuda": [
            {"section": e.section, "loadable": e.loadable, "kind": e.kind, "arch": e.arch,
             "compressed": e.compressed, "payload_size": e.payload_size}
            for e in info.device_code
        ],
    }


def _device_code_json(items: tuple[DeviceCode, ...]) -> list[dict[str, object]]:
    return [{"kind": item.kind, "arch": item.arch, "count": item.count} for item in items]
