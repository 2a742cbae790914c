"""Opening what the user names, safely: only regular files are opened, every failure one message
naming the path. A FIFO or device may block forever, so a path is looked at, opened with
O_NONBLOCK, and looked at again through the descriptor (a swap between the two is caught)."""

from __future__ import annotations

import errno
import mmap
import os
import stat
from collections.abc import Callable
from typing import TypeVar

from ninfer_kits.errors import BadInput

T = TypeVar("T")

ByteSource = bytes | bytearray | mmap.mmap
StrPath = str | os.PathLike[str]

OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)

ERRNO_WORDS = {
    errno.ENOENT: "no such file or folder",
    errno.ELOOP: "symlink loop (too many levels of symbolic links)",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOTDIR: "a component of the path is not a folder",
    errno.ENAMETOOLONG: "the path is too long",
    errno.EIO: "input/output error while reading it",
    errno.ENOSPC: "no space left on the device",
    errno.EROFS: "a read-only file system",
    errno.EDQUOT: "disk quota exceeded",
    errno.ENXIO: "no such device or address",
    errno.ENODEV: "no such device",
    errno.EISDIR: "is a folder",
    errno.EMFILE: "too many open files",
    errno.ENOMEM: "out of memory",
    errno.EOVERFLOW: "too large to read here",
    errno.EINVAL: "cannot be read this way (invalid argument)",
}


def printable(text: str) -> str:
    """A name for one line: control characters and undecodable bytes escaped."""
    if text.isprintable():
        return text
    out = []
    for char in text:
        code = ord(char)
        if char.isprintable():
            out.append(char)
        elif 0xDC80 <= code <= 0xDCFF:  # a raw byte kept by surrogateescape
            out.append(f"\\x{code - 0xDC00:02x}")
        else:
            out.append(char.encode("unicode_escape").decode("ascii"))
    return "".join(out)


def os_error_words(error: OSError) -> str:
    """What went wrong, in words, without the path."""
    if error.errno in ERRNO_WORDS:
        return ERRNO_WORDS[error.errno]
    text = error.strerror or type(error).__name__
    return text[:1].lower() + text[1:]


def kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode):
        return "a regular file"
    return f"a special file (mode {stat.filemode(mode)})"


def unreadable(shown: str, error: OSError) -> BadInput:
    return BadInput(f"{printable(shown)}: {os_error_words(error)}")


def look(path: StrPath, shown: str | None = None) -> os.stat_result:
    """`stat` (following symlinks, as opening would), with errors in words."""
    try:
        return os.stat(path)
    except OSError as error:
        shown = shown or str(path)
        if error.errno == errno.ENOENT and os.path.islink(path):
            target = os.readlink(path)
            raise BadInput(f"{printable(shown)}: a symlink to {printable(target)}, which does "
                           f"not exist") from error
        raise unreadable(shown, error) from error
    except ValueError as error:  # an embedded NUL byte
        raise BadInput(f"{printable(shown or str(path))}: not a valid path ({error})") from error


class RegularFile:
    def __init__(self, fd: int, size: int, shown: str) -> None:
        self.fd, self.size, self.shown = fd, size, shown

    def head(self, count: int) -> bytes:
        try:
            return os.pread(self.fd, count, 0)
        except OSError as error:
            raise unreadable(self.shown, error) from error

    def contents(self) -> ByteSource:
        """The whole file, mapped copy-on-write (so that C code can search it), or read where
        it cannot be mapped (empty, /proc)."""
        if self.size > 0:
            for access in (mmap.ACCESS_COPY, mmap.ACCESS_READ):  # COPY can fail under strict
                try:                                              # overcommit accounting
                    return mmap.mmap(self.fd, 0, access=access)
                except (OSError, ValueError, OverflowError):
                    pass
        return self._read_all()

    def read_with(self, read: Callable[[ByteSource], T]) -> T:
        """`read` of `contents()`, the map closed after."""
        data = self.contents()
        try:
            return read(data)
        finally:
            if isinstance(data, mmap.mmap):
                data.close()

    def _read_all(self) -> bytes:
        chunks, total = [], 0
        try:
            while chunk := os.read(self.fd, 1 << 20):
                chunks.append(chunk)
                total += len(chunk)
                if total > (1 << 31):
                    raise BadInput(f"{printable(self.shown)}: reports a size of {self.size} "
                                   f"bytes but reads on past 2 GiB: not a file to inspect")
        except OSError as error:
            raise unreadable(self.shown, error) from error
        return b"".join(chunks)


def open_regular(path: StrPath, shown: str | None = None) -> OpenRegular:
    """A context giving a RegularFile; anything else is refused by name, without blocking."""
    return OpenRegular(path, shown or str(path))


class OpenRegular:
    """A class, not a contextlib generator: `inspect` has no other use for contextlib."""

    def __init__(self, path: StrPath, shown: str) -> None:
        self.path, self.shown, self.fd = path, shown, -1

    def __enter__(self) -> RegularFile:
        shown = self.shown
        mode = look(self.path, shown).st_mode
        if not stat.S_ISREG(mode):
            raise BadInput(f"{printable(shown)}: {kind_of(mode)}, not a regular file")
        try:
            fd = os.open(self.path, OPEN_FLAGS)
        except OSError as error:
            raise unreadable(shown, error) from error
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):  # replaced between the two looks
                raise BadInput(f"{printable(shown)}: {kind_of(status.st_mode)}, not a regular "
                               f"file")
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return RegularFile(fd=fd, size=status.st_size, shown=shown)

    def __exit__(self, *exc_info: object) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)
