"""The inspector on real third-party files: NVIDIA's CUDA libraries (PyPI wheels), 32-bit glibc
(Debian's libc6-i386), and the Debian system's own libraries, against readelf and cuobjdump."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ninfer_kits.inspector.elf import read_elf
from ninfer_kits.inspector.floor import SearchPath, kit_floor
from ninfer_kits.inspector.inspection import inspect_path
from thirdparty import CUDART, CUFFT, CURAND, debian_package, wheel_file

from oracles import (
    as_cuobjdump_names,
    containers_in_sections,
    cuobjdump_entries,
    cuobjdump_loaded,
    cuobjdump_of_containers,
    readelf,
)
from tools import run, tool

SCHEMA = Path(__file__).parent.parent / "src/ninfer_kits/data/inspect.schema.json"
SYSTEM_LIBS = Path("/usr/lib/x86_64-linux-gnu")


@pytest.fixture(scope="session")
def curand() -> Path:
    return wheel_file(CURAND)


@pytest.fixture(scope="session")
def cufft() -> Path:
    return wheel_file(CUFFT)


@pytest.fixture(scope="session")
def cudart() -> Path:
    return wheel_file(CUDART)


@pytest.fixture(scope="session")
def glibc_i386() -> Path:
    return debian_package("libc6-i386")


def inspect_json(*args: str | Path) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", "--json",
                           *map(str, args)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    return report


def matches_readelf(path: Path) -> None:
    info, truth = read_elf(path), readelf(path)
    assert (info.needed, info.soname, info.rpath, info.runpath, info.interpreter) == (
        truth.needed, truth.soname, truth.rpath, truth.runpath, truth.interpreter)
    assert info.build_id == truth.build_id
    assert {need.library: set(need.versions) for need in info.version_needs} == truth.version_needs


# --- 1. the build-id is the GNU note's ------------------------------------------------------------

def test_build_id_is_the_gnu_note_not_a_systemtap_probe(curand: Path, cufft: Path) -> None:
    """Both libraries carry `.note.stapsdt` notes of type 3 (NT_STAPSDT) besides the GNU
    build-id note (NT_GNU_BUILD_ID, also 3); in libcurand the probes come first."""
    import jsonschema

    for path in (curand, cufft):
        notes = run(tool("readelf"), "-n", "-W", path)
        assert "NT_STAPSDT" in notes and "NT_GNU_BUILD_ID" in notes
        matches_readelf(path)
    report = inspect_json(curand)
    files = report["files"]
    assert isinstance(files, list) and len(files[0]["build_id"]) == 40
    jsonschema.validate(report, json.loads(SCHEMA.read_text()))


# --- 4. RPATH is called RPATH ---------------------------------------------------------------------

def test_rpath_is_named_rpath_in_the_floor(curand: Path) -> None:
    truth = readelf(curand)
    assert truth.rpath == ("$ORIGIN",) and truth.runpath == ()
    floor = kit_floor([read_elf(curand)])
    assert dict(floor.search_paths)["libcudart.so.13"] == (SearchPath("RPATH", "$ORIGIN"),)
    row = next(row for row in floor.table if "libcudart" in row.requirement)
    assert row.why == "RPATH is $ORIGIN"
    search = inspect_json(curand)["floor"]["search_paths"]  # type: ignore[index]
    assert search["libcudart.so.13"] == [{"tag": "RPATH", "path": "$ORIGIN"}]


def test_runpath_is_named_runpath(cufft: Path) -> None:
    assert readelf(cufft).runpath == ("$ORIGIN",)
    floor = kit_floor([read_elf(cufft)])
    assert {paths for _, paths in floor.search_paths} == {(SearchPath("RUNPATH", "$ORIGIN"),)}


# --- 6. device code outside .nv_fatbin ------------------------------------------------------------

@pytest.mark.parametrize(("name", "section"), [("curand", ".data"), ("cufft", ".ldata")])
def test_device_code_in_data_sections_is_found(name: str, section: str, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    """cuobjdump lists only `.nv_fatbin` of the library. The containers in its data section,
    carved out (found independently: pyelftools and a plain search) and handed to cuobjdump
    as a fatbin, list exactly what the inspector reports there."""
    path: Path = request.getfixturevalue(name)
    info = read_elf(path)
    in_fatbin = [(e.kind, e.arch) for e in info.device_code if e.placement == "fatbin"]
    assert as_cuobjdump_names(in_fatbin) == cuobjdump_loaded(path)
    assert cuobjdump_entries(path) == cuobjdump_loaded(path)  # nothing else, all fatbins asked
    containers = containers_in_sections(path)
    assert set(containers) == {section} and len(containers[section]) > 1000
    found = [(e.kind, e.arch) for e in info.device_code if e.placement == "data"]
    assert {e.section for e in info.device_code if e.placement == "data"} == {section}
    truth = cuobjdump_of_containers(path, containers[section], tmp_path / "carved.fatbin")
    assert as_cuobjdump_names(found) == truth
    assert all(e.loadable for e in info.device_code if e.placement == "data")
    floor = kit_floor([info])
    assert floor.embedded_in == (section,)
    assert sum(item.count for item in floor.embedded) == len(found)
    arch_row = floor.table[-1]
    assert f"in fatbin containers in {section}, outside .nv_fatbin" in arch_row.why


def test_text_names_device_code_in_data(cufft: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", str(cufft)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if " in .ldata (" in line)
    assert line.startswith("  cuda ") and "cuobjdump does not list them" in line
    assert "LTO-IR lto_75" in line


def test_data_search_stays_quick(cufft: Path) -> None:
    """A 286 MB library with 24,000 containers in .ldata: one C-speed search, no Python loop
    over its bytes (cuobjdump takes about a second on it and finds none)."""
    import time

    read_elf(cufft)  # warm the page cache
    start = time.process_time()
    info = read_elf(cufft)
    spent = time.process_time() - start
    assert len(info.device_code) > 20_000
    assert spent < 3.0, f"{spent:.2f} s of CPU for {cufft.name}"


# --- 5. what the kit carries, the 32-bit loader, Base ---------------------------------------------

def test_32bit_glibc_is_glibcs(glibc_i386: Path) -> None:
    target = next(glibc_i386.rglob("libc_malloc_debug.so.0"))
    matches_readelf(target)
    info = read_elf(target)
    assert (info.elf_class, info.machine) == (32, "i386")
    assert "ld-linux.so.2" in info.needed
    floor = kit_floor([info])
    rows = [row.requirement for row in floor.table]
    assert rows[0].startswith("i386 Linux, glibc ≥ ")
    assert not any("ld-linux" in row or "libc.so" in row for row in rows), rows


def test_base_version_is_no_requirement(tmp_path: Path) -> None:
    """libcryptsetup needs libdevmapper's `Base` version (a node libdevmapper names so) and
    DM_1_02_97: the row names the real one only."""
    path = SYSTEM_LIBS / "libcryptsetup.so.12"
    if not path.exists():
        pytest.skip(f"{path} is not on this system")
    truth = readelf(path)
    library, versions = next((lib, names) for lib, names in truth.version_needs.items()
                             if lib.startswith("libdevmapper"))
    assert "Base" in versions
    floor = kit_floor([read_elf(path)])
    row = next(row for row in floor.table if row.requirement.startswith(library))
    assert "Base" not in row.requirement and "DM_1_02_97" in row.requirement


def test_versions_of_libraries_the_kit_ships_are_no_floor(tmp_path: Path) -> None:
    """libcryptsetup with libdevmapper beside it in the kit: libdevmapper's versions are the
    kit's own business, not a requirement of the machine."""
    app, lib = SYSTEM_LIBS / "libcryptsetup.so.12", SYSTEM_LIBS / "libdevmapper.so.1.02.1"
    if not (app.exists() and lib.exists()):
        pytest.skip("libcryptsetup and libdevmapper are not on this system")
    alone = kit_floor([read_elf(app)])
    assert alone.floor("DM_1_02") is not None
    kit = tmp_path / "kit"
    (kit / "lib").mkdir(parents=True)
    for source in (app, lib):
        (kit / "lib" / source.name).write_bytes(source.read_bytes())
    floor = inspect_path(kit).floor
    assert floor.floor("DM_1_02") is None
    assert not any("libdevmapper" in row.requirement for row in floor.table)
    assert floor.floor("GLIBC") is not None


