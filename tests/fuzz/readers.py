"""The readers of untrusted bytes, as the fuzzer and the regression replay call them.

Each reader takes the bytes of one input and reads them the way the program does: from memory
where the program reads from memory (ELF, fatbin, ld.so.cache), through a file where it opens a
file (a kit archive, BUILDINFO.txt, SHA256SUMS, the ledger). It either returns or raises one of
its allowed errors, the project's own (`NinferKitsError`) or the documented error type of a
reader that has one (`CacheError` for ld.so.cache, which `verify` reads as "no cache"). Anything
else raised, an input that takes longer than `timeout` seconds, or one that makes the process
grow past the fuzzer's memory limit is a failure, and its input becomes a regression test
(tests/fuzz/regressions/<reader>/<sha1>, replayed by tests/test_fuzz_regressions.py).

This module imports no fuzzing library: the replay runs it under plain pytest.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ninfer_kits.errors import NinferKitsError, NotAnElf
from ninfer_kits.loader.ldcache import CacheError

HERE = Path(__file__).resolve().parent
REGRESSIONS = HERE / "regressions"


class Unexpected(Exception):
    """A reader failed in a way it must not: the input is a crash."""


@dataclass(frozen=True)
class Reader:
    name: str
    what: str  # the code under test, in words
    read: Callable[[bytes, Path], object]  # (input, a scratch folder) -> anything
    max_len: int  # the longest input the fuzzer makes
    allowed: tuple[type[BaseException], ...] = (NinferKitsError,)
    timeout: int = 10  # seconds for one input
    # Words the mutator splices in (libFuzzer's -dict): magic numbers, keys, headers.
    tokens: tuple[bytes, ...] = field(default=())
    check: Callable[[BaseException], None] | None = None  # more to ask of an allowed error


def scratch_file(scratch: Path, name: str, data: bytes) -> Path:
    path = scratch / name
    path.write_bytes(data)
    return path


def scratch_folder() -> Path:
    """Where the readers that open a file get theirs: memory-backed when the machine has it."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="ninfer-fuzz-", dir=base))


# --------------------------------------------------------------------------- the readers


def read_elf(data: bytes, scratch: Path) -> object:
    from ninfer_kits.inspector.elf import read_elf_buffer
    from ninfer_kits.inspector.elfsymbols import dynamic_symbols_buffer
    from ninfer_kits.inspector.floor import kit_floor

    info = read_elf_buffer(data, "fuzz.elf")
    floor = kit_floor((info,))  # what `inspect` derives from it
    # what verify's symbol-name check reads: the references, each looked up through the hash
    # table, then every definition decoded (as for a file without a hash table)
    symbols = dynamic_symbols_buffer(data, "fuzz.elf")
    found = [symbols.lookup(reference.name) for reference in symbols.needed[:256]]
    return floor, found, len(symbols.defined)


def elf_fence(error: BaseException) -> None:
    """read_elf_buffer turns any exception of its parser into NotAnElf (so that a bug still
    names the file in one line); for the fuzzer such an exception is a bug all the same."""
    from ninfer_kits.inspector import elf

    cause = error.__cause__
    if isinstance(error, NotAnElf) and cause is not None and not isinstance(
            cause, elf._Corrupt | NotAnElf | RecursionError):
        raise Unexpected(f"the ELF parser raised {type(cause).__name__}: {cause} "
                         f"(behind its NotAnElf fence)") from cause


def read_fatbin(data: bytes, scratch: Path) -> object:
    """The bytes as a `.nv_fatbin` section (parsed strictly), then as data searched for
    containers (the way `.data` sections and section-less files are)."""
    from ninfer_kits.inspector.fatbin import read_fatbin, search_containers

    found: list[object] = list(search_containers(data, [(0, len(data), ".data", None)])[0])
    found.extend(read_fatbin(data, ".nv_fatbin", 0, len(data)))
    return found


