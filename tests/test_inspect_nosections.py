"""ELF files without section headers, or with section headers that lie: the inspector reads what
the loader reads (program headers, PT_DYNAMIC and its tags) and says so, and it finds device code
in the loadable segments. readelf is the ground truth: `readelf -d`, `-l` and `-n` read the
program headers when there are no section headers; `-V` needs the sections, so the version
needs are compared with readelf on the original file."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from ninfer_kits.inspector.elf import ElfInfo, read_elf
from ninfer_kits.inspector.floor import kit_floor
from thirdparty import CURAND, wheel_file, without_section_headers

from oracles import readelf

C_PROGRAMS = ["glibc234", "recent_cxx", "runpath", "rpath", "kitlib", "empty_runpath"]
SHT_PROGBITS = 1


def same_loader_view(stripped: ElfInfo, original: ElfInfo, original_path: Path,
                     stripped_path: Path) -> None:
    truth = readelf(stripped_path)  # readelf -d/-l/-n from the program headers
    assert (stripped.needed, stripped.soname, stripped.rpath, stripped.runpath) == (
        truth.needed, truth.soname, truth.rpath, truth.runpath)
    assert stripped.interpreter == truth.interpreter
    assert stripped.build_id == truth.build_id == original.build_id
    assert truth.version_needs == {}  # readelf -V cannot see them without sections
    assert {n.library: set(n.versions) for n in stripped.version_needs} == (
        readelf(original_path).version_needs)
    assert stripped.version_defs == original.version_defs
    ours, theirs = kit_floor([stripped]).table, kit_floor([original]).table
    assert [row.requirement for row in ours] == [row.requirement for row in theirs]
    # the GPU row also says where the device code was found; every other row is the same
    assert [row for row in ours if "NVIDIA GPU" not in row.requirement] == [
        row for row in theirs if "NVIDIA GPU" not in row.requirement]


@pytest.mark.parametrize("name", C_PROGRAMS)
def test_c_programs_without_section_headers(c_binaries: dict[str, Path], name: str,
                                            tmp_path: Path) -> None:
    original_path = c_binaries[name]
    stripped_path = without_section_headers(original_path, tmp_path / name)
    stripped, original = read_elf(stripped_path), read_elf(original_path)
    same_loader_view(stripped, original, original_path, stripped_path)
    assert any(remark.startswith("no section headers") for remark in stripped.remarks)
    assert not original.remarks
    assert kit_floor([stripped]).table[0].requirement.startswith("x86-64 Linux")


def test_system_files_without_section_headers(tmp_path: Path) -> None:
    for source in (Path("/bin/ls"), Path("/usr/lib/x86_64-linux-gnu/libstdc++.so.6")):
        if not source.exists():
            continue
        stripped_path = without_section_headers(source.resolve(), tmp_path / source.name)
        same_loader_view(read_elf(stripped_path), read_elf(source), source, stripped_path)


def test_stripped_program_still_runs(c_binaries: dict[str, Path], tmp_path: Path) -> None:
    """What makes the case real: the loader does not need section headers."""
    stripped = without_section_headers(c_binaries["glibc234"], tmp_path / "glibc234")
    assert subprocess.run([str(stripped)], capture_output=True, check=False).returncode == 0
    assert "There are no sections in this file" in subprocess.run(
        ["readelf", "-S", str(stripped)], capture_output=True, text=True, check=False).stdout


def test_cuda_library_without_section_headers(tmp_path: Path) -> None:
    """libcurand: DT_RPATH, 58 MB of .data with fatbin containers, build-id after SystemTap
    notes; all of it from the program headers alone."""
    original_path = wheel_file(CURAND)
    stripped_path = without_section_headers(original_path, tmp_path / original_path.name)
    stripped, original = read_elf(stripped_path), read_elf(original_path)
    same_loader_view(stripped, original, original_path, stripped_path)
    assert Counter((e.kind, e.arch) for e in stripped.device_code) == Counter(
        (e.kind, e.arch) for e in original.device_code)
    assert {e.placement for e in stripped.device_code} == {"segment"}


@pytest.mark.parametrize("name", ["shared_cudart", "rdc", "compressed"])
def test_device_code_is_found_in_segments(cuda_binaries: dict[str, Path], name: str,
                                          tmp_path: Path) -> None:
    original = read_elf(cuda_binaries[name])
    stripped_path = without_section_headers(cuda_binaries[name], tmp_path / name)
    stripped = read_elf(stripped_path)
    # Both fatbin sections lie in a loadable segment: all of their entries are found.
    assert Counter((e.kind, e.arch, e.compressed) for e in stripped.device_code) == Counter(
        (e.kind, e.arch, e.compressed) for e in original.device_code)
    assert {e.placement for e in stripped.device_code} == {"segment"}
    remark = next(r for r in stripped.remarks if r.startswith("device code looked for"))
    assert "cannot be told apart" in remark
    row = kit_floor([stripped]).table[-1]
    assert "no section headers: they may include device-link inputs" in row.why


def test_cli_says_what_it_read(c_binaries: dict[str, Path], tmp_path: Path) -> None:
    stripped = without_section_headers(c_binaries["runpath"], tmp_path / "runpath")
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", str(stripped)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "  remark      no section headers (e_shoff = 0): read what the loader reads" in (
        done.stdout)
    assert "| libkitdemo.so.1 (KITDEMO_1.2) " in done.stdout


# --- section headers that disagree with the program headers ----------------------------------


def _section_header(data: bytes, index: int) -> int:
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, = struct.unpack_from("<H", data, 0x3A)
    return int(shoff) + index * int(entsize)


def test_lying_section_headers_do_not_mislead(c_binaries: dict[str, Path],
                                              tmp_path: Path) -> None:
    """`.gnu.version_r` retyped as PROGBITS and `.dynamic` pointed elsewhere: a reader that
    trusts sections (pyelftools) loses the version needs and the libraries; the loader, and the
    inspector, read PT_DYNAMIC and DT_VERNEED."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    source = c_binaries["recent_cxx"]
    data = bytearray(source.read_bytes())
    with source.open("rb") as stream:
        names = [section.name for section in ELFFile(stream).iter_sections()]
    verneed = _section_header(data, names.index(".gnu.version_r"))
    struct.pack_into("<I", data, verneed + 4, SHT_PROGBITS)
    dynamic = _section_header(data, names.index(".dynamic"))
    struct.pack_into("<Q", data, dynamic + 0x18, 0x40)  # sh_offset: the program headers
    target = tmp_path / "lying"
    target.write_bytes(bytes(data))
    with target.open("rb") as stream:
        sections = list(ELFFile(stream).iter_sections())
        assert not any(isinstance(s, GNUVerNeedSection) for s in sections)
        assert not any(isinstance(s, DynamicSection) and list(s.iter_tags())
                       and any(t.entry.d_tag == "DT_NEEDED" for t in s.iter_tags())
                       for s in sections)
    lying, original = read_elf(target), read_elf(source)
    truth = readelf(source)
    assert lying.needed == truth.needed == original.needed
    assert {n.library: set(n.versions) for n in lying.version_needs} == truth.version_needs
    remark = next(r for r in lying.remarks if "disagree" in r)
    assert "dynamic section" in remark and "version needs" in remark
    assert kit_floor([lying]).table == kit_floor([original]).table