# --- the whole of a Debian library folder, against readelf ----------------------------------------

def test_system_library_folder_matches_readelf() -> None:
    """Every ELF shared library directly in /usr/lib/x86_64-linux-gnu (hundreds): needed,
    soname, rpath, runpath, interpreter, build-id and version needs as readelf reads them."""
    if not SYSTEM_LIBS.is_dir():
        pytest.skip(f"{SYSTEM_LIBS} is not on this system")
    checked, wrong = 0, []
    for entry in sorted(os.scandir(SYSTEM_LIBS), key=lambda e: e.name):
        if ".so" not in entry.name or not entry.is_file(follow_symlinks=False):
            continue
        with open(entry.path, "rb") as stream:
            if stream.read(4) != b"\x7fELF":
                continue
        try:
            matches_readelf(Path(entry.path))
        except AssertionError as error:
            wrong.append(f"{entry.name}: {str(error).splitlines()[0][:200]}")
        checked += 1
    assert checked > 100 and not wrong, f"{len(wrong)} of {checked}: {wrong[:5]}"


def test_cudart_agrees(cudart: Path) -> None:
    matches_readelf(cudart)
    info = read_elf(cudart)
    assert info.version_defs == ("libcudart.so.13",)  # the non-base node of the same name
    counted = Counter(e.placement for e in info.device_code)
    assert counted == Counter()