def read_tar(data: bytes, scratch: Path) -> object:
    """A kit archive the way `inspect` streams one: each member's header, the ELF members'
    bytes read (from memory or a spooled copy) and inspected."""
    from ninfer_kits.inspector.archive import KitArchive
    from ninfer_kits.inspector.elf import ELF_MAGIC, read_elf_buffer

    path = scratch_file(scratch, "kit.tar.gz", data)
    seen = []
    with KitArchive(path, member_limit=16 << 20, memory_limit=1 << 20,
                    temp_dir=scratch) as archive:
        for member in archive:
            seen.append((member.info, member.header))
            if member.kind != "file" or member.size < 4 or member.head(4) != ELF_MAGIC:
                continue
            with member.contents() as contents:
                seen.append(read_elf_buffer(contents, member.name))
    return seen


def read_ldcache(data: bytes, scratch: Path) -> object:
    from ninfer_kits.loader.ldcache import parse

    entries = parse(data)
    return [entry.fits(64, "x86-64") for entry in entries]


def read_buildinfo(data: bytes, scratch: Path) -> object:
    from ninfer_kits.kit.buildinfo import read

    return read(scratch_file(scratch, "BUILDINFO.txt", data))


def read_sha256sums(data: bytes, scratch: Path) -> object:
    from ninfer_kits.release.checksums import read_sha256sums

    return read_sha256sums(scratch_file(scratch, "SHA256SUMS", data))


LEDGER_TAG = "example-sm86-cu13-v0.3.0-r1"


def read_ledger(data: bytes, scratch: Path) -> object:
    """releases/<tag>.toml as publish reads it back and as fetch looks a tag up."""
    from ninfer_kits.fetch.ledger import read_entry

    folder = scratch / "releases"
    folder.mkdir(exist_ok=True)
    scratch_file(folder, f"{LEDGER_TAG}.toml", data)
    record = read_entry(folder, LEDGER_TAG)
    if record is None:
        raise Unexpected("the ledger file written was not found")
    entry = record.entry
    return (record.repository, record.api, entry.tarballs,
            [entry.url(asset.name) for asset in entry.assets if asset.urls])


def read_kitindex(data: bytes, scratch: Path) -> object:
    """index.json as fetch and kit-url read it from a remote URL (each kit's ledger text
    through the ledger's reader), then every URL of every release as they look it up."""
    from ninfer_kits.release import kitindex

    entries = kitindex.parse(data, "index.json")
    return [(entry.tag, [entry.url(asset.name) for asset in entry.assets if asset.urls],
             entry.flavour_facts()) for entry in entries]


def read_linetable(data: bytes, scratch: Path) -> object:
    """A cubin's `.debug_line` as `diff` reads it for the source files' times (None, a table it
    does not read, counts as refused)."""
    from ninfer_kits.errors import BadInput
    from ninfer_kits.inspector.linetable import file_entries

    entries = file_entries(data)
    if entries is None:
        raise BadInput("not a DWARF 2-4 line table")
    return entries


BUILDINFO_KEYS = (
    "format", "kit", "card", "upstream", "upstream_url", "tracked_ref", "revision", "version",
    "arch", "cuda_version", "host_compiler", "cmake_version", "cmake_options", "builder",
    "toolchain", "base_image", "base_image_digest", "source_date_epoch", "pipeline_version",
    "pipeline_revision", "python_version", "zlib_version", "glibc_floor", "sonames", "runpath",
    "sass", "ptx", "relocatable_device_code", "flavour", "portable_asset", "symbol_floor",
    "floor", "sha256", "license", "bundled", "run.jobs")

