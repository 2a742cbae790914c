"""Read a kit archive safely, in one streaming pass: what `inspect`, `verify` and `fetch` share.

The standard library (tarfile, zlib, lzma, bz2) reads the formats; this module is the policy it
leaves to its caller: which names, types, shapes and sizes to accept, and nothing decompressed
twice or read backwards. The bounds and what is refused: docs/fetch.md and docs/inspect.md."""

from __future__ import annotations

import errno
import io
import mmap
import os
import posixpath
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from ninfer_kits.errors import BadInput
from ninfer_kits.inspector.decompress import Prefetched, gunzip_chunks, read_chunks
from ninfer_kits.inspector.formats import DEFAULT_MEMBER_LIMIT as DEFAULT_MEMBER_LIMIT
from ninfer_kits.inspector.formats import HEAD_BYTES as HEAD_BYTES
from ninfer_kits.inspector.formats import SUPPORTED_WORDS as SUPPORTED_WORDS
from ninfer_kits.inspector.formats import archive_format as archive_format
from ninfer_kits.inspector.formats import size_words as size_words
from ninfer_kits.inspector.formats import unsupported_format as unsupported_format
from ninfer_kits.inspector.inputs import (
    ByteSource,
    RegularFile,
    StrPath,
    open_regular,
    os_error_words,
    printable,
)

if TYPE_CHECKING:  # tarfile, tempfile and the signal machinery load only when an archive is read
    import tarfile
    from types import FrameType
    from typing import Any, BinaryIO, Self

MEMORY_LIMIT = 64 << 20
HEADER_LIMIT = 1 << 20
STREAM_BUFFER = 1 << 20
# A real kit is a few folders deep with hundreds of files; these leave room for thousands while
# keeping a hostile archive's tree within what recursion, path lengths and inodes cope with.
MAX_MEMBERS = 65_536
MAX_DEPTH = 64  # names in a member's path: kit/bin/app is 3
NAME_MAX = 255  # bytes in one name of a path (Linux, every common file system)
PATH_MAX = 4096  # bytes in a path the kernel takes, its NUL included (Linux)
SHOWN_NAME = 80  # characters of a member's name shown in a message, at most

# tarfile's member types, spelled out so that this module loads without tarfile.
KINDS = {b"0": "file", b"\0": "file", b"7": "file", b"S": "file", b"5": "folder",
         b"2": "symlink", b"1": "hardlink"}
REFUSED_KINDS = {b"3": "a character device", b"4": "a block device",
                 b"6": "a FIFO (named pipe)"}
LONG_HEADERS = (b"L", b"K", b"x", b"g", b"X")


class MemberInfo(NamedTuple):
    """One member of a kit archive, as its header says."""

    name: str  # relative, '/'-separated, without '.' or '..' components or a trailing '/'
    kind: str  # "file", "folder", "symlink" or "hardlink"
    size: int  # bytes of data (files only; 0 for the others)
    mode: int  # permission bits
    link: str | None  # a symlink's target (relative to its folder) or a hardlink's member name


class TarHeader(NamedTuple):
    mtime: int
    uid: int
    gid: int
    uname: str
    gname: str