def test_separate_debug_file_says_what_it_lacks(c_binaries: dict[str, Path],
                                                tmp_path: Path) -> None:
    """`objcopy --only-keep-debug` keeps the program headers but not the bytes they point at:
    not corrupt, but nothing the loader needs can be read, and the output says so (on stderr
    with --floor-only, where the table alone would look like a program that needs nothing)."""
    from tools import run, tool

    target = tmp_path / "app.debug"
    run(tool("objcopy"), "--only-keep-debug", c_binaries["glibc234"], target)
    assert "There is no dynamic section" in run(tool("readelf"), "-d", target)
    info = read_elf(target)
    assert info.needed == () and info.interpreter is None
    assert info.build_id == read_elf(c_binaries["glibc234"]).build_id
    assert info.remarks == ("the dynamic segment has no bytes in the file (a separate debug "
                            "file?): no library needs could be read",)
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", "--floor-only",
                           str(target)], capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stderr == f"ninfer-kits: note: {target}: {info.remarks[0]}\n"


def test_json_of_a_file_without_sections_follows_the_schema(cuda_binaries: dict[str, Path],
                                                            tmp_path: Path) -> None:
    import json

    import jsonschema

    stripped = without_section_headers(cuda_binaries["rdc"], tmp_path / "rdc")
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", "--json",
                           str(stripped)], capture_output=True, text=True, check=False)
    report = json.loads(done.stdout)
    schema = json.loads((Path(__file__).parent.parent /
                         "src/ninfer_kits/data/inspect.schema.json").read_text())
    jsonschema.validate(report, schema)
    entry = report["files"][0]["cuda"][0]
    assert (entry["placement"], entry["section"], entry["loadable"]) == ("segment", None, True)
    assert isinstance(entry["segment"], int)
    assert report["floor"]["cuda"]["embedded_in"] == [f"segment {entry['segment']}"]
    entry["section"] = ".nv_fatbin"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(report, schema)
