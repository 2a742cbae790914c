"""The portable toolchain (matrix toolchain `bullseye-sysroot-cuda130`,
dockerfiles/toolchain-sysroot-debian.Dockerfile), end to end: the example kit built in it
(`example-glibc228`) with the docker builder, twice cold, and what it must show:

- its glibc floor is at most the toolchain's (2.28, though the sysroot is Debian 11's 2.31):
  `inspect` and `verify` say so, and `floor` says every distribution it knows whose glibc is that
  new (RHEL 8 and its rebuilds, Ubuntu 20.04 and 22.04, Debian 11 and 12 among them) can run the
  portable kit, and any older one cannot, for its glibc only;
- the real loader starts both binaries (`ninfer --version`, `ninfer-serve --once` answering GET
  /v1/models, under `env -i`) in debootstrapped Debian 11 and 12 minbase roots, which have no
  FFmpeg, libcurl, OpenSSL or CUDA runtime; verify's verdict is what the loader then does;
- every bundled library is named with its origin and licence: the ones the image built from
  pinned tarballs by their records, zlib by the sysroot's own dpkg records; libstdc++, libgcc and
  CUDA's runtime are linked statically (nothing of GCC 14's runtime or libcudart.so is carried,
  or needed);
- two cold builds give the same bytes;
- the kit as a user gets it: published to GitHub (the local server, over HTTP, by `publish`),
  fetched back with `fetch --portable` (checked against SHA256SUMS, unpacked, verified); that
  folder is the one the old roots run.

- its CUDA 13.1 sibling (`bullseye-sysroot-cuda131`, the RTX 5090 kits' toolchain) builds the
  example for sm_120a, with no CUDA runtime library carried and the same floor.

The image takes about 15 minutes to build on 2 cores (OpenSSL, libcurl, FFmpeg and libstdc++ from
source): conftest starts building it in the background when the session starts
(`prebuilt_toolchain`), at a low CPU weight, so that it uses the core the tests before this
module leave idle. `nox -s sysroot` runs this module alone.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from github_server import GitHubServer
from ninfer_kits.kit import buildinfo, kitdir
from ninfer_kits.matrix import load_matrix
from roots import proc_in
from source_archive import archive_for
from test_fetch import REPOSITORY, checkout
from test_portable import GLIBC_SONAMES, _in_root, _inner_buildinfo, _unpacked
from test_publish_support import CANARY, cli
from unsigned import unsigned_matrix

from docker_fixtures import Run, bare_root, build, prebuild_toolchain_image
from oracles import readelf
from tools import ROOT, sha256_of

KIT = "example-glibc228"
TOOLCHAIN = "bullseye-sysroot-cuda130"
pytestmark = [pytest.mark.slow, pytest.mark.prebuilt_toolchain(TOOLCHAIN),
              pytest.mark.prepared("minbase-root:bullseye", "minbase-root:bookworm")]

FLOOR = "2.28"  # the toolchain's glibc_floor
BUILT = {"libcurl.so.4": "curl", "libssl.so.3": "openssl", "libcrypto.so.3": "openssl",
         "libavformat.so.61": "ffmpeg", "libavcodec.so.61": "ffmpeg",
         "libavutil.so.59": "ffmpeg", "libswscale.so.8": "ffmpeg", "libswresample.so.5": "ffmpeg"}


@pytest.fixture(scope="module")
def toolchain_image(engine: Any) -> str:
    """The toolchain image, built in the background since the session started (conftest)."""
    prebuild = prebuild_toolchain_image(TOOLCHAIN)
    tag = prebuild.wait()
    print(f"\n{prebuild.said()}")
    return tag


@pytest.fixture(scope="module")
def cold_builds(engine: Any, toolchain_image: str, example_repo: tuple[Path, str],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Run, Run]]:
    """Two cold builds of the kit in that image: own empty compiler caches, other folders and
    job counts."""
    volumes = [f"ninfer-kits-test-ccache-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    repo = str(example_repo[0])
    try:
        runs = (build(tmp_path_factory.mktemp("sysroot-a"), KIT, "--source", repo, "-j", "1",
                      "--ccache-volume", volumes[0]),
                build(tmp_path_factory.mktemp("sysroot-b") / "deeper", KIT, "--source", repo,
                      "--ccache-volume", volumes[1]))
        for run in runs:
            assert run.done.returncode == 0, run.done.stderr[-6000:]
        yield runs
    finally:
        for name in volumes:
            for volume in engine.volumes.list(filters={"name": name}):
                volume.remove(force=True)


@pytest.fixture(scope="module")
def kit_folder(cold_builds: tuple[Run, Run]) -> Path:
    return next(cold_builds[0].dist.iterdir())


def _portable(folder: Path) -> Path:
    kit = kitdir.read_kit_dir(folder)
    assert kit.portable is not None
    return kit.portable.path


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ninfer_kits", *map(str, args)],
                          capture_output=True, text=True, check=False)


def test_the_matrix_states_the_floor() -> None:
    toolchain = load_matrix(ROOT / "matrix.toml").kit(KIT).toolchain
    assert toolchain.id == TOOLCHAIN
    assert toolchain.glibc_floor == FLOOR
    assert toolchain.dockerfile_path.name == "toolchain-sysroot-debian.Dockerfile"


def test_two_cold_builds_give_the_same_bytes(cold_builds: tuple[Run, Run]) -> None:
    first, second = (next(run.dist.iterdir()) for run in cold_builds)
    for folder in (first, second):
        info = buildinfo.read(folder / kitdir.BUILDINFO)
        assert info.run_value("ccache_hits") == "0", info.run
    listed = [line.split("  ", 1)[1] for line in
              (first / "SHA256SUMS").read_text().splitlines()]
    assert len([name for name in listed if name.endswith(".tar.gz")]) == 2, listed
    for name in listed:  # both tarballs and their attestations
        if name != kitdir.BUILDINFO:
            assert sha256_of(first / name) == sha256_of(second / name), name
    # BUILDINFO alike but for its run section (the build's own timing, folders and caches)
    assert dataclasses.replace(buildinfo.read(first / kitdir.BUILDINFO), run=()) == \
        dataclasses.replace(buildinfo.read(second / kitdir.BUILDINFO), run=())


def test_inspect_and_verify_say_the_glibc_floor_is_the_sysroots(kit_folder: Path,
                                                                 tmp_path: Path) -> None:
    for tarball in (_portable(kit_folder), kitdir.read_kit_dir(kit_folder).tarball):
        done = _cli("inspect", "--json", tarball)
        assert done.returncode == 0, done.stderr
        table = json.loads(done.stdout)["floor"]["table"]
        glibc = next(row["requirement"] for row in table
                     if row["requirement"].startswith("x86-64 Linux, glibc"))
        found = re.search(r"glibc ≥ (2\.[0-9]+)", glibc)
        assert found and int(found[1].split(".")[1]) <= 28, glibc
    unpacked = _unpacked(_portable(kit_folder), tmp_path / "p")
    report = _cli("verify", unpacked, "--json")
    rows = json.loads(report.stdout)["rows"]
    glibc_row = next(row for row in rows if row["requirement"].startswith("x86-64 Linux"))
    print(f"\nverify: {glibc_row['requirement']}: {glibc_row['status']}")
    assert glibc_row["status"] == "ok"
    # The oracle: readelf's version needs of every ELF file the portable kit carries; the
    # highest GLIBC_ version among them is the floor both say.
    elves = [path for path in (unpacked / "kit").rglob("*")
             if path.is_file() and not path.is_symlink() and path.read_bytes()[:4] == b"\x7fELF"]
    versions = {tuple(map(int, version.removeprefix("GLIBC_").split(".")))
                for path in elves for needs in readelf(path).version_needs.values()
                for version in needs if re.fullmatch(r"GLIBC_2\.[0-9]+(\.[0-9]+)?", version)}
    highest = ".".join(map(str, max(versions)))
    assert len(elves) >= 11 and glibc_row["requirement"] == f"x86-64 Linux, glibc ≥ {highest}", \
        (highest, glibc_row["requirement"], [path.name for path in elves])


def test_floor_lists_ubuntu_2204_and_debian_12(kit_folder: Path) -> None:
    done = _cli("floor", _portable(kit_folder), "--json")
    assert done.returncode == 0, done.stderr
    verdicts = {row["id"]: row for row in json.loads(done.stdout)["distributions"]}
    print("\n" + _cli("floor", _portable(kit_folder)).stdout)
    assert {"ubuntu-20-04", "ubuntu-22-04", "debian-11", "debian-12", "rhel-8", "rhel-9"} \
        <= set(verdicts)
    # Every distribution the facts file knows runs it, but for one whose glibc is older than
    # the kit's floor (at most the toolchain's 2.28): that one says no for its glibc only.
    for key, row in verdicts.items():
        failed = [r["requirement"] for r in row["requirements"] if r["status"] != "met"]
        if row["answer"] == "yes":
            continue
        assert row["answer"] == "no" and failed and all(
            r.startswith("glibc ≥") for r in failed), (key, row["summary"])
    for key in ("rhel-8", "rocky-8", "almalinux-8", "ubuntu-20-04", "ubuntu-22-04", "debian-11",
                "debian-12", "rhel-9"):
        assert verdicts[key]["answer"] == "yes", (key, verdicts[key]["summary"])


def test_every_bundled_library_is_named_and_gcc_is_static(kit_folder: Path) -> None:
    tarball = _portable(kit_folder)
    info = _inner_buildinfo(tarball)
    bundled = {entry[0]: entry for entry in info.bundled}
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
        readme = archive.extractfile("kit/third_party/README")
        assert readme is not None
        notice = readme.read().decode()
    assert set(BUILT) <= set(bundled), sorted(bundled)
    for soname, package in BUILT.items():
        assert bundled[soname][2].startswith(f"{package} ") and \
            bundled[soname][2].endswith("(built)"), bundled[soname]
        assert bundled[soname][4] in names
    assert bundled["libz.so.1"][2].startswith("zlib1g 1:1.2.11"), bundled["libz.so.1"]
    assert bundled["libavcodec.so.61"][3] == "LGPL-2.1-or-later"
    assert not {"libstdc++.so.6", "libgcc_s.so.1", "libcudart.so.13"} & set(bundled), \
        sorted(bundled)
    assert not set(bundled) & GLIBC_SONAMES
    # libstdc++'s headers and code are compiled in: its notice travels with the kit
    assert "\nlibstdc++ 14.2.0 (built in the toolchain image" in notice
    assert "GPL-3.0-or-later WITH GCC-exception-3.1" in notice
    # so is the header that binds libm's calls to their glibc 2.2.5 versions (this project's)
    assert "\nninfer-kits-glibc-floor 1 (built in the toolchain image" in notice, notice
    # LGPL FFmpeg owes its source: its tarball and build scripts, published beside the kit
    # (copied from the image at build: no network), and named in the README
    sources = kitdir.read_kit_dir(kit_folder).sources
    assert {"sources/ffmpeg_7.1.5.orig.tar.xz", "sources/ffmpeg_7.1.5-ffmpeg.sh"} <= set(sources)
    assert "ffmpeg 7.1.5 (built in the toolchain image)" in notice


@dataclasses.dataclass(frozen=True)
class Fetched:
    publish: subprocess.CompletedProcess[str]
    fetch: subprocess.CompletedProcess[str]
    kit: Path  # the folder fetch unpacked into: kit/ and the tarball


@pytest.fixture(scope="module")
def fetched(kit_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fetched]:
    """The kit as a user gets it: `publish --to github` to the local GitHub server, then
    `fetch --portable` from a checkout whose matrix points there (no token needed to read)."""
    place = tmp_path_factory.mktemp("sysroot-release")
    with GitHubServer() as server, archive_for(kit_folder, place / "sources") as table:
        server.add_repo(REPOSITORY)
        server.add_token(CANARY)
        matrix = checkout(place, server.base_url)
        with matrix.open("a") as appended:  # the owed Debian sources, served here
            appended.write(table)
        published = cli("publish", kit_folder, "--to", "github", "--matrix", matrix,
                        env={"GITHUB_TOKEN": CANARY})
        assert published.returncode == 0, published.stderr[-3000:]
        dest = place / "user"
        got = cli("fetch", KIT, "--portable", "--matrix", matrix, "--dest", dest)
        yield Fetched(publish=published, fetch=got, kit=dest)


def test_the_published_kit_fetches_checked_and_verified(kit_folder: Path,
                                                         fetched: Fetched) -> None:
    said = fetched.publish.stdout + fetched.publish.stderr + fetched.fetch.stdout \
        + fetched.fetch.stderr
    assert CANARY not in said
    assert "checked   SHA256SUMS ok" in fetched.fetch.stderr, fetched.fetch.stderr
    portable = _portable(kit_folder)
    assert sha256_of(fetched.kit / portable.name) == sha256_of(portable)
    assert (fetched.kit / "kit" / "bin" / "ninfer").is_file()
    assert (fetched.kit / "kit" / "lib" / "libavcodec.so.61").is_file()
    # fetch ends with verify's verdict on this host: the floor met; a host without an NVIDIA
    # driver (CI's) lacks only the driver and the GPU, and fetch then says so with exit 4
    rows = json.loads(_cli("verify", fetched.kit, "--json", "--matrix",
                           unsigned_matrix()).stdout)["rows"]
    unmet = {row["requirement"] for row in rows if row["status"] != "ok"}
    glibc = next(row for row in rows if row["requirement"].startswith("x86-64 Linux, glibc"))
    assert glibc["status"] == "ok" and re.search(r"glibc ≥ 2\.(1[0-9]|2[0-8])$",
                                                 glibc["requirement"]), glibc
    assert all(row.startswith("An NVIDIA") for row in unmet), unmet
    assert fetched.fetch.returncode == (4 if unmet else 0), fetched.fetch.stderr[-3000:]
    assert glibc["requirement"] in fetched.fetch.stdout, fetched.fetch.stdout


@pytest.fixture(scope="module")
def old_roots(kit_folder: Path) -> Iterator[dict[str, Path]]:
    cache = ROOT / ".cache" / "roots"
    roots = {"bullseye-minbase": bare_root("bullseye", cache),
             "bookworm-minbase": bare_root("bookworm", cache)}
    with proc_in(roots.values()):
        yield roots


@pytest.mark.parametrize("where", ["bullseye-minbase", "bookworm-minbase"])
def test_both_binaries_start_in_old_minbase_roots(fetched: Fetched, old_roots: dict[str, Path],
                                                  where: str) -> None:
    assert (fetched.kit / "kit" / "bin" / "ninfer").is_file(), fetched.fetch.stderr[-3000:]
    outcome = _in_root(old_roots[where], fetched.kit)
    said = (outcome.version.stdout + outcome.version.stderr).strip()[:300]
    print(f"\n{where}: verify loads={outcome.verify_loads}; --version: {said}")
    assert outcome.verify_loads and outcome.verify_glibc_ok, outcome
    assert outcome.ran, outcome
    assert outcome.version.stdout.startswith("ninfer 0.3.0-example (sm_86")
    assert json.loads(outcome.models or "")["object"] == "list"


@pytest.mark.prebuilt_toolchain("bullseye-sysroot-cuda131")
def test_the_cuda_131_toolchain_builds_the_example_for_sm120a(engine: Any,
                                                               example_repo: tuple[Path, str],
                                                               tmp_path: Path) -> None:
    """The toolchain of the RTX 5090 kits (CUDA >= 13.1), portable as the 13.0 one, made from
    the same sysroot layers after it (conftest builds them one after the other): it builds the
    example for sm_120a, whose kit then loads in the matching runtime image, and whose portable
    flavour carries no CUDA runtime library (the static one is linked in) and needs glibc 2.28."""
    print(f"\n{prebuild_toolchain_image('bullseye-sysroot-cuda131').wait()}")
    run = build(tmp_path, "example-sm120a", "--source", str(example_repo[0]),
                "--ccache-volume", "none")
    assert run.done.returncode == 0, run.done.stderr[-4000:]
    folder = run.dist / "example-v0.3.0-linux-sm120a"
    info = buildinfo.read(folder / kitdir.BUILDINFO)
    assert info.cuda_version.startswith("13.1."), info.cuda_version
    assert info.toolchain == "bullseye-sysroot-cuda131" and info.sass == "sm_120a", info
    assert info.ptx == "none"  # the device link keeps SASS only; -rdc PTX stays relocatable
    gpu = [requirement for requirement, _ in info.floor if "compute capability" in requirement]
    assert gpu == ["An NVIDIA GPU of compute capability 12.0 only"], info.floor
    smoke = info.run_value("smoke") or ""
    assert smoke.startswith("passed in ninfer-kits/runtime-bullseye-sysroot-cuda131:"), smoke
    assert info.run_value("ccache") == "none (--ccache-volume none)"
    portable = _portable(folder)
    unpacked = _unpacked(portable, tmp_path / "p")
    bundled = {entry[0] for entry in _inner_buildinfo(portable).bundled}
    assert not any(name.startswith("libcudart") for name in bundled), sorted(bundled)
    for program in ("ninfer", "ninfer-serve"):
        needed = readelf(unpacked / "kit" / "bin" / program).needed
        assert not any(name.startswith("libcudart") for name in needed), needed
    table = json.loads(_cli("inspect", "--json", portable).stdout)["floor"]["table"]
    glibc = next(row["requirement"] for row in table
                 if row["requirement"].startswith("x86-64 Linux, glibc"))
    found = re.search(r"glibc ≥ 2\.([0-9]+)", glibc)
    assert found and int(found[1]) <= 28, glibc
