"""Opening what the user names, safely: only regular files are ever opened for reading, and every
failure becomes one message that names the path and says what is wrong with it.

A FIFO opened for reading blocks until a writer comes; a character device may never end. So a
path is looked at (`stat`) before it is opened, opened with O_NONBLOCK, and looked at again
(`fstat`) through the open descriptor, which is what is then read: a path swapped for something
else between the two looks is caught by the second.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat

from ninfer_kits.errors import BadInput

# What the ELF reader reads from: the bytes of a file, or the file mapped into memory.
ByteSource = bytes | bytearray | mmap.mmap
# A path as callers name one: text or a pathlib.Path (never loaded here: it costs start-up).
StrPath = str | os.PathLike[str]

OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)

# Said after the path: "kit.tar.gz: symlink loop (too many levels of symbolic links)".
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
    """A name as it can be shown on one line: control characters, and bytes that were not UTF-8
    (kept by Python as lone surrogates), written as escapes."""
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
    """What went wrong, in words, without the path (the caller puts the path first)."""
    if error.errno in ERRNO_WORDS:
        return ERRNO_WORDS[error.errno]
    text = error.strerror or type(error).__name__
    return text[:1].lower() + text[1:]


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
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
    """`stat` the path (following symlinks, as opening it would), with errors in words."""
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
    """An open regular file: its descriptor, its size, and how it is shown in messages."""

    def __init__(self, fd: int, size: int, shown: str) -> None:
        self.fd, self.size, self.shown = fd, size, shown

    def head(self, count: int) -> bytes:
        """The first `count` bytes (fewer if the file is shorter)."""
        try:
            return os.pread(self.fd, count, 0)
        except OSError as error:
            raise unreadable(self.shown, error) from error

    def contents(self) -> ByteSource:
        """The whole file: mapped into memory (read lazily, page by page; a private copy-on-write
        map, never written, so that C code can search it), or read into bytes where it cannot
        be mapped (empty files, files in /proc that report no size)."""
        if self.size > 0:
            for access in (mmap.ACCESS_COPY, mmap.ACCESS_READ):  # COPY can fail under strict
                try:                                              # overcommit accounting
                    return mmap.mmap(self.fd, 0, access=access)
                except (OSError, ValueError, OverflowError):
                    pass
        return self._read_all()

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
    """Open a regular file for reading, as a context (`with open_regular(path) as file:`, a
    RegularFile); anything else (FIFO, device, socket, folder) is refused by name, without
    blocking on it."""
    return OpenRegular(path, shown or str(path))


class OpenRegular:
    """open_regular's context: the path is looked at and opened on entering, closed on leaving.
    (A class, not a contextlib generator: `inspect` has no other use for contextlib.)"""

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
