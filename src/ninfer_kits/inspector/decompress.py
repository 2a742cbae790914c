"""A kit archive's bytes, decompressed ahead of the reader by threads of their own.

`Prefetched` runs a chunk iterator on another thread, a few chunks ahead; `gunzip_chunks` is
gzip's stream with gzip's own errors and messages, in chunks of a MiB rather than eight kB, and
pack's framed members (their length in an `NK` extra subfield) inflated whole, several at once.
The framing, its bounds and why: docs/reproducibility.md and DEVELOPING.md, "Benchmarks".
A framed member that does not inflate to its trailer's size is streamed again, so that its error
is gzip's (libdeflate does not say where the deflate data ended)."""

from __future__ import annotations

import struct
import zlib
from collections import deque
from functools import cache
from typing import TYPE_CHECKING, Literal, NamedTuple

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from concurrent.futures import Future, ThreadPoolExecutor
    from typing import BinaryIO

CHUNK = 1 << 20  # compressed bytes read at a time; decompressed bytes handed over at a time
DEPTH = 8  # chunks decompressed ahead of the reader, at most
TRUNCATED = "Compressed file ended before the end-of-stream marker was reached"  # gzip's words
GZIP_MAGIC = b"\037\213"
FHCRC, FEXTRA, FNAME, FCOMMENT = 2, 4, 8, 16
TRAILER = 8  # CRC-32 and ISIZE, little-endian
FRAMED_ID = b"NK"
FRAMED_EXTRA = struct.Struct("<2sHI")  # the subfield: ID, its size (4), the member's length
FRAMED_HEADER = 10 + 2 + FRAMED_EXTRA.size  # a framed member's header: fixed part, XLEN, extra
FRAMED_SIZE_LIMIT = 1 << 20  # what a framed member may inflate to: pack's block, no more
FRAMED_LENGTH_LIMIT = 4 << 20  # what a framed member may be; deflate never grows a MiB this much
INFLATE_THREADS = 4  # at most: the reader, tarfile and the download want cores too


def _bad_gzip(message: str) -> OSError:
    from gzip import BadGzipFile  # only when there is something to say

    return BadGzipFile(message)


class _Input:
    """The compressed file in CHUNK blocks; `block[start:]` is unused, handed out as views."""

    def __init__(self, file: BinaryIO) -> None:
        self.file = file
        self.block = b""
        self.start = 0

    def peek(self) -> memoryview:
        """What is left of the last block, or the next one (not used yet); empty at the end."""
        if self.start >= len(self.block):
            self.block, self.start = self.file.read(CHUNK), 0
        return memoryview(self.block)[self.start:]

    def take(self) -> memoryview:
        view = self.peek()
        self.start += len(view)
        return view

    def read(self, count: int) -> bytes:
        parts = []
        while count > 0 and (view := self.peek()):
            part = view[:count]
            self.start += len(part)
            count -= len(part)
            parts.append(part)
        return b"".join(parts)

    def exact(self, count: int) -> bytes:
        data = self.read(count)
        if len(data) < count:
            raise EOFError(TRUNCATED)
        return data

    def until_nul(self) -> None:
        while self.peek():
            end = self.block.find(b"\0", self.start)
            if end >= 0:
                self.start = end + 1
                return
            self.start = len(self.block)

    def unread(self, data: bytes) -> None:
        self.block, self.start = data + self.block[self.start:], 0

    def zeros_next(self) -> bool:
        """Whether zero padding comes next (gzip's FAQ 8)."""
        view = self.peek()
        return bool(view) and not view[0]

    def skip_zeros(self) -> None:
        while self.zeros_next():
            view = self.peek()
            self.start += len(view) - len(bytes(view).lstrip(b"\0"))


class _Header(NamedTuple):
    length: int | None  # the recorded length when the header is pack's, else None


def _read_header(source: _Input) -> _Header | None:
    """The next member's header, read as gzip reads it; None at the end."""
    magic = source.read(2)
    if not magic:
        return None
    if magic != GZIP_MAGIC:
        raise _bad_gzip(f"Not a gzipped file ({magic!r})")
    method, flags, _mtime = struct.unpack("<BBIxx", source.exact(8))
    if method != 8:
        raise _bad_gzip("Unknown compression method")
    extra = b""
    if flags & FEXTRA:
        extra = source.exact(struct.unpack("<H", source.exact(2))[0])
    if flags & FNAME:
        source.until_nul()
    if flags & FCOMMENT:
        source.until_nul()
    if flags & FHCRC:
        source.exact(2)
    if flags != FEXTRA or len(extra) != FRAMED_EXTRA.size:
        return _Header(None)
    name, size, length = FRAMED_EXTRA.unpack(extra)
    return _Header(length if name == FRAMED_ID and size == 4 else None)


