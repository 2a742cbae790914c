"""The fatbin reader's search for containers outside the fatbin sections: cut into pieces that
threads search side by side, it must find exactly what one search from the region's start finds,
hit after hit, wherever the cuts fall (inside a container, inside a hit, between two)."""

from __future__ import annotations

import mmap
import random
import struct
from pathlib import Path

import pytest

from ninfer_kits.inspector import fatbin
from ninfer_kits.inspector.fatbin import (
    CONTAINER_HEADER,
    ENTRY_HEADER,
    ENTRY_MIN_HEADER,
    FOUND_ARCHS,
    FOUND_PREFIX,
    FatbinEntry,
    search_containers,
)


def sequential(data: bytes, start: int, end: int, section: str) -> list[FatbinEntry]:
    """The search as it was written before it was cut into pieces: one hit after the other."""
    entries: list[FatbinEntry] = []
    end = min(end, len(data))
    position = max(start, 0)
    while True:
        at = data.find(FOUND_PREFIX, position, end)
        if at < 0:
            return entries
        position = at + 1
        if at + CONTAINER_HEADER.size > end:
            continue
        _magic, _version, header_size, body_size = CONTAINER_HEADER.unpack_from(data, at)
        if not ENTRY_MIN_HEADER <= body_size <= end - at - header_size:
            continue
        found = fatbin._entries(data, at + header_size, at + header_size + body_size, section,
                                None, searching=True)
        if isinstance(found, tuple) or not found:
            continue
        entries += found
        position = at + header_size + body_size


def entry(rng: random.Random, payload: bytes) -> bytes:
    header = bytearray(64)
    struct.pack_into("<HHIQ", header, 0, rng.choice([1, 2, 8]), 0x0101, 64, len(payload))
    struct.pack_into("<I", header, 28, rng.randrange(FOUND_ARCHS.start, 130))
    struct.pack_into("<Q", header, 40, rng.choice([0x11, 0x2011, 0x8011, 0x100011]))
    assert ENTRY_HEADER.size <= len(header)
    return bytes(header) + payload


def container(rng: random.Random, payloads: list[bytes]) -> bytes:
    body = b"".join(entry(rng, payload) for payload in payloads)
    return FOUND_PREFIX + struct.pack("<Q", len(body)) + body


def planted(seed: int, size: int) -> bytes:
    """Noise with containers in it: runs back to back, containers inside other containers'
    payloads (the outer one wins), prefixes followed by nothing that parses, and hits that
    overlap the end of a container."""
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(size))
    at = 0
    while at < size - 4096:
        at += rng.randrange(0, 60_000)
        choice = rng.random()
        if choice < 0.4:  # a run of containers, back to back
            blob = b"".join(container(rng, [rng.randbytes(rng.randrange(0, 3000))
                                            for _ in range(rng.randint(1, 3))])
                            for _ in range(rng.randint(1, 6)))
        elif choice < 0.6:  # one container inside another's payload
            inner = container(rng, [rng.randbytes(rng.randrange(0, 2000))])
            cut = rng.randrange(0, 1000)
            payload = rng.randbytes(cut) + inner + rng.randbytes(rng.randrange(0, 1000))
            blob = container(rng, [payload])
        elif choice < 0.8:  # a prefix and noise
            blob = FOUND_PREFIX + rng.randbytes(rng.randrange(0, 200))
        else:  # a container, then a hit that starts inside its last bytes
            first = container(rng, [rng.randbytes(rng.randrange(0, 500))])
            blob = first[:-4] + container(rng, [rng.randbytes(100)])
        data[at:at + len(blob)] = blob[:max(0, size - at)]
        at += len(blob)
    return bytes(data[:size])


