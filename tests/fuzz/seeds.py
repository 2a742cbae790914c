"""Seed inputs for each reader: real files of this machine and what the project's own writers
write. `python tests/fuzz/seeds.py READER FOLDER` writes one reader's seeds into FOLDER.

- elf: small programs and libraries of this machine (/usr/bin, glibc's stub libraries), the
  head of libcudart.so.13, one program with its section headers removed, and CUDA objects and
  a program compiled here by nvcc (`.nv_fatbin`, `__nv_relfatbin`, compressed), when nvcc is
  installed.
- fatbin: the fatbin sections of those CUDA files, and one container laid out by hand.
- tar: a kit tree packed by pipeline.pack.pack_tree (gzip), the same tar plain, as xz and
  bzip2, and in pack's gzip members of 4 kB (many members that record their length), and a
  pax-format tar with a hardlink and a long name.
- ldcache: /etc/ld.so.cache, and its first entries in the old and the compat layouts.
- buildinfo, sha256sums, ledger: buildinfo.render, checksums.write_sha256sums and
  ledger.write, plus the ledger files of releases/;
- kitindex: kitindex.render of those ledger entries (one, all, none).
"""

from __future__ import annotations

import bz2
import contextlib
import dataclasses
import datetime
import gzip
import io
import lzma
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

if __package__ in (None, ""):  # run as a script: tests/ on the path, for `fuzz.readers`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.readers import LEDGER_TAG, READERS

ROOT = Path(__file__).resolve().parent.parent.parent
ELF_SEED_LIMIT = 48 << 10  # a program of /usr/bin this small or smaller can be a seed
PROGRAMS = 4
STUB_LIBRARIES = ("libdl.so.2", "libutil.so.1")
LIBRARY_DIRS = (Path("/lib/x86_64-linux-gnu"), Path("/usr/lib/x86_64-linux-gnu"),
                Path("/lib/aarch64-linux-gnu"), Path("/lib64"))