class Member:
    """A member while the archive stands at it: its data can be read once, and not after the
    iteration moves on."""

    def __init__(self, info: MemberInfo, archive: KitArchive, tarinfo: tarfile.TarInfo) -> None:
        self.info = info
        self._archive = archive
        self._tarinfo = tarinfo
        self._stream: Any = None
        self._valid = True

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def size(self) -> int:
        return self.info.size

    @property
    def mode(self) -> int:
        return self.info.mode

    @property
    def link(self) -> str | None:
        return self.info.link

    @property
    def header(self) -> TarHeader:
        """The header's other fields: a deterministic tarball fixes them, so a diff shows them."""
        tarinfo = self._tarinfo
        return TarHeader(mtime=int(tarinfo.mtime), uid=tarinfo.uid, gid=tarinfo.gid,
                         uname=tarinfo.uname, gname=tarinfo.gname)

    def head(self, count: int = 4) -> bytes:
        """The first `count` bytes of a file member, without consuming them."""
        if count > io.DEFAULT_BUFFER_SIZE:
            raise ValueError("head() peeks at most one buffer")
        self._check_open()
        if self._stream is None:  # nothing read yet: tarfile's read-ahead bytes may hold it
            ahead = self._archive.read_ahead()
            if ahead is not None and len(ahead) >= min(count, self.size):
                return bytes(ahead[:min(count, self.size)])
        stream = self._open()
        with self._archive.reading(self.name):
            return bytes(stream.peek(count)[:count])

    def read(self) -> bytes:
        """The whole member in memory (at most `memory_limit` bytes)."""
        stream = self._open()
        self._check_size()
        if self.size > self._archive.memory_limit:
            raise BadInput(f"{self._where()} is {size_words(self.size)}, more than "
                           f"{size_words(self._archive.memory_limit)} to hold in memory")
        with self._archive.reading(self.name):
            data = bytes(stream.read(self.size))
        if len(data) != self.size:
            raise BadInput(f"{self._where()}: truncated (the archive ends inside it)")
        return data

    @contextmanager
    def contents(self) -> Iterator[ByteSource]:
        """The whole member: bytes when small, else an unnamed temporary file mapped into memory."""
        self._check_size()
        if self.size <= self._archive.memory_limit:
            yield self.read()
            return
        with self._archive.spool_file(self.name) as spool:
            self.copy_to(spool)
            spool.flush()
            mapped = mmap.mmap(spool.fileno(), 0, access=mmap.ACCESS_COPY)
            try:
                yield mapped
            finally:
                mapped.close()

    def copy_to(self, sink: BinaryIO, chunk: int = STREAM_BUFFER) -> int:
        """Stream the member's data into `sink` (at most `member_limit` bytes); the count."""
        self._check_open()
        self._check_size()
        blocks = self._blocks(chunk)
        copied = 0
        while copied < self.size:
            with self._archive.reading(self.name):
                block = next(blocks, b"")
            if not block:
                raise BadInput(f"{self._where()}: truncated (the archive ends inside it)")
            try:
                sink.write(block)
            except OSError as error:
                raise self._archive.write_failed(self.name, sink, error) from error
            copied += len(block)
        self._stream = _CONSUMED
        return copied

    def _blocks(self, chunk: int) -> Iterator[bytes | memoryview]:
        """The member's data: straight from the decompressor when untouched and large, else
        through tarfile."""
        direct = None
        if self._stream is None and self.size >= chunk:
            direct = self._archive.data_blocks(self.size, chunk)
        if direct is not None:
            self._stream = _CONSUMED
            yield from direct
            return
        stream = self._open()
        left = self.size
        while left > 0:
            block = stream.read(min(chunk, left))
            if not block:
                return
            left -= len(block)
            yield block

    def _where(self) -> str:
        return f"{printable(self._archive.shown)}: member {shown_name(self.name)}"

    def _check_size(self) -> None:
        if self.size > self._archive.member_limit:
            raise BadInput(f"{self._where()} is {size_words(self.size)}, larger than the limit "
                           f"of {size_words(self._archive.member_limit)} for one member"
                           f"{self._archive.limit_hint}")

    def _check_open(self) -> None:
        if not self._valid:
            raise RuntimeError(f"{self.name}: the archive has moved past this member")
        if self.kind != "file":
            raise ValueError(f"{self.name}: a {self.kind} has no data")
        if self._stream is _CONSUMED:
            raise RuntimeError(f"{self.name}: its data was read already")

    def _open(self) -> Any:
        self._check_open()
        if self._stream is None:
            self._stream = self._archive.tar.extractfile(self._tarinfo)
        return self._stream


@cache
def _bounded_tarinfo() -> type[tarfile.TarInfo]:
    import tarfile

    class BoundedTarInfo(tarfile.TarInfo):
        def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
            if self.type in LONG_HEADERS and self.size > HEADER_LIMIT:
                raise _HeaderTooLarge(self.size)
            return super()._proc_member(archive)  # type: ignore[misc,no-any-return]

        @classmethod
        def fromtarfile(cls, archive: tarfile.TarFile) -> Self:
            """A damaged header after the first is an error: tarfile takes it for the end."""
            offset = archive.offset
            try:
                return super().fromtarfile(archive)
            except tarfile.HeaderError as error:
                damaged = type(error).__name__ in ("InvalidHeaderError", "TruncatedHeaderError")
                if offset == 0 or not damaged:
                    raise  # not a tar at all (tarfile says so), or the end
                raise _CorruptHeader(offset, str(error)) from error

    return BoundedTarInfo


class _HeaderTooLarge(Exception):
    pass


class _CorruptHeader(Exception):  # (offset in the tar stream, tarfile's words)
    pass