@pytest.fixture()
def mapped(tmp_path: Path) -> tuple[bytes, mmap.mmap]:
    data = planted(7, 3 << 20)
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    with path.open("rb") as file:
        mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
    yield data, mapping
    mapping.close()


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_pieces_find_what_one_search_finds(mapped: tuple[bytes, mmap.mmap], workers: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    data, mapping = mapped
    monkeypatch.setattr(fatbin, "_cores", lambda: workers)
    rng = random.Random(workers)
    regions = [(0, len(data)), (1, len(data) - 3), *[
        tuple(sorted((rng.randrange(len(data)), rng.randrange(len(data))))) for _ in range(12)]]
    truth = [sequential(data, start, end, ".data") for start, end in regions]
    assert sum(map(len, truth)) > 200  # the planted containers are found
    for chunk_min in (1, 4096, 65_536, 1 << 20, len(data)):
        found = search_containers(mapping, [(start, end, ".data", None)
                                            for start, end in regions], chunk_min=chunk_min)
        assert found == truth, chunk_min
        # bytes (no memmem, one thread) and the mapped file agree
        assert search_containers(data, [(0, len(data), ".data", None)],
                                 chunk_min=chunk_min) == truth[:1]


def test_cuts_inside_every_container_of_a_run(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces that each begin inside a container of one long run: every piece's own search
    finds the inner containers the region's search skips, and the joins must drop them."""
    rng = random.Random(3)
    nested = [container(rng, [rng.randbytes(50) + container(rng, [rng.randbytes(300)])
                              + rng.randbytes(50)]) for _ in range(400)]
    data = rng.randbytes(1 << 20) + b"".join(nested) + rng.randbytes(1000)
    path = tmp_path / "run.bin"
    path.write_bytes(data)
    monkeypatch.setattr(fatbin, "_cores", lambda: 4)
    truth = sequential(data, 0, len(data), ".ldata")
    assert len(truth) == 400
    with path.open("rb") as file:
        mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
        try:
            for chunk_min in (997, 7919, 100_003):
                assert search_containers(mapping, [(0, len(data), ".ldata", None)],
                                         chunk_min=chunk_min) == [truth]
        finally:
            mapping.close()


def test_a_failing_piece_fails_the_search(mapped: tuple[bytes, mmap.mmap],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """An error in a thread is raised by the search, after every thread has stopped."""
    _data, mapping = mapped
    monkeypatch.setattr(fatbin, "_cores", lambda: 4)
    calls = []

    def broken(*args: object, **kwargs: object) -> object:
        calls.append(args)
        if len(calls) == 5:
            raise MemoryError("made up")
        return original(*args, **kwargs)

    original = fatbin._entries
    monkeypatch.setattr(fatbin, "_entries", broken)
    with pytest.raises(MemoryError, match="made up"):
        search_containers(mapping, [(0, len(mapping), ".data", None)], chunk_min=4096)


@pytest.mark.parametrize("later", [b"", b"second"])
def test_a_container_that_reaches_into_the_next_piece(tmp_path: Path, later: bytes,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The first piece's last container ends past the cut; the second piece's search, begun at
    the cut, took a container that starts in the last bytes of that one (which the region's
    search never stands at): the join goes on by itself from the first container's end."""
    rng = random.Random(11)
    size = 2 << 20
    data = bytearray(rng.randbytes(size))
    first = container(rng, [rng.randbytes(400)])
    second = container(rng, [rng.randbytes(300)])
    at = size // 2 - 200  # the cut (two pieces) falls inside `first`
    data[at:at + len(first)] = first
    data[at + len(first) - 4:at + len(first) - 4 + len(second)] = second
    if later:  # one more container after them, which both searches find
        third = container(rng, [later * 10])
        data[size // 2 + 4000:size // 2 + 4000 + len(third)] = third
    path = tmp_path / "overlap.bin"
    path.write_bytes(bytes(data))
    monkeypatch.setattr(fatbin, "_cores", lambda: 2)
    truth = sequential(bytes(data), 0, size, ".data")
    assert len(truth) == 1 + bool(later)  # `second` starts inside `first`: not found
    steps = []
    original = fatbin._Searcher.join

    def join(self: fatbin._Searcher, *args: object) -> int:
        before = self.step

        def step(*inner: object) -> object:
            steps.append(inner)
            return before(*inner)  # type: ignore[arg-type]

        self.step = step  # type: ignore[method-assign]
        try:
            return original(self, *args)  # type: ignore[arg-type]
        finally:
            del self.step

    monkeypatch.setattr(fatbin._Searcher, "join", join)
    with path.open("rb") as file:
        mapping = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
        try:
            assert search_containers(mapping, [(0, size, ".data", None)],
                                     chunk_min=1 << 20) == [truth]
        finally:
            mapping.close()
    assert steps  # the join went on by itself from inside the second piece's container
