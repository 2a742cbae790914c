"""Unpacking a kit archive into a private staging folder, with the hardened reader.

`KitArchive` (inspector.archive) decides what a member may be: relative names without '..',
links that stay inside the tree, no devices or FIFOs, no repeated names, bounded headers and
members. This module adds what writing them to disk needs:

- every member under `kit/` (what `tar xzf` of a kit gives: kit/bin, kit/BUILDINFO.txt …);
- nothing is written through a symlink: each folder on the way to a member must be a real
  folder made by this extraction (a link to `.` followed by `..` would otherwise lead out);
  files are created with O_EXCL|O_NOFOLLOW; hardlinks only to files written before;
- modes: folders 0755, files their own bits within 0755 (no setuid, no group/other write);
- a bound on the total: `expansion_limit` × the archive's size (1 GiB at least).

`FollowingArchive` reads the archive while the downloader still writes it (a `Feed` says how far
it is), so that unpacking runs beside the download instead of after it; a gzip archive is
inflated in a thread of its own (`ThreadedGunzip`: zlib, which checks the gzip trailer's CRC and
size), so that inflating, writing the members and downloading share the machine's cores.
"""

from __future__ import annotations

import contextlib
import io
import os
import queue
import stat
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ninfer_kits.errors import BadInput
from ninfer_kits.fetch.download import Feed, GrowingFile
from ninfer_kits.inspector.archive import KitArchive, Member
from ninfer_kits.inspector.inputs import RegularFile, printable

TOP = "kit"
EXPANSION_LIMIT = 50
MIN_TOTAL_LIMIT = 1 << 30
READ_BUFFER = 1 << 20


class FollowingArchive(KitArchive):
    """A KitArchive over a file that is still being downloaded: reads wait for the
    downloader (through the Feed) instead of meeting the end of the file."""

    def __init__(self, path: Path, feed: Feed, **options: object) -> None:
        super().__init__(path, **options)  # type: ignore[arg-type]
        self._feed = feed

    @contextmanager
    def _decompressed(self, file: RegularFile) -> Iterator[BinaryIO]:
        raw = io.BufferedReader(GrowingFile(file.fd, self._feed), READ_BUFFER)
        if self.format == "gzip":
            inflated = ThreadedGunzip(raw)
            try:
                yield io.BufferedReader(inflated, READ_BUFFER)
            finally:
                inflated.close()
        elif self.format == "xz":
            import lzma

            with lzma.LZMAFile(raw, mode="rb") as stream:
                yield stream  # type: ignore[misc]
        elif self.format == "bzip2":
            import bz2

            with bz2.BZ2File(raw, mode="rb") as stream:
                yield stream  # type: ignore[misc]
        else:
            yield raw


GZIP_MAGIC = b"\x1f\x8b"
INFLATE_INPUT = 1 << 20
INFLATE_OUTPUT = 4 << 20  # at most this much out of one call: a bomb is inflated in steps
INFLATE_QUEUE = 8


class ThreadedGunzip(io.RawIOBase):
    """Gzip data from `source`, inflated by a worker thread a few MiB ahead of the reader.

    zlib (wbits 31) reads the gzip header and checks the trailer (CRC-32 and size); several
    members follow each other as gzip -d takes them, and zero bytes after the last are
    ignored, as gzip -d does. What goes wrong in the worker is raised in the reader: zlib.error
    for corrupt data, EOFError when the data ends inside a member (as the gzip module does)."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source
        self._queue: queue.Queue[bytes | BaseException] = queue.Queue(INFLATE_QUEUE)
        self._stop = threading.Event()
        self._buffer = memoryview(b"")
        self._error: BaseException | None = None
        self._ended = False
        self._thread = threading.Thread(target=self._work, name="ninfer-kits-inflate",
                                        daemon=True)
        self._thread.start()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._buffer:
            if self._error is not None:
                raise self._error
            if self._ended:
                return 0
            item = self._queue.get()
            if isinstance(item, BaseException):
                self._error = item
                raise item
            if not item:
                self._ended = True
                return 0
            self._buffer = memoryview(item)
        count = min(len(buffer), len(self._buffer))
        buffer[:count] = self._buffer[:count]
        self._buffer = self._buffer[count:]
        return count

    def close(self) -> None:
        self._stop.set()
        while self._thread.is_alive():
            with contextlib.suppress(queue.Empty):  # room for a worker blocked on a full queue
                self._queue.get(timeout=0.05)
        super().close()

    def _put(self, item: bytes | BaseException) -> None:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def _work(self) -> None:
        try:
            self._inflate()
            self._put(b"")
        except BaseException as error:  # handed to the reader
            self._put(error)

    def _inflate(self) -> None:
        inflater = zlib.decompressobj(31)
        started = False  # some of the current member was read
        trailing = False  # past the last member: only zero bytes may follow
        while not self._stop.is_set():
            data = self._source.read(INFLATE_INPUT)
            if not data:
                break
            while True:
                if trailing:
                    if data.strip(b"\0"):
                        raise zlib.error("trailing garbage after the gzip data")
                    break
                started = started or bool(data)
                out = inflater.decompress(data, INFLATE_OUTPUT)
                if out:
                    self._put(out)
                    if self._stop.is_set():
                        return
                data = inflater.unconsumed_tail
                if inflater.eof:  # the member ended: another may follow
                    data = inflater.unused_data
                    inflater, started = zlib.decompressobj(31), False
                    if len(data) == 1:  # a magic split across reads
                        data += self._source.read(1)
                    trailing = bool(data) and not data.startswith(GZIP_MAGIC)
                    if not data:
                        break
                elif not data and len(out) < INFLATE_OUTPUT:
                    break  # all of it taken in, nothing held back: read on
        if started:
            raise EOFError("Compressed file ended before the end-of-stream marker was reached")


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
    for member in archive:
        shown = f"{printable(archive.shown)}: member {printable(member.name)}"
        top, _, _ = member.name.partition("/")
        if top != TOP:
            raise BadInput(f"{shown}: outside {TOP}/; a kit archive holds kit/ and nothing "
                           f"else")
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
                raise BadInput(f"{shown}: the archive unpacks to more than {limit} bytes "
                               f"({expansion_limit}× its size): refused")
            _write_file(member, target, shown)
            files.add(member.name)
            done.files += 1
        elif member.kind == "symlink":
            assert member.link is not None  # KitArchive checked it stays inside the tree
            os.symlink(member.link, target)
        elif member.kind == "hardlink":
            if member.link not in files:
                raise BadInput(f"{shown}: a hardlink to {printable(str(member.link))}, which "
                               f"is not a file written before it: refused")
            os.link(staging / str(member.link), target, follow_symlinks=False)
    if TOP not in folders:
        raise BadInput(f"{printable(archive.shown)}: holds no {TOP}/ folder")
    return done


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
    with open(fd, "wb", buffering=0) as sink:
        member.copy_to(sink)
        os.fchmod(fd, member.mode & 0o755)
