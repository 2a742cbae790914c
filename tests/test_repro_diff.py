"""`ninfer-kits diff` and repro.diff on pairs of binaries compiled here, one pair per cause.

Each pair is the same source built twice with one thing changed, the way a non-reproducible
build changes it: nvcc's temporary file name (the process id) in a FILE symbol, the build
folder in the debug info, __DATE__/__TIME__ under two SOURCE_DATE_EPOCHs, only the build-id,
and one constant in one of two kernels. Each test asserts the cause's kind and its detail (the
two names, the two paths, the kernel). The same files, wrapped in tarballs and kit folders
shaped like kits, test the members around them, and the CLI is run as a program once for its
exit codes.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ninfer_kits.files.tarsafe import extract_all
from ninfer_kits.kit import kitdir
from ninfer_kits.kit.buildinfo import RUN_MARKER
from ninfer_kits.repro import device, model
from ninfer_kits.repro.diff import Limits, compare, render, to_json
from ninfer_kits.repro.model import Cause, Comparison, MemberDiff
from test_publish_support import compile_program, info_for, make_kit

from tools import nvcc, run

KERNELS = """\
#include <cstdio>
__global__ void kernelA(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * 2.0f + 1.0f;
}
__global__ void kernelB(float *x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * SCALE;
}
int main() {
    float *d = nullptr;
    cudaMalloc(&d, 64);
    kernelA<<<1, 16>>>(d, 16);
    kernelB<<<1, 16>>>(d, 16);
    std::printf("%d\\n", (int)cudaDeviceSynchronize());
    return 0;
}
"""
STAMP = """\
#include <stdio.h>
static const char stamp[] = "built " __DATE__ " " __TIME__;
int main(void) { puts(stamp); return 0; }
"""
PLAIN = """\
#include <stdio.h>
int twice(int x) { return 2 * x; }
int main(void) { printf("%d\\n", twice(21)); return 0; }
"""
INTERNAL = """\
static int NAME(int x) { return x + 1; }
int visible(int x) { return NAME(x); }
"""
KERNEL_B = "_Z7kernelBPfi"
KERNEL_A = "_Z7kernelAPfi"
BUILD_ID_A, BUILD_ID_B = "11" * 20, "22" * 20


def zstd_decoder() -> str | None:
    """What decodes zstd payloads here (a module, else the zstd tool), as repro.device looks:
    None, and zstd-compressed entries are named but not looked into."""
    module = device._zstd_module()
    return str(module.__name__) if module is not None else shutil.which("zstd")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every pair, compiled in parallel (about ten seconds on two cores)."""
    out = tmp_path_factory.mktemp("pairs")
    compiler = str(nvcc())
    for name, text in (("k.cu", KERNELS), ("stamp.c", STAMP), ("plain.c", PLAIN),
                       ("internal.c", INTERNAL)):
        (out / name).write_text(text)
    arch = "-arch=sm_86"

    def cuda(target: str, *flags: str, folder: str = "") -> tuple[str | Path, ...]:
        where = out / folder if folder else out
        where.mkdir(exist_ok=True)
        return (compiler, arch, *flags, "-c", out / "k.cu", "-o", where / target)

    def objtemp(folder: str, scale: str, *flags: str) -> tuple[str | Path, ...]:
        # -objtemp names nvcc's temporaries after the object: the FILE symbol stays the same,
        # so the kernel pairs differ only where the kernel does.
        return cuda("k.o", "-objtemp", f"-DSCALE={scale}", *flags, folder=folder)

    for folder in ("li_one", "li_two_longer"):  # one source in two build folders
        (out / folder).mkdir()
        (out / folder / "k.cu").write_text(KERNELS)
    lz4 = ("-Xfatbin=-compress-all", "-compress-mode=speed")
    zstd = ("-Xfatbin=-compress-all",)
    commands: list[tuple[tuple[str | Path, ...], dict[str, str]]] = [
        (cuda("tmp_1.o", "-DSCALE=3.0f"), {}),
        (cuda("tmp_2.o", "-DSCALE=3.0f"), {}),
        (cuda("rdc_1.o", "-DSCALE=3.0f", "-rdc=true"), {}),
        (cuda("rdc_2.o", "-DSCALE=3.0f", "-rdc=true"), {}),
        (objtemp("same_1", "3.0f"), {}),
        (objtemp("same_2", "3.0f"), {}),
        (objtemp("scale_3", "3.0f"), {}),
        (objtemp("scale_5", "5.0f"), {}),
        (objtemp("lz4_3", "3.0f", *lz4), {}),
        (objtemp("lz4_5", "5.0f", *lz4), {}),
        (objtemp("zstd_3", "3.0f", *zstd), {}),
        (objtemp("zstd_5", "5.0f", *zstd), {}),
        *(((compiler, arch, "-objtemp", "-lineinfo", "-DSCALE=3.0f", "-c",
            out / folder / "k.cu", "-o", out / folder / "k.o"), {})
          for folder in ("li_one", "li_two_longer")),
        (("gcc", "-g", f"-ffile-prefix-map={out}=/build/one", "-c", out / "plain.c", "-o",
          out / "path_1.o"), {}),
        (("gcc", "-g", f"-ffile-prefix-map={out}=/build/two-longer", "-c", out / "plain.c",
          "-o", out / "path_2.o"), {}),
        (("gcc", "-O1", out / "stamp.c", "-o", out / "time_1"),
         {"SOURCE_DATE_EPOCH": "1700000000"}),
        (("gcc", "-O1", out / "stamp.c", "-o", out / "time_2"),
         {"SOURCE_DATE_EPOCH": "1800000000"}),
        (("gcc", "-O1", "-c", out / "plain.c", "-o", out / "plain.o"), {}),
        # cudafe's per-compile names for internal entities, as a -D can make them by hand
        (("gcc", "-O0", "-DNAME=_INTERNAL_49b9e886_1737", "-c", out / "internal.c", "-o",
          out / "internal_1.o"), {}),
        (("gcc", "-O0", "-DNAME=_INTERNAL_49b9e886_1742", "-c", out / "internal.c", "-o",
          out / "internal_2.o"), {}),
    ]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(lambda item: _run(item[0], item[1]), commands))
    links: list[tuple[tuple[str | Path, ...], dict[str, str]]] = [
        (("gcc", out / "plain.o", f"-Wl,--build-id=0x{BUILD_ID_A}", "-o", out / "bid_1"), {}),
        (("gcc", out / "plain.o", f"-Wl,--build-id=0x{BUILD_ID_B}", "-o", out / "bid_2"), {}),
        ((compiler, arch, out / "scale_3" / "k.o", "-o", out / "app_3"), {}),
        ((compiler, arch, out / "scale_5" / "k.o", "-o", out / "app_5"), {}),
    ]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(lambda item: _run(item[0], item[1]), links))
    # One source, compiled twice with -lineinfo under two modification times (one after the
    # other: the file is the same), into two folders (the object's name stays the same).
    source = out / "mtime" / "k.cu"
    source.parent.mkdir()
    source.write_text(KERNELS)
    for folder, mtime in (("mt_1", 1_600_000_000), ("mt_2", 1_700_000_000)):
        os.utime(source, (mtime, mtime))
        (out / folder).mkdir()
        _run((compiler, arch, "-objtemp", "-lineinfo", "-DSCALE=3.0f", "-c", source, "-o",
              out / folder / "k.o"), {})
    return {path.relative_to(out).as_posix(): path for path in out.rglob("*") if path.is_file()}