CUDART = Path("/usr/local/cuda/lib64/libcudart.so.13")
KERNEL = """\
__global__ void scale(float* data, float factor, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] *= factor;
}
int main() { scale<<<1, 1>>>(nullptr, 2.0f, 0); return 0; }
"""
SHA = "0123456789abcdef" * 4


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def _small_programs() -> list[Path]:
    """A few small ELF programs of /usr/bin, picked evenly from the sorted list."""
    found = []
    for path in sorted(Path("/usr/bin").iterdir()):
        if path.is_symlink() or not path.is_file():
            continue
        if path.stat().st_size <= ELF_SEED_LIMIT and _is_elf(path):
            found.append(path)
    step = max(1, len(found) // PROGRAMS)
    return found[::step][:PROGRAMS]


def _stub_libraries() -> list[Path]:
    found = []
    for name in STUB_LIBRARIES:
        path = next((folder / name for folder in LIBRARY_DIRS if (folder / name).is_file()), None)
        if path is not None and path.stat().st_size <= ELF_SEED_LIMIT:
            found.append(path)
    return found


def _nvcc() -> str | None:
    for candidate in (os.environ.get("NVCC", ""), "/usr/local/cuda/bin/nvcc",
                      shutil.which("nvcc") or ""):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


@cache
def cuda_files() -> dict[str, bytes]:
    """Device code compiled here: objects with `.nv_fatbin` (plain and compressed) and
    `__nv_relfatbin` (-rdc), and a program linked against the shared CUDA runtime."""
    nvcc = _nvcc()
    if nvcc is None:
        return {}
    with tempfile.TemporaryDirectory(prefix="ninfer-fuzz-nvcc-") as folder:
        work = Path(folder)
        source = work / "kernel.cu"
        source.write_text(KERNEL)
        builds = {
            "cuda-object.o": ["-c", "-arch=sm_86"],
            "cuda-compressed.o": ["-c", "-arch=sm_86", "--compress-mode=size"],
            "cuda-rdc.o": ["-c", "-rdc=true", "-gencode", "arch=compute_86,code=sm_86",
                           "-gencode", "arch=compute_90,code=compute_90"],
            "cuda-program": ["-arch=sm_86", "-cudart", "shared"],
            "cuda-lineinfo.cubin": ["-cubin", "-lineinfo", "-arch=sm_86"],
        }
        out = {}
        for name, flags in builds.items():
            done = subprocess.run([nvcc, *flags, "-o", str(work / name), str(source)],
                                  capture_output=True, check=False, timeout=300)
            if done.returncode == 0:
                out[name] = (work / name).read_bytes()
        return out


def _without_section_headers(data: bytes) -> bytes:
    """An ELF64 little-endian file as `strip --strip-section-headers` leaves it (e_shoff,
    e_shnum and e_shstrndx zeroed; it still runs)."""
    out = bytearray(data)
    struct.pack_into("<Q", out, 0x28, 0)
    struct.pack_into("<HHH", out, 0x3A, 0, 0, 0)
    return bytes(out)


def elf_seeds() -> dict[str, bytes]:
    limit = READERS["elf"].max_len
    seeds = {f"program-{path.name}": path.read_bytes() for path in _small_programs()}
    seeds.update({f"library-{path.name}": path.read_bytes() for path in _stub_libraries()})
    if CUDART.is_file():
        with CUDART.open("rb") as handle:
            seeds["libcudart-head"] = handle.read(limit)
    programs = [data for name, data in seeds.items() if name.startswith("program-")]
    if programs and programs[0][4:6] == b"\x02\x01":
        seeds["program-without-section-headers"] = _without_section_headers(programs[0])
    seeds.update(cuda_files())
    return {name: data[:limit] for name, data in seeds.items()}


def _sections(data: bytes, names: tuple[str, ...]) -> Iterator[tuple[str, bytes]]:
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    for section in elf.iter_sections():
        if section.name in names:
            yield section.name, section.data()


def handmade_fatbin() -> bytes:
    """One container as nvcc lays it out: a 16-byte header, then an sm_86 SASS entry and a
    compute_86 PTX entry, each a 64-byte header and its payload; zero padding after it."""
    def entry(kind: int, arch: int, flags: int, payload: bytes) -> bytes:
        header = bytearray(64)
        struct.pack_into("<HHIQ", header, 0, kind, 0x101, 64, len(payload))
        struct.pack_into("<I", header, 28, arch)
        struct.pack_into("<Q", header, 40, flags)
        return bytes(header) + payload

    body = entry(2, 86, 0x11, b"\xaa" * 48) + entry(1, 86, 0x8011, b".version 9.0\0" + b"\0" * 3)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body + b"\0" * 16


def fatbin_seeds() -> dict[str, bytes]:
    seeds = {"handmade": handmade_fatbin()}
    for name, data in cuda_files().items():
        for section, contents in _sections(data, (".nv_fatbin", "__nv_relfatbin")):
            seeds[f"{name}{section}"] = contents
    limit = READERS["fatbin"].max_len
    return {name: data[:limit] for name, data in seeds.items()}


def _kit_tree(root: Path) -> None:
    """A kit as `build` leaves it, in small: a library and its link, BUILDINFO.txt, a long
    name, a license."""
    kit = root / "kit"
    (kit / "lib").mkdir(parents=True)
    (kit / "share" / ("d" * 60)).mkdir(parents=True)
    library = _stub_libraries()
    elf = library[0].read_bytes() if library else handmade_fatbin()
    (kit / "lib" / "libkitdemo.so.1").write_bytes(elf)
    (kit / "lib" / "libkitdemo.so").symlink_to("libkitdemo.so.1")
    (kit / "BUILDINFO.txt").write_text(_buildinfo_text(with_run=False))
    (kit / "share" / ("d" * 60) / ("long-name-" * 6)).write_text("a name over 100 bytes\n")
    (kit / "LICENSE").write_text("MIT\n")


def _pax_tar() -> bytes:
    """A pax-format tar with what pack_tree never writes: a hardlink, a non-ASCII name (a pax
    header), an empty folder entry."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
        folder = tarfile.TarInfo("kit")
        folder.type = tarfile.DIRTYPE
        archive.addfile(folder)
        library = _stub_libraries()
        payload = library[0].read_bytes() if library else handmade_fatbin()
        file = tarfile.TarInfo("kit/bin/ninfer-\u00e9")
        file.size, file.mode = len(payload), 0o755
        archive.addfile(file, io.BytesIO(payload))
        link = tarfile.TarInfo("kit/bin/ninfer")
        link.type, link.linkname = tarfile.LNKTYPE, "kit/bin/ninfer-\u00e9"
        archive.addfile(link)
    return out.getvalue()


def _framed(plain: bytes, block: int) -> bytes:
    """`plain` in gzip members of `block` bytes each, as pack_tree writes its MiB members
    (each header records the member's length): several to a seed, so that the reader's
    members read whole are many, in flight at once."""
    from ninfer_kits.pipeline.pack import gzip_member

    return b"".join(gzip_member(plain[at:at + block], 6) for at in range(0, len(plain), block))


def tar_seeds() -> dict[str, bytes]:
    from ninfer_kits.pipeline.pack import pack_tree

    with tempfile.TemporaryDirectory(prefix="ninfer-fuzz-kit-") as folder:
        work = Path(folder)
        tree = work / "example-sm86-cu13"
        _kit_tree(tree)
        tarball = work / "kit.tar.gz"
        pack_tree(tree, tarball, mtime=1735689600, threads=1)
        packed = tarball.read_bytes()
    plain = gzip.decompress(packed)
    seeds = {"pack-tree.tar.gz": packed, "pack-tree.tar": plain,
             "pack-tree.tar.xz": lzma.compress(plain), "pack-tree.tar.bz2": bz2.compress(plain),
             "pax.tar": _pax_tar(), "framed-4k.tar.gz": _framed(plain, 4096)}
    return {name: data for name, data in seeds.items() if len(data) <= READERS["tar"].max_len}


def _old_cache(entries: list[tuple[int, str, str]]) -> tuple[bytes, int]:
    """The pre-2.32 layout: header, 12-byte entries, strings counted from the table's end."""
    strings = bytearray()
    table = bytearray()
    for flags, key, value in entries:
        key_at = len(strings)
        strings += key.encode() + b"\0"
        value_at = len(strings)
        strings += value.encode() + b"\0"
        table += struct.pack("<iII", flags, key_at, value_at)
    header = struct.pack("<12sI", b"ld.so-1.7.0", len(entries))
    return header + bytes(table) + bytes(strings), len(header) + len(table)


def _new_cache(entries: list[tuple[int, str, str]]) -> bytes:
    """The new layout alone: offsets counted from its header."""
    head = 48 + 24 * len(entries)
    strings = bytearray()
    table = bytearray()
    for flags, key, value in entries:
        key_at = head + len(strings)
        strings += key.encode() + b"\0"
        value_at = head + len(strings)
        strings += value.encode() + b"\0"
        table += struct.pack("<iIIIQ", flags, key_at, value_at, 0, 0)
    header = struct.pack("<20sIIB3xI12x", b"glibc-ld.so.cache1.1", len(entries), len(strings),
                         2, 0)
    return header + bytes(table) + bytes(strings)


def ldcache_seeds() -> dict[str, bytes]:
    from ninfer_kits.loader.ldcache import CacheError, parse

    seeds: dict[str, bytes] = {}
    real = Path("/etc/ld.so.cache")
    entries = [(0x0303, "libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
               (0x0303, "libm.so.6", "/lib/x86_64-linux-gnu/libm.so.6")]
    if real.is_file():
        data = real.read_bytes()
        seeds["etc-ld.so.cache"] = data[:READERS["ldcache"].max_len]
        with contextlib.suppress(CacheError):
            entries = [(entry.flags, entry.soname, entry.path) for entry in parse(data)][:12]
    old, old_end = _old_cache(entries)
    seeds["old-layout"] = old
    pad = b"\0" * (((old_end + 7) & ~7) - old_end)
    # compat: the new cache right after the old entry table, aligned; the old strings after it
    # would move, so the compat seed keeps the old table and puts the new cache in its place
    seeds["compat-layout"] = old[:old_end] + pad + _new_cache(entries)
    seeds["new-layout"] = _new_cache(entries)
    return seeds


def _sample_buildinfo() -> object:
    from ninfer_kits.kit.buildinfo import BuildInfo

    return BuildInfo(
        kit="example", card="RTX 3090", upstream="owner/engine",
        upstream_url="https://github.com/owner/engine.git", tracked_ref="main",
        revision="a" * 40, version="0.3.0", arch="sm_86", cuda_version="13.0.88",
        host_compiler="GNU 12.2.0", cmake_version="3.31.6",
        cmake_options="-DCMAKE_BUILD_TYPE=Release", builder="local", toolchain="gcc-12",
        base_image="none (built on the host)", base_image_digest="none",
        source_date_epoch=1735689600, pipeline_version="0.1.0", pipeline_revision="b" * 40,
        python_version="3.11.7", zlib_version="1.2.13", glibc_floor="2.34",
        sonames="libc.so.6, libstdc++.so.6", runpath="$ORIGIN/../lib", sass="sm_86",
        ptx="compute_86", relocatable_device_code="SASS sm_86 ×2",
        flavour_assets=(("portable", "example-sm86-cu13-portable.tar.gz"),),
        symbol_floors=("GLIBC_2.34", "GLIBCXX_3.4.30"),
        floor=(("x86-64 Linux, glibc ≥ 2.34", "highest versioned symbol is GLIBC_2.34"),),
        binaries=((SHA, "kit/bin/ninfer"),), licenses=("kit/LICENSE",),
        run=(("jobs", "2"), ("compile_seconds", "81.4"), ("driver", "580.65.06")),
    )


def _buildinfo_text(with_run: bool = True, portable: bool = False) -> str:
    from ninfer_kits.kit.buildinfo import BuildInfo, render

    info = _sample_buildinfo()
    assert isinstance(info, BuildInfo)
    if portable:
        info = dataclasses.replace(info, flavour="portable", flavour_assets=(), bundled=(
            ("libstdc++.so.6", "ab" * 32, "libstdc++6 12.2.0-14 (dpkg)", "GPL-3.0-only",
             "kit/third_party/libstdc++6/copyright"),))
    return render(info, with_run=with_run)


def buildinfo_seeds() -> dict[str, bytes]:
    return {"published": _buildinfo_text().encode(),
            "in-tarball": _buildinfo_text(with_run=False).encode(),
            "portable": _buildinfo_text(portable=True).encode()}


def sha256sums_seeds() -> dict[str, bytes]:
    from ninfer_kits.release.checksums import write_sha256sums

    with tempfile.TemporaryDirectory(prefix="ninfer-fuzz-sums-") as folder:
        path = Path(folder) / "SHA256SUMS"
        write_sha256sums(path, {"example-sm86-cu13.tar.gz": SHA,
                                "example-sm86-cu13-portable.tar.gz": "ab" * 32,
                                "BUILDINFO.txt": "cd" * 32})
        written = path.read_bytes()
    # what `sha256sum -b` writes: the binary marker, and hex as another tool may case it
    binary = f"{SHA.upper()} *example-sm86-cu13.tar.gz\n".encode()
    return {"write-sha256sums": written, "binary-mode": binary}


def _ledger_entries() -> list[object]:
    from ninfer_kits.release import ledger

    asset = "example-sm86-cu13.tar.gz"
    entry = ledger.LedgerEntry(
        tag=LEDGER_TAG, kit="example", card="RTX 3090", upstream="owner/engine",
        upstream_url="https://github.com/owner/engine.git", revision="a" * 40,
        version="0.3.0", arch="sm_86", cuda_version="13.0.88", toolchain="gcc-12",
        asset=asset, published_at=datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        stores=(ledger.LedgerStore(name="b2", location="b2://ninfer-kits/kits/x/",
                                   details=(("bucket", "ninfer-kits"),)),
                ledger.LedgerStore(name="github",
                                   location="https://github.com/o/r/releases/tag/x",
                                   details=(("repository", "o/r"),
                                            ("api", "https://api.github.com")))),
        assets=(ledger.LedgerAsset(name=asset, size=12, sha256="a" * 64, sha1="b" * 40,
                                   urls=(("b2", "https://f000.backblazeb2.com/x"),
                                         ("github", "https://github.com/o/r/x"))),),
        floor=(("x86-64 Linux, glibc ≥ 2.34", "highest versioned symbol is GLIBC_2.34"),
               ('quote " and \\ and \x7f', "tab\there")))
    portable = "example-sm86-cu13-portable.tar.gz"
    sibling = ledger.LedgerAsset(name=portable, size=34, sha256="c" * 64, sha1="d" * 40,
                                 urls=(("github", "https://github.com/o/r/p"),))
    with_portable = dataclasses.replace(entry, assets=(*entry.assets, sibling), tarballs=(
        ledger.LedgerTarball(flavour="portable", asset=portable, sha256="c" * 64, size=34),))
    needs = ledger.LedgerNeeds(
        glibc="2.34", sonames=("libstdc++.so.6", "libc.so.6"), runpath=("$ORIGIN/../lib",),
        sass=("sm_86",), ptx=(), relocatable_sass=("sm_86",), relocatable_ptx=("compute_86",),
        versions=(("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.34")),
                  ("libstdc++.so.6", ("GLIBCXX_3.4.32",))))
    judged = dataclasses.replace(with_portable, driver_minimum="580",
                                 distributions_as_of="2026-11-30", flavours=(
        ledger.LedgerFlavour(flavour="plain", asset=asset, needs=needs,
                             meets=("debian-13",), not_known=("rhel-10",)),
        ledger.LedgerFlavour(flavour="portable", asset=portable, needs=needs, meets=())))
    return [entry, with_portable, judged]


def ledger_seeds() -> dict[str, bytes]:
    from ninfer_kits.release import ledger

    seeds = {}
    with tempfile.TemporaryDirectory(prefix="ninfer-fuzz-ledger-") as folder:
        for number, entry in enumerate(_ledger_entries()):
            assert isinstance(entry, ledger.LedgerEntry)
            path = Path(folder) / f"{number}.toml"
            ledger.write(path, entry)
            seeds[f"write-{number}"] = path.read_bytes()
    for path in sorted((ROOT / "releases").glob("*.toml")):
        seeds[f"releases-{path.name}"] = path.read_bytes()
    limit = READERS["ledger"].max_len
    return {name: data[:limit] for name, data in seeds.items()}


def kitindex_seeds() -> dict[str, bytes]:
    from ninfer_kits.release import kitindex, ledger

    entries = [entry for entry in _ledger_entries() if isinstance(entry, ledger.LedgerEntry)]
    seeds = {"all": kitindex.render(kitindex.document(entries)),
             "one": kitindex.render(kitindex.document(entries[-1:])),
             "empty": kitindex.render(kitindex.document([]))}
    limit = READERS["kitindex"].max_len
    return {name: data[:limit] for name, data in seeds.items()}


def _line_table(version: int, files: list[tuple[bytes, int, int, int]]) -> bytes:
    """A DWARF line program header (32-bit) with one include folder and `files`, no program."""
    lengths = bytes([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])  # opcode_base 13's standard lengths
    tables = b"/src/include\0\0" + b"".join(
        name + b"\0" + bytes([folder, mtime & 0x7F | 0x80, mtime >> 7, length])
        for name, folder, mtime, length in files) + b"\0"
    header = bytes([1]) + (bytes([1]) if version >= 4 else b"") + bytes([1, 0xFB, 14, 13])
    header += lengths + tables
    body = struct.pack("<HI", version, len(header)) + header
    return struct.pack("<I", len(body)) + body


def linetable_seeds() -> dict[str, bytes]:
    from ninfer_kits.inspector.elfread import read_layout, section_text

    files = [(b"kernel.cu", 0, 1000, 42), (b"common.cuh", 1, 2000, 7)]
    seeds = {"v2": _line_table(2, files), "v4": _line_table(4, files),
             "two-units": _line_table(3, files) + _line_table(4, files[:1])}
    cubin = cuda_files().get("cuda-lineinfo.cubin")
    if cubin is not None:
        layout = read_layout(cubin, "cubin")
        for section in layout.sections:
            if section.name == ".debug_line":
                seeds["nvcc-lineinfo"] = section_text(cubin, layout, section)
    limit = READERS["linetable"].max_len
    return {name: data[:limit] for name, data in seeds.items()}


SEEDS: dict[str, Callable[[], dict[str, bytes]]] = {
    "elf": elf_seeds, "fatbin": fatbin_seeds, "tar": tar_seeds, "ldcache": ldcache_seeds,
    "buildinfo": buildinfo_seeds, "sha256sums": sha256sums_seeds, "ledger": ledger_seeds,
    "linetable": linetable_seeds, "kitindex": kitindex_seeds,
}


def write_seeds(reader: str, folder: Path) -> int:
    """Write one reader's seeds into `folder` as seed-<name>; how many."""
    folder.mkdir(parents=True, exist_ok=True)
    seeds = SEEDS[reader]()
    for name, data in seeds.items():
        (folder / f"seed-{name}").write_bytes(data)
    return len(seeds)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in SEEDS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(SEEDS)}}} FOLDER")
    print(write_seeds(sys.argv[1], Path(sys.argv[2])))