READERS: dict[str, Reader] = {reader.name: reader for reader in (
    Reader("elf", "inspector.elf.read_elf_buffer, then inspector.floor.kit_floor; "
           "inspector.elfsymbols", read_elf,
           max_len=64 << 10, check=elf_fence,
           tokens=(b"\x7fELF", b"\x50\xed\x55\xba", b"\x50\xed\x55\xba\x01\x00\x10\x00",
                   b".nv_fatbin", b"__nv_relfatbin", b"GNU", b"GLIBC_2.34", b"GLIBCXX_3.4.32",
                   b"libc.so.6", b"$ORIGIN")),
    Reader("fatbin", "inspector.fatbin.read_fatbin and search_containers", read_fatbin,
           max_len=16 << 10,
           tokens=(b"\x50\xed\x55\xba", b"\x50\xed\x55\xba\x01\x00\x10\x00", b"\x01\x00",
                   b"\x02\x00", b"\x08\x00", b"\x00\x80\x00\x00", b"\x56\x00\x00\x00")),
    Reader("tar", "inspector.archive.KitArchive (a member's bytes to read_elf_buffer)",
           read_tar, max_len=64 << 10, timeout=20,
           tokens=(b"ustar\x0000", b"ustar  \x00", b"././@LongLink", b"././@PaxHeader",
                   b"path=", b"linkpath=", b"size=", b"GNU.sparse.", b"hdrcharset=",
                   b"\x1f\x8b\x08", b"\x1f\x8b\x08\x04", b"\x08\x00NK\x04\x00",
                   b"\xfd7zXZ\x00", b"BZh9", b"\x7fELF", b"../")),
    Reader("ldcache", "loader.ldcache.parse", read_ldcache, max_len=64 << 10,
           allowed=(NinferKitsError, CacheError),
           tokens=(b"ld.so-1.7.0\x00", b"glibc-ld.so.cache1.1", b"\x03\x03\x00\x00")),
    Reader("buildinfo", "buildinfo.read", read_buildinfo, max_len=16 << 10,
           tokens=(*(key.encode() + b": " for key in BUILDINFO_KEYS), b" | ",
                   b"# --- this run", b"-portable.tar.gz", b" (dpkg)", b" (wheel)")),
    Reader("sha256sums", "checksums.read_sha256sums", read_sha256sums, max_len=8 << 10,
           tokens=(b"  ", b" *", b"\n", b"0123456789abcdef" * 4)),
    Reader("linetable", "inspector.linetable.file_entries", read_linetable, max_len=8 << 10,
           tokens=(b"\x02\x00", b"\x04\x00", b"\x05\x00", b"\xff\xff\xff\xff", b".cu\0")),
    Reader("ledger", "ledger.read through fetch.ledger.read_entry", read_ledger,
           max_len=16 << 10,
           tokens=(b"format = 1\n", b"[stores.github]\n", b"[[assets]]\n", b"[assets.urls]\n",
                   b"[[floor]]\n", b"published_at = 2026-01-02T03:04:05Z\n",
                   b"portable_asset", b"portable_sha256", b"portable_size", b"location",
                   b"repository", b"sha256", b"sha1", b"size", b'"""', b"'''",
                   b"\\u", b"= [", b"= {", b"tag = ", b"[[flavours]]\n",
                   b"[flavours.needs]\n", b"[flavours.needs.versions]\n", b"meets = [",
                   b"distributions_as_of = ")),
    Reader("kitindex", "kitindex.parse (each kit's ledger text through ledger.parse)",
           read_kitindex, max_len=32 << 10,
           tokens=(b'{"format": 1, "kits": [', b'"ledger": "', b'"tag": "', b"\\n",
                   b"\\u0000", b'\\"', b"[[assets]]\\n", b"[stores.local]\\n",
                   b"[[flavours]]\\n", b"format = 1\\n")),
)}


def replay(reader: Reader, data: bytes, scratch: Path) -> str:
    """Run one input: "read" or "refused" (an allowed error); anything else raises."""
    try:
        reader.read(data, scratch)
    except reader.allowed as error:
        if reader.check is not None:
            reader.check(error)
        return "refused"
    return "read"