def _run(command: tuple[str | Path, ...], env: dict[str, str]) -> None:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True,
                            env={**os.environ, **env}, check=False)
    assert result.returncode == 0, f"{command} failed:\n{result.stderr[-2000:]}"


def _one_member(comparison: Comparison) -> MemberDiff:
    assert not comparison.identical
    assert len(comparison.members) == 1, render(comparison)
    return comparison.members[0]


def _causes(member: MemberDiff, kind: str) -> list[Cause]:
    return [cause for cause in member.causes if cause.kind == kind]


# --- one cause per pair ------------------------------------------------------------------------


@pytest.mark.parametrize("pair", ["tmp", "rdc"])
def test_nvcc_temporary_file_name_is_a_differing_file_symbol(built: dict[str, Path],
                                                              pair: str) -> None:
    """Without -objtemp, nvcc 13 names its temporary after its process id, and that name is the
    object's STT_FILE symbol: the only difference between two compiles (with -rdc too)."""
    a, b = built[f"{pair}_1.o"], built[f"{pair}_2.o"]
    readelf = run("readelf", "-sW", a)
    assert "tmpxft_" in readelf  # the oracle: binutils sees the same FILE symbol
    member = _one_member(compare(a, b))
    assert member.kind == "elf"
    assert {cause.kind for cause in member.causes} == {model.FILE_SYMBOL}
    (cause,) = member.causes
    assert cause.section == ".symtab"
    assert cause.a is not None and cause.b is not None and cause.a != cause.b
    for name in (cause.a, cause.b):
        assert name.startswith("tmpxft_") and name.endswith("_k.cudafe1.cpp")
        assert name in run("readelf", "-sW", a) + run("readelf", "-sW", b)
    assert "-objtemp" in cause.detail
    assert [section.name for section in member.sections] == [".strtab"]


