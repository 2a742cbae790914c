"""The two things compared, read as trees of members. Two passes, so that two large kits that
are the same cost neither memory nor disk: the first lists and hashes every member, the second
reads again only those whose hashes differ (docs/repro.md, "Causes"). What of a kit folder is
not the kit's is left out and named in `Tree.left_out`."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast

from ninfer_kits.errors import BadInput
from ninfer_kits.files.trees import walk
from ninfer_kits.inspector.archive import HEAD_BYTES, KitArchive, TarHeader, archive_format
from ninfer_kits.inspector.inputs import ByteSource, look, open_regular, printable
from ninfer_kits.kit.flavours import beside
from ninfer_kits.kit.kitdir import (
    ATTESTATION_SUFFIXES,
    BUILDINFO,
    FIXED_FILES,
    SHA256SUMS,
    TARBALL_SUFFIX,
)
from ninfer_kits.repro.model import Side

KEEP = 1 << 20  # members up to this size are kept in memory by the first pass
BLOCK = 1 << 20

ARCHIVE, KIT_FOLDER, FOLDER, FILE = "archive", "kit-folder", "folder", "file"


@dataclass(frozen=True)
class Origin:
    """Where a member's bytes are: a file (`tarball` None), or member `name` of a tarball."""

    path: Path
    name: str = ""
    tarball: bool = False


@dataclass(frozen=True)
class Member:
    path: str
    side: Side
    origin: Origin | None  # None: no bytes (a folder, a link)
    small: bytes | None = None  # the bytes, when at most KEEP
    header: TarHeader | None = None  # from a tarball


@dataclass(frozen=True)
class Archive:
    """A tarball of one side: its path in the tree, its file, and what its bytes say."""

    path: str  # "" for a tarball compared as such; the asset's name in a kit folder
    role: str  # "kit" or a flavour's name in a kit folder: how two kit folders' tarballs pair
    file: Path
    sha256: str
    head: bytes  # the compression header (gzip: mtime, flags, OS)
    order: tuple[str, ...]  # its members' names in archive order


@dataclass(frozen=True)
class Tree:
    shown: str
    layout: str  # ARCHIVE, KIT_FOLDER, FOLDER, FILE
    members: dict[str, Member]
    archives: tuple[Archive, ...] = ()
    left_out: tuple[str, ...] = ()  # a kit folder's entries that are not the kit's


def read_tree(path: Path, shown: str) -> Tree:
    """What `path` holds as a tree of members; BadInput unless a folder or a regular file."""
    mode = look(path, shown).st_mode
    if stat.S_ISDIR(mode):
        if _is_kit_folder(path):
            return _kit_folder(path, shown)
        return Tree(shown, FOLDER, dict(_folder(path)))
    with open_regular(path, shown) as file:
        head = file.head(HEAD_BYTES)
    if archive_format(head) is not None:
        archive, members = _tarball(path, shown, "")
        return Tree(shown, ARCHIVE, members, (archive,))
    member = _file(path, path.name, path.lstat())
    return Tree(shown, FILE, {member.path: member})


def _is_kit_folder(path: Path) -> bool:
    """dist/<tag>/ or a release of it: a tarball beside BUILDINFO.txt or SHA256SUMS."""
    names = os.listdir(path)
    return (BUILDINFO in names or SHA256SUMS in names) and any(
        name.endswith(TARBALL_SUFFIX) for name in names)


def _kit_folder(path: Path, shown: str) -> Tree:
    members: dict[str, Member] = {}
    archives = []
    left_out = []
    for name in sorted(os.listdir(path)):
        status = (path / name).lstat()
        if name.endswith(TARBALL_SUFFIX) and stat.S_ISREG(status.st_mode):
            archive, inside = _tarball(path / name, f"{shown}/{name}", name)
            archives.append(archive)
            members.update(inside)
        elif name in FIXED_FILES or (name.endswith(ATTESTATION_SUFFIXES) and
                                     stat.S_ISREG(status.st_mode)):
            members.update(_entry(path / name, name, status))
        else:
            left_out.append(f"{name}/" if stat.S_ISDIR(status.st_mode) else name)
    return Tree(shown, KIT_FOLDER, members, tuple(archives), tuple(left_out))


def role(asset: str) -> str:
    """What a kit folder's tarball is: the plain kit ("kit") or another flavour's (its name)."""
    return next((kind.name for kind in beside() if asset.endswith(kind.suffix)), "kit")


def _folder(root: Path) -> Iterator[tuple[str, Member]]:
    """Every entry under `root` (symlinks not followed), sorted, with '/'-separated paths."""
    entries = walk(root)
    while True:
        try:
            found = next(entries, None)
        except OSError as error:
            raise BadInput(f"{printable(str(error.filename))}: cannot read it "
                           f"({error.strerror})") from error
        if found is None:
            return
        path, status = found
        yield from _entry(root / path, path, status).items()


