"""CUDA device code inside an ELF: the SASS and PTX entries of its fatbin containers.

By hand because NVIDIA documents no fatbin layout and ships only cuobjdump, which misses the
containers libraries such as cuFFT keep in their data; the tests hold this reader to cuobjdump.
Only headers are read: containers back to back, 8-byte aligned, a 16-byte header, then entries
each a header of its own size and a payload. Sections, placements, the search: docs/inspect.md."""

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
# A found container's start, as nvcc 12 and 13 write them: eight known bytes skip twice as far.
FOUND_PREFIX = struct.pack("<IHH", CONTAINER_MAGIC, 1, CONTAINER_HEADER.size)
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
FLAG_COMPRESSED = FLAG_ZSTD  # inspector/payload.py's name for it
FLAG_LZ4 = 0x2000  # LZ4 block format: --compress-mode=speed
COMPRESSION_FLAGS = FLAG_ZSTD | FLAG_LZ4
FLAG_ARCH_SPECIFIC = 0x100000  # "a": a flag bit, not part of the arch number
FLAG_FAMILY_SPECIFIC = 0x200000  # "f"
NAMED_FLAGS = FLAG_ARCH_SPECIFIC | FLAG_FAMILY_SPECIFIC | COMPRESSION_FLAGS


class FatbinEntry(NamedTuple):
    """One piece of device code (a named tuple: a big CUDA library has tens of thousands)."""

    section: str  # ".nv_fatbin", "__nv_relfatbin", another section, or "" (no section headers)
    kind: str  # "sass", "ptx", "ltoir", or "kind-N" for any other kind number N
    arch: str  # "sm_86", "sm_120a", "sm_100f" for SASS; "compute_90" PTX; "lto_86"; "arch_86"
    compressed: bool
    payload_size: int
    segment: int | None = None  # the program header's index, when found without section headers

    @property
    def placement(self) -> str:
        """`fatbin`, `relocatable` (`__nv_relfatbin`), `data` or `segment`: docs/inspect.md."""
        if self.segment is not None:
            return "segment"
        if self.section == LOADED_SECTION:
            return "fatbin"
        if self.section == RELOCATABLE_SECTION:
            return "relocatable"
        return "data"

    @property
    def loadable(self) -> bool:
        """False for the device-link inputs of `__nv_relfatbin`, which the runtime never loads."""
        return self.placement != "relocatable"

    @property
    def where(self) -> str:
        return f"segment {self.segment}" if self.segment is not None else self.section


def kind_name(kind: int) -> str:
    return KIND_NAMES.get(kind, f"kind-{kind}")


def is_compressed(flags: int) -> bool:
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
# (kind, arch, flags & NAMED_FLAGS) -> (kind, arch name, compressed), once per distinct header.
_NAMED: dict[tuple[int, int, int], tuple[str, str, bool]] = {}
_new_tuple = tuple.__new__  # builds a FatbinEntry without the Python-level __new__ of namedtuple


def _named(kind: int, arch: int, flags: int) -> tuple[str, str, bool]:
    key = (kind, arch, flags & NAMED_FLAGS)
    named = _NAMED[key] = (kind_name(kind), arch_name(kind, arch, flags), is_compressed(flags))
    return named


def read_fatbin(data: ByteSource, section: str, offset: int, size: int) -> list[FatbinEntry]:
    """Every entry of a fatbin section; anything that does not parse is corrupt (NotAnElf)."""
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


# start and end (file offsets), section, segment
Region = tuple[int, int, str, int | None]
# where, where the search goes on (the container's end, or the next byte), the entries
Hit = tuple[int, int, list[FatbinEntry]]
# from, to, the region's end, section, segment, whether it is the region's first piece
Piece = tuple[int, int, int, str, int | None, bool]

# Below MEMMEM_FROM bytes `find` beats loading ctypes; and within NEAR bytes, where the next
# container of a run usually lies, it beats a ctypes call.
MEMMEM_FROM = 1 << 20
NEAR = 4096
SMALLEST_CONTAINER = CONTAINER_HEADER.size + ENTRY_MIN_HEADER
# Pieces searched side by side (memmem runs without the GIL); smaller is not worth a thread.
CHUNK_MIN = 4 << 20
WORKERS = 4


def search_containers(data: ByteSource, regions: Sequence[Region],
                      chunk_min: int = CHUNK_MIN) -> list[list[FatbinEntry]]:
    """The containers in each region, found by FOUND_PREFIX; a hit counts only if the whole
    container parses, and the search resumes after it. Pieces of a large region are searched
    at once, then joined so that the result is that of one search from the region's start:
    once that search meets a hit the piece's own search stood at, the rest is the same."""
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
    """One file's search: memmem or the data's own find, pieces side by side."""

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
        """The hits of each piece, on up to `workers` threads, all waited for however this one
        ends (the data must stay mapped while they read it)."""
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
        """Every hit from the piece's start to its end (a container may reach the region's)."""
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
        at = self.find(FOUND_PREFIX, position, min(end, stop + len(FOUND_PREFIX) - 1))
        return None if at < 0 else _hit(self.data, at, end, section, segment)

    def join(self, entries: list[FatbinEntry], hits: list[Hit], position: int,
             piece: Piece) -> int:
        """Carry the search from the region's start (at `position`) over a piece, adding to
        `entries`; where it stands after."""
        _start, stop, end, section, segment, _first = piece
        starts = [at for at, _following, _found in hits]
        while position < stop:
            index = bisect_left(starts, position)
            if index and hits[index - 1][2] and hits[index - 1][1] > position:
                # Inside a container the piece's own search took: one hit on, by hand.
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
    """`find` by the C library's memmem (several times mmap.find's speed, without the GIL),
    after Python's find over the next NEAR bytes."""

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
    """Where the data lies in memory, for memmem; None for a read-only map (ctypes takes
    writable buffers only: ACCESS_COPY maps are)."""
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
    """The entries between two file offsets, or (why not, where)."""
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
