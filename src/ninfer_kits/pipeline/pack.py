"""The pack stage: deterministic kit tarballs, gzipped in 1 MiB members of their own on every core,
each recording its length (docs/reproducibility.md says why each choice). The tarball lands
through files.atomic, and a kit's carries kit/MANIFEST.json, written just before."""

from __future__ import annotations

import os
import posixpath
import stat
import struct
import tarfile
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from ninfer_kits.errors import BadInput, EnvironmentFailure
from ninfer_kits.files.atomic import FILE_MODE, READ_SIZE, HashingSink, PackedFile, output
from ninfer_kits.inspector.decompress import (
    FEXTRA,
    FRAMED_EXTRA,
    FRAMED_HEADER,
    FRAMED_ID,
    TRAILER,
)
from ninfer_kits.kit import kitmanifest
from ninfer_kits.pipeline.parallel import usable_cores

BLOCK_SIZE = 1 << 20  # one gzip member per MiB of tar: fixed, so the bytes never vary
# libdeflate's level 6: on the benchmark's 332 MB tree of real libraries, 0.995x the size of
# `gzip -n -6` at ~137 MB/s per core (5: 1.000x, 7: 0.992x at 104 MB/s; tests/benchmarks).
LEVEL = 6
LEVELS = range(0, 13)  # libdeflate's: 0 stores, 1 to 12 compress
# The libdeflate each pinned `deflate` wheel bundles (the module does not say; its CHANGELOG and
# the libdeflate.h of its sdist do).
BUNDLED_LIBDEFLATE = {"0.9.0": "1.26"}
TAR_BLOCK = tarfile.BLOCKSIZE
TAR_RECORD = tarfile.RECORDSIZE
GZIP_OS_UNIX = 3  # what `gzip -n` writes; fixed so the header never depends on the builder
DIR_MODE = 0o755
EXEC_MODE = 0o755
LINK_MODE = 0o777
# Tar names are encoded the same way on every machine, whatever its locale says.
TAR_ENCODING = "utf-8"
TAR_ERRORS = "surrogateescape"

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Entry:
    name: str
    source: Path
    kind: str  # "dir", "file" or "symlink"
    size: int = 0
    mode: int = FILE_MODE
    target: str = ""


def _check_link(root: Path, path: Path, name: str, target: str) -> None:
    """Symlinks must stay inside the kit, as written and as resolved (a link through a link)."""
    if not target or posixpath.isabs(target):
        raise BadInput(f"{path}: symlink to an absolute path ({target!r}) cannot go in a kit")
    inside = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    resolved = Path(os.path.realpath(path.parent / target))
    if inside.split("/")[0] == ".." or not resolved.is_relative_to(root.resolve()):
        raise BadInput(f"{path}: symlink target {target!r} points outside the kit")


def _entry(root: Path, path: Path, name: str) -> Entry:
    info = path.lstat()
    if stat.S_ISREG(info.st_mode):
        mode = EXEC_MODE if info.st_mode & 0o111 else FILE_MODE
        return Entry(name, path, "file", info.st_size, mode)
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path)
        _check_link(root, path, name, target)
        return Entry(name, path, "symlink", mode=LINK_MODE, target=target)
    raise BadInput(f"{path}: not a file, folder or symlink (device, FIFO or socket); "
                   "it cannot go in a kit")


def _walk(root: Path, folder: Path, name: str) -> Iterator[Entry]:
    yield Entry(name, folder, "dir", mode=DIR_MODE)
    with os.scandir(folder) as listing:
        # Sorted here too, so that the first bad entry we report is always the same one.
        children = sorted(listing, key=lambda child: os.fsencode(child.name))
    for child in children:
        path, child_name = Path(child.path), f"{name}/{child.name}"
        if child.is_dir(follow_symlinks=False):
            yield from _walk(root, path, child_name)
        else:
            yield _entry(root, path, child_name)


def list_entries(root: Path, name: str) -> list[Entry]:
    """Every entry under `root`, sorted by the bytes of its whole path (folders included)."""
    return sorted(_walk(root, root, name), key=lambda entry: os.fsencode(entry.name))


