"""A kit archive's bytes, decompressed ahead of the reader by a thread of their own.

`Prefetched(chunks)` is a read-only stream over an iterator of byte chunks that another thread
runs: decompression (zlib, lzma and bz2 all let other threads run while they work) goes on
while tarfile, the copy of a member and the ELF reader use the chunks before. At most `depth`
chunks wait (a few MiB): memory stays bounded however large the archive. An error the chunks
raise (a corrupt or truncated stream) is raised by `read`, after all the bytes before it, as
reading the decompressor directly would.

`gunzip_chunks(file)` is gzip's stream as Python's gzip module reads it (RFC 1952 members one
after the other, as many as there are: a packer may write independent members; zero bytes
between or after them skipped; each member's CRC-32 and length checked), with the same errors
and messages, but in chunks of a MiB rather than eight kB (gzip.GzipFile's), which spares a few
thousand Python-level calls per 100 MB. `check_crc=False` skips the CRC-32 (80 ms per 500 MB
inflated, on the decompressing thread) for a caller that checks a hash of the whole file before
it trusts anything it unpacked; the lengths are still checked. The inflating is zlib's: only
the member framing is read here, because no library hands out gzip in larger chunks.
"""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import BinaryIO

CHUNK = 1 << 20  # compressed bytes read at a time; decompressed bytes handed over at a time
DEPTH = 8  # chunks decompressed ahead of the reader, at most
TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"  # gzip's words
FHCRC, FEXTRA, FNAME, FCOMMENT = 2, 4, 8, 16


class _Input:
    """The compressed file, read in CHUNK blocks, with what was read and not used yet."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.pending = b""

    def take(self) -> bytes:
        """What is left of the last block, or the next block; b"" at the end."""
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        return self.file.read(CHUNK)

    def read(self, count: int) -> bytes:
        """Up to `count` bytes (fewer only at the end)."""
        data = b""
        while len(data) < count:
            block = self.take()
            if not block:
                break
            need = count - len(data)
            data += block[:need]
            self.pending = block[need:]
        return data

    def exact(self, count: int) -> bytes:
        data = self.read(count)
        if len(data) < count:
            raise EOFError(TRUNCATED)
        return data

    def until_nul(self) -> None:
        """Skip a zero-terminated field (or to the end)."""
        while True:
            block = self.take()
            if not block:
                return
            end = block.find(b"\0")
            if end >= 0:
                self.pending = block[end + 1:]
                return


def gunzip_chunks(file: BinaryIO, *, check_crc: bool = True) -> Iterator[bytes]:
    """The decompressed bytes of a gzip file (every member), in chunks of at most CHUNK."""
    from gzip import BadGzipFile

    source = _Input(file)
    while True:
        magic = source.read(2)
        if not magic:
            return
        if magic != b"\037\213":
            raise BadGzipFile(f"Not a gzipped file ({magic!r})")
        method, flags, _mtime = struct.unpack("<BBIxx", source.exact(8))
        if method != 8:
            raise BadGzipFile("Unknown compression method")
        if flags & FEXTRA:
            source.exact(struct.unpack("<H", source.exact(2))[0])
        if flags & FNAME:
            source.until_nul()
        if flags & FCOMMENT:
            source.until_nul()
        if flags & FHCRC:
            source.exact(2)
        inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        crc = size = 0
        while not inflate.eof:
            block = inflate.unconsumed_tail or source.take()
            if not block:
                raise EOFError(TRUNCATED)
            before = inflate.copy()
            try:
                data = inflate.decompress(block, CHUNK)
            except zlib.error:
                # Corrupt data: hand over what comes before it, as gzip (which decompresses
                # eight kB at a time) would have, then fail the same way.
                yield from _up_to_the_error(before, block)
                raise
            if data:
                if check_crc:
                    crc = zlib.crc32(data, crc)
                size += len(data)
                yield data
        source.pending = inflate.unused_data + source.pending
        stored_crc, stored_size = struct.unpack("<II", source.exact(8))
        if check_crc and stored_crc != crc:
            raise BadGzipFile(f"CRC check failed {hex(stored_crc)} != {hex(crc)}")
        if stored_size != size & 0xFFFFFFFF:
            raise BadGzipFile("Incorrect length of data produced")
        while True:  # zero padding after a member (gzip's FAQ 8), as gzip skips it
            block = source.take()
            if not block:
                return
            rest = block.lstrip(b"\0")
            if rest:
                source.pending = rest
                break


def _up_to_the_error(inflate: zlib._Decompress, block: bytes) -> Iterator[bytes]:
    """What `inflate` makes of `block`, fed eight kB at a time, before it fails."""
    step = 8192
    for start in range(0, len(block), step):
        try:
            data = inflate.decompress(block[start:start + step])
        except zlib.error:
            return
        if data:
            yield data


def read_chunks(stream: BinaryIO) -> Iterator[bytes]:
    """A decompressing file object's bytes (lzma.LZMAFile, bz2.BZ2File, a plain file), in
    chunks of CHUNK."""
    while block := stream.read(CHUNK):
        yield block


class Prefetched:
    """A stream whose chunks another thread makes, at most `depth` ahead. Close it (or use it
    as a context) to stop that thread; it is waited for, so that nothing it reads (the
    archive's file) is closed under it."""

    def __init__(self, chunks: Iterator[bytes], depth: int = DEPTH) -> None:
        import queue
        import threading

        self._queue: queue.Queue[bytes | BaseException | None] = queue.Queue(depth)
        self._stop = threading.Event()
        self._chunks = chunks
        self._buffer = b""
        self._offset = 0
        self._ended = False
        self._thread: threading.Thread | None = threading.Thread(
            target=self._make, name="ninfer-kits decompress", daemon=True)
        try:
            self._thread.start()
        except RuntimeError:  # no thread to be had: decompress as the reader reads
            self._thread = None

    def _make(self) -> None:
        import queue

        item: bytes | BaseException | None
        try:
            for item in self._chunks:
                while True:  # wait for room, or to be told to stop
                    if self._stop.is_set():
                        return
                    try:
                        self._queue.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
            item = None
        except BaseException as error:  # the reader raises it, after the bytes before it
            item = error
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (fewer where a chunk ends: callers read on, as from a raw file);
        b"" at the end."""
        if size is None or size < 0:
            parts = [self._buffer[self._offset:]]
            self._buffer, self._offset = b"", 0
            while block := self._next():
                parts.append(block)
            return b"".join(parts)
        if self._offset >= len(self._buffer):
            self._buffer, self._offset = self._next(), 0
        if self._offset == 0 and size >= len(self._buffer):
            data, self._buffer = self._buffer, b""  # the whole chunk, as it is: no copy
            return data
        data = self._buffer[self._offset:self._offset + size]
        self._offset += len(data)
        return data

    def _next(self) -> bytes:
        if self._ended:
            return b""
        if self._thread is None:
            block = next(self._chunks, b"")
            self._ended = not block
            return block
        item = self._queue.get()
        if item is None:
            self._ended = True
            return b""
        if isinstance(item, BaseException):
            self._ended = True
            raise item
        return item

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        import queue
        from contextlib import suppress

        self._stop.set()
        if self._thread is None:
            return
        while self._thread.is_alive():
            with suppress(queue.Empty):  # a chunk it waits to hand over: taken, it sees the stop
                self._queue.get(timeout=0.05)
        self._thread.join()

    def __enter__(self) -> Prefetched:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
