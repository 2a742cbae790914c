"""CUDA device code inside an ELF: list the SASS and PTX entries of its fatbin containers.

Two sections hold fatbins by name, and only one of them is device code the CUDA runtime loads
when the program starts: `.nv_fatbin`. `__nv_relfatbin` holds the inputs of the device link
(separable compilation, `nvcc -rdc=true`), which nvlink consumed when the program was linked and
which the runtime never loads; they are read and reported, but as what they are
(`FatbinEntry.loadable` is False).

Some libraries keep fatbin containers elsewhere: cuFFT keeps thousands in `.data`/`.ldata` and
loads them itself through the driver API; cuobjdump does not see them ("does not contain device
code"). `search_containers` looks for them by their magic number in other data, over the whole
region at C speed (the C library's memmem on the data in memory, else `find`), and keeps only
what parses as a whole container with sane entries; a large region is cut into pieces that a few
threads search at once (memmem runs without the GIL), joined so that the result is that of one
search from the region's start. A file without section headers is searched the same way,
segment by segment.

Only headers are read, so the time taken grows with the number of entries and not with the size
of the payloads (a large CUDA library carries hundreds of MB): no payload is copied or
decompressed, and an entry costs one `struct` read and one tuple. Layout (checked against
cuobjdump on binaries compiled by nvcc 13): containers lie back to back, 8-byte aligned; each
container is a 16-byte header followed by entries, each entry a header of its own size followed
by its payload. A payload is compressed when its flags say zstd (0x8000, nvcc's default
`--compress-mode`) or LZ4 (0x2000, `--compress-mode=speed`).

Why by hand: NVIDIA documents no fatbin layout and ships no library for it, only cuobjdump (a
program from the CUDA toolkit, which misses cuFFT's containers); the tests check this reader
against cuobjdump on nvcc's output and NVIDIA's own libraries.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_left
from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, NamedTuple

from ninfer_kits.errors import NotAnElf
from ninfer_kits.inspector.inputs import ByteSource

if TYPE_CHECKING:
    import _thread
    from typing import Any

LOADED_SECTION = ".nv_fatbin"  # what the CUDA runtime loads
RELOCATABLE_SECTION = "__nv_relfatbin"  # device-link inputs (-rdc): JIT-linked when needed
WRAPPER_SECTION = ".nvFatBinSegment"  # the registration structs that point at the fatbins
FATBIN_SECTIONS = (LOADED_SECTION, RELOCATABLE_SECTION)

CONTAINER_MAGIC = 0xBA55ED50
CONTAINER_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, body size
# What a container found by searching (not in a fatbin section) must start with: the magic,
# version 1 and a 16-byte header, as every container nvcc 12 and 13 write (and NVIDIA's
# libraries carry) does. Eight known bytes also let the search skip ahead twice as far.
FOUND_PREFIX = struct.pack("<IHH", CONTAINER_MAGIC, 1, CONTAINER_HEADER.size)
ENTRY_ARCH_OFFSET = 28
ENTRY_FLAGS_OFFSET = 40
# kind, version, header size, payload size (0-15), arch (28), flags (40): one read per entry
ENTRY_HEADER = struct.Struct("<HHIQ12xI8xQ")
ENTRY_MIN_HEADER = ENTRY_HEADER.size
ENTRY_MAX_HEADER = 4096
FOUND_ARCHS = range(10, 1000)  # what an entry of a found container may name

KIND_PTX = 1
KIND_SASS = 2
KIND_LTOIR = 8  # LTO-IR (NVVM IR): nvcc 13 writes it for `code=lto_86` with -rdc=true
KIND_NAMES = {KIND_PTX: "ptx", KIND_SASS: "sass", KIND_LTOIR: "ltoir"}
ARCH_PREFIXES = {KIND_PTX: "compute", KIND_SASS: "sm", KIND_LTOIR: "lto"}
FLAG_ZSTD = 0x8000  # zstd: nvcc's default --compress-mode (PTX always; SASS with -compress-all)
FLAG_COMPRESSED = FLAG_ZSTD  # the name inspector/payload.py reads zstd's flag by
FLAG_LZ4 = 0x2000  # LZ4 block format: --compress-mode=speed
COMPRESSION_FLAGS = FLAG_ZSTD | FLAG_LZ4
# The arch-specific ("a") and family-specific ("f") variants are flag bits, not arch numbers.
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000
# The flag bits an entry's report depends on: its arch's suffix and whether it is compressed.
NAMED_FLAGS = FLAG_ARCH_SPECIFIC | FLAG_FAMILY_SPECIFIC | COMPRESSION_FLAGS

# Where an entry was found, and so whether anything loads it:
#   fatbin       `.nv_fatbin`: registered and loaded by the CUDA runtime
#   relocatable  `__nv_relfatbin`: device-link inputs; the CUDA runtime JIT-links their PTX for
#                a GPU the device-linked SASS does not fit (seen on an H200), so PTX there counts
#   data         a container in another section (`.data`, `.ldata`): the library loads it itself
#   segment      a container found in a loadable segment of a file without section headers
PLACEMENTS = ("fatbin", "relocatable", "data", "segment")


class FatbinEntry(NamedTuple):
    """One piece of device code: SASS for a real GPU arch, PTX for a virtual one, LTO-IR, or an
    entry of a kind this parser does not know (reported by its number, never read further).
    A named tuple: a big CUDA library has tens of thousands of them."""

    section: str  # ".nv_fatbin", "__nv_relfatbin", another section, or "" (no section headers)
    kind: str  # "sass", "ptx", "ltoir", or "kind-N" for any other kind number N
    arch: str  # "sm_86", "sm_120a", "sm_100f" for SASS; "compute_90" PTX; "lto_86"; "arch_86"
    compressed: bool
    payload_size: int
    segment: int | None = None  # the program header's index, when found without section headers

    @property
    def placement(self) -> str:
        if self.segment is not None:
            return "segment"
        if self.section == LOADED_SECTION:
            return "fatbin"
        if self.section == RELOCATABLE_SECTION:
            return "relocatable"
        return "data"

    @property
    def loadable(self) -> bool:
        """Whether this is device code a GPU gets to run: everything but the device-link inputs
        of `__nv_relfatbin`, which the CUDA runtime never loads."""
        return self.placement != "relocatable"

    @property
    def where(self) -> str:
        return f"segment {self.segment}" if self.segment is not None else self.section


def kind_name(kind: int) -> str:
    return KIND_NAMES.get(kind, f"kind-{kind}")


def is_compressed(flags: int) -> bool:
    """Whether an entry with these flags has a compressed payload (zstd or LZ4)."""
    return bool(flags & COMPRESSION_FLAGS)


def arch_name(kind: int, number: int, flags: int) -> str:
    key = (kind, number, flags & (FLAG_ARCH_SPECIFIC | FLAG_FAMILY_SPECIFIC))
    name = _ARCH_NAMES.get(key)
    if name is None:
        prefix = ARCH_PREFIXES.get(kind, "arch")
        suffix = ""
        if flags & FLAG_ARCH_SPECIFIC:
            suffix = "a"
        elif flags & FLAG_FAMILY_SPECIFIC:
            suffix = "f"
        name = _ARCH_NAMES[key] = f"{prefix}_{number}{suffix}"
    return name


_ARCH_NAMES: dict[tuple[int, int, int], str] = {}
# (kind, arch, flags & NAMED_FLAGS) -> (kind name, arch name, compressed): what an entry says,
# worked out once per distinct header rather than once per entry.
_NAMED: dict[tuple[int, int, int], tuple[str, str, bool]] = {}
_new_tuple = tuple.__new__  # builds a FatbinEntry without the Python-level __new__ of namedtuple


def _named(kind: int, arch: int, flags: int) -> tuple[str, str, bool]:
    key = (kind, arch, flags & NAMED_FLAGS)
    named = _NAMED[key] = (kind_name(kind), arch_name(kind, arch, flags), is_compressed(flags))
    return named


def read_fatbin(data: ByteSource, section: str, offset: int, size: int) -> list[FatbinEntry]:
    """Every entry of the fatbin section that lies at `offset` (file offset) with `size` bytes.
    Anything that does not parse is corrupt: this section holds nothing but fatbins."""
    if offset < 0 or size < 0 or offset + size > len(data):
        raise _corrupt(section, 0, f"the section ({size} bytes at file offset {offset:#x}) runs "
                                   f"past the end of the file ({len(data)} bytes)")
    entries: list[FatbinEntry] = []
    position = 0
    while position + CONTAINER_HEADER.size <= size:
        magic, _version, header_size, body_size = CONTAINER_HEADER.unpack_from(
            data, offset + position)
        if magic != CONTAINER_MAGIC:
            rest = data[offset + position:offset + min(size, position + 64)]
            if position > 0 and not bytes(rest).strip(b"\0"):
                break  # zero padding after the last container
            raise _corrupt(section, position, f"bad container magic {magic:#x}")
        body_start = position + header_size
        body_end = body_start + body_size
        if header_size < CONTAINER_HEADER.size or body_end > size:
            raise _corrupt(section, position, "container runs past the end of the section")
        found = _entries(data, offset + body_start, offset + body_end, section, None)
        if isinstance(found, tuple):
            why, at = found
            raise _corrupt(section, at - offset, why)
        entries.extend(found)
        position = (body_end + 7) & ~7
    return entries


# A region to search: start and end (file offsets), its section's name, its segment's number.
Region = tuple[int, int, str, int | None]
# What a search made of one hit: where it was, where the search went on from (the container's
# end, or the next byte), and the container's entries (none: the hit was not a container).
Hit = tuple[int, int, list[FatbinEntry]]
# A piece of a region: from, to, the region's end, section, segment, and whether it is first.
Piece = tuple[int, int, int, str, int | None, bool]

# Below this many bytes, `find` on the data is as quick as loading ctypes for memmem; and it is
# tried first over the next NEAR bytes, where the next of a run of containers usually lies (a
# ctypes call costs more than a short search).
MEMMEM_FROM = 1 << 20
NEAR = 4096
SMALLEST_CONTAINER = CONTAINER_HEADER.size + ENTRY_MIN_HEADER
# A large region is searched in pieces of at least this many bytes, side by side on up to
# WORKERS cores (memmem runs without the GIL); smaller ones are not worth a thread.
CHUNK_MIN = 4 << 20
WORKERS = 4


def search_containers(data: ByteSource, regions: Sequence[Region],
                      chunk_min: int = CHUNK_MIN) -> list[list[FatbinEntry]]:
    """Fatbin containers anywhere in each region's data[start:end] (file offsets), in the order
    given, found by their first eight bytes (FOUND_PREFIX). A hit counts only if the whole
    container parses: a body that fits, and entries that fill it exactly with sane header sizes
    and plausible archs. Containers lie back to back, so the search resumes after each one and
    never reads the bytes it covers: the same entries as searching each region from its start
    to its end, one hit after the other.

    A large region is cut into pieces searched at once by a few threads, each as if the search
    had begun at its piece's start; then the pieces are joined in order. Where the search from
    the region's start stands at a hit that the piece's own search stood at too, it goes the
    same way from there (the same hit, the same end), so the rest of that piece's result is
    taken as it is; before that (a container of the piece before reaches into this one, into
    the middle of a container this piece's search took) the search goes on here, hit by hit."""
    largest = max((min(end, len(data)) - max(start, 0) for start, end, _s, _n in regions),
                  default=0)
    searcher = _Searcher(data, fast=largest >= MEMMEM_FROM)
    pieces: list[tuple[int, Piece]] = []
    for number, (start, end, section, segment) in enumerate(regions):
        start, end = max(start, 0), min(end, len(data))
        count = max(1, min(searcher.workers, (end - start) // max(chunk_min, 1)))
        bounds = [start + (end - start) * i // count for i in range(count)] + [end]
        pieces += [(number, (bounds[i], bounds[i + 1], end, section, segment, i == 0))
                   for i in range(count)]
    found = searcher.run([piece for _number, piece in pieces])
    results: list[list[FatbinEntry]] = [[] for _ in regions]
    position = 0
    for (number, piece), hits in zip(pieces, found, strict=True):
        if piece[5]:
            position = piece[0]
        position = searcher.join(results[number], hits, position, piece)
    return results


class _Searcher:
    """The search of one file's data: how hits are found (memmem, or the data's own find) and
    how pieces of it are searched side by side."""

    def __init__(self, data: ByteSource, fast: bool) -> None:
        self.data = data
        self.find: Callable[[bytes, int, int], int] = data.find
        self.base: int | None = None
        self.workers = 1
        self.cancelled = False
        if fast:  # a region large enough for memmem (and ctypes) to pay
            memmem, self.base = _memmem(), _address(data)
            if memmem is not None and self.base is not None:
                self.find = _memmem_find(data.find, memmem, self.base)
                self.workers = _cores()

    def run(self, pieces: list[Piece]) -> list[list[Hit]]:
        """The hits of each piece, searched on this thread and on up to `workers - 1` others,
        which are waited for however this one ends (they read the data, which must stay mapped
        while they do)."""
        results: list[list[Hit]] = [[] for _ in pieces]
        if self.workers < 2 or len(pieces) < 2:
            return [self.search(piece) for piece in pieces]
        import _thread

        claim = _thread.allocate_lock()
        queue = list(reversed(range(len(pieces))))
        failures: list[BaseException] = []

        def work() -> None:
            while not self.cancelled:
                with claim:
                    if not queue:
                        return
                    index = queue.pop()
                results[index] = self.search(pieces[index])

        def worker(done: _thread.LockType) -> None:
            try:
                work()
            except BaseException as error:  # raised by the thread that waits for this one
                failures.append(error)
                self.cancelled = True
            finally:
                done.release()

        waits = []
        for _ in range(min(self.workers, len(pieces)) - 1):
            done = _thread.allocate_lock()
            done.acquire()
            try:
                _thread.start_new_thread(worker, (done,))
            except RuntimeError:  # no more threads to be had: the ones there are do it all
                break
            waits.append(done)
        interrupted: BaseException | None = None
        try:
            work()
        except BaseException as error:
            interrupted = error
            self.cancelled = True
        for done in waits:
            while True:
                try:
                    done.acquire()
                    break
                except BaseException as error:  # Ctrl-C, SIGTERM: stop the others, then go
                    interrupted = interrupted or error
                    self.cancelled = True
        if interrupted is not None:
            raise interrupted
        if failures:
            raise failures[0]
        return results

    def search(self, piece: Piece) -> list[Hit]:
        """Every hit the search from the piece's start stands at before its end (a container
        may reach past that end, up to the region's)."""
        start, stop, end, section, segment, _first = piece
        hits: list[Hit] = []
        find, data = self.find, self.data
        limit = min(end, stop + len(FOUND_PREFIX) - 1)  # a hit starts before `stop`
        position = start
        while position < stop and not self.cancelled:
            at = find(FOUND_PREFIX, position, limit)
            if at < 0:
                break
            hit = _hit(data, at, end, section, segment)
            hits.append(hit)
            position = hit[1]
        return hits

    def step(self, position: int, stop: int, end: int, section: str,
             segment: int | None) -> Hit | None:
        """The first hit at or after `position` and before `stop`, and what it is; None if
        there is none."""
        at = self.find(FOUND_PREFIX, position, min(end, stop + len(FOUND_PREFIX) - 1))
        return None if at < 0 else _hit(self.data, at, end, section, segment)

    def join(self, entries: list[FatbinEntry], hits: list[Hit], position: int,
             piece: Piece) -> int:
        """Go on from `position` (where the search from the region's start stands) over the
        piece whose own search found `hits`, adding what the search finds to `entries`; where
        it stands after."""
        _start, stop, end, section, segment, _first = piece
        starts = [at for at, _following, _found in hits]
        while position < stop:
            index = bisect_left(starts, position)
            if index and hits[index - 1][2] and hits[index - 1][1] > position:
                # Inside a container that the piece's search took and the search from the
                # region's start never stood at: one hit on, as that search goes.
                hit = self.step(position, stop, end, section, segment)
                if hit is None:
                    return stop
                entries += hit[2]
                position = hit[1]
                continue
            for _at, _following, found in hits[index:]:
                entries += found
            if index < len(hits):
                position = hits[-1][1]
            break
        return position


def _hit(data: ByteSource, at: int, end: int, section: str, segment: int | None) -> Hit:
    """What the hit at `at` is: a container that parses whole within data[:end] (the search
    goes on after it), or not (it goes on from the next byte)."""
    if at + SMALLEST_CONTAINER <= end:
        _magic, _version, header_size, body_size = CONTAINER_HEADER.unpack_from(data, at)
        if ENTRY_MIN_HEADER <= body_size <= end - at - header_size:
            body_end = at + header_size + body_size
            found = _entries(data, at + header_size, body_end, section, segment, True)
            if not isinstance(found, tuple) and found:
                return at, body_end, found
    return at, at + 1, []


def _memmem_find(near_find: Callable[[bytes, int, int], int], memmem: Any,
                 base: int) -> Callable[[bytes, int, int], int]:
    """`find(needle, start, end)` by the C library's memmem (several times faster than
    mmap.find: it skips on two-byte hashes, and it lets other threads run), after a look at the
    next NEAR bytes in Python's find (cheaper than a ctypes call when the hit is that near)."""

    def find(needle: bytes, start: int, end: int) -> int:
        near = start + NEAR
        if near >= end:
            return near_find(needle, start, end)
        hit = near_find(needle, start, near)
        if hit >= 0:
            return hit
        start = max(start, near - len(needle) + 1)
        hit = memmem(base + start, end - start, needle, len(needle))
        return -1 if not hit else int(hit) - base

    return find


def _cores() -> int:
    try:
        return max(1, min(WORKERS, len(os.sched_getaffinity(0))))
    except (AttributeError, OSError):
        return max(1, min(WORKERS, os.cpu_count() or 1))


@cache
def _memmem() -> Any:
    try:
        import ctypes

        function = ctypes.CDLL(None).memmem
    except (ImportError, OSError, AttributeError):
        return None
    function.restype = ctypes.c_void_p
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
    return function


def _address(data: ByteSource) -> int | None:
    """Where the data lies in memory, for memmem: a memory map's (ctypes takes the address of
    writable buffers only: ACCESS_COPY maps are, read-only ones not), a bytearray's, a bytes
    object's (its own buffer, not a copy); None where there is none. The data stays alive and
    mapped while it is searched, so the address stays valid."""
    import ctypes

    if isinstance(data, bytes):
        return ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
    try:
        anchor = ctypes.c_char.from_buffer(data)
    except (TypeError, ValueError, BufferError):
        return None
    address = ctypes.addressof(anchor)
    del anchor  # releases the export: the map can be closed later
    return address


def _entries(data: ByteSource, start: int, end: int, section: str, segment: int | None,
             searching: bool = False) -> list[FatbinEntry] | tuple[str, int]:
    """The entries between two file offsets, or why they are not entries and where."""
    entries: list[FatbinEntry] = []
    append = entries.append
    position = start
    last = end - ENTRY_MIN_HEADER
    unpack = ENTRY_HEADER.unpack_from
    named_by_header = _NAMED
    while position <= last:
        kind, _version, header_size, payload_size, arch, flags = unpack(data, position)
        if kind == 0:  # a kind this parser does not know is reported; no kind at all is not
            return "entry kind 0", position
        if not ENTRY_MIN_HEADER <= header_size <= ENTRY_MAX_HEADER:
            return f"entry header size {header_size} out of range", position
        following = position + header_size + payload_size
        if following > end:
            return "entry runs past the end of its container", position
        if searching and arch not in FOUND_ARCHS:
            return f"arch {arch} out of range", position
        named = named_by_header.get((kind, arch, flags & NAMED_FLAGS))
        if named is None:
            named = _named(kind, arch, flags)
        append(_new_tuple(FatbinEntry, (section, *named, payload_size, segment)))
        position = following
    if searching and position != end:
        return "entries do not fill the container", position
    return entries


def _corrupt(section: str, position: int, why: str) -> NotAnElf:
    return NotAnElf(f"corrupt CUDA fatbin in section {section} at offset {position:#x}: {why}")
