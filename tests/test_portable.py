"""Portable kits, end to end: the example kit (`portable = true` in matrix.toml) built in the
trixie toolchain image with the docker builder gives two tarballs from one compile; the
portable one carries every library but glibc's and the driver's, with their packages, licences
and copyright files. Both flavours are `verify`-ed and then really run — `ninfer --version`, and
`ninfer-serve --once` answering GET /v1/models — with the real loader (chroot, /proc mounted)
in (a) a bookworm minbase root, (b) a trixie minbase root with no FFmpeg, libcurl or CUDA
runtime, (c) the kit's runtime image: verify's verdict must be what the loader then does; the
plain kit fails in (a) and (b), the portable one runs in every root whose glibc meets its floor.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ninfer_kits.files.tarsafe import extract_all
from ninfer_kits.kit import buildinfo, kitdir, owed_sources
from roots import proc_in
from unsigned import unsigned_matrix

from docker_fixtures import Run, bare_root, image_root
from tools import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.prepared("minbase-root:bookworm", "minbase-root:trixie")]

KIT_MOUNT = "/opt/ninfer-kit"  # verify's place for a kit inside a root; the run uses it too
GLIBC_SONAMES = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                 "ld-linux-x86-64.so.2", "libresolv.so.2"}
NOT_SYSTEM = ("libavformat", "libavcodec", "libavutil", "libswscale", "libcurl", "libcudart",
              "libstdc++", "libgcc_s")


@dataclass(frozen=True)
class Built:
    folder: Path  # dist/<tag>
    stderr: str

    def tarball(self, portable: bool) -> Path:
        kit = kitdir.read_kit_dir(self.folder)
        assert kit.portable is not None, "the example kit is portable = true in matrix.toml"
        return kit.portable.path if portable else kit.tarball


@pytest.fixture(scope="module")
def docker_kit(docker_builds: tuple[Run, Run]) -> Built:
    """The second of the session's two cold docker builds (test_docker proves it byte-identical
    to the first): matrix.toml's flags, one compile that gives both tarballs."""
    run = docker_builds[1]
    return Built(run.out, run.done.stderr)


@pytest.fixture(scope="module")
def foreign_roots(docker_kit: Built) -> dict[str, Path]:
    """(a) bookworm minbase, (b) trixie minbase, (c) the runtime image the smoke test used."""
    cache = ROOT / ".cache" / "roots"
    verdict = _info(docker_kit.folder).run_value("smoke") or ""
    runtime = re.match(r"passed in (ninfer-kits/runtime-[\w.-]+:[0-9a-f]+):", verdict)
    assert runtime, verdict
    tag = runtime[1]
    return {"bookworm-minbase": bare_root("bookworm", cache),
            "trixie-minbase": bare_root("trixie", cache),
            "runtime-image": image_root(tag, cache, "runtime-trixie-cuda130")}


def _info(folder: Path) -> buildinfo.BuildInfo:
    return buildinfo.read(folder / kitdir.BUILDINFO)


def _inner_buildinfo(tarball: Path) -> buildinfo.BuildInfo:
    with tarfile.open(tarball) as archive:
        member = archive.extractfile("kit/BUILDINFO.txt")
        assert member is not None
        text = member.read().decode()
    path = tarball.parent.parent / f".{tarball.name}.BUILDINFO.txt"
    path.write_text(text)
    try:
        return buildinfo.read(path)
    finally:
        path.unlink()


# --------------------------------------------------------------------------- the build


def test_one_compile_gives_both_tarballs(docker_kit: Built) -> None:
    kit = kitdir.read_kit_dir(docker_kit.folder)
    assert kit.portable is not None and kit.verified
    assert kit.portable.asset == kit.asset.removesuffix(".tar.gz") + "-portable.tar.gz"
    assert _info(docker_kit.folder).asset_of("portable") == kit.portable.asset
    assert docker_kit.stderr.count("==> compile\n") == 1
    plain, portable = kit.size, kit.portable.size
    print(f"\nsizes: plain {plain:,} bytes, portable {portable:,} bytes ({portable / plain:.1f}×)")
    assert portable > plain


