"""The code compiled into a kit from outside the upstream's tree, and its licences: the cubins'
line tables of the example kit, a real Ninja dependency log, the host's real dpkg records."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput, ConfigError
from ninfer_kits.files.tarsafe import extract_all
from ninfer_kits.inspector.compiled_in import (
    Deps,
    device_sources,
    outside,
    parse_ninja_deps,
    read_deps,
)
from ninfer_kits.kit import kitdir
from ninfer_kits.pipeline.compiled_in import (
    find_licences,
    load_table,
    write_licences,
)
from ninfer_kits.pipeline.provenance import LicenseUnknown

from tools import nvcc, run, tool

CUB = "/include/cccl/cub/"
NINJA = """\
rule cc
  command = cc -MD -MF $out.d -I{include} -c $in -o $out
  depfile = $out.d
  deps = gcc
build main.o: cc {source}/main.c
"""


@pytest.fixture(scope="module")
def ninja_log(tmp_path_factory: pytest.TempPathFactory) -> Deps:
    """A real compile through Ninja (gcc's depfile, as CMake's generator sets it up) of a file
    that includes one header of its own tree and two of the system's."""
    ninja = tool("ninja")
    place = tmp_path_factory.mktemp("ninja")
    source, build = place / "source", place / "build"
    (source / "include").mkdir(parents=True)
    build.mkdir()
    (source / "include" / "own.h").write_text("#define OWN 1\n")
    (source / "main.c").write_text("#include <stdio.h>\n#include <stddef.h>\n#include \"own.h\"\n"
                                   "int main(void) { printf(\"%d\\n\", OWN); return 0; }\n")
    (build / "build.ninja").write_text(NINJA.format(include=source / "include",
                                                    source="../source"))
    subprocess.run([ninja, "-C", str(build)], check=True, capture_output=True)
    listed = subprocess.run([ninja, "-C", str(build), "-t", "deps"], check=True,
                            capture_output=True, text=True).stdout
    saved = place / "ninja-deps.txt"
    saved.write_text(f"# build folder: {build}\n# source folder: {source}\n{listed}")
    return read_deps(saved)


def test_a_ninja_dependency_log_names_system_headers_outside_the_tree(ninja_log: Deps) -> None:
    assert f"{ninja_log.build}/../source/main.c" in ninja_log.files  # made absolute
    found = outside((), ninja_log)
    assert "/usr/include/stdio.h" in found and found["/usr/include/stdio.h"] == ("host",)
    assert not [path for path in found if path.startswith((ninja_log.source, ninja_log.build))]


def test_system_headers_map_to_their_debian_packages(ninja_log: Deps, tmp_path: Path) -> None:
    found = outside((), ninja_log)
    rows, texts = find_licences(found, Path("/"), load_table())
    by_package = {row.package: row for row in rows}
    assert "libc6-dev" in by_package, rows
    assert any(f.path == "/usr/include/stdio.h" for f in by_package["libc6-dev"].files)
    assert "third_party/libc6-dev/copyright" in texts
    kit = tmp_path / "kit"
    written = write_licences(kit, rows, texts, "owner/upstream")
    assert "kit/third_party/README" in written
    readme = (kit / "third_party/README").read_text()
    assert "libc6-dev" in readme and "host        /usr/include/stdio.h" in readme
    again = tmp_path / "again" / "kit"
    write_licences(again, rows, texts, "owner/upstream")
    assert (again / "third_party/README").read_bytes() == (kit / "third_party/README").read_bytes()


@pytest.mark.slow
def test_the_example_kits_cubins_name_cub(example_dist: Path, tmp_path: Path) -> None:
    """The example's top_k kernel uses cub::BlockReduce: its cubin's line table names CUB's
    headers, the data table gives them BSD-3-Clause, and the notice is the headers' own."""
    kit = kitdir.read_kit_dir(example_dist)
    root = tmp_path / "plain"
    with tarfile.open(kit.path / kit.asset) as archive:
        extract_all(archive, root, policy="tar")
    device = device_sources(root / "kit" / "bin")
    cub = [path for path in device if CUB in path]
    assert cub, device
    assert any(path.startswith("/proc/self/cwd/") and path.endswith("topk.cu") for path in device)
    rows, texts = find_licences(dict.fromkeys(cub, ("device",)), Path("/"), load_table())
    assert [(r.package, r.part) for r in rows] == [("nvidia-cuda-cccl", "cub")]
    notice = texts["third_party/nvidia-cuda-cccl/cub.LICENSE"].decode()
    assert "Redistributions in binary form must reproduce" in notice
    assert "Copyright (c)" in notice and "NVIDIA CORPORATION" in notice
    shipped = root / "kit" / "third_party"
    # the build's own also holds the notices of the CUB headers host code included
    built = (shipped / "nvidia-cuda-cccl" / "cub.LICENSE").read_text()
    assert all(block in built for block in notice.split("\n\n"))
    assert "nvidia-cuda-cccl" in (shipped / "README").read_text()


