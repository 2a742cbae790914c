"""One pass over a kit's bytes: written to `.<asset>.part`, hashed and handed to the extractor
as they arrive, so that downloading, hashing and unpacking overlap. Resuming and bounds:
docs/fetch.md, "Interrupted downloads resume" and "What fetch opens". Bytes already written are
never rewritten: the extractor may have read them, and the sha256 is of exactly the file's bytes.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.client import HTTPException
from pathlib import Path
from typing import Protocol

from ninfer_kits.errors import BadInput, CheckFailed, EnvironmentFailure
from ninfer_kits.fetch.http import (
    Client,
    HttpFailure,
    Pace,
    PaceWatch,
    RangeRefused,
    TooSlow,
    network_failure,
    shown,
)
from ninfer_kits.files import atomic
from ninfer_kits.inspector.inputs import kind_of, os_error_words, printable

CHUNK = 1 << 20
PROGRESS_EVERY = 0.1  # seconds between progress updates


class Aborted(Exception):
    """The other side of the pipeline stopped (an error or Ctrl-C there)."""


class Feed:
    """How far the file is written and read, shared by the downloader and the extractor.
    `ahead` bounds how far the download may run past the extractor until `release()`: without
    it, a loaded machine's extractor let a server send 234 MB past an archive of no size."""

    def __init__(self, written: int = 0, ahead: int | None = None) -> None:
        self._cond = threading.Condition()
        self.written = written
        self.read = 0
        self.ahead = ahead
        self.done = False
        self.error: BaseException | None = None
        self.aborted = False

    def advance(self, count: int) -> None:
        with self._cond:
            self.written += count
            self._cond.notify_all()

    def finish(self, error: BaseException | None = None) -> None:
        with self._cond:
            self.done = True
            self.error = error
            self._cond.notify_all()

    def consumed(self, position: int) -> None:
        with self._cond:
            if position > self.read:
                self.read = position
                self._cond.notify_all()

    def release(self) -> None:
        """No more waiting: the extractor found the archive's end, which bounds the rest."""
        with self._cond:
            self.ahead = None
            self._cond.notify_all()

    def wait_for_room(self) -> bool:
        """Block while the download is `ahead` bytes past the extractor; whether it waited."""
        with self._cond:
            waited = False
            while (self.ahead is not None and self.written - self.read > self.ahead
                   and not self.aborted):
                waited = True
                self._cond.wait()
            return waited

    def abort(self) -> None:
        with self._cond:
            self.aborted = True
            self._cond.notify_all()

    def wait_for(self, position: int) -> int:
        """Block until more than `position` bytes are written, or the end; how many there are.
        Aborted when the download failed."""
        with self._cond:
            while self.written <= position and not self.done and not self.aborted:
                self._cond.wait()
            if self.aborted or self.error is not None:
                raise Aborted()
            return self.written


class GrowingFile(io.RawIOBase):
    """A file the downloader is still writing: a read at its end waits for more."""

    def __init__(self, fd: int, feed: Feed) -> None:
        self._fd = fd
        self._feed = feed
        self._position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        available = self._feed.wait_for(self._position)
        count = min(len(buffer), available - self._position)
        if count <= 0:
            return 0
        done = os.preadv(self._fd, [memoryview(buffer)[:count]], self._position)  # no copy
        self._position += done
        self._feed.consumed(self._position)
        return done


@dataclass(frozen=True)
class Digests:
    size: int
    sha256: str
    sha1: str | None


class Source(Protocol):
    """Where the bytes come from: `open(offset)` gives a stream from `start` (≤ offset) and the
    size when known; RangeRefused when it cannot start at `offset`."""

    url: str

    def open(self, offset: int) -> tuple[io.BufferedIOBase, int, int | None]: ...


class HttpSource:
    def __init__(self, client: Client, url: str, accept: str | None = None) -> None:
        self.client, self.url, self.accept = client, url, accept

    def open(self, offset: int) -> tuple[io.BufferedIOBase, int, int | None]:
        opened = self.client.open_at(self.url, offset, accept=self.accept)
        return opened.response, opened.start, opened.total