def test_an_internal_symbol_name(built: dict[str, Path]) -> None:
    """A static function named differently (as cudafe names internal entities per compile):
    the symbol's two names, and the hint for it."""
    member = _one_member(compare(built["internal_1.o"], built["internal_2.o"]))
    (cause,) = member.causes
    assert (cause.kind, cause.section, cause.a, cause.b) == (
        model.SYMBOL_NAME, ".symtab", "_INTERNAL_49b9e886_1737", "_INTERNAL_49b9e886_1742")
    assert "-frandom-seed" in cause.detail


def test_objtemp_makes_two_compiles_identical(built: dict[str, Path]) -> None:
    """With -objtemp the same compile in two folders gives the same bytes: identical, exit 0."""
    comparison = compare(built["same_1/k.o"], built["same_2/k.o"])
    assert comparison.identical and comparison.members == () and comparison.same == 1
    assert render(comparison).rstrip().endswith("identical: 1 member(s) the same")


def test_build_folder_in_debug_info_is_an_embedded_path(built: dict[str, Path]) -> None:
    """-g with two -ffile-prefix-map targets: the source's folder and path are strings of
    .debug_line_str; what moved after them (relocations into it) is said to follow from them."""
    member = _one_member(compare(built["path_1.o"], built["path_2.o"]))
    paths = _causes(member, model.EMBEDDED_PATH)
    assert {(cause.section, cause.a, cause.b) for cause in paths} == {
        (".debug_line_str", "/build/one", "/build/two-longer"),
        (".debug_line_str", "/build/one/plain.c", "/build/two-longer/plain.c")}
    assert member.causes[:2] == tuple(paths)  # what explains the rest comes first
    for cause in _causes(member, model.BYTES):
        assert ".debug_line_str changed size" in cause.detail
    sections = {section.name: section for section in member.sections}
    strings = sections[".debug_line_str"]
    assert strings.a is not None and strings.b is not None
    assert strings.b.size - strings.a.size == 2 * (len("/build/two-longer") - len("/build/one"))


def test_build_folder_in_device_code(built: dict[str, Path]) -> None:
    """-lineinfo puts the source's folder into the cubin's .debug_line and its path into the
    PTX's `.file` directive: both found inside .nv_fatbin, the PTX one outside any kernel."""
    one, two = built["li_one/k.o"].parent, built["li_two_longer/k.o"].parent
    member = _one_member(compare(built["li_one/k.o"], built["li_two_longer/k.o"]))
    paths = {cause.section: cause for cause in _causes(member, model.EMBEDDED_PATH)}
    cubin = paths[".nv_fatbin › sass sm_86 › .debug_line"]
    assert (cubin.a, cubin.b) == (str(one), str(two))
    if zstd_decoder() is not None:  # the PTX is zstd-compressed
        ptx = paths[".nv_fatbin › ptx compute_86"]
        assert (ptx.a, ptx.b, ptx.kernel) == (str(one / "k.cu"), str(two / "k.cu"), None)
        assert "outside any function" in ptx.detail
    (sass,) = [cause for cause in member.causes if cause.kind == model.FATBIN_ENTRY]
    assert sass.kernel is None and ".debug_line" in sass.detail


def test_a_source_files_time_in_the_device_codes_line_table(built: dict[str, Path]) -> None:
    """nvcc -lineinfo writes each source file's mtime into the cubin's .debug_line: the same
    source with another mtime is a differing SASS entry, and the time is named, both values."""
    member = _one_member(compare(built["mt_1/k.o"], built["mt_2/k.o"]))
    (time,) = _causes(member, model.EMBEDDED_TIME)
    assert time.section == ".nv_fatbin › sass sm_86 › .debug_line"
    assert (time.a, time.b) == ("1600000000 (2020-09-13 12:26:40 UTC)",
                                "1700000000 (2023-11-14 22:13:20 UTC)")
    assert "source file k.cu" in time.detail and "one fixed time" in time.detail
    assert not _causes(member, model.EMBEDDED_PATH) and not _causes(member, model.BYTES)