SHARED_KERNEL = """\
__global__ void pick(const float* in, float* out) {
  __shared__ float staged[4096];  // 16 KiB of static shared memory: a section bigger than the file
  staged[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = staged[blockDim.x - 1 - threadIdx.x];
}
"""


def test_a_relocatable_cubins_shared_memory_section_is_not_read_from_the_file(
        tmp_path: Path) -> None:
    """A device-link input's `.nv.shared.<kernel>` section (NVIDIA's type 0x7000000a) has no
    bytes in the file, whatever its size says: Don-Chad/ninfer-3090's argmax kernel made one
    that ends past its cubin's end, and the line table of that cubin must still be read."""
    source = tmp_path / "pick.cu"
    source.write_text(SHARED_KERNEL)
    cubin, built = tmp_path / "pick.cubin", tmp_path / "objects"
    built.mkdir()
    flags = ["-rdc=true", "-lineinfo", "-arch=sm_86"]
    run(nvcc(), *flags, "-cubin", "-o", cubin, source)
    headers = run("readelf", "-S", "-W", cubin)
    shared = [line for line in headers.splitlines() if ".nv.shared." in line and "pick" in line]
    assert shared and "LOPROC+0xa" in shared[0], headers
    offset, size = (int(field, 16) for field in shared[0].split("LOPROC+0xa")[1].split()[1:3])
    assert offset + size > cubin.stat().st_size, headers  # what tripped the bounds check
    run(nvcc(), *flags, "-c", "-o", built / "pick.o", source)
    assert str(source) in device_sources(built)


def test_a_file_no_package_claims_fails_naming_it(tmp_path: Path) -> None:
    header = tmp_path / "vendored.h"
    header.write_text("/* no package installed me */\n")
    with pytest.raises(LicenseUnknown, match=rf"{header}.*no package claims it"):
        find_licences({str(header): ("host",)}, Path("/"), load_table())


def test_a_package_of_the_table_whose_parts_miss_the_file_fails(tmp_path: Path) -> None:
    table = tmp_path / "licences.toml"
    table.write_text('schema = 1\n[parts.gnu-c]\npackage = "libc6-dev"\n'
                     'paths = ["/usr/include/net/*"]\nlicence = "LGPL-2.1-or-later"\n'
                     'texts = ["Apache-2.0.txt"]\n')
    with pytest.raises(LicenseUnknown, match=r"/usr/include/stdio\.h.*libc6-dev.*none of its "
                                             r"parts' paths match"):
        find_licences({"/usr/include/stdio.h": ("host",)}, Path("/"), load_table(table))


def test_a_header_part_whose_files_lack_the_phrase_fails(tmp_path: Path) -> None:
    table = tmp_path / "licences.toml"
    table.write_text('schema = 1\n[parts.stdio]\npackage = "libc6-dev"\n'
                     'paths = ["/usr/include/*"]\nlicence = "BSD-3-Clause"\n'
                     'header = "Redistributions in binary form must reproduce"\n')
    with pytest.raises(LicenseUnknown, match=r"part stdio of package libc6-dev .* none of them "
                                             r"holds"):
        find_licences({"/usr/include/stdio.h": ("host",)}, Path("/"), load_table(table))


@pytest.mark.parametrize(("text", "message"), [
    ('schema = 2\n[parts]\n', r"schema.*unsupported schema 2"),
    ('schema = 1\n[parts.a]\npackage = "p"\npaths = ["*"]\nlicence = "MIT"\n'
     'texts = ["MIT.txt"]\n', r"texts.*MIT\.txt: no such licence text"),
    ('schema = 1\n[parts.a]\npackage = "p"\npaths = ["*"]\nlicence = "MIT"\n',
     r"no licence text"),
])
def test_a_bad_table_is_refused_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    table = tmp_path / "licences.toml"
    table.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_table(table)
    assert str(table) in str(caught.value)


def test_a_dependency_log_of_another_form_is_refused(tmp_path: Path) -> None:
    saved = tmp_path / "ninja-deps.txt"
    saved.write_text("main.o: #deps 1, deps mtime 1 (VALID)\n    main.c\n")
    with pytest.raises(BadInput, match=rf"{saved}:1: expected '# build folder: "):
        read_deps(saved)
    with pytest.raises(BadInput, match=r"x:2: not a line of `ninja -t deps`"):
        parse_ninja_deps("main.o: #deps 1, deps mtime 1 (VALID)\nwhat is this\n", "/b", "x")


def test_a_stale_record_is_not_listed() -> None:
    """An object whose output is gone (or was made otherwise since) did not reach the binaries."""
    text = ("a.o: #deps 2, deps mtime 5 (VALID)\n    ../src/a.c\n    /usr/include/stdio.h\n\n"
            "b.o: #deps 1, deps mtime 6 (STALE)\n    /usr/include/zlib.h\n\n")
    assert parse_ninja_deps(text, "/b", "x") == ("/b/../src/a.c", "/usr/include/stdio.h")