class FileSource:
    """A file of a `--from DIR` folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = str(path)

    def open(self, offset: int) -> tuple[io.BufferedIOBase, int, int | None]:
        stream = open_local(self.path)
        size = os.fstat(stream.fileno()).st_size
        stream.seek(min(offset, size))
        return stream, min(offset, size), size


def open_local(path: Path) -> io.BufferedReader:
    """A `--from` file opened only if regular: never through a symlink, never blocking on a FIFO
    or device (O_NONBLOCK), which are refused by name."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as error:
        words = ("a symbolic link; fetch --from reads regular files only"
                 if error.errno == errno.ELOOP else os_error_words(error))
        raise BadInput(f"{printable(str(path))}: {words}") from error
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise BadInput(f"{printable(str(path))}: {kind_of(mode)}, not a regular file: refused")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_local(path: Path, limit: int) -> bytes:
    """A small `--from` file, whole: at most `limit` bytes, and none past its size."""
    with open_local(path) as stream:
        size = os.fstat(stream.fileno()).st_size
        if size > limit:
            raise BadInput(f"{printable(str(path))}: {size} bytes, larger than the {limit} "
                           f"bytes of the small file expected there: refused")
        data = stream.read(size + 1)
    if len(data) != size:
        raise BadInput(f"{printable(str(path))}: reads {len(data)} bytes where its size says "
                       f"{size}: not a file to trust")
    return data


def part_paths(dest: Path, asset: str) -> tuple[Path, Path]:
    """The temporary name a download is written to, and the file naming its sha256."""
    part = dest / f".{asset}.part"
    return part, dest / f".{asset}.part.sha256"


def prepare_part(dest: Path, asset: str, sha256: str) -> int:
    """The bytes to resume from: a `.part` left for this sha256 is kept, anything else removed."""
    part, marker = part_paths(dest, asset)
    try:
        meant = marker.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        meant = ""
    if meant != sha256 or not part.is_file() or part.is_symlink():
        part.unlink(missing_ok=True)
        atomic.write_file(marker, f"{sha256}\n".encode("ascii"))
        return 0
    return part.stat().st_size