def test_the_line_table_reader_gives_up_on_what_it_does_not_know() -> None:
    from ninfer_kits.inspector.linetable import file_entries

    version_5 = struct.pack("<IH", 2, 5)
    assert file_entries(version_5) is None
    assert file_entries(struct.pack("<I", 0xFFFFFFFF) + bytes(12)) is None  # 64-bit DWARF
    assert file_entries(struct.pack("<IH", 100, 2)) is None  # runs past the section
    assert file_entries(b"") == []


def test_date_and_time_under_two_source_date_epochs(built: dict[str, Path]) -> None:
    """__DATE__ " " __TIME__ under SOURCE_DATE_EPOCH 1700000000 and 1800000000 (UTC): the
    string in .rodata, both values; the build-id (sha1 of the rest) follows from it."""
    member = _one_member(compare(built["time_1"], built["time_2"]))
    (time,) = _causes(member, model.EMBEDDED_TIME)
    assert time.section == ".rodata"
    assert time.a == "built Nov 14 2023 22:13:20"
    assert time.b == "built Jan 15 2027 08:00:00"
    assert "'Nov 14 2023 22:13:20' vs 'Jan 15 2027 08:00:00'" in time.detail
    (build_id,) = _causes(member, model.BUILD_ID)
    assert "follows from the other differences" in build_id.detail
    assert {cause.kind for cause in member.causes} == {model.EMBEDDED_TIME, model.BUILD_ID}


def test_only_the_build_id(built: dict[str, Path]) -> None:
    """The same object linked with two explicit --build-id values: one section, one cause."""
    member = _one_member(compare(built["bid_1"], built["bid_2"]))
    assert [section.name for section in member.sections] == [".note.gnu.build-id"]
    (cause,) = member.causes
    assert (cause.kind, cause.a, cause.b) == (model.BUILD_ID, BUILD_ID_A, BUILD_ID_B)
    assert cause.detail.startswith("only the GNU build-id differs")


@pytest.mark.parametrize("codec", ["scale", "lz4", "zstd"])
def test_one_changed_kernel_is_named(built: dict[str, Path], codec: str) -> None:
    """SCALE 3.0f vs 5.0f in kernelB only: the SASS sm_86 entry names kernelB (its .text
    section) and the instruction; the PTX entry shows the two lines, inside kernelB. The SASS
    payload as nvcc leaves it (small: not compressed), LZ4 (-compress-mode=speed) and zstd
    (-compress-all); the PTX is zstd-compressed unless the mode is speed."""
    if codec == "zstd" and zstd_decoder() is None:
        pytest.skip("no zstd decoder here (compression.zstd, zstandard or the zstd tool)")
    member = _one_member(compare(built[f"{codec}_3/k.o"], built[f"{codec}_5/k.o"]))
    assert [section.name for section in member.sections] == [".nv_fatbin"]
    entries = _causes(member, model.FATBIN_ENTRY)
    assert {cause.kind for cause in member.causes} == {model.FATBIN_ENTRY}
    sass = [cause for cause in entries if cause.entry == "sass sm_86"]
    assert [cause.kernel for cause in sass] == [KERNEL_B]
    assert f"kernel {KERNEL_B} differs (.text.{KERNEL_B} at +0x" in sass[0].detail
    assert sass[0].a is not None and sass[0].b is not None
    assert sass[0].a.startswith(f".text.{KERNEL_B}+0x") and sass[0].a != sass[0].b
    assert sass[0].section == ".nv_fatbin"
    assert all(KERNEL_A not in (cause.kernel or "") + cause.detail for cause in entries)
    ptx = [cause for cause in entries if cause.entry == "ptx compute_86"]
    if zstd_decoder() is None and codec != "lz4":
        assert "not decompressed" in ptx[0].detail
        return
    assert [cause.kernel for cause in ptx] == [KERNEL_B]
    assert ptx[0].a is not None and ptx[0].b is not None
    assert "0f40400000" in ptx[0].a and "0f40A00000" in ptx[0].b  # 3.0f and 5.0f


def test_a_kernel_change_inside_an_executable(built: dict[str, Path]) -> None:
    """Linked: the kernel's entry is found among cudart's containers in .nv_fatbin, and the
    linker's build-id follows from it."""
    member = _one_member(compare(built["app_3"], built["app_5"]))
    sass = [cause for cause in member.causes if cause.entry == "sass sm_86"]
    assert [cause.kernel for cause in sass] == [KERNEL_B]
    assert {cause.kind for cause in member.causes} == {model.FATBIN_ENTRY, model.BUILD_ID}