def _stream_member(source: _Input, check_crc: bool) -> Iterator[bytes]:
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
            # What gzip (eight kB at a time) would hand over first, then the same error.
            yield from _up_to_the_error(before, block)
            raise
        if data:
            if check_crc:
                crc = zlib.crc32(data, crc)
            size += len(data)
            yield data
    source.unread(inflate.unused_data)
    _check_trailer(source.exact(TRAILER), crc if check_crc else None, size)


def _check_trailer(trailer: bytes | memoryview, crc: int | None, size: int) -> None:
    """gzip's checks of a trailer (the CRC-32 unless `crc` is None), in its words."""
    stored_crc, stored_size = struct.unpack("<II", trailer)
    if crc is not None and stored_crc != crc:
        raise _bad_gzip(f"CRC check failed {hex(stored_crc)} != {hex(crc)}")
    if stored_size != size & 0xFFFFFFFF:
        raise _bad_gzip("Incorrect length of data produced")


def _up_to_the_error(inflate: zlib._Decompress, block: bytes | memoryview) -> Iterator[bytes]:
    step = 8192
    for start in range(0, len(block), step):
        try:
            data = inflate.decompress(block[start:start + step])
        except zlib.error:
            return
        if data:
            yield data


# ---------------------------------------------------------------------------- framed members


class _Framed(NamedTuple):
    rest: bytes  # after the header: deflate data, then the trailer
    length: int  # as recorded: the header's bytes and these

    @property
    def size(self) -> int:
        return int.from_bytes(self.rest[-4:], "little")

    @property
    def crc(self) -> int:
        return int.from_bytes(self.rest[-8:-4], "little")


def _read_framed(source: _Input, header: _Header) -> _Framed | None:
    """The rest of a framed member, read whole; None (nothing read) when it is to be streamed:
    no length, out of bounds, or a file that ends inside it."""
    length = header.length
    if length is None or not FRAMED_HEADER + TRAILER < length <= FRAMED_LENGTH_LIMIT:
        return None
    framed = _Framed(source.read(length - FRAMED_HEADER), length)
    if len(framed.rest) == length - FRAMED_HEADER and 0 < framed.size <= FRAMED_SIZE_LIMIT:
        return framed
    source.unread(framed.rest)
    return None


@cache
def _one_call_inflate() -> Callable[[memoryview, int], bytes | None]:
    """Raw deflate to exactly `size` bytes in one call, or None: libdeflate, else zlib."""
    try:
        from deflate import DeflateError, deflate_decompress
    except ImportError:
        return _zlib_inflate

    def inflate(body: memoryview, size: int) -> bytes | None:
        try:
            data = deflate_decompress(body, size)  # never more than `size` bytes
        except DeflateError:
            return None
        return bytes(data) if len(data) == size else None

    return inflate


def _zlib_inflate(body: memoryview, size: int) -> bytes | None:
    inflate = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        data = inflate.decompress(body, size + 1)  # a byte of room: the end is reached, or more
    except zlib.error:
        return None
    ok = inflate.eof and not inflate.unused_data and len(data) == size
    return data if ok else None


def _inflate_framed(framed: _Framed, check_crc: bool) -> tuple[bytes, int] | None:
    """A framed member and its CRC-32 (0 unchecked); None if not its trailer's size."""
    data = _one_call_inflate()(memoryview(framed.rest)[:-TRAILER], framed.size)
    if data is None:
        return None
    return data, zlib.crc32(data) if check_crc else 0


def _stream_framed(framed: _Framed, check_crc: bool) -> Iterator[bytes]:
    """A framed member that failed in one call, streamed for gzip's error (or ours, when its
    length does not frame it)."""
    import io

    source = _Input(io.BytesIO(framed.rest))
    try:
        yield from _stream_member(source, check_crc)
    except EOFError:
        raise _bad_gzip(_unframed(framed)) from None
    if source.peek():
        raise _bad_gzip(_unframed(framed))


def _unframed(framed: _Framed) -> str:
    return (f"a gzip member's recorded length ({framed.length} bytes) is not where its data "
            f"ends")


