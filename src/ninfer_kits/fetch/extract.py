"""A kit archive unpacked into a private staging folder with the hardened reader
(`inspector.archive` decides what a member may be; this adds what writing to disk needs). What
it refuses and its bounds: docs/fetch.md, "One pass, and nothing unchecked". `FollowingArchive`
reads behind the download, inflated ahead by its own threads, so the work shares the cores.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ninfer_kits.errors import BadInput
from ninfer_kits.fetch.download import Feed, GrowingFile
from ninfer_kits.files.trees import MAX_SYMLINKS, TooManyLinks, stays_inside
from ninfer_kits.inspector.archive import PATH_MAX, KitArchive, Member, shown_name
from ninfer_kits.inspector.inputs import RegularFile, printable

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

TOP = "kit"
EXPANSION_LIMIT = 50
MIN_TOTAL_LIMIT = 1 << 30
READ_BUFFER = 1 << 20


class FollowingArchive(KitArchive):
    """A KitArchive over a file still being downloaded: reads wait through the Feed."""

    # Staged until the download's sha256, which covers every byte, is checked: gzip's CRC-32
    # would only cost the decompressing thread time.
    check_gzip_crc = False
    # Inflating waits for the downloader: on two cores a waiting downloader loses link time
    # (fetch-link: 1.29x -> 1.20x of curl's time at 200 MB/s).
    worker_nice = 10

    def __init__(self, path: Path, feed: Feed, *, at_end: Callable[[], None] | None = None,
                 **options: object) -> None:
        super().__init__(path, **options)  # type: ignore[arg-type]
        self._feed = feed
        self._at_end = at_end  # called when the tar's end is read (before what may follow)

    def _raw(self, file: RegularFile) -> BinaryIO:
        return io.BufferedReader(GrowingFile(file.fd, self._feed), READ_BUFFER)

    def _read_to_the_end(self) -> None:
        if self._at_end is not None:
            self._at_end()
        super()._read_to_the_end()


class Extraction:

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0


def extract(archive: KitArchive, staging: Path, *, archive_size: int,
            expansion_limit: int = EXPANSION_LIMIT) -> Extraction:
    """Write every member of `archive` under the empty private `staging`; BadInput names one
    that cannot be written safely."""
    limit = max(MIN_TOTAL_LIMIT, archive_size * expansion_limit)
    done = Extraction()
    folders = {""}  # made by this extraction, relative to staging: safe to write into
    files: set[str] = set()
    links: list[str] = []
    room = PATH_MAX - 1 - len(os.fsencode(staging)) - 1  # bytes a member's name may have
    for member in archive:
        shown = f"{printable(archive.shown)}: member {shown_name(member.name)}"
        top, _, _ = member.name.partition("/")
        if top != TOP:
            raise BadInput(f"{shown}: outside {TOP}/; a kit archive holds kit/ and nothing "
                           f"else")
        if len(os.fsencode(member.name)) > room:
            raise BadInput(f"{shown}: its path, unpacked into {printable(str(staging))}, "
                           f"would be longer than a path may be ({PATH_MAX - 1} bytes): refused")
        parent, _, _ = member.name.rpartition("/")
        _make_folders(staging, parent, folders, shown)
        target = staging / member.name
        if member.kind == "folder":
            if member.name not in folders:
                _mkdir(target, shown)
                folders.add(member.name)
            continue
        if member.name in folders:
            raise BadInput(f"{shown}: a {member.kind} where a folder was: refused")
        if member.kind == "file":
            done.bytes += member.size
            if done.bytes > limit:
                raise BadInput(f"{shown}: the archive unpacks to more than {limit:,} bytes "
                               f"({expansion_limit}× its size, {MIN_TOTAL_LIMIT >> 30} GiB at "
                               f"least): refused")
            _write_file(member, target, shown)
            files.add(member.name)
            done.files += 1
        elif member.kind == "symlink":
            assert member.link is not None  # KitArchive checked its words stay inside the tree
            os.symlink(member.link, target)
            links.append(member.name)
            _check_resolves_inside(staging, member.name, shown)
        elif member.kind == "hardlink":
            if member.link not in files:
                raise BadInput(f"{shown}: a hardlink to {printable(str(member.link))}, which "
                               f"is not a file written before it: refused")
            os.link(staging / str(member.link), target, follow_symlinks=False)
    if TOP not in folders:
        raise BadInput(f"{printable(archive.shown)}: holds no {TOP}/ folder")
    for name in links:  # the tree is whole now: how each link resolves for good
        _check_resolves_inside(staging, name,
                               f"{printable(archive.shown)}: member {shown_name(name)}")
    return done


def _check_resolves_inside(staging: Path, name: str, shown: str) -> None:
    """Refuse symlink `name` when the file system resolves it outside `staging`, through the
    links already placed (checked again once the tree is whole)."""
    link = shown_name(os.readlink(staging / name))
    try:
        inside = stays_inside(str(staging), name)
    except TooManyLinks:
        raise BadInput(f"{shown}: a symlink to {link}, which resolves through more than "
                       f"{MAX_SYMLINKS} links (a loop, or more than the system follows): "
                       f"refused") from None
    if not inside:
        raise BadInput(f"{shown}: a symlink to {link}, which resolves outside the folder it "
                       f"is unpacked into (through the links in the archive): refused")


def _make_folders(staging: Path, parent: str, folders: set[str], shown: str) -> None:
    """Make the folders to a member; one not made here (a symlink, a file) is refused."""
    if parent in folders:
        return
    path = ""
    for part in parent.split("/"):
        path = f"{path}/{part}" if path else part
        if path in folders:
            continue
        target = staging / path
        try:
            status = target.lstat()
        except FileNotFoundError:
            _mkdir(target, shown)
            folders.add(path)
            continue
        kind = "a symlink" if stat.S_ISLNK(status.st_mode) else "a file"
        raise BadInput(f"{shown}: its folder {printable(path)} is {kind} in the archive: "
                       f"refused (nothing is written through a link)")


def _mkdir(target: Path, shown: str) -> None:
    try:
        os.mkdir(target, 0o755)
    except FileExistsError:
        raise BadInput(f"{shown}: a folder where another member already is: refused") from None
    os.chmod(target, 0o755, follow_symlinks=False)  # whatever the umask


def _write_file(member: Member, target: Path, shown: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise BadInput(f"{shown}: written twice: refused") from None
    with _WholeWrites(fd, "wb") as sink:
        sink.name = str(target)  # what a failed write names: this file, in DEST
        member.copy_to(sink)
        os.fchmod(fd, member.mode & 0o755)


class _WholeWrites(io.FileIO):
    """A file that takes each block whole or raises, so a filling disk says "no space" rather
    than losing the rest of a block to a short count."""

    def write(self, data: ReadableBuffer, /) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            taken = super().write(view[done:])
            if not taken:  # no error and no progress: nothing more goes in
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += taken
        return done
