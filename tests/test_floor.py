"""The facts the floor's advice rests on, and the GPU row's wording for each kind of arch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ninfer_kits.config.tables import Locator, Source, Table
from ninfer_kits.errors import ConfigError
from ninfer_kits.host.runtime_facts import _validate, runtime_facts
from ninfer_kits.inspector.elf import ElfInfo
from ninfer_kits.inspector.fatbin import FatbinEntry
from ninfer_kits.inspector.floor import kit_floor
from ninfer_kits.kit import buildinfo

# Rows of the libstdc++ manual's "Symbol versioning on the libstdc++.so binary" list
# (ABI Policy and Guidelines): "GCC 4.8.3: GLIBCXX_3.4.19, CXXABI_1.3.7", "GCC 13.1.0:
# GLIBCXX_3.4.31, CXXABI_1.3.14", "GCC 13.2.0: GLIBCXX_3.4.32, CXXABI_1.3.14", "GCC 14.1.0:
# GLIBCXX_3.4.33, CXXABI_1.3.15", ...: the first release to define each version.
DOCUMENTED = [
    ("GLIBCXX", (3, 4, 19), "GCC 4.8.3"),
    ("GLIBCXX", (3, 4, 24), "GCC 7.2"),
    ("GLIBCXX", (3, 4, 28), "GCC 9.3"),
    ("GLIBCXX", (3, 4, 29), "GCC 11.1"),
    ("GLIBCXX", (3, 4, 31), "GCC 13.1"),
    ("GLIBCXX", (3, 4, 32), "GCC 13.2"),
    ("GLIBCXX", (3, 4, 33), "GCC 14.1"),
    ("CXXABI", (1, 3, 7), "GCC 4.8"),
    ("CXXABI", (1, 3, 12), "GCC 9.1"),
    ("CXXABI", (1, 3, 13), "GCC 11.1"),
    ("CXXABI", (1, 3, 14), "GCC 13.1"),
    ("CXXABI", (1, 3, 15), "GCC 14.1"),
]


@pytest.mark.parametrize(("prefix", "version", "gcc"), DOCUMENTED)
def test_rows_follow_the_libstdcxx_abi_list(prefix: str, version: tuple[int, ...],
                                            gcc: str) -> None:
    table = dict(runtime_facts().glibcxx if prefix == "GLIBCXX" else runtime_facts().cxxabi)
    assert table[version] == gcc


def test_advice_names_the_point_release() -> None:
    facts = runtime_facts()
    assert facts.gcc_advice("GLIBCXX", (3, 4, 32)) == "GCC 13.2 or newer"
    assert facts.gcc_advice("GLIBCXX", (3, 4, 31)) == "GCC 13.1 or newer"
    assert facts.gcc_advice("GLIBCXX", (3, 4, 19)) == "GCC 4.8.3 or newer"
    assert facts.gcc_advice("CXXABI", (1, 3, 15)) == "GCC 14.1 or newer"
    assert facts.gcc_advice("GLIBCXX", (3, 4, 18)) == "any GCC of the last decade"
    assert facts.gcc_advice("GLIBCXX", (3, 4, 99)).startswith("a libstdc++ newer than")


def _raw(**tables: dict[str, str]) -> Table:
    raw = {"schema": 1, "glibcxx": {"3.4.31": "GCC 13.1", "3.4.32": "GCC 13.2"},
           "cxxabi": {"1.3.14": "GCC 13.1"}, "families": {}, "glibc_sonames": [], **tables}
    return Table(Source(Path("runtime_facts.toml"), Locator("")), (), raw)


def test_validation_accepts_the_shipped_form() -> None:
    assert _validate(_raw()).glibcxx[-1] == ((3, 4, 32), "GCC 13.2")


@pytest.mark.parametrize("glibcxx", [
    {"3.4.32": "13.2"},  # not "GCC <release>"
    {"3.4.x": "GCC 13.2"},  # not a version
    {"3.4.31": "GCC 13.2", "3.4.32": "GCC 13.1"},  # a newer version in an older release
])
def test_validation_rejects_bad_rows(glibcxx: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"\[glibcxx\]"):
        _validate(_raw(glibcxx=glibcxx))


# --- the GPU row, on made-up fatbin entries (the real binaries are in test_inspect_rdc.py) ----

def _files(*entries: tuple[str, str, str]) -> list[ElfInfo]:
    code = tuple(FatbinEntry(section=section, kind=kind, arch=arch, compressed=False,
                             payload_size=1) for section, kind, arch in entries)
    return [ElfInfo(path="bin/ninfer", elf_class=64, machine="x86-64", type="EXEC",
                    interpreter=None, soname=None, needed=(), rpath=(), runpath=(),
                    build_id=None, version_needs=(), version_defs=(), device_code=code)]


LOADED, RELOCATABLE = ".nv_fatbin", "__nv_relfatbin"


@pytest.mark.parametrize(("entries", "gpus"), [
    ([("sass", "sm_86")], "8.6 or a later 8.x"),
    ([("sass", "sm_86"), ("ptx", "compute_86")], "8.6 or higher"),
    ([("sass", "sm_120a")], "12.0 only"),
    ([("sass", "sm_120a"), ("ptx", "compute_120a")], "12.0 only"),
    ([("sass", "sm_100f"), ("ptx", "compute_100f")], "10.0 or a later 10.x"),
    ([("sass", "sm_103f")], "10.3 or a later 10.x"),
    ([("sass", "sm_90a"), ("ptx", "compute_120")], "9.0 only, or 12.0 or higher"),
    ([("sass", "sm_120a"), ("ptx", "compute_90")], "9.0 or higher"),
    ([("ptx", "compute_120f")], "12.0 or a later 12.x"),
])
def test_gpu_row_says_which_gpus(entries: list[tuple[str, str]], gpus: str) -> None:
    floor = kit_floor(_files(*((LOADED, kind, arch) for kind, arch in entries)))
    assert floor.table[-1].requirement == f"An NVIDIA GPU of compute capability {gpus}"


def test_relocatable_ptx_widens_the_row_and_relocatable_sass_does_not() -> None:
    """Device-link inputs give no SASS (the device-linked cubin is what loads), but the CUDA
    runtime JIT-links their PTX when that SASS does not fit the GPU (seen on an H200)."""
    floor = kit_floor(_files((LOADED, "sass", "sm_86"), (RELOCATABLE, "ptx", "compute_86"),
                             (RELOCATABLE, "sass", "sm_90")))
    assert (floor.sass, floor.ptx) == (("sm_86",), ())
    row = floor.table[-1]
    assert row.requirement == "An NVIDIA GPU of compute capability 8.6 or higher"
    assert "no PTX" not in row.why and "JIT-links" in row.why
    assert "device-link inputs: SASS sm_90 ×1, PTX compute_86 ×1 in __nv_relfatbin" in row.why
    sass_only = kit_floor(_files((LOADED, "sass", "sm_86"), (RELOCATABLE, "sass", "sm_86")))
    assert sass_only.table[-1].requirement == ("An NVIDIA GPU of compute capability 8.6 or a "
                                               "later 8.x")
    assert "no PTX" in sass_only.table[-1].why


def test_buildinfo_keeps_the_relocatable_code_apart() -> None:
    info = buildinfo.BuildInfo(
        kit="k", card="c", upstream="u", upstream_url="x", tracked_ref="main", revision="r",
        version="", arch="sm_86", cuda_version="13.0", host_compiler="GNU 14", cmake_version="3",
        cmake_options="", builder="local", toolchain="t", base_image="none",
        base_image_digest="none", source_date_epoch=1, pipeline_version="0", pipeline_revision="p",
        glibc_floor="2.34", sonames="", runpath="none", sass="sm_86", ptx="none",
        relocatable_device_code="SASS sm_86 ×2, PTX compute_86 ×2")
    text = buildinfo.render(info)
    assert "\nptx: none\nrelocatable_device_code: SASS sm_86 ×2, PTX compute_86 ×2\n" in text
    assert buildinfo.parse(text) == info
    older = text.replace("relocatable_device_code: SASS sm_86 ×2, PTX compute_86 ×2\n", "")
    assert buildinfo.parse(older) == dataclasses.replace(info, relocatable_device_code="none")


# --- glibc: its sonames and its ABI markers (runtime_facts.toml) ---------------------------------

def _sonames(files: list[Path]) -> set[str]:
    from ninfer_kits.inspector.elf import read_elf

    found = set()
    for path in files:
        if path.is_file() and not path.is_symlink() and path.read_bytes()[:4] == b"\x7fELF":
            soname = read_elf(path).soname
            if soname and ".so." in soname:
                found.add(soname)
    return found


def test_glibc_sonames_cover_glibcs_packages() -> None:
    """Every versioned soname of Debian's libc6 (this machine) and libc6-i386 (downloaded:
    the 32-bit loader ld-linux.so.2) is covered by the glibc row, not a row of its own."""
    import shutil
    import subprocess

    from thirdparty import debian_package

    from tools import missing

    dpkg = shutil.which("dpkg")
    if dpkg is None:
        missing("dpkg (a Debian system), for the list of libc6's files")
        return
    listed = subprocess.run([dpkg, "-L", "libc6"], capture_output=True, text=True,
                            check=True).stdout.split()
    native = _sonames([Path(p) for p in listed if "/gconv/" not in p])
    i386 = _sonames([p for p in debian_package("libc6-i386").rglob("*.so*")
                     if "gconv" not in p.parts])
    assert {"libc.so.6", "ld-linux-x86-64.so.2"} <= native and "ld-linux.so.2" in i386
    assert native | i386 <= runtime_facts().glibc_sonames, (native | i386) - (
        runtime_facts().glibc_sonames)


def test_glibc_abi_markers_are_validated() -> None:
    marker = runtime_facts().glibc_abi_marker("GLIBC_ABI_DT_RELR")
    assert marker is not None and marker.glibc == (2, 36) and "2.36" in marker.source
    good = {"glibc": "2.36", "meaning": "m", "source": "s"}
    assert _validate(_raw(glibc_abi={"GLIBC_ABI_X": good})).glibc_abi[0].name == "GLIBC_ABI_X"
    for bad in ({**good, "glibc": "two"}, {**good, "source": ""}, {"glibc": "2.36"}):
        with pytest.raises(ConfigError, match=r"\[glibc_abi\.GLIBC_ABI_X\]"):
            _validate(_raw(glibc_abi={"GLIBC_ABI_X": bad}))
    with pytest.raises(ConfigError, match="GLIBC_ABI_ name"):
        _validate(_raw(glibc_abi={"GLIBC_2.36": good}))


def test_search_paths_name_their_tag() -> None:
    from ninfer_kits.inspector.floor import SearchPath, describe_search_paths

    assert describe_search_paths([SearchPath("RPATH", "$ORIGIN")]) == "RPATH is $ORIGIN"
    assert describe_search_paths([SearchPath("RUNPATH", "/a"), SearchPath("RUNPATH", "/b"),
                                  SearchPath("RPATH", "$ORIGIN")]) == (
        "RUNPATH is /a:/b; RPATH is $ORIGIN")


# --- weak version needs ---------------------------------------------------------------------

def test_a_weak_need_raises_no_floor() -> None:
    """A need marked VER_FLG_WEAK is not required by glibc's loader (elf/dl-version.c): it
    neither raises the glibc floor nor becomes a requirement of its library."""
    from ninfer_kits.inspector.elf import VersionNeed

    needs = (VersionNeed("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.38"), weak=("GLIBC_2.38",)),
             VersionNeed("libk.so.1", ("KIT_2",), weak=("KIT_2",)))
    [info] = _files()
    floor = kit_floor([info._replace(needed=("libc.so.6", "libk.so.1"), version_needs=needs)])
    glibc = floor.floor("GLIBC")
    assert glibc is not None and glibc.version == "2.2.5"
    assert dict(floor.versions_by_library) == {"libc.so.6": ("GLIBC_2.2.5",), "libk.so.1": ()}