class _InOrder:
    """Framed members inflating on a thread pool, a few ahead, handed over in order."""

    def __init__(self, check_crc: bool, nice: int) -> None:
        self.check_crc = check_crc
        self.nice = nice
        self.threads = _inflate_threads()
        self.ahead = 2 * self.threads  # members read and not handed over, at most
        self.pool: ThreadPoolExecutor | None = None
        self.queue: deque[tuple[Future[tuple[bytes, int] | None], _Framed]] = deque()

    def add(self, framed: _Framed) -> Iterator[bytes]:
        """Start inflating `framed`; hand over those done, and the oldest while too many wait."""
        self.queue.append((self._submit(framed), framed))
        while self.queue and (len(self.queue) > self.ahead or self.queue[0][0].done()):
            yield from self._next()

    def drain(self) -> Iterator[bytes]:
        while self.queue:
            yield from self._next()

    def _next(self) -> Iterator[bytes]:
        """The oldest member's bytes; if it fails, those after it are dropped."""
        future, framed = self.queue.popleft()
        try:
            done = future.result()
            if done is None:
                yield from _stream_framed(framed, self.check_crc)
                return
            data, crc = done
            yield data
            _check_trailer(framed.rest[-TRAILER:], crc if self.check_crc else None, len(data))
        except Exception:
            self.close()
            raise

    def _submit(self, framed: _Framed) -> Future[tuple[bytes, int] | None]:
        from concurrent.futures import Future, ThreadPoolExecutor

        try:
            if self.pool is None:
                self.pool = ThreadPoolExecutor(self.threads, "ninfer-kits inflate",
                                               initializer=lower_priority,
                                               initargs=(self.nice,))
            return self.pool.submit(_inflate_framed, framed, self.check_crc)
        except RuntimeError:  # no thread to be had: inflate here
            done: Future[tuple[bytes, int] | None] = Future()
            done.set_result(_inflate_framed(framed, self.check_crc))
            return done

    def close(self) -> None:
        """Drop what waits, wait for what runs."""
        self.queue.clear()
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def _inflate_threads() -> int:
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(INFLATE_THREADS, cores or 1))


def gunzip_chunks(file: BinaryIO, *, check_crc: bool = True,
                  nice: int = 0) -> Iterator[bytes]:
    """A gzip file's bytes (every member), in chunks of at most a MiB; the inflating threads
    run `nice` levels lower."""
    source = _Input(file)
    framed_members = _InOrder(check_crc, nice)
    try:
        first = True
        while True:
            try:
                if not first and source.zeros_next():
                    # The members before the padding first, so that the tar's end is seen.
                    yield from framed_members.drain()
                    source.skip_zeros()
                member = _next_member(source)
            except Exception:  # a broken header or file: after the members before it
                yield from framed_members.drain()
                raise
            first = False
            if isinstance(member, _Framed):
                yield from framed_members.add(member)
                continue
            yield from framed_members.drain()
            if member == "end":
                return
            yield from _stream_member(source, check_crc)
    finally:
        framed_members.close()


def _next_member(source: _Input) -> _Framed | Literal["streamed", "end"]:
    """A framed member, read whole; "streamed" (its deflate data is next); or "end"."""
    header = _read_header(source)
    if header is None:
        return "end"
    framed = _read_framed(source, header)
    return "streamed" if framed is None else framed


def read_chunks(stream: BinaryIO) -> Iterator[bytes]:
    while block := stream.read(CHUNK):
        yield block


def lower_priority(levels: int) -> None:
    """Run this thread `levels` nice levels below the main one (Linux only), so that on few
    cores the thread that must keep pace (fetch's downloader) goes first."""
    import os
    import sys
    import threading

    if levels <= 0 or sys.platform != "linux":
        return
    try:
        target = min(19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + levels)
        me = threading.get_native_id()
        if os.getpriority(os.PRIO_PROCESS, me) < target:
            os.setpriority(os.PRIO_PROCESS, me, target)
    except OSError:
        pass  # not allowed here: the same work at the same priority


class Prefetched:
    """A stream whose chunks another thread makes, at most `depth` ahead. Closing it waits for
    that thread, so that the file it reads is not closed under it."""

    def __init__(self, chunks: Iterator[bytes], depth: int = DEPTH, nice: int = 0) -> None:
        import queue
        import threading

        self._nice = nice
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

        lower_priority(self._nice)

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
        """Up to `size` bytes (fewer where a chunk ends, as a raw file); b"" at the end."""
        if size is None or size < 0:
            parts = [self._buffer[self._offset:]]
            self._buffer, self._offset = b"", 0
            while block := self._next():
                parts.append(block)
            return b"".join(parts)
        data = self.read_view(size)
        return data if isinstance(data, bytes) else bytes(data)

    def read_view(self, size: int) -> bytes | memoryview:
        """As `read(size)`, but part of a chunk comes as a view of it, not a copy."""
        if self._offset >= len(self._buffer):
            self._buffer, self._offset = self._next(), 0
        if self._offset == 0 and size >= len(self._buffer):
            data, self._buffer = self._buffer, b""  # the whole chunk, as it is: no copy
            return data
        view = memoryview(self._buffer)[self._offset:self._offset + size]
        self._offset += len(view)
        return view

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
        if self._thread is not None:
            while self._thread.is_alive():
                with suppress(queue.Empty):  # a chunk it waits to hand over: taken, it stops
                    self._queue.get(timeout=0.05)
            self._thread.join()
        # Stop a generator left part-way (and its threads) now, not when collected.
        stop = getattr(self._chunks, "close", None)
        if stop is not None:
            stop()

    def __enter__(self) -> Prefetched:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