def test_identical_files(built: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy.o"
    copy.write_bytes(built["tmp_1.o"].read_bytes())
    comparison = compare(built["tmp_1.o"], copy)
    assert comparison.identical and comparison.members == ()
    assert to_json(comparison)["identical"] is True


# --- kits: tarballs, kit folders, folders ------------------------------------------------------


def _tarball(path: Path, files: dict[str, tuple[bytes | str, int]], *, mtime: int = 0,
             gzip_mtime: int = 0) -> Path:
    """A kit-shaped tarball: `files` maps a member to (bytes, mode) or (link target, -1)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for name, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            if mode < 0:
                assert isinstance(data, str)
                info.type, info.linkname = tarfile.SYMTYPE, data
                archive.addfile(info)
            else:
                assert isinstance(data, bytes)
                info.size, info.mode = len(data), mode
                archive.addfile(info, io.BytesIO(data))
    with open(path, "wb") as sink, gzip.GzipFile(fileobj=sink, mode="wb", filename="",
                                                 mtime=gzip_mtime) as stream:
        stream.write(raw.getvalue())
    return path


def _kit(built: dict[str, Path], app: str, licence: str, link: str, serve_mode: int,
         extra: bool) -> dict[str, tuple[bytes | str, int]]:
    files: dict[str, tuple[bytes | str, int]] = {
        "kit/bin/ninfer": (built[app].read_bytes(), 0o755),
        "kit/bin/ninfer-serve": (built["bid_1"].read_bytes(), serve_mode),
        "kit/BUILDINFO.txt": (b"format: 1\nkit: example\n", 0o644),
        "kit/LICENSE": (f"MIT License\n\nCopyright (c) {licence}\n".encode(), 0o644),
        "kit/lib/libexample.so": (link, -1),
    }
    if extra:
        files["kit/bin/extra"] = (b"#!/bin/sh\n", 0o755)
    return files


def test_kit_tarballs_member_by_member(built: dict[str, Path], tmp_path: Path) -> None:
    a = _tarball(tmp_path / "a.tar.gz", _kit(built, "app_3", "2025 NInfer", "libexample.so.1",
                                             0o755, extra=True))
    b = _tarball(tmp_path / "b.tar.gz", _kit(built, "app_5", "2026 NInfer", "libexample.so.2",
                                             0o700, extra=False))
    comparison = compare(a, b)
    members = {member.path: member for member in comparison.members}
    assert set(members) == {"kit/bin/ninfer", "kit/bin/ninfer-serve", "kit/LICENSE",
                            "kit/lib/libexample.so", "kit/bin/extra"}
    assert comparison.same == 1  # kit/BUILDINFO.txt
    ninfer = members["kit/bin/ninfer"]
    assert ninfer.kind == "elf"
    assert [c.kernel for c in ninfer.causes if c.entry == "sass sm_86"] == [KERNEL_B]
    (mode,) = members["kit/bin/ninfer-serve"].causes
    assert (mode.kind, mode.a, mode.b) == (model.MODE, "0755", "0700")
    (lines,) = members["kit/LICENSE"].causes
    assert lines.kind == model.TEXT_LINES and lines.detail == "lines 3 differ"
    assert (lines.a, lines.b) == ("Copyright (c) 2025 NInfer", "Copyright (c) 2026 NInfer")
    (link,) = members["kit/lib/libexample.so"].causes
    assert (link.kind, link.a, link.b) == (model.LINK_TARGET, "libexample.so.1",
                                           "libexample.so.2")
    assert members["kit/bin/extra"].status == model.ONLY_IN_A
    _valid(to_json(comparison))
    text = render(comparison)
    assert f"kernel {KERNEL_B} differs" in text and text.rstrip().endswith(
        "differ: 5 member(s) differ, 1 the same")


def test_tarballs_that_differ_only_in_their_headers(built: dict[str, Path],
                                                    tmp_path: Path) -> None:
    files = _kit(built, "app_3", "2025", "libexample.so.1", 0o755, extra=False)
    a = _tarball(tmp_path / "a.tar.gz", files)
    b = _tarball(tmp_path / "b.tar.gz", files, mtime=1700000000, gzip_mtime=1700000000)
    (member,) = compare(a, b).members
    assert (member.path, member.kind) == ("a.tar.gz", "archive")
    causes = {cause.detail.split(" differs")[0]: cause for cause in member.causes}
    mtime = causes["the tar header field mtime"]
    assert (mtime.kind, mtime.a, mtime.b) == (model.ARCHIVE_HEADER, "0", "1700000000")
    assert "in 5 member(s)" in mtime.detail
    assert any("gzip headers differ" in cause.detail for cause in member.causes)


def test_a_tarball_against_its_unpacked_folder(built: dict[str, Path], tmp_path: Path) -> None:
    files = _kit(built, "app_3", "2025", "libexample.so.1", 0o755, extra=False)
    a = _tarball(tmp_path / "a.tar.gz", files)
    unpacked = tmp_path / "unpacked"
    with tarfile.open(a) as archive:
        extract_all(archive, unpacked, policy="tar")
    comparison = compare(a, unpacked)
    assert comparison.identical, render(comparison)
    (unpacked / "kit/bin/ninfer").chmod(0o700)
    (member,) = compare(a, unpacked).members
    assert [cause.kind for cause in member.causes] == [model.MODE]


def _kit_folder(root: Path, tarball_files: dict[str, tuple[bytes | str, int]], jobs: int
                ) -> Path:
    """dist/<tag>/ as kitdir.py describes it, with this run's facts in BUILDINFO.txt."""
    import hashlib

    root.mkdir(parents=True)
    asset = "ninfer-example-v1-sm86.tar.gz"
    _tarball(root / asset, tarball_files)
    info = f"format: 1\nkit: example\n{RUN_MARKER}\nrun.jobs: {jobs}\nrun.driver: none\n"
    (root / "BUILDINFO.txt").write_text(info)
    sums = {name: hashlib.sha256((root / name).read_bytes()).hexdigest()
            for name in (asset, "BUILDINFO.txt")}
    (root / "SHA256SUMS").write_text("".join(f"{sums[n]}  {n}\n" for n in sorted(sums)))
    sha1 = hashlib.sha1((root / asset).read_bytes()).hexdigest()
    (root / "SHA1SUMS").write_text(f"{sha1}  {asset}\n")
    (root / "build.log").write_text(f"-- configure\n-- build with {jobs} jobs\n")
    return root


def test_kit_folders_whose_run_facts_differ_are_identical(built: dict[str, Path],
                                                          tmp_path: Path) -> None:
    """Two builds of the same kit: the tarballs are the same; BUILDINFO.txt's run facts, its
    line in SHA256SUMS and the build log differ, as they must: identical."""
    files = _kit(built, "app_3", "2025", "libexample.so.1", 0o755, extra=False)
    a = _kit_folder(tmp_path / "one" / "example", files, jobs=2)
    b = _kit_folder(tmp_path / "two" / "example", files, jobs=16)
    comparison = compare(a, b)
    assert comparison.identical, render(comparison)
    members = {member.path: member for member in comparison.members}
    assert set(members) == {"BUILDINFO.txt", "SHA256SUMS", "build.log"}
    assert all(member.status == model.EXPECTED for member in members.values())
    (run_facts,) = members["BUILDINFO.txt"].causes
    assert (run_facts.kind, run_facts.expected) == (model.RUN_FACTS, True)
    assert (run_facts.a, run_facts.b) == ("run.jobs: 2", "run.jobs: 16")
    assert "run facts (expected to differ)" in run_facts.detail
    assert [c.kind for c in members["SHA256SUMS"].causes] == [model.RUN_FACTS]
    assert "differ only where expected" in render(comparison)
    _valid(to_json(comparison))

    # The same folders with another kernel: the tarball's member, under the asset's name.
    other = _kit(built, "app_5", "2025", "libexample.so.1", 0o755, extra=False)
    c = _kit_folder(tmp_path / "three" / "example", other, jobs=2)
    comparison = compare(a, c)
    assert not comparison.identical
    paths = {member.path: member for member in comparison.members}
    ninfer = paths["ninfer-example-v1-sm86.tar.gz/kit/bin/ninfer"]
    assert [c.kernel for c in ninfer.causes if c.entry == "sass sm_86"] == [KERNEL_B]
    sums = [c for c in paths["SHA256SUMS"].causes if c.kind == model.TEXT_LINES]
    assert sums and "ninfer-example-v1-sm86.tar.gz" in (sums[0].a or "")


# --- beside the tarballs: what records the run ---------------------------------------------------


CLEAN = "5422660fb1349e1e4d5e0bff9acf9de294a8bae8"


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kits' bin/ninfer: one compile, so that every kit of these tests carries its bytes."""
    return compile_program(tmp_path_factory.mktemp("program"))


def _attested(place: Path, program: Path, *run: tuple[str, str],
              payload: bytes = b"") -> kitdir.KitDir:
    """A kit folder as build makes it, with each tarball's SBOM and provenance, built with the
    run keys `run` (the pipeline checkout's commit, the toolchain image)."""
    info = info_for(run=(("jobs", "2"), *run))
    return make_kit(place / "dist", program, info=info, portable=True, attested=True,
                    payload=payload)


def test_the_pipelines_own_state_in_the_attestations_is_no_difference(tmp_path: Path,
                                                                      program: Path) -> None:
    """Issue 39: a kit rebuilt from a dirty checkout (and in another image of the same
    toolchain) has the same tarballs; its provenance names the commit `…-dirty` instead of the
    commit, its SBOM the other image, and SHA256SUMS lists the changed documents. The tarballs
    decide: identical, each of these reported as expected, with the values."""
    image = "ninfer-kits/toolchain@sha256:"
    clean = _attested(tmp_path / "clean", program, ("pipeline_revision", CLEAN),
                      ("image", image + "1" * 64))
    dirty = _attested(tmp_path / "dirty", program, ("pipeline_revision", f"{CLEAN}-dirty"),
                      ("pipeline_changes", f"releases/{clean.tag}.toml"),
                      ("image", image + "2" * 64))
    assert [f.sha256 for f in clean.flavours] == [f.sha256 for f in dirty.flavours]
    comparison = compare(clean.path, dirty.path)
    assert comparison.identical, render(comparison)
    members = {member.path: member for member in comparison.members}
    stem = clean.asset.removesuffix(".tar.gz")
    portable = f"{stem}-portable"
    assert set(members) == {"BUILDINFO.txt", "SHA256SUMS", f"{stem}.intoto.json",
                            f"{portable}.intoto.json", f"{stem}.cdx.json", f"{portable}.cdx.json"}
    assert all(member.status == model.EXPECTED for member in members.values())
    (recorded,) = members[f"{stem}.intoto.json"].causes
    assert (recorded.kind, recorded.expected) == (model.RUN_FACTS, True)
    assert "what the provenance records of the run" in recorded.detail
    commit = "predicate.buildDefinition.resolvedDependencies[ninfer-kits]"
    assert f'{commit}.digest.gitCommit: "{CLEAN}"' in (recorded.a or "")
    assert f'{commit}.annotations.revision: "{CLEAN}-dirty"' in (recorded.b or "")
    (sbom,) = members[f"{stem}.cdx.json"].causes
    assert sbom.kind == model.RUN_FACTS
    assert "1" * 64 in (sbom.a or "") and "2" * 64 in (sbom.b or "")
    (sums,) = members["SHA256SUMS"].causes
    assert sums.kind == model.RUN_FACTS and f"{stem}.intoto.json" in sums.detail
    assert "differ only where expected (what records the run" in render(comparison)
    _valid(to_json(comparison))

    # A fetch's DEST lacks the documents: named in a note, not compared.
    fetched = tmp_path / "fetched"
    shutil.copytree(clean.path, fetched)
    for name, _ in clean.attestations:
        (fetched / name).unlink()
    comparison = compare(fetched, dirty.path)
    assert comparison.identical, render(comparison)
    assert any(f"{stem}.intoto.json" in note and "only in b" in note
               for note in comparison.notes), comparison.notes


def test_an_attestation_of_another_tarball_differs(tmp_path: Path, program: Path) -> None:
    """The documents decide by their subject: a provenance that names another sha256 than its
    tarball's differs, though the tarballs are the same; and other tarballs differ by their
    own lines of SHA256SUMS too."""
    one = _attested(tmp_path / "one", program, ("pipeline_revision", CLEAN))
    two = _attested(tmp_path / "two", program, ("pipeline_revision", CLEAN))
    name = one.asset.replace(".tar.gz", ".intoto.json")
    statement = json.loads((two.path / name).read_text())
    statement["subject"][0]["digest"]["sha256"] = "0" * 64
    (two.path / name).chmod(0o644)
    (two.path / name).write_text(json.dumps(statement))
    comparison = compare(one.path, two.path)
    assert not comparison.identical
    member = next(member for member in comparison.members if member.path == name)
    (subject,) = [cause for cause in member.causes if not cause.expected]
    assert subject.kind == model.SUBJECT and "describes another tarball" in subject.detail
    assert "0" * 64 in (subject.b or "") and one.sha256 in (subject.a or "")
    assert _diff(one.path, two.path).returncode == 1
    # Past the limit, or not JSON: never taken for what records the run.
    bounded = compare(one.path, two.path, Limits(document=100))
    member = next(member for member in bounded.members if member.path == name)
    assert [cause.kind for cause in member.causes] == [model.NOT_EXPLAINED]
    assert not bounded.identical
    (two.path / name).write_text("{not json")
    member = next(member for member in compare(one.path, two.path).members
                  if member.path == name)
    assert member.status == model.DIFFERS and "not read as JSON" in member.causes[0].detail

    other = _attested(tmp_path / "other", program, ("pipeline_revision", CLEAN),
                      payload=b"other\n")
    comparison = compare(one.path, other.path)
    assert not comparison.identical
    sums = {member.path: member for member in comparison.members}["SHA256SUMS"]
    tarballs = [cause for cause in sums.causes if cause.kind == model.TEXT_LINES]
    assert tarballs and one.asset in tarballs[0].detail and not tarballs[0].expected


# --- the command ---------------------------------------------------------------------------------


def _diff(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", "diff", *map(str, args)],
                          capture_output=True, text=True, check=False)


SCHEMA = Path(__file__).parent.parent / "src/ninfer_kits/data/diff.schema.json"


def _valid(document: dict[str, Any]) -> dict[str, Any]:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(document, json.loads(SCHEMA.read_text()))
    return document


def test_cli_exit_codes_and_json(built: dict[str, Path], tmp_path: Path) -> None:
    same = _diff(built["same_1/k.o"], built["same_2/k.o"], "--json")
    assert same.returncode == 0, same.stderr
    document = _valid(json.loads(same.stdout))
    assert (document["schema_version"], document["identical"], document["members"]) == (
        1, True, [])

    differ = _diff(built["scale_3/k.o"], built["scale_5/k.o"], "--json")
    assert differ.returncode == 1, differ.stderr
    document = _valid(json.loads(differ.stdout))
    assert document["identical"] is False
    (member,) = document["members"]
    assert {"path", "kind", "sections", "causes"} <= member.keys()
    assert member["sections"][0]["name"] == ".nv_fatbin"
    kernels = {(cause["kind"], cause["entry"], cause["kernel"]) for cause in member["causes"]}
    assert (model.FATBIN_ENTRY, "sass sm_86", KERNEL_B) in kernels
    assert all({"kind", "section", "detail", "a", "b"} <= cause.keys()
               for cause in member["causes"])

    words = _diff(built["time_1"], built["time_2"])
    assert words.returncode == 1 and "embedded-time [.rodata]" in words.stdout

    missing = _diff(tmp_path / "nowhere.tar.gz", built["tmp_1.o"], "--json")
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip().splitlines() == [
        f"ninfer-kits: error: {tmp_path / 'nowhere.tar.gz'}: no such file or folder"]

    unlike = _diff(built["tmp_1.o"], tmp_path)
    assert unlike.returncode == 2
    assert "is a single file and" in unlike.stderr and "compare two kit tarballs" in unlike.stderr

    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00" + b"\0" * 20)
    other = _tarball(tmp_path / "other.tar.gz", {"kit/x": (b"x", 0o644)})
    bad = _diff(broken, other)
    assert bad.returncode == 2 and "broken.tar.gz" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_data_file_names_its_differing_string(tmp_path: Path) -> None:
    """Neither ELF nor text: the printable string around the difference, as a path here."""
    a, b = tmp_path / "a.bin", tmp_path / "b.bin"
    a.write_bytes(b"\x00\x01\x02/home/alice/ninfer/build\x00\xff\xfe")
    b.write_bytes(b"\x00\x01\x02/home/bob/ninfer/build\x00\xff\xfe")
    member = _one_member(compare(a, b))
    assert member.kind == "data"
    (cause,) = member.causes
    assert (cause.kind, cause.a, cause.b) == (model.EMBEDDED_PATH, "/home/alice/ninfer/build",
                                              "/home/bob/ninfer/build")


def test_limits_keep_a_member_unexplained(built: dict[str, Path]) -> None:
    """A member larger than the limit is not read section by section: its sha256 says it."""
    member = _one_member(compare(built["app_3"], built["app_5"], Limits(explain=1000)))
    (cause,) = member.causes
    assert cause.kind == model.NOT_EXPLAINED and "larger than the 1000 bytes" in cause.detail
