"""The pack stage on real trees: GNU tar, gzip and sha256sum are the oracles, nothing is mocked."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import importlib.metadata
import os
import random
import re
import subprocess
import tarfile
import tomllib
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from ninfer_kits.errors import EXIT_ENVIRONMENT, BadInput, NinferKitsError
from ninfer_kits.files.atomic import DiskFull, HashingSink, PackedFile, hash_file, write_file
from ninfer_kits.inspector.archive import KitArchive
from ninfer_kits.inspector.decompress import (
    FEXTRA,
    FRAMED_HEADER,
    FRAMED_LENGTH_LIMIT,
    FRAMED_SIZE_LIMIT,
)
from ninfer_kits.kit import buildinfo
from ninfer_kits.pipeline.pack import (
    BLOCK_SIZE,
    BUNDLED_LIBDEFLATE,
    ParallelGzip,
    compressor,
    pack_tree,
)
from ninfer_kits.release.checksums import read_sha256sums, write_sha256sums
from test_buildinfo import sample

from tools import ROOT, missing, run, sha256_of, tool

MTIME = 1_700_000_000  # 2023-11-14 22:13:20 UTC
MTIME_SHOWN = "2023-11-14 22:13"
LONG_DIR = "share/" + "d" * 70 + "/" + "e" * 40
BIG = "lib/libbig.so"
# The decompressed tar stream of `tiny_tree`, the same on Python 3.10, 3.11, 3.12 and 3.13:
# if this changes, kits packed by two Python versions would differ.
TINY_TAR_SHA256 = "c571483aad7e9797c859fdd7d05ac5b8b176a8871bb4089b130065622ccd96ef"


@contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def big_payload() -> bytes:
    """Several deflate blocks of incompressible data followed by compressible text."""
    noise = random.Random(1234).randbytes(3 * BLOCK_SIZE + 12345)
    text = b"".join(b"line %d of a kit file\n" % i for i in range(150_000))
    return noise + text


def make_tree(base: Path, *, mask: int = 0o022, owner: int = 0, mtime: int = 1) -> Path:
    """The kit every test packs; `mask`, `owner` and `mtime` are what must not matter."""
    kit = base / "kit"
    with umask(mask):
        for folder in ("bin", "lib", "empty", LONG_DIR):
            (kit / folder).mkdir(parents=True)
        (kit / "bin" / "ninfer").write_bytes(b"\x7fELF pretend binary\n" * 1000)
        (kit / "bin" / "ninfer").chmod(0o700 & ~mask | 0o100)
        (kit / "BUILDINFO.txt").write_text("arch = 86\n")
        (kit / "lib" / "libx.so.1").write_bytes(b"library\n")
        (kit / "lib" / "libx.so").symlink_to("libx.so.1")
        (kit / LONG_DIR / ("f" * 60 + ".txt")).write_text("deep\n")
        (kit / BIG).write_bytes(big_payload())
    for path in [*sorted(kit.rglob("*"), reverse=True), kit]:
        os.chown(path, owner, owner, follow_symlinks=False)
        os.utime(path, (mtime, mtime), follow_symlinks=False)
    return kit


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tree(tmp_path_factory.mktemp("src"))


@pytest.fixture(scope="module")
def packed(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> PackedFile:
    return pack_tree(tree, tmp_path_factory.mktemp("out") / "kit.tar.gz", mtime=MTIME, threads=4)


def listing(archive: Path) -> list[str]:
    completed = subprocess.run(
        [tool("tar"), "--numeric-owner", "-tzvf", str(archive)], capture_output=True, text=True,
        check=True, env={**os.environ, "TZ": "UTC"},
    )
    return completed.stdout.splitlines()


# ---------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_same_bytes_whatever_the_thread_count(tree: Path, packed: PackedFile, tmp_path: Path,
                                              threads: int) -> None:
    one = pack_tree(tree, tmp_path / "kit.tar.gz", mtime=MTIME, threads=threads)
    assert one.path != packed.path
    assert sha256_of(one.path) == sha256_of(packed.path)
    assert (one.sha256, one.sha1, one.size) == (packed.sha256, packed.sha1, packed.size)


def test_source_mtimes_owners_and_umask_do_not_matter(packed: PackedFile, tmp_path: Path) -> None:
    other = make_tree(tmp_path / "src", mask=0o077, owner=4321, mtime=1_234_567_890)
    again = pack_tree(other, tmp_path / "kit.tar.gz", mtime=MTIME, threads=2)
    assert sha256_of(again.path) == sha256_of(packed.path)


def test_blocks_are_cut_at_fixed_offsets_whatever_the_writes(tmp_path: Path) -> None:
    data = big_payload()
    outputs = []
    for sizes in ([len(data)], [1, 511, BLOCK_SIZE - 512, 7, 3 * BLOCK_SIZE], [65536] * 200):
        fd = os.open(tmp_path / f"out{len(outputs)}", os.O_WRONLY | os.O_CREAT, 0o644)
        sink = HashingSink(fd)
        with ThreadPoolExecutor(2) as pool:
            stream = ParallelGzip(sink, pool, 2, 6, len(data), None)
            offset = 0
            for size in sizes:
                stream.write(data[offset:offset + size])
                offset += size
            stream.write(data[offset:])
            stream.close()
        os.close(fd)
        outputs.append(sink.sha256.hexdigest())
    assert len(set(outputs)) == 1
    assert gzip.decompress((tmp_path / "out0").read_bytes()) == data


def test_tar_stream_is_pinned(tmp_path: Path) -> None:
    kit = tmp_path / "tiny"
    (kit / "bin").mkdir(parents=True)
    (kit / "bin" / "run").write_text("#!/bin/sh\n")
    (kit / "bin" / "run").chmod(0o755)
    (kit / "bin" / "go").symlink_to("run")
    (kit / ("n" * 120)).write_text("long name\n")
    result = pack_tree(kit, tmp_path / "tiny.tar.gz", mtime=MTIME)
    stream = gzip.decompress(result.path.read_bytes())
    assert hashlib.sha256(stream).hexdigest() == TINY_TAR_SHA256


# ---------------------------------------------------------------------------- the format


def test_gnu_tar_lists_fixed_owner_mtime_and_modes(packed: PackedFile) -> None:
    lines = listing(packed.path)
    pattern = re.compile(r"^(\S{10}) (\S+) +\d+ (\d{4}-\d\d-\d\d \d\d:\d\d) (.+?)(?: -> .*)?$")
    seen = {}
    for line in lines:
        match = pattern.match(line)
        assert match is not None, line
        mode, owner, when, name = match.groups()
        assert (owner, when) == ("0/0", MTIME_SHOWN), line
        seen[name] = mode
    assert seen["kit/"] == "drwxr-xr-x"
    assert seen["kit/empty/"] == "drwxr-xr-x"
    assert seen["kit/bin/ninfer"] == "-rwxr-xr-x"
    assert seen["kit/BUILDINFO.txt"] == "-rw-r--r--"
    assert seen["kit/lib/libx.so"] == "lrwxrwxrwx"
    assert f"kit/{LONG_DIR}/{'f' * 60}.txt" in seen


def test_entries_sorted_with_empty_names_and_no_pax(packed: PackedFile) -> None:
    with tarfile.open(packed.path) as archive:
        members = archive.getmembers()
        assert archive.pax_headers == {}
    names = [member.name for member in members]
    assert names == sorted(names, key=os.fsencode)
    assert names[0] == "kit"
    for member in members:
        assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")
        assert member.mtime == MTIME and member.pax_headers == {}
    links = {member.name: member.linkname for member in members if member.issym()}
    assert links == {"kit/lib/libx.so": "libx.so.1"}


def test_gnu_tar_unpacks_the_same_tree(tree: Path, packed: PackedFile, tmp_path: Path) -> None:
    run(tool("tar"), "-xzf", packed.path, "-C", tmp_path)
    out = tmp_path / "kit"
    for source in [tree, *tree.rglob("*")]:
        copy = out / source.relative_to(tree)
        if source.is_symlink():
            assert os.readlink(copy) == os.readlink(source)
        elif source.is_dir():
            assert copy.is_dir()
        else:
            assert sha256_of(copy) == sha256_of(source), source
    assert (out / BIG).stat().st_size > 3 * BLOCK_SIZE
    assert not any((out / "empty").iterdir())


def test_gzip_accepts_it_and_the_header_is_fixed(packed: PackedFile) -> None:
    run(tool("gzip"), "-t", packed.path)
    head = packed.path.read_bytes()[:FRAMED_HEADER]
    assert head[:3] == b"\x1f\x8b\x08"
    assert head[3] == FEXTRA, "flags: an extra field, no file name, no comment"
    assert head[4:8] == b"\0\0\0\0", "gzip mtime must be 0"
    assert head[9] == 3, "OS byte is fixed to Unix"
    # XLEN, then one subfield (RFC 1952 2.3.1.1): our ID, 4 bytes, the member's length
    assert head[10:16] == b"\x08\x00NK\x04\x00"


def gzip_members(data: bytes) -> list[tuple[bytes, bytes, int]]:
    """(the header, the inflated data, the member's length) of each gzip member, in order,
    as zlib (which skips the extra field) reads them."""
    members = []
    while data:
        inflater = zlib.decompressobj(31)
        inflated = inflater.decompress(data)
        assert inflater.eof, "the data ends inside a member"
        length = len(data) - len(inflater.unused_data)
        members.append((data[:FRAMED_HEADER], inflated, length))
        data = inflater.unused_data
    return members


def test_each_mebibyte_is_a_gzip_member_of_its_own(packed: PackedFile) -> None:
    data = packed.path.read_bytes()
    members = gzip_members(data)
    stream = gzip.decompress(data)
    assert len(members) == -(-len(stream) // BLOCK_SIZE) > 3
    assert b"".join(inflated for _, inflated, _ in members) == stream
    assert all(len(inflated) == BLOCK_SIZE for _, inflated, _ in members[:-1])
    # Every member has the same fixed header but for its length: no name, no time, OS Unix,
    # XFL 0 at level 6.
    assert {header[:16] for header, _, _ in members} == {
        b"\x1f\x8b\x08\x04\0\0\0\0\0\x03\x08\x00NK\x04\x00"}


def test_each_member_records_its_own_length(packed: PackedFile) -> None:
    """The subfield's length is where zlib finds the member's end, within what readers take
    whole, incompressible blocks (big_payload's noise) included."""
    members = gzip_members(packed.path.read_bytes())
    assert BLOCK_SIZE <= FRAMED_SIZE_LIMIT
    for header, _, length in members:
        assert int.from_bytes(header[16:20], "little") == length
    assert max(length for _, _, length in members) > BLOCK_SIZE  # the noise: stored blocks
    assert max(length for _, _, length in members) <= FRAMED_LENGTH_LIMIT


def test_readers_take_every_member_whole(packed: PackedFile,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """inspector.decompress inflates pack's members whole (none is streamed), with libdeflate
    and with zlib alone (the stdlib-only ninfer-kits.pyz)."""
    from ninfer_kits.inspector import decompress

    streamed: list[object] = []
    real_stream = decompress._stream_member

    def stream(*args: object) -> object:
        streamed.append(args)
        return real_stream(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(decompress, "_stream_member", stream)
    data = packed.path.read_bytes()
    for inflate in (decompress._one_call_inflate(), decompress._zlib_inflate):
        monkeypatch.setattr(decompress, "_one_call_inflate", lambda inflate=inflate: inflate)
        with packed.path.open("rb") as raw:
            assert b"".join(decompress.gunzip_chunks(raw)) == gzip.decompress(data)
    assert decompress._one_call_inflate is not decompress._zlib_inflate
    assert not streamed


@pytest.mark.parametrize("mode", ["r", "r:gz"])
def test_tarfile_reads_every_member(tree: Path, packed: PackedFile, mode: str) -> None:
    # (Not "r|gz": tarfile's own stream reader stops after the first gzip member, and says so
    # with ReadError; "r" and "r:gz" go through the gzip module, which reads them all.)
    with tarfile.open(packed.path, mode) as archive:
        names = archive.getnames()
        big = archive.extractfile(f"kit/{BIG}")
        assert big is not None and big.read() == (tree / BIG).read_bytes()
    assert names == sorted(names, key=os.fsencode) and f"kit/{LONG_DIR}" in names


def test_kit_archive_reads_every_member(tree: Path, packed: PackedFile) -> None:
    with tarfile.open(packed.path) as archive:
        names = archive.getnames()
    with KitArchive(packed.path) as archive:
        assert archive.format == "gzip"
        seen = []
        for member in archive:
            seen.append(member.name)
            if member.name == f"kit/{BIG}":
                assert member.read() == (tree / BIG).read_bytes()
    assert seen == names


def test_fetch_and_inspect_inflate_every_member(packed: PackedFile) -> None:
    """Both read a kit through inspector.decompress: every 1 MiB gzip member, not the first."""
    from ninfer_kits.inspector.decompress import Prefetched, gunzip_chunks

    with packed.path.open("rb") as raw, Prefetched(gunzip_chunks(raw)) as inflated:
        assert inflated.read() == gzip.decompress(packed.path.read_bytes())


def test_buildinfo_records_the_pinned_compressor() -> None:
    version = importlib.metadata.version("deflate")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert f"deflate=={version}" in pyproject["project"]["dependencies"]
    assert compressor() == (f"libdeflate {BUNDLED_LIBDEFLATE[version]} (deflate {version}), "
                            "level 6, 1 MiB gzip members, each with its length")
    info = dataclasses.replace(sample(), zlib_version=compressor())
    text = buildinfo.render(info)
    assert f"\nzlib_version: {compressor()}\n" in text
    assert buildinfo.parse(text) == info


def test_hashes_come_from_the_bytes_written(packed: PackedFile) -> None:
    data = packed.path.read_bytes()
    assert packed.size == len(data)
    assert packed.sha256 == hashlib.sha256(data).hexdigest()
    assert packed.sha1 == hashlib.sha1(data).hexdigest()
    assert hash_file(packed.path) == packed


def test_progress_reaches_the_announced_total(tree: Path, tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    result = pack_tree(tree, tmp_path / "kit.tar.gz", mtime=MTIME, threads=2,
                       progress=lambda done, total: calls.append((done, total)))
    done = [call[0] for call in calls]
    assert len(calls) > 3 and done == sorted(done)
    assert calls[-1][0] == calls[-1][1] == calls[0][1]
    assert calls[-1][0] == len(gzip.decompress(result.path.read_bytes()))


def test_output_folder_holds_only_the_result(packed: PackedFile) -> None:
    assert [path.name for path in packed.path.parent.iterdir()] == ["kit.tar.gz"]
    assert packed.path.stat().st_mode & 0o777 == 0o644


# ---------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("target", ["/etc/passwd", "../../outside", "../.."])
def test_symlinks_out_of_the_kit_are_refused(tmp_path: Path, target: str) -> None:
    kit = tmp_path / "kit"
    (kit / "bin").mkdir(parents=True)
    (kit / "bin" / "bad").symlink_to(target)
    with pytest.raises(BadInput, match=re.escape(str(kit / "bin" / "bad"))):
        pack_tree(kit, tmp_path / "kit.tar.gz", mtime=MTIME)
    assert not (tmp_path / "kit.tar.gz").exists()


def test_a_link_through_a_link_cannot_escape(tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    (kit / "a").mkdir(parents=True)
    (kit / "a" / "up").symlink_to("..")  # the kit folder itself: fine
    (kit / "sneaky").symlink_to("a/up/..")  # looks like `kit`, resolves to its parent
    with pytest.raises(BadInput, match="sneaky"):
        pack_tree(kit, tmp_path / "kit.tar.gz", mtime=MTIME)


def test_a_fifo_is_refused_by_name(tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    kit.mkdir()
    os.mkfifo(kit / "pipe")
    with pytest.raises(BadInput, match=re.escape(str(kit / "pipe"))):
        pack_tree(kit, tmp_path / "kit.tar.gz", mtime=MTIME)
    assert list(tmp_path.iterdir()) == [kit]


def test_the_tarball_cannot_go_inside_its_tree(tmp_path: Path) -> None:
    (tmp_path / "kit").mkdir()
    with pytest.raises(BadInput, match="inside the folder"):
        pack_tree(tmp_path / "kit", tmp_path / "kit" / "kit.tar.gz", mtime=MTIME)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(folder)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        missing(f"mounting a 512 KiB tmpfs (needs root: {mounted.stderr.strip()})")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_is_reported_and_leaves_nothing(tree: Path, small_disk: Path) -> None:
    dest = small_disk / "kit.tar.gz"
    with pytest.raises(DiskFull, match=f"no space left on device while writing {dest}") as info:
        pack_tree(tree, dest, mtime=MTIME, threads=2)
    assert isinstance(info.value, NinferKitsError)
    assert info.value.exit_code == EXIT_ENVIRONMENT  # the machine's fault, not the input's
    assert list(small_disk.iterdir()) == []
    with pytest.raises(DiskFull):
        write_file(dest, b"\0" * (1 << 20))
    assert list(small_disk.iterdir()) == []


# ---------------------------------------------------------------------------- single files


def test_write_file_is_atomic_and_hashed(tmp_path: Path) -> None:
    data = b"arch = 120a\n"
    with umask(0o077):
        result = write_file(tmp_path / "BUILDINFO.txt", data)
    assert result == PackedFile(tmp_path / "BUILDINFO.txt", len(data),
                                hashlib.sha256(data).hexdigest(), hashlib.sha1(data).hexdigest())
    assert hash_file(result.path) == result
    assert [path.name for path in tmp_path.iterdir()] == ["BUILDINFO.txt"]
    assert result.path.stat().st_mode & 0o777 == 0o644


# ---------------------------------------------------------------------------- SHA256SUMS


def test_sha256sums_are_sorted_and_sha256sum_checks_them(tmp_path: Path) -> None:
    assets = {
        "ninfer-kit-sm120a.tar.gz": b"kit for 5090",
        "BUILDINFO-sm86.txt": b"arch = 86\n",
        "ninfer-kit-sm86.tar.gz": b"kit for 3090",
    }
    for name, data in assets.items():
        write_file(tmp_path / name, data)
    sums = {name: hash_file(tmp_path / name).sha256 for name in assets}
    result = write_sha256sums(tmp_path / "SHA256SUMS", sums)
    lines = result.path.read_text().splitlines()
    assert [line.split("  ", 1)[1] for line in lines] == sorted(assets)
    run(tool("sha256sum"), "-c", "--strict", "SHA256SUMS", cwd=tmp_path)
    assert read_sha256sums(result.path) == sums
    assert hash_file(result.path) == result


def test_sha256sum_output_reads_back(tmp_path: Path) -> None:
    (tmp_path / "a b.bin").write_bytes(b"x")
    text = run(tool("sha256sum"), "--binary", "a b.bin", cwd=tmp_path)
    (tmp_path / "SUMS").write_text(text)
    assert read_sha256sums(tmp_path / "SUMS") == {"a b.bin": hashlib.sha256(b"x").hexdigest()}


@pytest.mark.parametrize(("text", "line"), [
    (f"{'a' * 64}  one\nnot a line\n", 2),
    (f"{'a' * 64}  one\n{'b' * 63}  two\n", 2),
    (f"{'a' * 64} one\n", 1),
    (f"{'a' * 64}  one\n{'b' * 64}  one\n", 2),
    (f"{'a' * 64}  one\n\n{'b' * 64}  two\n", 2),
])
def test_malformed_sha256sums_name_the_line(tmp_path: Path, text: str, line: int) -> None:
    (tmp_path / "SHA256SUMS").write_text(text)
    with pytest.raises(BadInput, match=f"SHA256SUMS:{line}:"):
        read_sha256sums(tmp_path / "SHA256SUMS")


@pytest.mark.parametrize(("name", "digest"), [("a\nb", "a" * 64), ("ok", "xyz"), ("", "a" * 64)])
def test_unlistable_sums_are_refused(tmp_path: Path, name: str, digest: str) -> None:
    with pytest.raises(BadInput):
        write_sha256sums(tmp_path / "SHA256SUMS", {name: digest})
    assert list(tmp_path.iterdir()) == []