class KitArchive:
    def __init__(self, path: StrPath, *, shown: str | None = None,
                 member_limit: int = DEFAULT_MEMBER_LIMIT, memory_limit: int = MEMORY_LIMIT,
                 temp_dir: StrPath | None = None, limit_hint: str = "") -> None:
        self.path = path
        self.shown = shown or str(path)
        self.member_limit = member_limit
        self.memory_limit = min(memory_limit, member_limit)
        self.temp_dir = temp_dir
        self.limit_hint = limit_hint
        self.format = ""
        self._stack = ExitStack()
        self._tar: tarfile.TarFile | None = None
        self._stream: object = None
        self._names: set[str] = set()
        self._count = 0

    @property
    def tar(self) -> tarfile.TarFile:
        if self._tar is None:
            raise RuntimeError("KitArchive is used outside its `with` block")
        return self._tar

    def __enter__(self) -> KitArchive:
        try:
            self._stack.enter_context(terminate_as_exit())
            file = self._stack.enter_context(open_regular(self.path, self.shown))
            self.format = self._format(file.head(HEAD_BYTES))
            stream = self._stream = self._stack.enter_context(self._decompressed(file))
            import tarfile

            with self.reading(None):
                self._tar = self._stack.enter_context(tarfile.open(
                    fileobj=stream, mode="r|", bufsize=STREAM_BUFFER,
                    tarinfo=_bounded_tarinfo()))
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._tar = None
        self._stack.close()

    def __iter__(self) -> Iterator[Member]:
        tar = self.tar
        while True:
            with self.reading(None):
                tarinfo = tar.next()
            if tarinfo is None:
                self._read_to_the_end()
                return
            tar.members.clear()  # type: ignore[attr-defined]  # stream mode keeps every header
            member = self._member(tarinfo)
            if member is not None:
                try:
                    yield member
                finally:
                    member._valid = False
            self._skip_rest(tarinfo)

    def _read_to_the_end(self) -> None:
        """Read a buffer past the tar's end, so that a truncated or failing compressed end is
        reported."""
        if isinstance(self._stream, Prefetched):
            with self.reading(None):
                self.tar.fileobj.read(STREAM_BUFFER)

    def data_blocks(self, size: int, chunk: int) -> Iterator[bytes | memoryview] | None:
        """The next `size` bytes of the tar stream straight from the decompressor, or None
        where tarfile's stream reader is not the shape relied on. That reader copies every byte
        twice; its state is `buf` (read ahead) and `pos` (Python 3.8 to 3.14), which this
        drains and then moves past the member."""
        reader = self._stream_reader()
        source = self._stream
        if reader is None or not isinstance(source, Prefetched):
            return None
        return self._direct(reader, source, size, chunk)

    def read_ahead(self) -> bytes | None:
        """The bytes tarfile's stream reader holds ahead, or None (as `data_blocks`)."""
        reader = self._stream_reader()
        return None if reader is None else reader.buf

    def _stream_reader(self) -> Any:
        reader: Any = self.tar.fileobj
        if not (getattr(reader, "fileobj", None) is self._stream
                and getattr(reader, "comptype", None) == "tar"
                and isinstance(getattr(reader, "buf", None), bytes)
                and isinstance(getattr(reader, "pos", None), int)):
            return None
        return reader

    @staticmethod
    def _direct(reader: Any, source: Prefetched, size: int,
                chunk: int) -> Iterator[bytes | memoryview]:
        left = size
        ahead: bytes = reader.buf
        if ahead:
            taken = min(left, len(ahead))
            reader.buf = ahead[taken:]
            reader.pos += taken
            left -= taken
            yield memoryview(ahead)[:taken]
        while left > 0:
            block = source.read_view(min(left, chunk))
            if not block:
                return
            reader.pos += len(block)
            left -= len(block)
            yield block

    def _skip_rest(self, tarinfo: tarfile.TarInfo) -> None:
        """Read on to the next header, no further than the archive goes (tarfile's seek would
        read up to a made-up size: 2**62 bytes never ends)."""
        stream: Any = self.tar.fileobj
        with self.reading(tarinfo.name):
            remaining = self.tar.offset - stream.tell()
            while remaining > 0:
                block = stream.read(min(remaining, STREAM_BUFFER))
                if not block:
                    raise BadInput(f"{printable(self.shown)}: member {shown_name(tarinfo.name)}: "
                                   f"truncated (the archive ends inside it)")
                remaining -= len(block)

    # --- formats and members ------------------------------------------------------------------

    def _format(self, head: bytes) -> str:
        found = archive_format(head)
        if found is not None:
            return found
        what = unsupported_format(head)
        if what is not None:
            raise BadInput(f"{printable(self.shown)}: {what}: not a supported archive (kits are "
                           f"{SUPPORTED_WORDS})")
        raise BadInput(f"{printable(self.shown)}: not a supported archive (not "
                       f"{SUPPORTED_WORDS})")

    # Off only where the caller checks the whole archive's hash before trusting it (fetch).
    check_gzip_crc = True
    worker_nice = 0  # decompress.lower_priority

    def _raw(self, file: RegularFile) -> BinaryIO:
        """The compressed bytes (a subclass may read a file still being written)."""
        return open(file.fd, "rb", closefd=False)

    @contextmanager
    def _decompressed(self, file: RegularFile) -> Iterator[BinaryIO]:
        """The tar stream, decompressed by threads ahead of its reader, so that the one pass
        runs on two cores or more."""
        raw = self._raw(file)
        try:
            if self.format == "gzip":
                chunks = gunzip_chunks(raw, check_crc=self.check_gzip_crc, nice=self.worker_nice)
                with Prefetched(chunks, nice=self.worker_nice) as stream:
                    yield stream  # type: ignore[misc]
            elif self.format == "xz":
                import lzma

                with lzma.LZMAFile(raw, mode="rb") as unpacked, \
                        Prefetched(read_chunks(unpacked),  # type: ignore[arg-type]
                                   nice=self.worker_nice) as stream:
                    yield stream  # type: ignore[misc]
            elif self.format == "bzip2":
                import bz2

                with bz2.BZ2File(raw, mode="rb") as bunzipped, \
                        Prefetched(read_chunks(bunzipped),  # type: ignore[arg-type]
                                   nice=self.worker_nice) as stream:
                    yield stream  # type: ignore[misc]
            else:
                yield raw
        finally:
            raw.close()

    def _member(self, tarinfo: tarfile.TarInfo) -> Member | None:
        raw = tarinfo.name
        name = _safe_name(raw)
        shown = f"{printable(self.shown)}: member {shown_name(raw)}"
        if name is None:
            raise BadInput(f"{shown}: an absolute path or one with '..': refused (it would be "
                           f"written outside the folder it is extracted into)")
        if tarinfo.type in REFUSED_KINDS:
            raise BadInput(f"{shown} is {REFUSED_KINDS[tarinfo.type]}: a kit archive holds only "
                           f"files, folders and links")
        kind = KINDS.get(tarinfo.type)
        if kind is None:
            raise BadInput(f"{shown}: unknown member type {tarinfo.type!r}")
        self._count += 1
        if self._count > MAX_MEMBERS:
            raise BadInput(f"{shown}: more than {MAX_MEMBERS:,} members, which a kit archive "
                           f"holds at most: refused")
        if not name:
            return None  # the archive's own top folder, "./"
        too_large = _shape_problem(name, tarinfo.linkname if kind in ("symlink", "hardlink")
                                   else None)
        if too_large is not None:
            raise BadInput(f"{shown}: {too_large}: refused")
        link = None
        if kind == "symlink":
            link = tarinfo.linkname
            if not _link_stays_inside(name, link):
                raise BadInput(f"{shown}: a symlink to {shown_name(link)}, outside the archive's "
                               f"tree: refused")
        elif kind == "hardlink":
            link = _safe_name(tarinfo.linkname)
            if not link or link not in self._names:
                raise BadInput(f"{shown}: a hardlink to {shown_name(tarinfo.linkname)}, which is "
                               f"not an earlier member of the archive: refused")
        if kind != "folder":
            if name in self._names:
                raise BadInput(f"{shown}: the name appears twice (extracting keeps only the "
                               f"last): refused")
            self._names.add(name)
        info = MemberInfo(name=name, kind=kind, size=tarinfo.size if kind == "file" else 0,
                          mode=tarinfo.mode & 0o7777, link=link)
        return Member(info, self, tarinfo)

    # --- errors, in words ---------------------------------------------------------------------

    @contextmanager
    def reading(self, member: str | None) -> Iterator[None]:
        """What the decompressor and tarfile raise, as BadInput naming archive and member."""
        import tarfile
        import zlib

        where = printable(self.shown) + (f": member {shown_name(member)}" if member else "")
        kind = f"{self.format} tarball" if self.format not in ("", "tar") else "tarball"
        try:
            yield
        except BadInput:
            raise
        except _HeaderTooLarge as error:
            raise BadInput(f"{where}: a long-name or pax header of {size_words(error.args[0])} "
                           f"(more than {size_words(HEADER_LIMIT)}): refused") from error
        except _CorruptHeader as error:
            offset, reason = error.args
            raise BadInput(f"{where}: a corrupt tar header at byte {offset} of the tar stream "
                           f"({reason}), before the archive's end: refused") from error
        except EOFError as error:
            raise BadInput(f"{where}: not a readable {kind} (truncated: the compressed data "
                           f"ends early)") from error
        except (tarfile.TarError, zlib.error) as error:
            raise BadInput(f"{where}: not a readable {kind} ({error})") from error
        except OverflowError as error:  # tarfile's pax parser on a length past ssize_t (fuzzed)
            raise BadInput(f"{where}: not a readable {kind} (a header field out of range: "
                           f"{error})") from error
        except OSError as error:
            if error.errno is None:  # gzip.BadGzipFile and friends: the data, not the disk
                raise BadInput(f"{where}: not a readable {kind} ({error})") from error
            raise BadInput(f"{where}: {os_error_words(error)}") from error
        except Exception as error:
            if type(error).__name__ == "LZMAError":
                raise BadInput(f"{where}: not a readable {kind} ({error})") from error
            raise

    @contextmanager
    def spool_file(self, member: str) -> Iterator[BinaryIO]:
        import tempfile

        folder = str(self.temp_dir) if self.temp_dir else tempfile.gettempdir()
        try:
            handle: BinaryIO = tempfile.TemporaryFile(dir=folder)  # noqa: SIM115 (unnamed: O_TMPFILE)
        except OSError as error:
            raise SpoolFailed(error.errno, f"{printable(self.shown)}: member "
                              f"{shown_name(member)}: cannot make a temporary file in {folder}: "
                              f"{os_error_words(error)}") from error
        with handle:
            yield handle

    def write_failed(self, member: str, sink: BinaryIO, error: OSError) -> OSError:
        import tempfile

        where = getattr(sink, "name", None)
        if isinstance(where, int) or where is None:
            where = str(self.temp_dir) if self.temp_dir else tempfile.gettempdir()
        return SpoolFailed(error.errno, f"{printable(self.shown)}: member {shown_name(member)}: "
                                        f"cannot write a copy of it to {where}: "
                                        f"{os_error_words(error)}")