def _padded(size: int) -> int:
    return -(-size // TAR_BLOCK) * TAR_BLOCK


def _long_name_bytes(text: str) -> int:
    """GNU format stores a name over 100 bytes as an extra header plus the name as data."""
    encoded = len(text.encode(TAR_ENCODING, TAR_ERRORS))
    return 0 if encoded <= 100 else TAR_BLOCK + _padded(encoded + 1)


def tar_size(entries: list[Entry]) -> int:
    """The length of the uncompressed tar stream, known before writing it (for progress)."""
    total = 0
    for entry in entries:
        name = entry.name + "/" if entry.kind == "dir" else entry.name
        total += TAR_BLOCK + _padded(entry.size) + _long_name_bytes(name)
        total += _long_name_bytes(entry.target)
    total += 2 * TAR_BLOCK  # the end-of-archive marker
    return -(-total // TAR_RECORD) * TAR_RECORD


def _tarinfo(entry: Entry, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(entry.name)
    info.type = {"dir": tarfile.DIRTYPE, "file": tarfile.REGTYPE, "symlink": tarfile.SYMTYPE}[
        entry.kind]
    info.mode, info.size, info.mtime, info.linkname = entry.mode, size, mtime, entry.target
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _add(archive: tarfile.TarFile, entry: Entry, mtime: int) -> None:
    if entry.kind != "file":
        archive.addfile(_tarinfo(entry, 0, mtime))
        return
    with entry.source.open("rb") as handle:
        # The size of the file as opened, not as listed: tarfile then reads exactly that much.
        size = os.fstat(handle.fileno()).st_size
        archive.addfile(_tarinfo(entry, size, mtime), handle)


def _gzip_header(level: int, length: int) -> bytes:
    """A member's header: no name, no time, and its whole `length` in the extra field."""
    # What libdeflate itself writes in XFL (2: slowest, 4: fastest), and the OS byte of gzip -n.
    extra_flags = 4 if level < 2 else 2 if level >= 8 else 0
    # magic, deflate, an extra field only (no name), mtime 0, extra flags, OS; then XLEN and
    # the one subfield
    fixed = struct.pack("<BBBBIBBH", 0x1F, 0x8B, 8, FEXTRA, 0, extra_flags, GZIP_OS_UNIX,
                        FRAMED_EXTRA.size)
    return fixed + FRAMED_EXTRA.pack(FRAMED_ID, 4, length)


def _deflate_version() -> str:
    """The `deflate` wheel's version, imported here: its absence (the .pyz) is one message."""
    try:
        import deflate
    except ImportError as error:
        raise EnvironmentFailure("packing a kit needs the `deflate` package (libdeflate), a "
                                 "dependency of ninfer-kits: pip install ninfer-kits") from error
    return deflate.__version__


def compressor(level: int = LEVEL) -> str:
    """What compresses the tarball, for BUILDINFO.txt (its bytes depend on this alone)."""
    version = _deflate_version()
    library = BUNDLED_LIBDEFLATE.get(version, "of unknown version")
    return (f"libdeflate {library} (deflate {version}), level {level}, "
            f"{BLOCK_SIZE >> 20} MiB gzip members, each with its length")


def gzip_member(block: bytes, level: int) -> bytes:
    """One block as a complete gzip member recording its length: a function of block and level."""
    import deflate  # see _deflate_version

    body = deflate.deflate_compress(block, level)
    length = FRAMED_HEADER + len(body) + TRAILER
    trailer = struct.pack("<II", deflate.crc32(block), len(block) & 0xFFFFFFFF)
    return b"".join((_gzip_header(level, length), body, trailer))


class ParallelGzip:
    """A write-only gzip stream: fixed-size blocks compressed on a thread pool, written in order,
    so the output depends on the input bytes and the level alone."""

    def __init__(self, sink: HashingSink, pool: ThreadPoolExecutor, threads: int, level: int,
                 total: int, progress: Progress | None) -> None:
        self.sink, self.pool, self.level = sink, pool, level
        self.total, self.progress = total, progress
        self.max_in_flight = 2 * threads + 2  # bounds memory: never the whole archive
        self.pending = bytearray()
        self.in_flight: deque[Future[bytes]] = deque()
        self.consumed = 0

    def tell(self) -> int:  # tarfile asks where it starts
        return self.consumed + len(self.pending)

    def write(self, data: bytes) -> int:
        self.pending += data
        while len(self.pending) >= BLOCK_SIZE:
            with memoryview(self.pending) as view:
                block = bytes(view[:BLOCK_SIZE])
            del self.pending[:BLOCK_SIZE]
            self._submit(block)
        return len(data)

    def _submit(self, block: bytes) -> None:
        self.in_flight.append(self.pool.submit(gzip_member, block, self.level))
        self.consumed += len(block)
        while len(self.in_flight) > self.max_in_flight:
            self.sink.write(self.in_flight.popleft().result())
        if self.progress is not None:
            self.progress(self.consumed, max(self.total, self.consumed))

    def close(self) -> None:
        if self.pending or not self.consumed:  # an empty stream is still one (empty) member
            self._submit(bytes(self.pending))
            self.pending.clear()
        while self.in_flight:
            self.sink.write(self.in_flight.popleft().result())

    def abandon(self) -> None:
        """After an error: drop queued blocks so that the pool can shut down at once."""
        for future in self.in_flight:
            future.cancel()
        self.in_flight.clear()


def _write_tar(stream: ParallelGzip, entries: list[Entry], mtime: int) -> None:
    # GNU format: long names as ././@LongLink members, no pax headers (so no atime/ctime).
    archive = tarfile.TarFile(fileobj=cast(IO[bytes], stream), mode="w",
                              format=tarfile.GNU_FORMAT, encoding=TAR_ENCODING,
                              errors=TAR_ERRORS, copybufsize=READ_SIZE)
    for entry in entries:
        _add(archive, entry, mtime)
    archive.close()  # end-of-archive blocks and record padding; leaves `stream` open


def _archive_name(root: Path) -> str:
    name = root.name if root.name not in ("", "..") else root.resolve().name
    if not name:
        raise BadInput(f"{root}: cannot name a kit after the file system root")
    return name


def _check_paths(root: Path, dest: Path) -> None:
    if not root.is_dir():
        raise BadInput(f"{root}: not a folder to pack")
    if dest.resolve().is_relative_to(root.resolve()):
        raise BadInput(f"{dest}: the tarball cannot be written inside the folder it packs")


def pack_tree(root: Path, dest: Path, *, mtime: int, threads: int | None = None,
              level: int = LEVEL, progress: Progress | None = None) -> PackedFile:
    """Pack `root` (named by its last component) into the .tar.gz `dest`; same tree, same bytes."""
    threads = threads if threads is not None else usable_cores()
    if threads < 1 or level not in LEVELS or mtime < 0:
        raise ValueError(f"bad pack settings: threads={threads}, level={level}, mtime={mtime}")
    _check_paths(root, dest)
    _deflate_version()  # a missing compressor is said before anything is written
    entries = list_entries(root, _archive_name(root))
    total = tar_size(entries)
    with output(dest) as sink, ThreadPoolExecutor(threads, "pack") as pool:
        stream = ParallelGzip(sink, pool, threads, level, total, progress)
        try:
            _write_tar(stream, entries, mtime)
            stream.close()
        except BaseException:
            stream.abandon()
            raise
    return sink.packed(dest)


def pack_kit(root: Path, dest: Path, *, mtime: int, threads: int | None = None,
             level: int = LEVEL, progress: Progress | None = None) -> PackedFile:
    """`pack_tree` of a kit's tree, kit/MANIFEST.json written first (covered by the sha256)."""
    if root.name != kitmanifest.KIT:
        raise ValueError(f"{root}: a kit's tree is a folder named {kitmanifest.KIT}")
    kitmanifest.write(root)
    return pack_tree(root, dest, mtime=mtime, threads=threads, level=level, progress=progress)
