"""Device code the CUDA runtime loads versus device-link inputs, on binaries nvcc compiles here.

`.nv_fatbin` is what a GPU can run; `__nv_relfatbin` holds the inputs of the device link
(`-rdc=true`), which the runtime never loads. The ground truth is cuobjdump: by default it lists
the executable fatbin, with `--all-fatbin` both.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from ninfer_kits.errors import CheckFailed
from ninfer_kits.inspector.elf import read_elf
from ninfer_kits.inspector.floor import KitFloor, kit_floor
from ninfer_kits.inspector.inspection import inspect_path
from ninfer_kits.pipeline.kit_rules import check_archs

from oracles import (
    as_cuobjdump_names,
    cuobjdump_entries,
    cuobjdump_loaded,
    cuobjdump_relocatable,
    cuobjdump_says_no_ptx,
    section_names,
)
from tools import DATA, nvcc, run, tool

SM86_WITH_PTX = "arch=compute_86,code=[sm_86,compute_86]"


@pytest.fixture(scope="session")
def rdc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Separable compilation and its relatives, each the way a build would make it:
    rdc_app: rdc_main.cu + rdc_helper.cu, -rdc=true, SASS sm_86 and PTX compute_86, device-linked;
    lto.o / lto_app: LTO-IR (code=lto_86) in the object, and beside SASS in an executable;
    sm120a, sm100f, sm86_ptx: whole-program builds with SASS and PTX of one arch each;
    rdc_sm120a.o: a relocatable object for sm_120a."""
    compiler, out = nvcc(), tmp_path_factory.mktemp("rdc")
    main, helper = DATA / "rdc_main.cu", DATA / "rdc_helper.cu"
    built = {name: out / name for name in ("main.o", "helper.o", "rdc_app", "lto.o",
                                           "main_lto.o", "lto_app", "sm120a", "sm100f",
                                           "sm86_ptx", "rdc_sm120a.o")}
    for source, target in ((main, "main.o"), (helper, "helper.o")):
        run(compiler, "-rdc=true", "-gencode", SM86_WITH_PTX, "-c", "-o", built[target], source)
    run(compiler, "-rdc=true", "-gencode", SM86_WITH_PTX, "-o", built["rdc_app"],
        built["main.o"], built["helper.o"])
    lto_and_sass = "arch=compute_86,code=[sm_86,lto_86]"
    run(compiler, "-rdc=true", "-gencode", "arch=compute_86,code=lto_86", "-c", "-o",
        built["lto.o"], helper)
    run(compiler, "-rdc=true", "-gencode", lto_and_sass, "-c", "-o", built["main_lto.o"], main)
    helper_lto = out / "helper_lto.o"
    run(compiler, "-rdc=true", "-gencode", lto_and_sass, "-c", "-o", helper_lto, helper)
    run(compiler, "-rdc=true", "-gencode", "arch=compute_86,code=sm_86", "-o", built["lto_app"],
        built["main_lto.o"], helper_lto)
    kernels = DATA / "kernels.cu"
    run(compiler, "-gencode", "arch=compute_120a,code=[sm_120a,compute_120a]", "-o",
        built["sm120a"], kernels)
    run(compiler, "-gencode", "arch=compute_100f,code=[sm_100f,compute_100f]", "-o",
        built["sm100f"], kernels)
    run(compiler, "-gencode", SM86_WITH_PTX, "-o", built["sm86_ptx"], kernels)
    run(compiler, "-rdc=true", "-gencode", "arch=compute_120a,code=sm_120a", "-c", "-o",
        built["rdc_sm120a.o"], helper)
    return built


def loaded(path: Path) -> list[tuple[str, str]]:
    return [(e.kind, e.arch) for e in read_elf(path).device_code if e.loadable]


def relocatable(path: Path) -> list[tuple[str, str]]:
    return [(e.kind, e.arch) for e in read_elf(path).device_code if not e.loadable]


def arch_row(floor: KitFloor) -> tuple[str, str]:
    row = next(row for row in floor.table if "compute capability" in row.requirement)
    return row.requirement, row.why


# --- what the runtime loads, against cuobjdump -------------------------------------------------

@pytest.mark.parametrize("name", ["rdc_app", "lto_app", "main.o", "lto.o", "sm120a", "sm100f",
                                  "sm86_ptx", "rdc_sm120a.o"])
