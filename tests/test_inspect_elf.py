"""The inspector against the ground truth (readelf, cuobjdump) on binaries compiled here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ninfer_kits.inspector.elf import ElfInfo, read_elf
from ninfer_kits.inspector.floor import SymbolVersion, kit_floor

from conftest import system_libraries
from oracles import (
    as_cuobjdump_names,
    cuobjdump_entries,
    cuobjdump_loaded,
    cuobjdump_relocatable,
    readelf,
)


def assert_matches_readelf(info: ElfInfo, path: Path) -> None:
    truth = readelf(path)
    assert info.needed == truth.needed
    assert info.soname == truth.soname
    assert info.rpath == truth.rpath
    assert info.runpath == truth.runpath
    assert info.interpreter == truth.interpreter
    assert info.build_id == truth.build_id
    assert {n.library: set(n.versions) for n in info.version_needs} == truth.version_needs
    floor = kit_floor([info])
    for prefix, highest in _highest_by_prefix(truth.version_needs).items():
        item = floor.floor(prefix)
        assert item is not None and item.name == highest, prefix


def _highest_by_prefix(needs: dict[str, set[str]]) -> dict[str, str]:
    best: dict[str, SymbolVersion] = {}
    for names in needs.values():
        for version in map(SymbolVersion.parse, names):
            if version.number and (version.prefix not in best or version > best[version.prefix]):
                best[version.prefix] = version
    return {prefix: version.name for prefix, version in best.items()}


@pytest.mark.parametrize("name", ["glibc234", "recent_cxx", "runpath", "rpath", "kitlib",
                                  "empty_runpath"])
def test_c_programs_match_readelf(c_binaries: dict[str, Path], name: str) -> None:
    assert_matches_readelf(read_elf(c_binaries[name]), c_binaries[name])


@pytest.mark.parametrize("path", system_libraries(), ids=lambda p: p.name)
def test_system_files_match_readelf(path: Path) -> None:
    assert_matches_readelf(read_elf(path), path)


def test_glibc_floor_is_the_bound_version(c_binaries: dict[str, Path]) -> None:
    floor = kit_floor([read_elf(c_binaries["glibc234"])])
    glibc = floor.floor("GLIBC")
    assert glibc is not None and glibc.name == "GLIBC_2.34"
    assert "GLIBC_2.14" in dict(floor.versions_by_library)["libc.so.6"]
    assert floor.table[0].requirement == "x86-64 Linux, glibc ≥ 2.34"


def test_cxx_floor_names_gcc(c_binaries: dict[str, Path]) -> None:
    floor = kit_floor([read_elf(c_binaries["recent_cxx"])])
    glibcxx = floor.floor("GLIBCXX")
    assert glibcxx is not None and glibcxx.libraries == ("libstdc++.so.6",)
    assert SymbolVersion.parse(glibcxx.name).number >= (3, 4, 30)
    row = next(r for r in floor.table if "GLIBCXX" in r.requirement)
    assert row.requirement == f"libstdc++.so.6 providing {glibcxx.name}"
    assert row.why.startswith("GCC ") and row.why.endswith(" or newer")


def test_runpath_with_origin_and_own_symbol_versions(c_binaries: dict[str, Path]) -> None:
    info = read_elf(c_binaries["runpath"])
    assert info.runpath == ("$ORIGIN/../lib", "/opt/kitdemo/lib")
    assert info.rpath == ()
    floor = kit_floor([info])
    assert floor.floor("KITDEMO") is not None and floor.floor("KITDEMO").name == "KITDEMO_1.2"
    row = next(r for r in floor.table if r.requirement.startswith("libkitdemo.so.1"))
    assert row.requirement == "libkitdemo.so.1 (KITDEMO_1.2)"


def test_library_defines_its_versions(c_binaries: dict[str, Path]) -> None:
    info = read_elf(c_binaries["kitlib"])
    assert info.soname == "libkitdemo.so.1"
    assert set(info.version_defs) >= {"KITDEMO_1.0", "KITDEMO_1.2"}


def test_kit_view_does_not_require_what_the_kit_carries(c_binaries: dict[str, Path]) -> None:
    floor = kit_floor([read_elf(c_binaries["runpath"]), read_elf(c_binaries["kitlib"])])
    assert "libkitdemo.so.1" not in floor.sonames
    assert floor.provided_in_kit == ("libkitdemo.so.1",)


@pytest.mark.parametrize("name", ["plain", "compressed", "default", "rdc.o", "rdc",
                                  "shared_cudart"])
def test_device_code_matches_cuobjdump(cuda_binaries: dict[str, Path], name: str) -> None:
    info = read_elf(cuda_binaries[name])
    ours = [(entry.kind, entry.arch) for entry in info.device_code]
    assert as_cuobjdump_names(ours) == cuobjdump_entries(cuda_binaries[name])
    loaded = [(entry.kind, entry.arch) for entry in info.device_code if entry.loadable]
    assert as_cuobjdump_names(loaded) == cuobjdump_loaded(cuda_binaries[name])
    moved = [(entry.kind, entry.arch) for entry in info.device_code if not entry.loadable]
    assert as_cuobjdump_names(moved) == cuobjdump_relocatable(cuda_binaries[name])


def test_floor_counts_only_loaded_code(cuda_binaries: dict[str, Path]) -> None:
    """The -rdc build of the same kernels: every arch is in .nv_fatbin as SASS, but its PTX
    is a device-link input only (cuobjdump's default listing has none)."""
    floor = kit_floor([read_elf(cuda_binaries["rdc"])])
    truth = cuobjdump_loaded(cuda_binaries["rdc"])
    assert [("ptx", a) for a in floor.ptx] == [k for k in truth if k[0] == "ptx"] == []
    assert floor.sass == ("sm_86", "sm_100f", "sm_120a")
    assert ("ptx", "compute_90") in {(item.kind, item.arch) for item in floor.relocatable}


def test_archs_keep_their_suffixes(cuda_binaries: dict[str, Path]) -> None:
    floor = kit_floor([read_elf(cuda_binaries["plain"])])
    assert floor.sass == ("sm_86", "sm_100f", "sm_120a")
    assert floor.ptx == ("compute_90",)
    arch = floor.table[-1]
    # compute_90 PTX reaches 9.0 and everything newer, sm_100f and sm_120a included.
    assert arch.requirement == ("An NVIDIA GPU of compute capability 8.6 or a later 8.x, or 9.0 "
                                "or higher")
    assert "SASS sm_120a (arch-specific) runs on 12.0 only" in arch.why
    assert "PTX compute_90: the driver JIT-compiles it for any GPU of 9.0 or higher" in arch.why


def test_compression_is_reported_per_entry(cuda_binaries: dict[str, Path]) -> None:
    plain = read_elf(cuda_binaries["plain"]).device_code
    packed = read_elf(cuda_binaries["compressed"]).device_code
    default = read_elf(cuda_binaries["default"]).device_code
    assert not any(entry.compressed for entry in plain)
    assert all(entry.compressed for entry in packed)
    # nvcc's default compresses PTX but leaves small SASS entries as they are.
    assert Counter((e.kind, e.compressed) for e in default if e.kind == "ptx") == Counter(
        {("ptx", True): sum(1 for e in default if e.kind == "ptx")})


def test_lz4_compressed_entries_are_reported_compressed(tmp_path: Path) -> None:
    """`--compress-mode=speed` compresses with LZ4 (entry flag 0x2000, where zstd's is 0x8000):
    every entry of a binary built so, SASS included (-compress-all), is compressed; cuobjdump
    lists the same entries."""
    import struct

    from ninfer_kits.inspector.fatbin import ENTRY_FLAGS_OFFSET, FLAG_LZ4, FLAG_ZSTD

    from conftest import CUDA_ARCHS
    from tools import DATA, nvcc, run

    built = tmp_path / "lz4"
    run(nvcc(), "-o", built, DATA / "kernels.cu", *CUDA_ARCHS, "--compress-mode=speed",
        "-Xfatbin=-compress-all")
    info = read_elf(built)
    entries = [e for e in info.device_code if e.loadable]
    assert entries and all(entry.compressed for entry in entries)
    assert as_cuobjdump_names([(e.kind, e.arch) for e in info.device_code]) == \
        cuobjdump_entries(built)
    # the flags themselves, as nvcc wrote them: LZ4's, not zstd's
    data = built.read_bytes()
    flags = []
    at = data.find(b"\x50\xed\x55\xba")  # the first container of .nv_fatbin
    body_end = at + 16 + struct.unpack_from("<Q", data, at + 8)[0]
    position = at + 16
    while position < body_end:
        header_size, payload_size = struct.unpack_from("<IQ", data, position + 4)
        flags.append(struct.unpack_from("<Q", data, position + ENTRY_FLAGS_OFFSET)[0])
        position += header_size + payload_size
    assert flags and all(f & FLAG_LZ4 and not f & FLAG_ZSTD for f in flags)


def test_relocatable_fatbin_is_read(cuda_binaries: dict[str, Path]) -> None:
    entries = read_elf(cuda_binaries["rdc"]).device_code
    assert {entry.section for entry in entries} == {".nv_fatbin", "__nv_relfatbin"}
    assert all(entry.loadable == (entry.section == ".nv_fatbin") for entry in entries)
    only = {entry.section for entry in read_elf(cuda_binaries["rdc.o"]).device_code}
    assert only == {"__nv_relfatbin"}


def test_shared_cudart_row(cuda_binaries: dict[str, Path]) -> None:
    path = cuda_binaries["shared_cudart"]
    info = read_elf(path)
    assert_matches_readelf(info, path)
    table = kit_floor([info]).table
    cudart = next(row for row in table if "libcudart" in row.requirement)
    assert cudart.requirement == "CUDA 13 runtime — libcudart.so.13"
    assert cudart.why == "RUNPATH is /usr/local/cuda/lib64"
    arch = table[-1]
    assert arch.requirement == "An NVIDIA GPU of compute capability 8.6 or a later 8.x"
    assert arch.why == ("SASS sm_86 runs on 8.6 or a later 8.x; no PTX: the driver cannot "
                        "JIT-compile it for any other GPU")


@pytest.mark.parametrize(
    ("smaller", "larger"),
    [("GLIBC_2.9", "GLIBC_2.38"), ("GLIBCXX_3.4.9", "GLIBCXX_3.4.32"), ("CXXABI_1.3.9",
     "CXXABI_1.3.15"), ("GLIBC_2.3", "GLIBC_2.3.4"), ("CURL_OPENSSL_3", "CURL_OPENSSL_4")],
)
def test_versions_compare_numerically(smaller: str, larger: str) -> None:
    assert SymbolVersion.parse(smaller) < SymbolVersion.parse(larger)


def test_prefixes_are_split_at_the_number() -> None:
    assert SymbolVersion.parse("CURL_OPENSSL_4").prefix == "CURL_OPENSSL"
    assert SymbolVersion.parse("CXXABI_TM_1").prefix == "CXXABI_TM"
    assert SymbolVersion.parse("GLIBC_PRIVATE").number == ()


def test_empty_runpath_entry_stays_visible(c_binaries: dict[str, Path]) -> None:
    assert read_elf(c_binaries["empty_runpath"]).runpath == ("/opt/kitdemo/lib", "")


def test_packed_relative_relocations_need_glibc_236(tmp_path: Path) -> None:
    """`ld -z pack-relative-relocs` adds a need for GLIBC_ABI_DT_RELR on libc.so.6, which only
    glibc 2.36 and later define: the floor says glibc ≥ 2.36 although no GLIBC_2.36 symbol is
    used (runtime_facts.toml, [glibc_abi])."""
    from tools import DATA, run, tool

    target = tmp_path / "relr"
    run(tool("gcc"), "-O1", "-o", target, DATA / "relr.c", "-Wl,-z,pack-relative-relocs")
    truth = readelf(target)
    assert "GLIBC_ABI_DT_RELR" in truth.version_needs["libc.so.6"]
    numbered = [SymbolVersion.parse(name) for name in truth.version_needs["libc.so.6"]]
    assert max(v.number for v in numbered if v.prefix == "GLIBC") < (2, 36)
    info = read_elf(target)
    assert {n.library: set(n.versions) for n in info.version_needs} == truth.version_needs
    floor = kit_floor([info])
    glibc = floor.floor("GLIBC")
    assert glibc is not None and (glibc.version, glibc.name) == ("2.36", "GLIBC_ABI_DT_RELR")
    assert floor.table[0].requirement == "x86-64 Linux, glibc ≥ 2.36"
    assert floor.table[0].why == ("GLIBC_ABI_DT_RELR (packed relative relocations, from ld -z "
                                  "pack-relative-relocs) needs glibc 2.36 or newer")


def test_rpath_row_says_rpath(tmp_path: Path) -> None:
    """A CUDA program linked with DT_RPATH (old dtags): the cudart row names RPATH."""
    from tools import DATA, nvcc, run

    target = tmp_path / "rpath_cudart"
    run(nvcc(), "-o", target, DATA / "kernels.cu", "-cudart", "shared",
        "-gencode", "arch=compute_86,code=sm_86", "-Xlinker", "--disable-new-dtags",
        "-Xlinker", "-rpath=/opt/cuda/lib64")
    info = read_elf(target)
    assert_matches_readelf(info, target)
    assert info.rpath == ("/opt/cuda/lib64",) and info.runpath == ()
    row = next(r for r in kit_floor([info]).table if "libcudart" in r.requirement)
    assert row.why == "RPATH is /opt/cuda/lib64"


def test_kit_libraries_versions_are_not_floors(c_binaries: dict[str, Path]) -> None:
    alone = kit_floor([read_elf(c_binaries["runpath"])])
    assert alone.floor("KITDEMO") is not None
    floor = kit_floor([read_elf(c_binaries["runpath"]), read_elf(c_binaries["kitlib"])])
    assert floor.floor("KITDEMO") is None
    assert not any("KITDEMO" in row.requirement for row in floor.table)
