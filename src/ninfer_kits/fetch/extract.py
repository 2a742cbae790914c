"""Unpacking a kit archive into a private staging folder, with the hardened reader.

`KitArchive` (inspector.archive) decides what a member may be: relative names without '..',
links that stay inside the tree, no devices or FIFOs, no repeated names, bounded headers and
members. This module adds what writing them to disk needs:

- every member under `kit/` (what `tar xzf` of a kit gives: kit/bin, kit/BUILDINFO.txt …);
- nothing is written through a symlink: each folder on the way to a member must be a real
  folder made by this extraction (a link to `.` followed by `..` would otherwise lead out);
  files are created with O_EXCL|O_NOFOLLOW; hardlinks only to files written before;
- every symlink resolves inside the staging folder as the file system resolves it, through
  the links placed before it (KitArchive's check reads the target's words alone, and
  `kit/l1 -> .` makes `l1/l1/../../..` climb three folders, not one); checked when it is
  placed and again once the tree is whole (a link placed later can change how an earlier one
  resolves);
- modes: folders 0755, files their own bits within 0755 (no setuid, no group/other write);
- a bound on the total: `expansion_limit` × the archive's size, 1 GiB at least (MIN_TOTAL_LIMIT:
  an archive of no known size, or a small one); KitArchive bounds the tree's shape (members,
  depth, name lengths), and a member whose path under the staging folder would pass PATH_MAX
  is refused here, by name, before anything tries to write it.

`FollowingArchive` reads the archive while the downloader still writes it (a `Feed` says how far
it is), so that unpacking runs beside the download instead of after it; the archive is
decompressed ahead by threads of its own, as `inspect` reads one (inspector.decompress: pack's
gzip members several at once), so that inflating, writing the members and downloading share
the machine's cores.
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
from ninfer_kits.inspector.archive import PATH_MAX, KitArchive, Member, shown_name
from ninfer_kits.inspector.inputs import RegularFile, printable
from ninfer_kits.trees import MAX_SYMLINKS, TooManyLinks, stays_inside

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

TOP = "kit"
EXPANSION_LIMIT = 50
MIN_TOTAL_LIMIT = 1 << 30
READ_BUFFER = 1 << 20


class FollowingArchive(KitArchive):
    """A KitArchive over a file that is still being downloaded: reads wait for the
    downloader (through the Feed) instead of meeting the end of the file."""

    # What it unpacks stays in staging until the download's sha256 is checked, which covers
    # every byte: gzip's CRC-32 on top of it would only cost the decompressing thread time.
    check_gzip_crc = False
    # Inflating and reading ahead wait for the downloader: on two cores, a downloader kept
    # waiting for one loses link time that cannot be had back (fetch-link: 1.29x -> 1.20x of
    # curl's time at 200 MB/s).
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
    """What an extraction wrote: counts for the summary line."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0


def extract(archive: KitArchive, staging: Path, *, archive_size: int,
            expansion_limit: int = EXPANSION_LIMIT) -> Extraction:
    """Write every member of the open `archive` under `staging` (an empty private folder);
    BadInput names the member when one cannot be written safely."""
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
    """Refuse the symlink `name` when the file system resolves it outside `staging` (which
    becomes DEST), following the links already in the tree."""
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
    """Make the folders on the way to a member. One that exists must have been made by this
    extraction: a symlink (or a file) in the way is refused, never followed."""
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
    """A file that takes each block whole or raises: a disk filling up takes part of a block,
    then fails on the rest, and that failure (no space) is what is said; a plain unbuffered
    write would return the short count, and the rest of the block would be lost unseen."""

    def write(self, data: ReadableBuffer, /) -> int:
        view = memoryview(data).cast("B")
        done = 0
        while done < len(view):
            taken = super().write(view[done:])
            if not taken:  # no error and no progress: nothing more goes in
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            done += taken
        return done