def test_loaded_and_relocatable_match_cuobjdump(rdc: dict[str, Path], name: str) -> None:
    path = rdc[name]
    assert as_cuobjdump_names(loaded(path)) == cuobjdump_loaded(path)
    assert as_cuobjdump_names(relocatable(path)) == cuobjdump_relocatable(path)


def test_rdc_executable_loads_no_ptx(rdc: dict[str, Path]) -> None:
    """The upstream case: PTX only among the device-link inputs. cuobjdump finds no PTX to
    load, so the floor claims none and nothing is said about JIT for other GPUs."""
    path = rdc["rdc_app"]
    assert {".nv_fatbin", "__nv_relfatbin"} <= section_names(path)
    assert cuobjdump_says_no_ptx(path)
    assert cuobjdump_entries(path)[("ptx", "sm_86")] >= 1  # it is there, but only relocatable
    floor = kit_floor([read_elf(path)])
    assert floor.sass == ("sm_86",) and floor.ptx == ()
    assert {(item.kind, item.arch) for item in floor.relocatable} == {
        ("sass", "sm_86"), ("ptx", "compute_86")}
    ptx = next(item for item in floor.relocatable if item.kind == "ptx")
    assert ptx.count == cuobjdump_relocatable(path)[("ptx", "sm_86")]
    requirement, why = arch_row(floor)
    # Not in .nv_fatbin, yet used: on an H200 (9.0) such a kit ran through the JIT-linked
    # relocatable PTX, and one without it failed (scripts/gpu-check.sh, docs/verify.md).
    assert requirement == "An NVIDIA GPU of compute capability 8.6 or higher"
    assert "no PTX" not in why
    assert ("PTX compute_86: the driver JIT-compiles it for any GPU of 8.6 or higher, from the "
            "device-link inputs (__nv_relfatbin)") in why


def test_whole_program_ptx_is_claimed(rdc: dict[str, Path]) -> None:
    path = rdc["sm86_ptx"]
    assert not cuobjdump_says_no_ptx(path)
    floor = kit_floor([read_elf(path)])
    assert floor.sass == ("sm_86",) and floor.ptx == ("compute_86",) and floor.relocatable == ()
    requirement, why = arch_row(floor)
    assert requirement == "An NVIDIA GPU of compute capability 8.6 or higher"
    assert "PTX compute_86: the driver JIT-compiles it for any GPU of 8.6 or higher" in why
    assert "no PTX" not in why and "not counted" not in why


def test_arch_specific_code_runs_on_one_capability(rdc: dict[str, Path]) -> None:
    floor = kit_floor([read_elf(rdc["sm120a"])])
    assert floor.sass == ("sm_120a",) and floor.ptx == ("compute_120a",)
    requirement, why = arch_row(floor)
    assert requirement == "An NVIDIA GPU of compute capability 12.0 only"
    assert "SASS sm_120a (arch-specific) runs on 12.0 only" in why
    assert "PTX compute_120a (arch-specific): the driver can JIT-compile it only for 12.0" in why
    assert "any GPU" not in why and "higher" not in why


def test_family_specific_code_runs_on_the_family(rdc: dict[str, Path]) -> None:
    floor = kit_floor([read_elf(rdc["sm100f"])])
    assert floor.sass == ("sm_100f",) and floor.ptx == ("compute_100f",)
    requirement, why = arch_row(floor)
    assert requirement == "An NVIDIA GPU of compute capability 10.0 or a later 10.x"
    assert ("PTX compute_100f (family-specific): the driver can JIT-compile it only for 10.0 "
            "or a later 10.x") in why
    assert "any GPU" not in why and "higher" not in why


def test_kit_of_several_archs_names_their_union(rdc: dict[str, Path]) -> None:
    files = [read_elf(rdc[name]) for name in ("sm120a", "sm100f")]
    requirement, _ = arch_row(kit_floor(files))
    assert requirement == ("An NVIDIA GPU of compute capability 10.0 or a later 10.x, or 12.0 "
                           "only")
    # The -rdc program's relocatable PTX compute_86 reaches every GPU of 8.6 or higher.
    requirement, _ = arch_row(kit_floor([*files, read_elf(rdc["rdc_app"])]))
    assert requirement == "An NVIDIA GPU of compute capability 8.6 or higher"


