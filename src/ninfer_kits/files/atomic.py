"""Files that appear complete or not at all, and their hashes: every output is written under a
temporary name beside its final one, fsynced, renamed, and its folder fsynced; a failure leaves the
old file (or none). The hashes release hosts ask for come from the same pass."""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ninfer_kits.errors import EnvironmentFailure

FILE_MODE = 0o644
READ_SIZE = 1 << 20


class DiskFull(EnvironmentFailure):
    """The disk filled up while writing an output; the partial file is removed."""


@dataclass(frozen=True)
class PackedFile:
    path: Path
    size: int
    sha256: str
    sha1: str


class HashingSink:
    """Hashes exactly the bytes that reached the file descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.size = 0
        self.sha256 = hashlib.sha256()
        self.sha1 = hashlib.sha1()  # B2 asks for SHA-1 on upload; not a security use

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # os.write may write less than asked (a filling disk does exactly that)
            written = os.write(self.fd, view)
            view = view[written:]
        self.sha256.update(data)
        self.sha1.update(data)
        self.size += len(data)

    def packed(self, path: Path) -> PackedFile:
        return PackedFile(path, self.size, self.sha256.hexdigest(), self.sha1.hexdigest())


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing(dest: Path, mode: int = FILE_MODE) -> Iterator[Path]:
    """A temporary path beside `dest`, renamed onto it only if the body succeeds."""
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, mode)  # the umask must not decide what we publish
        os.replace(tmp, dest)
        fsync_dir(dest.parent)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(f"no space left on device while writing {dest}") from error
        raise


@contextmanager
def output(dest: Path, mode: int = FILE_MODE) -> Iterator[HashingSink]:
    with replacing(dest, mode) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        try:
            yield HashingSink(fd)
        finally:
            os.close(fd)


def write_file(dest: Path, data: bytes, mode: int = FILE_MODE) -> PackedFile:
    with output(dest, mode) as sink:
        sink.write(data)
    return sink.packed(dest)


def hash_file(path: Path) -> PackedFile:
    sha256, sha1, size = hashlib.sha256(), hashlib.sha1(), 0
    with path.open("rb") as handle:
        while chunk := handle.read(READ_SIZE):
            sha256.update(chunk)
            sha1.update(chunk)
            size += len(chunk)
    return PackedFile(path, size, sha256.hexdigest(), sha1.hexdigest())
