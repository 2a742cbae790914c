"""The kit-archive reader (inspector/archive.py) that inspect, verify and fetch share: one
streaming pass, safe names, bounded memory and disk, and what it refuses, by name."""

from __future__ import annotations

import io
import itertools
import random
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput
from ninfer_kits.inspector import archive as archive_module
from ninfer_kits.inspector.archive import DEFAULT_MEMBER_LIMIT, KitArchive
from ninfer_kits.inspector.decompress import TRUNCATED
from ninfer_kits.inspector.inspection import inspect_path


def make_tar(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]],
             mode: str = "w:gz", **options: object) -> Path:
    with tarfile.open(path, mode, **options) as archive:  # type: ignore[call-overload]
        for member in members:
            if isinstance(member, tarfile.TarInfo):
                archive.addfile(member)
            else:
                name, data = member
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mode = 0o755
                archive.addfile(info, io.BytesIO(data))
    return path


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def special(name: str, kind: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    return info


@pytest.fixture()
def elf(c_binaries: dict[str, Path]) -> bytes:
    return c_binaries["glibc234"].read_bytes()


def test_members_come_in_order_with_clean_names(tmp_path: Path, elf: bytes) -> None:
    path = make_tar(tmp_path / "kit.tar.gz", [
        special("./", tarfile.DIRTYPE), special("./kit", tarfile.DIRTYPE),
        ("./kit/bin/app", elf), ("kit/README", b"hello\n"),
        link("kit/lib/libx.so", "libx.so.1"), link("kit/bin/app2", "kit/bin/app", tarfile.LNKTYPE),
        link("kit/lib/up", "../bin/app")])
    with KitArchive(path) as archive:
        seen = [(m.name, m.kind, m.size, m.link) for m in archive]
    assert seen == [("kit", "folder", 0, None), ("kit/bin/app", "file", len(elf), None),
                    ("kit/README", "file", 6, None), ("kit/lib/libx.so", "symlink", 0, "libx.so.1"),
                    ("kit/bin/app2", "hardlink", 0, "kit/bin/app"),
                    ("kit/lib/up", "symlink", 0, "../bin/app")]


def test_head_does_not_consume(tmp_path: Path, elf: bytes) -> None:
    path = make_tar(tmp_path / "kit.tar.xz", [("kit/bin/app", elf), ("kit/x", b"x" * 100)],
                    mode="w:xz")
    with KitArchive(path, memory_limit=1024) as archive:  # app goes through a temporary file
        members = iter(archive)
        app = next(members)
        assert app.head(4) == b"\x7fELF"
        with app.contents() as data:
            assert bytes(data[:]) == elf and type(data).__name__ == "mmap"
        small = next(members)
        assert small.head(1) == b"x" and small.read() == b"x" * 100
        with pytest.raises(RuntimeError, match="moved past"):
            app.read()


def test_copy_to_streams_the_member(tmp_path: Path, elf: bytes) -> None:
    path = make_tar(tmp_path / "kit.tar.bz2", [("kit/bin/app", elf)], mode="w:bz2")
    sink = io.BytesIO()
    with KitArchive(path) as archive:
        for member in archive:
            assert member.copy_to(sink, chunk=1000) == len(elf)
    assert sink.getvalue() == elf


@pytest.mark.parametrize(("mode", "tar_format"), [("w:gz", tarfile.PAX_FORMAT),
                                                  ("w:gz", tarfile.GNU_FORMAT),
                                                  ("w:xz", tarfile.PAX_FORMAT),
                                                  ("w", tarfile.PAX_FORMAT)])
def test_large_members_are_copied_whole_and_in_place(tmp_path: Path, mode: str,
                                                     tar_format: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Members of a MiB and more are copied straight from the decompressor, past tarfile's
    stream buffer: each one's bytes exactly, and the members after it where they are (long
    names too: a pax header, or GNU's long-name member, before the data). head() peeks at
    what tarfile read ahead and leaves the copy whole."""
    rng = random.Random(20261203)
    long_name = "kit/" + "d" * 150 + "/a"
    members = [(long_name, rng.randbytes(3 * (1 << 20) + 333)), ("kit/small", b"s" * 700),
               ("kit/b", rng.randbytes(1 << 20)), ("kit/c", rng.randbytes(2 * (1 << 20) - 1)),
               ("kit/tail", b"t")]
    path = make_tar(tmp_path / "kit.tar", members, mode=mode, format=tar_format)
    direct = []
    original = KitArchive._direct
    monkeypatch.setattr(KitArchive, "_direct", staticmethod(
        lambda *args: direct.append(args[2]) or original(*args)))
    copied = {}
    with KitArchive(path) as archive:
        for member in archive:
            data = dict(members)[member.name]
            assert member.head(4) == data[:4] and member.head(1000) == data[:1000]
            sink = io.BytesIO()
            assert member.copy_to(sink) == member.size
            copied[member.name] = sink.getvalue()
            if member.size >= 1 << 20:
                with pytest.raises(RuntimeError, match="read already"):
                    member.read()
    assert copied == dict(members)
    compressed = mode != "w"  # a plain tar is read through tarfile as before
    assert direct == ([len(data) for _, data in members if len(data) >= 1 << 20]
                      if compressed else [])


def test_a_large_member_cut_short_is_truncated(tmp_path: Path) -> None:
    import gzip

    data = make_tar(tmp_path / "kit.tar", [("kit/a", random.Random(1).randbytes(3 << 20)),
                                           ("kit/b", b"b")], mode="w").read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(gzip.compress(data[:2 << 20]))
    with pytest.raises(BadInput, match=r"member kit/a: (truncated|not a readable)"), \
            KitArchive(cut) as archive:
        for member in archive:
            member.copy_to(io.BytesIO())


@pytest.mark.parametrize(("members", "words"), [
    ([("../evil", b"x")], "member ../evil: an absolute path or one with '..': refused"),
    ([("kit/../../evil", b"x")], "an absolute path or one with '..'"),
    ([("/etc/evil", b"x")], "member /etc/evil: an absolute path"),
    ([link("kit/lib/passwd", "../../../etc/passwd")], "a symlink to ../../../etc/passwd, outside"),
    ([link("kit/lib/up", "../../..")], "a symlink to ../../.., outside"),
    ([link("kit/lib/passwd", "/etc/passwd")], "a symlink to /etc/passwd, outside"),
    ([link("kit/bin/x", "kit/bin/nothing", tarfile.LNKTYPE)],
     "a hardlink to kit/bin/nothing, which is not an earlier member"),
    ([link("kit/bin/x", "../../etc/shadow", tarfile.LNKTYPE)], "a hardlink to ../../etc/shadow"),
    ([special("kit/bin/pipe", tarfile.FIFOTYPE)],
     "member kit/bin/pipe is a FIFO (named pipe): a kit archive holds only files, folders"),
    ([special("kit/dev/sda", tarfile.BLKTYPE)], "is a block device"),
    ([special("kit/dev/tty", tarfile.CHRTYPE)], "is a character device"),
    ([("kit/bin/app", b"1"), ("kit/bin/app", b"2")], "the name appears twice"),
])
def test_unsafe_members_are_refused_by_name(tmp_path: Path, members: list[object],
                                            words: str) -> None:
    path = make_tar(tmp_path / "evil.tar.gz", members)  # type: ignore[arg-type]
    with pytest.raises(BadInput) as caught, KitArchive(path) as archive:
        for _member in archive:
            pass
    assert str(caught.value).startswith(f"{path}: member ")
    assert words in str(caught.value)
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", str(path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr


def test_huge_pax_header_is_refused_before_it_is_read(tmp_path: Path) -> None:
    info = tarfile.TarInfo("kit/x")
    info.pax_headers = {"comment": "x" * (2 << 20)}
    path = make_tar(tmp_path / "pax.tar", [info], mode="w", format=tarfile.PAX_FORMAT)
    with pytest.raises(BadInput, match=r"a long-name or pax header of 2\.0 MiB .*refused"), \
            KitArchive(path) as archive:
        list(archive)


def test_member_limit(tmp_path: Path, elf: bytes) -> None:
    assert DEFAULT_MEMBER_LIMIT == 4 << 30
    big = elf + bytes(2 << 20)
    path = make_tar(tmp_path / "kit.tar.gz", [("kit/bin/big", big)])
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect",
                           "--max-member-size", "1M", str(path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert (f"{path}: member kit/bin/big is 2.0 MiB, larger than the limit of 1 MiB for one "
            f"member (--max-member-size)") in done.stderr
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect",
                           "--max-member-size", "3MiB", str(path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    # a member that is not an ELF file is not held, whatever its size
    path = make_tar(tmp_path / "data.tar.gz", [("kit/data", bytes(2 << 20)),
                                               ("kit/bin/app", elf)])
    assert inspect_path(path, member_limit=1 << 20).files[0].path == "kit/bin/app"


def test_one_pass_over_the_archive(tmp_path: Path, elf: bytes) -> None:
    """The compressed file is read once, front to back: the process reads (rchar) about the
    archive's size, not twice that as a list-then-extract reader that seeks back does."""
    rng = random.Random(5)
    noise = rng.randbytes(8 << 20)  # does not compress: the archive is about this big
    members = [(f"kit/bin/app{i}", elf) for i in range(5)]
    path = make_tar(tmp_path / "kit.tar.gz", [*members[:3], ("kit/noise", noise), *members[3:]],
                    compresslevel=1)
    size = path.stat().st_size

    def read_so_far() -> int:
        text = Path("/proc/self/io").read_text()
        return int(next(line.split()[1] for line in text.splitlines()
                        if line.startswith("rchar:")))

    inspect_path(path)  # imports and data files loaded once, before the count
    before = read_so_far()
    inspection = inspect_path(path)
    spent = read_so_far() - before
    assert len(inspection.files) == 5
    assert size <= spent < size * 1.2 + (256 << 10), (spent, size)


def test_kinds_are_tarfiles_own() -> None:
    """archive.py spells tarfile's member types out so that it loads without tarfile."""
    assert archive_module.KINDS == {
        tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.CONTTYPE: "file",
        tarfile.GNUTYPE_SPARSE: "file", tarfile.DIRTYPE: "folder", tarfile.SYMTYPE: "symlink",
        tarfile.LNKTYPE: "hardlink"}
    assert set(archive_module.REFUSED_KINDS) == {tarfile.CHRTYPE, tarfile.BLKTYPE,
                                                 tarfile.FIFOTYPE}
    assert set(archive_module.LONG_HEADERS) == {
        tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
        tarfile.SOLARIS_XHDTYPE}


def test_mutated_archives_give_a_result_or_one_clean_error(tmp_path: Path, elf: bytes) -> None:
    """Bytes flipped in tar headers and data, plain and gzip: the reader never crashes."""
    plain = make_tar(tmp_path / "seed.tar", [("kit/bin/app", elf), ("kit/README", b"x" * 700),
                                             link("kit/lib/l", "../bin/app")], mode="w")
    seed = plain.read_bytes()
    rng = random.Random(20261130)
    outcomes = {"result": 0, "error": 0}
    for case in range(300):
        data = bytearray(seed)
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(0, 1536) if rng.random() < 0.7 else rng.randrange(len(data))
            data[at] = rng.randrange(256)
        target = tmp_path / f"case-{case}.tar"
        if case % 2:
            import gzip

            target = target.with_suffix(".tar.gz")
            target.write_bytes(gzip.compress(bytes(data))[: rng.choice([None, 200, 4000])])
        else:
            target.write_bytes(bytes(data))
        try:
            inspect_path(target)
            outcomes["result"] += 1
        except BadInput as error:
            assert str(error).startswith(str(target)), error
            assert "\n" not in str(error)
            outcomes["error"] += 1
    assert outcomes["result"] > 10 and outcomes["error"] > 10, outcomes


def _header_with_size(name: str, size: int) -> bytes:
    """A tar header claiming `size` bytes of data, in GNU base-256 for sizes past 8 GiB."""
    header = bytearray(tarfile.TarInfo(name).tobuf(format=tarfile.GNU_FORMAT))
    field = bytearray(12)
    field[0] = 0x80
    field[4:] = size.to_bytes(8, "big")
    header[124:136] = field
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


@pytest.mark.parametrize("compress", [False, True])
def test_made_up_member_size_ends_at_the_archive_end(tmp_path: Path, compress: bool) -> None:
    """A header that claims 2**62 bytes, followed by 200 kB: skipping it must stop where the
    archive stops (tarfile's own seek in a stream would read empty blocks for ever)."""
    import gzip

    data = _header_with_size("kit/huge", 1 << 62) + b"\x01" * 200_000
    target = tmp_path / ("huge.tar.gz" if compress else "huge.tar")
    target.write_bytes(gzip.compress(data) if compress else data)
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", str(target)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (f"ninfer-kits: error: {target}: member kit/huge: truncated (the "
                           f"archive ends inside it)\n")


def _gzip_members(data: bytes, cuts: list[int], **options: object) -> bytes:
    """`data` as independent gzip members, cut at the given offsets (as a parallel packer such
    as one built on libdeflate writes them)."""
    import gzip

    bounds = [0, *sorted(cuts), len(data)]
    return b"".join(gzip.compress(data[a:b], mtime=0, **options)  # type: ignore[arg-type]
                    for a, b in itertools.pairwise(bounds))


def _framed_members(data: bytes, cuts: list[int]) -> bytes:
    """`data` as pack writes it (each member's header records its length), cut at the given
    offsets."""
    from ninfer_kits.pipeline.pack import gzip_member

    bounds = [0, *sorted(cuts), len(data)]
    return b"".join(gzip_member(data[a:b], 6) for a, b in itertools.pairwise(bounds))


def test_a_tarball_of_many_gzip_members_reads_as_one(tmp_path: Path, elf: bytes) -> None:
    """Cut anywhere (inside a tar header, inside a member's data), gzip members one after the
    other read as the one stream they make; zero padding between and after them is skipped."""
    single = make_tar(tmp_path / "single.tar.gz", [("kit/bin/app", elf), ("kit/README", b"x"),
                                                   ("kit/lib/libapp.so", elf)])
    import gzip

    plain = gzip.decompress(single.read_bytes())
    truth = inspect_path(single)
    rng = random.Random(9)
    for case in range(6):
        cuts = [*rng.sample(range(1, len(plain)), case * 3 + 1), 100, 511, 512, 513]
        data = _gzip_members(plain, cuts, compresslevel=rng.choice([1, 6, 9]))
        if case % 2:
            data += bytes(rng.randrange(1, 3000))  # zero padding after the last member
        target = tmp_path / f"members-{case}.tar.gz"
        target.write_bytes(data)
        found = inspect_path(target)
        assert found.files == truth.files and found.floor == truth.floor


def _gzip_module_reads(data: bytes) -> tuple[bytes, str | None]:
    import gzip

    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            while block := stream.read(8192):
                out.write(block)
    except Exception as error:
        return out.getvalue(), f"{type(error).__name__}: {error}"
    return out.getvalue(), None


def _ours_reads(data: bytes) -> tuple[bytes, str | None]:
    from ninfer_kits.inspector.decompress import gunzip_chunks

    out = io.BytesIO()
    try:
        for block in gunzip_chunks(io.BufferedReader(io.BytesIO(data))):  # type: ignore[arg-type]
            out.write(block)
    except Exception as error:
        return out.getvalue(), f"{type(error).__name__}: {error}"
    return out.getvalue(), None


def test_gunzip_without_crc_checks_still_checks_lengths() -> None:
    """check_crc=False (fetch, which checks the whole download's sha256) reads a member whose
    CRC-32 is wrong; the default refuses it; a wrong length is refused either way."""
    import gzip

    from ninfer_kits.inspector.decompress import gunzip_chunks

    payload = random.Random(7).randbytes(50_000) * 3
    good = gzip.compress(payload, mtime=0)
    bad_crc = good[:-8] + bytes([good[-8] ^ 1]) + good[-7:]
    bad_size = good[:-4] + bytes([good[-4] ^ 1]) + good[-3:]

    def read(data: bytes, check_crc: bool) -> bytes:
        stream = io.BufferedReader(io.BytesIO(data))  # type: ignore[arg-type]
        return b"".join(gunzip_chunks(stream, check_crc=check_crc))  # type: ignore[arg-type]

    assert read(bad_crc, check_crc=False) == payload
    with pytest.raises(gzip.BadGzipFile, match="CRC check failed"):
        read(bad_crc, check_crc=True)
    for check_crc in (True, False):
        with pytest.raises(gzip.BadGzipFile, match="Incorrect length"):
            read(bad_size, check_crc=check_crc)


def test_gunzip_reads_what_the_gzip_module_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """decompress.gunzip_chunks against gzip.GzipFile on good, padded, truncated, corrupt and
    odd-headered streams: the same bytes, then the same error (or none). Before an error, ours
    hands over every byte made before it, and GzipFile those of its reads before the one that
    failed: its bytes begin ours (for corrupt deflate data, both are a beginning of the same
    stream, as far as each got)."""
    import gzip
    import struct

    from ninfer_kits.inspector import decompress

    monkeypatch.setattr(decompress, "CHUNK", 4096)  # small chunks: every seam is crossed
    rng = random.Random(2026)
    payload = b"".join(rng.choice([bytes(5000), rng.randbytes(3000), b"abc" * 900])
                       for _ in range(12))
    header_flags = struct.pack("<BBIBB", 8, 2 | 4 | 8 | 16, 0, 0, 255)
    odd = (b"\x1f\x8b" + header_flags + b"\x03\x00xyz" + b"name\0" + b"comment\0" + b"\xab\xcd"
           + gzip.compress(payload[:7000], mtime=0)[10:])
    framed = _framed_members(payload, [1, 9000, 30000])
    seeds = [gzip.compress(payload, mtime=0), _gzip_members(payload, [1, 9000, 30000]),
             gzip.compress(b"", mtime=0) * 3, odd, framed, b"", b"\x1f", b"not gzip at all"]
    cases = list(seeds)
    for seed in seeds[:5]:
        cases += [seed + bytes(100), seed + bytes(50) + seed, seed + b"garbage",
                  seed + b"\x1f", seed + bytes(10) + b"\x1f\x8b\x09"]
        cases += [seed[:rng.randrange(len(seed))] for _ in range(25)]
        for _ in range(25):
            flipped = bytearray(seed)
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            cases.append(bytes(flipped))
    for data in cases:
        ours, our_error = _ours_reads(data)
        if our_error is not None and our_error.endswith(UNFRAMED):
            # A bit flipped in a recorded length: a clean error of ours, after gzip's bytes
            theirs = _gzip_module_reads(data)[0]
            assert ours[:len(theirs)] == theirs[:len(ours)]
            continue
        _assert_reads_as_gzip(data, ours, our_error)


def _assert_reads_as_gzip(data: bytes, ours: bytes, our_error: str | None) -> None:
    """What we read of `data` is what the gzip module reads, given that gzip hands over only
    the reads before the one that failed."""
    theirs, their_error = _gzip_module_reads(data)
    assert our_error == their_error, (data[:20], len(data))
    if their_error is None:
        assert ours == theirs
    elif "Error -3" not in their_error:
        assert ours[:len(theirs)] == theirs
    else:
        shorter = min(len(ours), len(theirs))
        assert ours[:shorter] == theirs[:shorter]


UNFRAMED = "is not where its data ends"


def _read_all(data: bytes, check_crc: bool = True) -> bytes:
    from ninfer_kits.inspector.decompress import gunzip_chunks

    stream = io.BufferedReader(io.BytesIO(data))  # type: ignore[arg-type]
    return b"".join(gunzip_chunks(stream, check_crc=check_crc))  # type: ignore[arg-type]


def _framed_payload() -> bytes:
    rng = random.Random(5)
    return b"".join(rng.choice([rng.randbytes(70_000), b"kit %d\n" % i * 9000])
                    for i in range(12))


def test_framed_members_are_read_whole_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """pack's members (their length in the header) inflate whole, several at once, and come
    out in order: with libdeflate, with zlib alone, and without a thread to be had."""
    import threading

    from ninfer_kits.inspector import decompress

    payload = _framed_payload()
    data = _framed_members(payload, list(range(1 << 16, len(payload), 1 << 16)))
    sizes: list[int] = []
    inflate = decompress._one_call_inflate()

    def counted(body: memoryview, size: int) -> bytes | None:
        sizes.append(size)
        return inflate(body, size)

    monkeypatch.setattr(decompress, "_one_call_inflate", lambda: counted)
    assert _read_all(data) == payload
    assert len(sizes) == -(-len(payload) >> 16)  # every member, none streamed
    inflate = decompress._zlib_inflate
    assert _read_all(data) == payload

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert _read_all(data) == payload


class _NeverEnds(BaseException):  # not an Exception: nothing is handed over on its way out
    pass


class _ThenZeros(io.RawIOBase):
    """`data`, then zeros without end (a server that never ends a body): past 64 MiB of
    them, _NeverEnds."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.zeros = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        if self.data:
            count = min(len(buffer), len(self.data))
            buffer[:count], self.data = self.data[:count], self.data[count:]
            return count
        self.zeros += len(buffer)
        if self.zeros > 64 << 20:
            raise _NeverEnds("read on through 64 MiB of zeros")
        buffer[:] = bytes(len(buffer))
        return len(buffer)


def test_framed_members_are_handed_over_before_endless_padding() -> None:
    """Zeros after the last member are padding that gzip skips; members read whole are handed
    over before they are skipped, so that a reader sees the archive's end while a body goes
    on (fetch bounds a download of no recorded size by it)."""
    from ninfer_kits.inspector.decompress import gunzip_chunks

    payload = _framed_payload()
    data = _framed_members(payload, list(range(1 << 16, len(payload), 1 << 16)))
    got = b""
    for chunk in gunzip_chunks(io.BufferedReader(_ThenZeros(data))):  # type: ignore[arg-type]
        got += chunk
        if len(got) >= len(payload):
            break
    assert got == payload


@pytest.mark.parametrize("one_call", ["libdeflate", "zlib"])
def test_a_recorded_length_that_lies_gives_gzips_bytes_or_a_clean_error(
        one_call: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A length that does not end where the member's data does: what gzip reads (the member
    is streamed when the trailer it points at is out of bounds), or the members before it and
    an error naming the length; never data taken from the wrong bytes."""
    from ninfer_kits.inspector import decompress

    if one_call == "zlib":
        monkeypatch.setattr(decompress, "_one_call_inflate", lambda: decompress._zlib_inflate)
    payload = _framed_payload()
    first = _framed_members(payload[:300_000], [])
    second = _framed_members(payload[300_000:], [])
    # A length that cuts the member short where the 4 bytes before the cut make a size within
    # a block: read whole, and found out.
    short = next(cut for cut in range(9, 50_000)
                 if 0 < int.from_bytes(second[-cut - 4:-cut], "little") <= 1 << 20)
    errors = 0
    for lie in (-9, -8, -4, -1, 1, 4, 8, 100, -100, 1 - len(second) + 29, -short):
        length = len(second) + lie
        lying = second[:16] + length.to_bytes(4, "little") + second[20:]
        for copied in (b"", second[-8:]):
            data = first + lying + copied + first
            ours, our_error = _ours_reads(data)
            if one_call == "libdeflate" and copied and lie == 8:
                # libdeflate does not say where the deflate data ended: a length 8 bytes long,
                # at a copy of the trailer, frames a member that inflates to its size, and the
                # reading goes on from there (gzip stops at the copy: not a member).
                assert (ours, our_error) == (payload + payload[:300_000], None)
                continue
            if our_error is not None and our_error.endswith(UNFRAMED):
                assert our_error == (f"BadGzipFile: a gzip member's recorded length ({length} "
                                     f"bytes) {UNFRAMED}")
                # the first member, then as much of the second as its bytes gave
                assert payload.startswith(ours) and len(ours) >= 300_000
                errors += 1
            else:
                _assert_reads_as_gzip(data, ours, our_error)
    assert errors >= 1


@pytest.mark.parametrize("length", [0, 19, 28, (4 << 20) + 1, 0xFFFFFFFF])
def test_a_length_out_of_bounds_is_streamed(length: int) -> None:
    """A recorded length too small to hold a member or past what is read whole: the member is
    streamed, as gzip reads it, and nothing the length says is allocated."""
    payload = _framed_payload()
    data = _framed_members(payload, [500_000])
    data = data[:16] + length.to_bytes(4, "little") + data[20:]
    assert _read_all(data) == payload


@pytest.mark.parametrize("size", [0xFFFFFFFF, (1 << 20) + 1, 1, 0, "one less", "one more"])
def test_a_trailer_size_that_lies_is_gzips_error(size: int | str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """ISIZE comes from the network too: past a block it is never allocated (the member is
    streamed); within one, a wrong size fails as gzip says it, after the data."""
    import gzip

    from ninfer_kits.inspector import decompress

    asked: list[int] = []
    inflate = decompress._one_call_inflate()

    def counted(body: memoryview, wanted: int) -> bytes | None:
        asked.append(wanted)
        return inflate(body, wanted)

    monkeypatch.setattr(decompress, "_one_call_inflate", lambda: counted)
    payload = _framed_payload()[:600_000]
    data = bytearray(_framed_members(payload, []))
    real = int.from_bytes(data[-4:], "little")
    value = {"one less": real - 1, "one more": real + 1}.get(size, size)  # type: ignore[call-overload]
    data[-4:] = int(value).to_bytes(4, "little")
    ours, our_error = _ours_reads(bytes(data))
    assert (ours, our_error) == (payload, "BadGzipFile: Incorrect length of data produced")
    _assert_reads_as_gzip(bytes(data), ours, our_error)
    assert all(0 < wanted <= decompress.FRAMED_SIZE_LIMIT for wanted in asked)
    with pytest.raises(gzip.BadGzipFile, match="Incorrect length"):
        _read_all(bytes(data), check_crc=False)


def test_framed_members_cut_short_or_corrupt_fail_as_gzip_does() -> None:
    """A file that ends inside a framed member (streamed: truncated), a wrong CRC-32 (refused
    unless the caller checks a hash) and corrupt deflate data: gzip's errors, after gzip's
    bytes."""
    import gzip

    payload = _framed_payload()
    data = _framed_members(payload, [250_000, 500_000])
    for cut in (len(data) - 3, len(data) // 2, 25):
        ours, error = _ours_reads(data[:cut])
        assert error == _gzip_module_reads(data[:cut])[1] == f"EOFError: {TRUNCATED}"
        assert payload.startswith(ours)
    bad_crc = bytearray(data)
    bad_crc[-8] ^= 1
    assert _read_all(bytes(bad_crc), check_crc=False) == payload
    with pytest.raises(gzip.BadGzipFile, match="CRC check failed"):
        _read_all(bytes(bad_crc))
    corrupt = bytearray(data)
    corrupt[-1000] ^= 0xFF  # in the last member
    ours, error = _ours_reads(bytes(corrupt))
    assert error is not None and ours[:500_000] == payload[:500_000]
    _assert_reads_as_gzip(bytes(corrupt), ours, error)


def test_the_decompressing_thread_stops_with_the_reader(tmp_path: Path) -> None:
    """A reader that stops early (an error in the first member) does not leave the thread
    decompressing the rest, nor wait for it."""
    import threading
    import time

    rng = random.Random(4)
    data = [("kit/../evil", b"x"), *[(f"kit/noise{i}", rng.randbytes(1 << 20))
                                      for i in range(40)]]
    path = make_tar(tmp_path / "evil.tar.gz", data, compresslevel=1)
    started = time.monotonic()
    with pytest.raises(BadInput, match=r"an absolute path or one with '\.\.'"), \
            KitArchive(path) as archive:
        for _member in archive:
            pass
    assert time.monotonic() - started < 5
    assert not [t for t in threading.enumerate() if t.name.startswith("ninfer-kits ")]


def test_the_inflating_threads_stop_with_the_reader(tmp_path: Path) -> None:
    """The same, for pack's members inflated on a pool: its threads end with the archive."""
    import threading

    rng = random.Random(4)
    data = [("kit/../evil", b"x"), *[(f"kit/noise{i}", rng.randbytes(1 << 20))
                                      for i in range(40)]]
    plain = make_tar(tmp_path / "evil.tar", data, mode="w").read_bytes()
    path = tmp_path / "evil.tar.gz"
    path.write_bytes(_framed_members(plain, list(range(1 << 20, len(plain), 1 << 20))))
    with pytest.raises(BadInput, match=r"an absolute path or one with '\.\.'"), \
            KitArchive(path) as archive:
        for _member in archive:
            pass
    assert not [t for t in threading.enumerate() if t.name.startswith("ninfer-kits ")]


@pytest.mark.parametrize("damage", ["crc", "truncated", "garbage"])
def test_a_damaged_end_of_the_gzip_data_is_said(tmp_path: Path, elf: bytes, damage: str) -> None:
    """The tar ends before the gzip data does (its trailer, padding): a trailer that fails its
    check, a stream cut before it, or garbage after it is an error, as gzip -d says."""
    import gzip

    data = bytearray(gzip.compress(make_tar(tmp_path / "kit.tar", [("kit/bin/app", elf)],
                                            mode="w").read_bytes()))
    if damage == "crc":
        data[-8] ^= 0xFF
    elif damage == "truncated":
        del data[-6:]
    else:
        data += b"garbage"
    target = tmp_path / "damaged.tar.gz"
    target.write_bytes(bytes(data))
    words = {"crc": "CRC check failed", "truncated": "truncated: the compressed data ends early",
             "garbage": "Not a gzipped file"}[damage]
    with pytest.raises(BadInput, match=f"{target}: not a readable gzip tarball .*{words}"):
        inspect_path(target)


def test_without_a_thread_the_archive_is_read_all_the_same(
        tmp_path: Path, elf: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no thread can be started, the reader decompresses as it reads."""
    import threading

    path = make_tar(tmp_path / "kit.tar.gz", [("kit/bin/app", elf), ("kit/README", b"x")])
    truth = inspect_path(path)

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert inspect_path(path) == truth


@pytest.mark.skipif(sys.platform != "linux", reason="thread priorities are Linux's")
def test_reading_ahead_and_inflating_can_run_at_a_lower_priority(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """fetch's decompressing threads run nicer than the downloader (extract.FollowingArchive);
    inspect's at the reader's own priority."""
    import os
    import threading

    from ninfer_kits.fetch.extract import FollowingArchive
    from ninfer_kits.inspector import decompress

    def priority() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    mine = priority()
    seen: list[tuple[str, int]] = []
    inflate = decompress._inflate_framed

    def recorded(*args: object) -> object:
        seen.append(("inflate", priority()))
        return inflate(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(decompress, "_inflate_framed", recorded)

    payload = _framed_payload()
    data = _framed_members(payload, list(range(1 << 16, len(payload), 1 << 16)))

    def chunks(nice: int) -> Iterator[bytes]:
        seen.append(("read ahead", priority()))
        yield from decompress.gunzip_chunks(io.BytesIO(data), nice=nice)

    for nice in (KitArchive.worker_nice, FollowingArchive.worker_nice):
        seen.clear()
        with decompress.Prefetched(chunks(nice), nice=nice) as stream:
            assert stream.read() == payload
        assert set(seen) == {("read ahead", min(19, mine + nice)),
                             ("inflate", min(19, mine + nice))}
    assert FollowingArchive.worker_nice > KitArchive.worker_nice == 0