# --- LTO-IR and kinds the parser does not know --------------------------------------------------

def test_lto_ir_is_reported_as_its_kind(rdc: dict[str, Path]) -> None:
    """nvcc 13 writes `code=lto_86` as fatbin entries of kind 8; cuobjdump lists none of them."""
    entries = read_elf(rdc["lto.o"]).device_code
    assert entries and {(e.section, e.kind, e.arch) for e in entries} == {
        ("__nv_relfatbin", "ltoir", "lto_86")}
    assert cuobjdump_entries(rdc["lto.o"]) == Counter()
    app = read_elf(rdc["lto_app"]).device_code
    assert Counter(e.kind for e in app if not e.loadable) == Counter({"sass": 2, "ltoir": 2})
    floor = kit_floor([read_elf(rdc["lto_app"])])
    assert floor.sass == ("sm_86",) and floor.ptx == ()
    assert [(i.kind, i.arch, i.count) for i in floor.relocatable] == [
        ("sass", "sm_86", 2), ("ltoir", "lto_86", 2)]


def _with_first_entry_kind(data: bytes, kind: int) -> bytes:
    """The file with the kind of the first entry of its first fatbin container replaced."""
    at = data.index(b"\x50\xed\x55\xba")  # container magic, little-endian
    header_size = int.from_bytes(data[at + 6:at + 8], "little")
    entry = at + header_size
    assert int.from_bytes(data[entry:entry + 2], "little") == 2  # a SASS entry before
    return data[:entry] + kind.to_bytes(2, "little") + data[entry + 2:]