_CONSUMED = object()  # a member's stream once `copy_to` took its data


class SpoolFailed(OSError):
    """No room for a member's copy: not the archive's fault, so an OSError (the CLI's
    environment failure)."""

    def __init__(self, number: int | None, message: str) -> None:
        super().__init__(number or errno.EIO, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def shown_name(name: str) -> str:
    """A name for a message: escaped, its middle left out when long."""
    text = printable(name)
    if len(text) <= SHOWN_NAME:
        return text
    half = SHOWN_NAME // 2
    return f"{text[:half]}…({len(os.fsencode(name)):,} bytes)…{text[-half:]}"


def _shape_problem(name: str, link: str | None) -> str | None:
    """Why a member is deeper or longer than a kit's tree may be, in words; None if not."""
    parts = name.split("/")
    if len(parts) > MAX_DEPTH:
        return f"{len(parts):,} names deep, more than the {MAX_DEPTH} a kit's path may have"
    size = len(os.fsencode(name))
    if size >= PATH_MAX:
        return f"a name of {size:,} bytes, longer than a path may be ({PATH_MAX - 1} bytes)"
    longest = max(parts, key=lambda part: len(os.fsencode(part)))
    if len(os.fsencode(longest)) > NAME_MAX:
        return (f"a name in its path of {len(os.fsencode(longest)):,} bytes, longer than a "
                f"file system takes ({NAME_MAX} bytes)")
    if link is not None and len(os.fsencode(link)) >= PATH_MAX:
        return (f"a link target of {len(os.fsencode(link)):,} bytes, longer than a path may "
                f"be ({PATH_MAX - 1} bytes)")
    return None


def _safe_name(raw: str) -> str | None:
    """The name made relative and clean; None if absolute or with '..' or NUL; "" for "./"."""
    if raw.startswith("/") or "\0" in raw:
        return None
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    if ".." in parts:
        return None
    return "/".join(parts)


def _link_stays_inside(name: str, target: str) -> bool:
    if not target or target.startswith("/") or "\0" in target:
        return False
    depth = len(posixpath.dirname(name).split("/")) if posixpath.dirname(name) else 0
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return False
        elif part not in ("", "."):
            depth += 1
    return True


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit (143) in the main thread, so `finally` blocks run as for
    Ctrl-C; a handler the program installed stays."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):
        yield
        return

    def terminate(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