def _entry(path: Path, name: str, status: os.stat_result) -> dict[str, Member]:
    mode = status.st_mode
    if stat.S_ISDIR(mode):
        return {name: Member(name, Side("folder", mode=stat.S_IMODE(mode)), None)}
    if stat.S_ISLNK(mode):
        return {name: Member(name, Side("symlink", link=os.readlink(path)), None)}
    if stat.S_ISREG(mode):
        return {name: _file(path, name, status)}
    # A FIFO or a device in an unpacked kit is compared by what it is, never opened.
    return {name: Member(name, Side(f"special ({stat.filemode(mode)[0]})",
                                    mode=stat.S_IMODE(mode)), None)}


def _file(path: Path, name: str, status: os.stat_result) -> Member:
    sink = _digest_file(path)
    return Member(name, Side("file", size=sink.size, mode=stat.S_IMODE(status.st_mode),
                             sha256=sink.hash.hexdigest()),
                  Origin(path), None if sink.kept is None else bytes(sink.kept))


class _Digest:
    """A sink (for Member.copy_to too): hashes what passes, keeps it when it is small."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.kept: bytearray | None = bytearray()
        self.size = 0

    def write(self, block: bytes | memoryview) -> int:
        self.hash.update(block)
        self.size += len(block)
        if self.kept is not None:
            if len(self.kept) + len(block) <= KEEP:
                self.kept += block
            else:
                self.kept = None
        return len(block)


def _tarball(path: Path, shown: str, prefix: str) -> tuple[Archive, dict[str, Member]]:
    members: dict[str, Member] = {}
    order = []
    with KitArchive(path, shown=shown) as archive:
        for member in archive:
            name = f"{prefix}/{member.name}" if prefix else member.name
            order.append(member.name)
            side = Side(member.kind, size=member.size, mode=member.mode, link=member.link)
            origin = small = None
            if member.kind == "file":
                sink = _Digest()
                member.copy_to(cast(BinaryIO, sink))
                side = Side("file", size=member.size, mode=member.mode,
                            sha256=sink.hash.hexdigest())
                origin = Origin(path, member.name, tarball=True)
                small = None if sink.kept is None else bytes(sink.kept)
            members[name] = Member(name, side, origin, small, member.header)
    return Archive(prefix, role(path.name), path, _digest_file(path).hash.hexdigest(),
                   _compression_head(path), tuple(order)), members


def _digest_file(path: Path) -> _Digest:
    sink = _Digest()
    with open_regular(path) as file:
        while block := os.read(file.fd, BLOCK):
            sink.write(block)
    return sink


def _compression_head(path: Path) -> bytes:
    with open_regular(path) as file:
        return file.head(10)


# --- the second pass -------------------------------------------------------------------------


class Contents:
    """The bytes of the members a comparison reads again, while its `with` block lasts."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._copies: dict[tuple[Path, str], Path] = {}

    def fetch(self, members: list[Member]) -> None:
        """Copy the members not kept in memory out of their tarballs, one pass per tarball."""
        wanted: dict[Path, set[str]] = {}
        for member in members:
            origin = member.origin
            if origin is not None and origin.tarball and member.small is None:
                wanted.setdefault(origin.path, set()).add(origin.name)
        for number, (tarball, names) in enumerate(sorted(wanted.items())):
            self._copy_out(tarball, names, self._folder / str(number))

    def _copy_out(self, tarball: Path, names: set[str], into: Path) -> None:
        into.mkdir()
        with KitArchive(tarball) as archive:
            for index, member in enumerate(archive):
                if member.kind == "file" and member.name in names:
                    target = into / str(index)
                    with open(target, "wb") as sink:
                        member.copy_to(sink)
                    self._copies[(tarball, member.name)] = target

    @contextmanager
    def open(self, member: Member) -> Iterator[ByteSource]:
        """The member's bytes: in memory, or a file mapped into memory."""
        if member.small is not None:
            yield member.small
            return
        origin = member.origin
        if origin is None:
            yield b""
            return
        path = self._copies[(origin.path, origin.name)] if origin.tarball else origin.path
        with open_regular(path) as file:
            data = file.contents()
            try:
                yield data
            finally:
                if not isinstance(data, bytes | bytearray):
                    data.close()


@contextmanager
def contents() -> Iterator[Contents]:
    """A place to hold the members read again; removed when the block ends."""
    with tempfile.TemporaryDirectory(prefix="ninfer-diff-") as folder:
        yield Contents(Path(folder))