def test_unknown_kind_is_reported_not_corrupt(rdc: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "unknown-kind"
    target.write_bytes(_with_first_entry_kind(rdc["sm86_ptx"].read_bytes(), 0x40))
    entries = read_elf(target).device_code
    original = read_elf(rdc["sm86_ptx"]).device_code
    assert entries[0].kind == "kind-64" and entries[0].arch == "arch_86"
    assert entries[1:] == original[1:]
    floor = kit_floor([read_elf(target)])
    other = [(item.kind, item.arch, item.count) for item in floor.other_device_code]
    assert other == [("kind-64", "arch_86", 1)]
    assert "not counted: kind-64 arch_86 ×1 (neither SASS nor PTX)" in arch_row(floor)[1]
    done = _inspect(target)
    assert done.returncode == 0, done.stderr
    assert "kind-64 arch_86 ×1" in done.stdout


def test_entry_without_a_kind_is_still_corrupt(rdc: dict[str, Path], tmp_path: Path) -> None:
    target = tmp_path / "kind-zero"
    target.write_bytes(_with_first_entry_kind(rdc["sm86_ptx"].read_bytes(), 0))
    done = _inspect(target)
    assert done.returncode == 2
    assert "corrupt CUDA fatbin in section .nv_fatbin" in done.stderr
    assert "entry kind 0" in done.stderr


# --- what inspect prints ------------------------------------------------------------------------

def _inspect(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", *map(str, args)],
                          capture_output=True, text=True, check=False)


def test_text_reports_relocatable_apart(rdc: dict[str, Path]) -> None:
    done = _inspect(rdc["rdc_app"])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    cuda = next(line for line in lines if line.startswith("  cuda "))
    assert "SASS sm_86" in cuda and "PTX" not in cuda
    moved = next(line for line in lines if line.startswith("  relocatable "))
    count = cuobjdump_relocatable(rdc["rdc_app"])[("ptx", "sm_86")]
    assert f"PTX compute_86 (compressed) ×{count}" in moved
    assert moved.endswith("(device-link inputs; the CUDA runtime JIT-links their PTX when the "
                          "SASS does not fit the GPU)")


def test_json_keeps_loaded_and_relocatable_apart(rdc: dict[str, Path]) -> None:
    import jsonschema

    report = json.loads(_inspect("--json", rdc["rdc_app"]).stdout)
    schema_path = Path(__file__).parent.parent / "src/ninfer_kits/data/inspect.schema.json"
    jsonschema.validate(report, json.loads(schema_path.read_text()))
    assert report["schema_version"] == 3
    cuda = report["floor"]["cuda"]
    assert cuda["sass"] == ["sm_86"] and cuda["ptx"] == [] and cuda["other"] == []
    assert {(item["kind"], item["arch"]) for item in cuda["relocatable"]} == {
        ("sass", "sm_86"), ("ptx", "compute_86")}
    for entry in report["files"][0]["cuda"]:
        assert entry["loadable"] == (entry["section"] == ".nv_fatbin")


def test_schema_ties_loadable_to_the_section(rdc: dict[str, Path]) -> None:
    import jsonschema

    report = json.loads(_inspect("--json", rdc["rdc_app"]).stdout)
    schema = json.loads((Path(__file__).parent.parent /
                         "src/ninfer_kits/data/inspect.schema.json").read_text())
    entry = next(e for e in report["files"][0]["cuda"] if e["section"] == "__nv_relfatbin")
    entry["loadable"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, schema)


# --- the arch check, per kit --------------------------------------------------------------------

def _kit_folder(tmp_path: Path, files: dict[str, Path]) -> Path:
    kit = tmp_path / f"kit-{len(list(tmp_path.glob('kit-*')))}"
    (kit / "bin").mkdir(parents=True)
    for name, source in files.items():
        (kit / "bin" / name).write_bytes(source.read_bytes())
    return kit


def _check(arch: str, folder: Path) -> None:
    kit = SimpleNamespace(id=f"example-{arch}", arch=arch)
    check_archs(kit, inspect_path(folder))  # type: ignore[arg-type]


@pytest.fixture()
def helper_without_device_code(tmp_path: Path) -> Path:
    target = tmp_path / "helper"
    run(tool("gcc"), "-o", target, DATA / "glibc234.c")
    return target


def test_helper_without_device_code_passes(rdc: dict[str, Path], tmp_path: Path,
                                           helper_without_device_code: Path) -> None:
    _check("sm_86", _kit_folder(tmp_path, {"ninfer": rdc["sm86_ptx"],
                                           "ninfer-helper": helper_without_device_code}))


def test_relocatable_inputs_count_neither_way(rdc: dict[str, Path], tmp_path: Path) -> None:
    # rdc_app's __nv_relfatbin holds PTX compute_86 and the object sm_120a: neither is loaded.
    _check("sm_86", _kit_folder(tmp_path, {"ninfer": rdc["rdc_app"],
                                           "device.o": rdc["rdc_sm120a.o"]}))


def test_arch_specific_kit_allows_its_own_ptx(rdc: dict[str, Path], tmp_path: Path) -> None:
    _check("sm_120a", _kit_folder(tmp_path, {"ninfer": rdc["sm120a"]}))
    with pytest.raises(CheckFailed, match=r"no SASS for sm_120 .*loaded: sm_120a, compute_120a"):
        _check("sm_120", _kit_folder(tmp_path, {"ninfer": rdc["sm120a"]}))
    with pytest.raises(CheckFailed, match=r"bin/other carries compute_86, sm_86, which kit "
                                          r"example-sm_120a does not declare"):
        _check("sm_120a", _kit_folder(tmp_path, {"ninfer": rdc["sm120a"],
                                                 "other": rdc["sm86_ptx"]}))


def test_kit_without_sass_for_its_arch_fails(rdc: dict[str, Path], tmp_path: Path,
                                             helper_without_device_code: Path) -> None:
    with pytest.raises(CheckFailed, match=r"kit example-sm_86 carries no SASS for sm_86 that the "
                                          r"CUDA runtime loads \(loaded: no device code\)"):
        _check("sm_86", _kit_folder(tmp_path, {"helper": helper_without_device_code}))


def test_relocatable_sass_does_not_satisfy_the_check(rdc: dict[str, Path],
                                                     tmp_path: Path) -> None:
    with pytest.raises(CheckFailed, match=r"no SASS for sm_86 .*device-link inputs: "
                                          r"SASS sm_86 ×1, PTX compute_86 ×1"):
        _check("sm_86", _kit_folder(tmp_path, {"device.o": rdc["main.o"]}))


def test_foreign_arch_fails(rdc: dict[str, Path], tmp_path: Path) -> None:
    folder = _kit_folder(tmp_path, {"ninfer": rdc["sm86_ptx"], "other": rdc["sm100f"]})
    with pytest.raises(CheckFailed, match=r"bin/other carries compute_100f, sm_100f, which kit "
                                          r"example-sm_86 does not declare \(it declares sm_86\)"):
        _check("sm_86", folder)