class Downloader:
    """Fetch `source` into `part` from where it stands, hashing all; `run()` in a thread."""

    def __init__(self, source: Source, part: Path, *, expected_size: int | None, sha1: bool,
                 feed: Feed, pace: Pace,
                 progress: Callable[[int, int | None], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep, attempts: int = 6) -> None:
        self.source = source
        self.part = part
        self.expected_size = expected_size
        self.feed = feed
        self.pace = pace
        self.progress = progress
        self.sleep = sleep
        self.attempts = attempts
        self._whole = False  # the server's Range answers cannot be used: ask for the whole
        self._sha256 = hashlib.sha256()
        self._sha1 = hashlib.sha1() if sha1 else None
        self.digests: Digests | None = None
        self.resumed_from = 0  # where this run started (bytes of an earlier run's .part)
        self.reconnects = 0  # body reads that failed and were resumed in this run
        self.received = 0  # bytes of bodies received in this run (skipped ones too)
        self.total: int | None = expected_size
        self.have = 0
        # set once the archive's end was found, where no size is recorded
        self.limit: int | None = None

    def run(self) -> None:
        try:
            self.digests = self._download()
        except BaseException as error:  # handed to the main thread through the Feed
            self.feed.finish(error)
        else:
            self.feed.finish()

    def _download(self) -> Digests:
        fd = os.open(self.part, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        try:
            if self.expected_size is not None and os.fstat(fd).st_size > self.expected_size:
                os.ftruncate(fd, 0)  # longer than the file it should be: before anyone reads it
            self.have = self.resumed_from = self._hash_existing(fd)
            try:
                self._transfer_all(fd)
            except TooSlow as slow:
                raise self._kept(slow) from None
            return Digests(self.have, self._sha256.hexdigest(),
                           self._sha1.hexdigest() if self._sha1 else None)
        finally:
            os.close(fd)

    def _transfer_all(self, fd: int) -> None:
        """Requests until the body is whole, a drop resumed (bounded, without progress)."""
        watch = self.pace.watch(self.source.url)  # across reconnects: a drip that drops and
        failures = 0                              # comes back is a drip still
        while True:
            before = self.have
            try:
                self._transfer(fd, watch)
                return
            except _Dropped as dropped:
                last = dropped.error
            self.reconnects += 1
            failures = 1 if self.have > before else failures + 1
            if failures >= self.attempts:
                raise self._kept(network_failure(self.source.url, last))
            self.sleep(min(0.5 * 2.0 ** (failures - 1), 8.0))
            watch.check(self.received)

    def _kept(self, failure: HttpFailure) -> HttpFailure:
        """A failure after which the .part stays, to resume from, as the message says."""
        return type(failure)(f"{failure} (stopped at byte {self.have}; {self.part.name} is "
                             f"kept: run the same command again to resume the download)",
                             url=failure.url)

    def _hash_existing(self, fd: int) -> int:
        have = 0
        while block := os.pread(fd, CHUNK, have):
            self._update(block)
            have += len(block)
        if have > self.feed.written:
            self.feed.advance(have - self.feed.written)
        return have

    def _update(self, block: bytes | memoryview) -> None:
        self._sha256.update(block)
        if self._sha1 is not None:
            self._sha1.update(block)

    def _open(self) -> tuple[io.BufferedIOBase, int, int | None]:
        """The body from `self.have` on, or from 0 where a Range answer cannot be used."""
        if self.have and not self._whole:
            try:
                return self.source.open(self.have)
            except RangeRefused:
                self._whole = True
        return self.source.open(0)

    def _transfer(self, fd: int, watch: PaceWatch) -> None:
        """One request to the body's end; a drop raises _Dropped (worth resuming)."""
        stream, start, total = self._open()
        with stream:
            if total is not None:
                if self.expected_size is not None and total != self.expected_size:
                    raise CheckFailed(f"{shown(self.source.url)}: the server has {total} "
                                      f"bytes, but the release says {self.expected_size}")
                if total < self.have:
                    raise CheckFailed(f"{shown(self.source.url)}: the server has {total} "
                                      f"bytes, fewer than the {self.have} of the partial "
                                      f"download here, which is not of this file")
                self.total = total
            skip = self.have - start  # a server that ignored Range starts again at 0
            view = memoryview(bytearray(CHUNK))
            last_shown = 0.0
            position = start  # of the stream's next byte in the whole file
            while True:
                if self.feed.wait_for_room():  # our extractor's time, not the server's
                    watch.restart(self.received)
                if self.feed.aborted:
                    raise Aborted()
                room = CHUNK
                if self.expected_size is not None:  # one byte past it says it is larger
                    room = min(CHUNK, self.expected_size + 1 - position)
                limit = self.limit
                if limit is not None:
                    if position > limit:
                        raise CheckFailed(f"{shown(self.source.url)}: the server sends more "
                                          f"than the archive holds (past byte {limit}, "
                                          f"after the archive's end): refusing it")
                    room = min(room, limit + 1 - position)
                try:  # one recv at most: a reset loses none of the bytes received before it
                    count = stream.readinto1(view[:room])
                except (OSError, HTTPException) as error:
                    raise _Dropped(error) from error
                if not count:
                    break
                self.received += count
                watch.check(self.received)
                position += count
                if self.expected_size is not None and position > self.expected_size:
                    raise CheckFailed(f"{shown(self.source.url)}: larger than the recorded "
                                      f"{self.expected_size} bytes (the server sent more): "
                                      f"refusing it")
                data = view[:count]
                if skip:
                    dropped = min(skip, count)
                    skip -= dropped
                    data = data[dropped:]
                    if not data:
                        continue
                self._write(fd, data)
                now = time.monotonic()
                if self.progress is not None and now - last_shown >= PROGRESS_EVERY:
                    last_shown = now
                    self.progress(self.have, self.total)
            if self.progress is not None:
                self.progress(self.have, self.total)
        if self.total is not None and position < self.total:  # cut short: resume
            raise _Dropped(OSError(f"the connection closed at byte {position} of {self.total}"))
        if skip:
            raise CheckFailed(f"{shown(self.source.url)}: the server's file ends at byte "
                              f"{position}, before the {self.have} bytes of the partial "
                              f"download here, which is not of this file")

    def _write(self, fd: int, data: memoryview) -> None:
        # a filling disk takes part of a block: write on, so the failure says "no space"
        written = 0
        while written < len(data):
            try:
                taken = os.pwrite(fd, data[written:], self.have + written)
            except OSError as error:
                raise EnvironmentFailure(f"cannot write {self.part}: "
                                         f"{os_error_words(error)}") from error
            if taken == 0:  # no error and no progress: a file system that would spin here
                raise EnvironmentFailure(f"cannot write {self.part}: the file system takes "
                                         f"no more bytes")
            written += taken
        self._update(data)
        self.have += written
        self.feed.advance(written)


class _Dropped(Exception):
    """The connection failed mid-body."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error