def test_the_floor_shrinks_to_glibc_and_the_driver(docker_kit: Built) -> None:
    assert "floor before the repair:" in docker_kit.stderr
    assert "floor after the repair:" in docker_kit.stderr
    done = subprocess.run([sys.executable, "-m", "ninfer_kits", "inspect", "--json",
                           str(docker_kit.tarball(portable=True))],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    floor = json.loads(done.stdout)["floor"]
    assert set(floor["sonames"]) <= GLIBC_SONAMES | {"libcuda.so.1"}, floor["sonames"]
    requirements = [row["requirement"] for row in floor["table"]]
    assert not [r for r in requirements if any(name in r for name in NOT_SYSTEM)], requirements
    assert any(r.startswith("x86-64 Linux, glibc") for r in requirements)
    assert any("driver" in r for r in requirements)
    assert any("compute capability 8.6" in r for r in requirements)
    plain = json.loads(subprocess.run(
        [sys.executable, "-m", "ninfer_kits", "inspect", "--json",
         str(docker_kit.tarball(portable=False))], capture_output=True, text=True,
        check=True).stdout)["floor"]
    assert {"libcurl.so.4", "libcudart.so.13"} <= set(plain["sonames"])


def test_every_bundled_library_is_accounted_for(docker_kit: Built) -> None:
    tarball = docker_kit.tarball(portable=True)
    info = _inner_buildinfo(tarball)
    assert info.flavour == "portable"
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
        shipped = {name.removeprefix("kit/lib/") for name in names
                   if name.startswith("kit/lib/") and name != "kit/lib"}
        readme = archive.extractfile("kit/third_party/README")
        assert readme is not None
        notice = readme.read().decode()
    bundled = {entry[0]: entry for entry in info.bundled}
    assert set(bundled) == shipped
    assert {"libcurl.so.4", "libcudart.so.13", "libstdc++.so.6", "libgcc_s.so.1",
            "libavformat.so.61"} <= shipped
    assert not shipped & (GLIBC_SONAMES | {"libcuda.so.1"})
    for soname, sha256, origin, license_, copyright_file in bundled.values():
        assert re.fullmatch(r"[0-9a-f]{64}", sha256), soname
        assert origin.endswith(("(dpkg)", "(wheel)")), origin
        assert license_ and copyright_file in names, (soname, copyright_file)
    assert bundled["libcudart.so.13"][2] == "nvidia-cuda-runtime 13.0.96 (wheel)"
    assert bundled["libcurl.so.4"][2].startswith("libcurl4t64 ")
    assert "Attachment A" in notice and "libcudart" in notice
    # GPL FFmpeg and x264 owe their source: the build records them (SOURCES.json, no fetch;
    # publish fetches them), and the README names each with its licence (pipeline.copyleft)
    owed = {package.name for package in
            owed_sources.read(docker_kit.folder / kitdir.OWED).packages}
    assert {"ffmpeg", "x264", "x265", "xvidcore", "zvbi", "gcc-14"} <= owed, owed
    assert "  ffmpeg 7:" not in notice and "\nffmpeg 7:" in notice and "\nx264 " in notice
    assert "Written statement" in notice and "NOT FETCHED" not in notice
    assert not kitdir.read_kit_dir(docker_kit.folder).sources  # nothing fetched at build


# --------------------------------------------------------------------------- in foreign roots


@pytest.fixture()
def mounted(foreign_roots: dict[str, Path]) -> Iterator[None]:
    with proc_in(foreign_roots.values()):
        yield


@dataclass(frozen=True)
class Outcome:
    verify_loads: bool
    verify_glibc_ok: bool
    version: subprocess.CompletedProcess[str]
    models: str | None  # the body ninfer-serve answered, None when it did not start

    @property
    def ran(self) -> bool:
        return self.version.returncode == 0 and self.models is not None


def _unpacked(tarball: Path, dest: Path) -> Path:
    dest.mkdir(parents=True)
    with tarfile.open(tarball) as archive:
        extract_all(archive, dest, policy="tar")
    return dest


def _in_root(root: Path, kit: Path) -> Outcome:
    report = json.loads(subprocess.run(
        [sys.executable, "-m", "ninfer_kits", "verify", str(kit), "--root", str(root), "--json",
         "--matrix", str(unsigned_matrix())],  # the test's own kits: built and published unsigned
        capture_output=True, text=True, check=False).stdout)
    loads = all(program["loads"] for program in report["programs"])
    glibc = next(row for row in report["rows"] if row["requirement"].startswith("x86-64 Linux"))
    place = root / KIT_MOUNT.lstrip("/")
    shutil.rmtree(place, ignore_errors=True)
    shutil.copytree(kit, place, symlinks=True)
    try:
        chroot = [shutil.which("chroot") or "chroot", str(root), "/usr/bin/env", "-i"]
        version = subprocess.run([*chroot, f"{KIT_MOUNT}/kit/bin/ninfer", "--version"],
                                 capture_output=True, text=True, check=False, timeout=60)
        return Outcome(loads, glibc["status"] == "ok", version, _serve_once(chroot))
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _serve_once(chroot: list[str]) -> str | None:
    server = subprocess.Popen([*chroot, f"{KIT_MOUNT}/kit/bin/ninfer-serve", "--once",
                               "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout is not None
        for line in server.stdout:
            found = re.search(r"listening on (http://\S+)", line)
            if found:
                with urllib.request.urlopen(f"{found[1]}/v1/models", timeout=30) as answer:
                    return answer.read().decode()
        return None
    finally:
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.mark.parametrize("where", ["bookworm-minbase", "trixie-minbase", "runtime-image"])
def test_verify_says_what_the_loader_then_does(docker_kit: Built, foreign_roots: dict[str, Path],
                                               mounted: None, tmp_path: Path,
                                               where: str) -> None:
    root = foreign_roots[where]
    outcomes: dict[str, Outcome] = {}
    for flavour, is_portable in (("plain", False), ("portable", True)):
        kit = _unpacked(docker_kit.tarball(is_portable), tmp_path / flavour)
        outcome = outcomes[flavour] = _in_root(root, kit)
        said = (outcome.version.stdout + outcome.version.stderr).strip()[:200]
        print(f"\n{where}, {flavour}: verify loads={outcome.verify_loads}; --version exit "
              f"{outcome.version.returncode}: {said}")
        assert outcome.verify_loads == outcome.ran, (where, flavour, outcome)
        if outcome.ran:
            assert outcome.version.stdout.startswith("ninfer 0.3.0-example (sm_86")
            models: Any = json.loads(outcome.models or "")
            assert models["object"] == "list", models
    portable, plain = outcomes["portable"], outcomes["plain"]
    # The portable kit needs nothing of the root but glibc.
    assert portable.ran == portable.verify_glibc_ok, (where, portable)
    if where != "runtime-image":
        assert not plain.ran, (where, plain)  # no FFmpeg 7, libcurl or CUDA runtime there
    else:
        assert plain.ran, plain
    if where in ("trixie-minbase", "runtime-image"):
        assert portable.ran, portable


def test_a_fresh_folder_and_a_clean_environment_are_enough(example_dist: Path,
                                                           tmp_path: Path) -> None:
    """What a user does: unpack anywhere, run with no LD_LIBRARY_PATH; the loader takes every
    library but glibc's from kit/lib, not the copies this host has (the kit of the local
    builder: its glibc floor is this host's)."""
    kit = kitdir.read_kit_dir(example_dist)
    assert kit.portable is not None
    unpacked = _unpacked(kit.portable.path, tmp_path / "anywhere")
    done = subprocess.run(["env", "-i", "LD_DEBUG=libs", str(unpacked / "kit/bin/ninfer"),
                           "--version"], capture_output=True, text=True, check=False,
                          timeout=60)
    loaded = [os.path.normpath(path) for path in re.findall(r"calling init: (\S+)", done.stderr)]
    outside = [path for path in loaded if not path.startswith(str(unpacked))
               and Path(path).name not in GLIBC_SONAMES]
    assert done.returncode == 0 and loaded and not outside, (outside, done.stderr[-2000:])
    assert any(path.endswith("/kit/lib/libcudart.so.13") for path in loaded), loaded
    # the CUB the top_k kernel compiles in: named after the bundled libraries, its notice shipped
    readme = (unpacked / "kit/third_party/README").read_text()
    assert "Attachment A" in readme and "nvidia-cuda-cccl" in readme and "cub" in readme
    assert (unpacked / "kit/third_party/nvidia-cuda-cccl/cub.LICENSE").is_file()
